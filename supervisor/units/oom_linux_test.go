package units

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// ownMemoryCgroup is the test's own cgroup in the v1 memory hierarchy, or
// "" where there is none it may make children in.
func ownMemoryCgroup(t *testing.T) string {
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return ""
	}
	for _, line := range strings.Split(string(b), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) == 3 && parts[1] == "memory" {
			dir := filepath.Join(cgroupRoot, "memory", parts[2])
			if _, err := os.Stat(filepath.Join(dir, "cgroup.event_control")); err == nil && os.Geteuid() == 0 {
				return parts[2]
			}
		}
	}
	return ""
}

// runIn runs sh -c script inside a new child of the test's v1 memory
// cgroup, limited to 32 MiB, and returns once the cgroup has been removed;
// killed is what the watch said then.
func runIn(t *testing.T, parent, name, script string) (killed bool) {
	cg := filepath.Join(parent, name)
	dir := filepath.Join(cgroupRoot, "memory", cg)
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(dir) })
	for file, v := range map[string]string{"memory.limit_in_bytes": "33554432", "memory.memsw.limit_in_bytes": "33554432"} {
		// memsw is there only where swap is accounted.
		if err := os.WriteFile(filepath.Join(dir, file), []byte(v), 0); err != nil && file == "memory.limit_in_bytes" {
			t.Fatal(err)
		}
	}
	w := watchOOM(cgroupRoot, cg)
	if w == nil {
		t.Fatal("watchOOM refused a v1 memory cgroup")
	}
	defer w.close()
	cmd := exec.Command("/bin/sh", "-c", `echo $$ > "$1/cgroup.procs" && `+script, "sh", dir)
	_ = cmd.Run()
	// As systemd does once a unit's cgroup is empty.
	if err := os.Remove(dir); err != nil {
		t.Fatal(err)
	}
	return w.killed()
}

// TestOOMWatchOnV1: on a cgroup v1 memory hierarchy, where systemd cannot
// tell, a process killed for going over its cgroup's limit is counted as
// an OOM kill, and one that ends otherwise is not, the cgroup's removal
// notwithstanding. Needs root and a v1 memory hierarchy (this project's
// development machines have one; a unified-only machine skips it).
func TestOOMWatchOnV1(t *testing.T) {
	parent := ownMemoryCgroup(t)
	if parent == "" {
		t.Skip("no cgroup v1 memory hierarchy this test may make cgroups in (needs root)")
	}
	// tail keeps the last line of an endless file without newlines: it
	// grows until the kernel kills it.
	if !runIn(t, parent, "berth-oom-test-"+strings.ReplaceAll(t.Name(), "/", "-"), "exec tail /dev/zero") {
		t.Error("a process killed for its cgroup's memory was not counted as an OOM kill")
	}
	if runIn(t, parent, "berth-nooom-test", "exec true") {
		t.Error("a process that exited was counted as an OOM kill")
	}
}
