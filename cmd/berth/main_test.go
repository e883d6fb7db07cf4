package main

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/berthd/berth/probes"
	"github.com/berthd/berth/supervisor/testkit"
)

// berth runs the command line in-process on the fixture machine under
// testdata/box (8 cores, 2 cards, 16G) with the given environment.
func berth(t *testing.T, environ map[string]string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	return berthOn(t, "testdata/box", environ, args...)
}

// berthOn is berth on the fixture machine under root.
func berthOn(t *testing.T, root string, environ map[string]string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var out, errOut bytes.Buffer
	c := &cli{
		stdout: &out,
		stderr: &errOut,
		env: env{
			lookup: func(k string) (string, bool) { v, ok := environ[k]; return v, ok },
			uid:    1000,
			home:   "/home/someone",
		},
		root: root,
	}
	code = c.main(args)
	return out.String(), errOut.String(), code
}

func TestHelp(t *testing.T) {
	for _, args := range [][]string{nil, {"help"}, {"--help"}, {"-h"}} {
		out, _, code := berth(t, nil, args...)
		if code != exitOK {
			t.Errorf("berth %v exited %d", args, code)
		}
		testkit.Golden(t, "testdata/help.golden", []byte(out))
	}
	for _, cmd := range commands {
		t.Run(cmd.name, func(t *testing.T) {
			out, _, code := berth(t, nil, cmd.name, "--help")
			if code != exitOK {
				t.Fatalf("exit %d", code)
			}
			if strings.Count(out, "Usage: berth "+cmd.name) != 1 || strings.Count(out, "Example:") != 1 {
				t.Errorf("help should give the usage and an example once:\n%s", out)
			}
			// Every flag is in the usage line, but the client's
			// --socket, which every command that asks the daemon takes.
			usage, _, _ := strings.Cut(out, "\n")
			// Written as the usage line writes them: --json, but -f.
			if bad := regexp.MustCompile(`(?m)^  -[a-z][a-z-]+`).FindString(out); bad != "" {
				t.Errorf("%q in the flags, not --%s", strings.TrimSpace(bad), strings.TrimSpace(bad)[1:])
			}
			for _, f := range regexp.MustCompile(`(?m)^  --?([a-z][a-z-]*)`).FindAllStringSubmatch(out, -1) {
				if f[1] != "socket" && !regexp.MustCompile(`-`+f[1]+`\b`).MatchString(usage) {
					t.Errorf("--%s is not in the usage line: %s", f[1], usage)
				}
			}
		})
	}
}

func TestUsageErrors(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"machnie"}, `berth: unknown command "machnie" (did you mean "machine"?); berth help lists the commands`},
		{[]string{"frobnicate"}, `berth: unknown command "frobnicate"; berth help lists the commands`},
		{[]string{"stat"}, `berth: unknown command "stat" (did you mean "status"?); berth help lists the commands`},
		{[]string{"help", "stat"}, `berth: unknown command "stat" (did you mean "status"?); berth help lists the commands`},
		{[]string{"status", "train"}, `berth status: unexpected argument "train"; it takes none but flags (berth show train shows one job; berth status --help shows the usage)`},
		{[]string{"stop"}, `berth stop: takes one JOB, or --all for every job you may stop (berth stop --help shows the usage)`},
		{[]string{"--socket"}, `berth: --socket, but no command: the command comes before or after its flags (berth --socket PATH status, say; berth help lists the commands)`},
		{[]string{"machine", "--bogus"}, `berth machine: flag provided but not defined: --bogus (berth machine --help shows the usage)`},
		{[]string{"machine", "--cpus", "many"}, `berth machine: invalid value "many" for flag --cpus: "many" is not a whole number (berth machine --help shows the usage)`},
		{[]string{"machine", "extra"}, `berth machine: unexpected argument "extra"; it takes none but flags (berth machine --help shows the usage)`},
		{[]string{"logs", "--index", "3"}, `berth logs: --index 3 names an index of an array: name the array too, e.g. berth logs ARRAY --index 3 (berth jobs lists the arrays: those with a number under INDICES)`},
		{[]string{"history", "--index", "0"}, `berth history: --index 0 names an index of an array: name the array too, e.g. berth history ARRAY --index 0 (berth jobs lists the arrays: those with a number under INDICES)`},
		{[]string{"logs", "sweep[2]", "--index", "3"}, `berth logs: sweep[2] already names an index; give the index once, either as sweep[2] or with --index 3 (berth logs --help shows the usage)`},
		{[]string{"logs", "sweep", "--index", "-1"}, `berth logs: invalid value "-1" for flag --index: an index is a whole number, 0 or more (berth logs --help shows the usage)`},
		{[]string{"start", "--all", "--ignore-deps"}, `berth start: --ignore-deps applies to one JOB, not to --all (berth start --help shows the usage)`},
		{[]string{"stop", "--index", "1", "--all"}, `berth stop: --index applies to one JOB, not to --all (berth stop --help shows the usage)`},
		// A variable that was not set (--state "$STATE"): not the current
		// directory.
		{[]string{"daemon", "--state", ""}, `berth daemon: --state is empty: give the state directory, or leave the flag out for the default (berth daemon --help shows the usage)`},
		{[]string{"daemon", "--socket="}, `berth daemon: --socket is empty: give the control socket's path, or leave the flag out for the default (berth daemon --help shows the usage)`},
		{[]string{"daemon", "--jobs", ""}, `berth daemon: --jobs is empty: give the jobs directory, or leave the flag out for the default (berth daemon --help shows the usage)`},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			out, errOut, code := berth(t, nil, tt.args...)
			if code != exitUsage {
				t.Errorf("exit %d, want %d", code, exitUsage)
			}
			if strings.TrimSpace(errOut) != tt.want {
				t.Errorf("stderr:\n got %s\nwant %s", strings.TrimSpace(errOut), tt.want)
			}
			if out != "" {
				t.Errorf("a usage error wrote on stdout (the sentence names --help):\n%s", out)
			}
		})
	}
}

// TestJSONFailures: a command asked for --json that fails without an
// answer writes {code, error} on stdout, besides its sentence on stderr.
func TestJSONFailures(t *testing.T) {
	none := map[string]string{"BERTH_SOCKET": filepath.Join(t.TempDir(), "none.sock")}
	tests := []struct {
		args     []string
		exit     int
		code     string
		contains string
	}{
		{[]string{"status", "--json"}, exitNoDaemon, "no_daemon", "no daemon answers on"},
		{[]string{"show", "train", "-json"}, exitNoDaemon, "no_daemon", "no daemon answers on"},
		{[]string{"history", "--json", "-n", "x"}, exitUsage, "usage", `invalid value "x" for flag -n`},
		{[]string{"machine", "--json", "--cpus", "many"}, exitUsage, "usage", `"many" is not a whole number`},
		{[]string{"check", "--json", "/nonexistent/x.lua"}, exitFailed, "", "x.lua"},
		// A command berth does not have is a usage error like the others
		// (trial AT: nothing on stdout).
		{[]string{"bogus", "--json"}, exitUsage, "usage", `unknown command "bogus"`},
		{[]string{"statsu", "--mine", "--json"}, exitUsage, "usage", `unknown command "statsu"`},
		{[]string{"--socket", "/x", "--json"}, exitUsage, "usage", "but no command"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			out, errOut, code := berth(t, none, tt.args...)
			if code != tt.exit {
				t.Errorf("exit %d, want %d", code, tt.exit)
			}
			if tt.code == "" {
				// A command whose answer says what failed (check's
				// report) gives that answer, not the failure.
				if strings.Contains(out, `"code": "failed"`) || !strings.Contains(out, tt.contains) {
					t.Errorf("stdout:\n%s", out)
				}
				return
			}
			var f jsonFailure
			if err := json.Unmarshal([]byte(out), &f); err != nil {
				t.Fatalf("stdout is not JSON (%v):\n%s", err, out)
			}
			if f.Code != tt.code || !strings.Contains(f.Error, tt.contains) || strings.HasPrefix(f.Error, "berth: ") {
				t.Errorf("got %+v, want code %s and an error with %q", f, tt.code, tt.contains)
			}
			if !strings.Contains(errOut, tt.contains) {
				t.Errorf("stderr lost the sentence: %q", errOut)
			}
		})
	}
}

func TestMachine(t *testing.T) {
	out, errOut, code := berth(t, nil, "machine")
	if code != exitOK || errOut != "" {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
	testkit.Golden(t, "testdata/machine.golden", []byte(out))

	// A daemon named that does not answer is said, not passed over.
	nowhere := filepath.Join(t.TempDir(), "none.sock")
	out2, errOut, code := berth(t, nil, "machine", "--socket", nowhere)
	if code != exitOK || out2 != out || errOut != msgWarning(msgMachineNoDaemon(&noDaemonError{sockets: []string{nowhere}}))+"\n" {
		t.Errorf("machine --socket of no daemon: exit %d, stderr %q", code, errOut)
	}
}

func TestMachineJSON(t *testing.T) {
	tests := []struct {
		name    string
		environ map[string]string
		args    []string
		want    string
	}{
		{"probed", nil, nil,
			`{"cpus":6,"cpu_ids":[2,3,4,5,6,7],"gpus":["0","1"],"ram_bytes":16106127360,"hostname":"gpubox","gpu_mem_bytes":[0,0],"cards":[],"numa_nodes":[],"daemon":null}`},
		{"daemon's CUDA_VISIBLE_DEVICES", map[string]string{"CUDA_VISIBLE_DEVICES": "GPU-a,GPU-b,GPU-c"}, nil,
			`{"cpus":6,"cpu_ids":[2,3,4,5,6,7],"gpus":["GPU-a","GPU-b","GPU-c"],"ram_bytes":16106127360,"hostname":"gpubox","gpu_mem_bytes":[0,0,0],"cards":[],"numa_nodes":[],"daemon":null}`},
		{"empty CUDA_VISIBLE_DEVICES: no cards", map[string]string{"CUDA_VISIBLE_DEVICES": ""}, nil,
			`{"cpus":6,"cpu_ids":[2,3,4,5,6,7],"gpus":[],"ram_bytes":16106127360,"hostname":"gpubox","gpu_mem_bytes":[],"cards":[],"numa_nodes":[],"daemon":null}`},
		{"each card's memory", nil, []string{"--gpu-mem", "80G"},
			`{"cpus":6,"cpu_ids":[2,3,4,5,6,7],"gpus":["0","1"],"ram_bytes":16106127360,"hostname":"gpubox","gpu_mem_bytes":[85899345920,85899345920],"cards":[],"numa_nodes":[],"daemon":null}`},
		{"overrides", nil, []string{"--cpus", "2", "--gpus", "4", "--ram", "8G"},
			`{"cpus":2,"cpu_ids":[2,3],"gpus":["0","1","2","3"],"ram_bytes":8589934592,"hostname":"gpubox","gpu_mem_bytes":[0,0,0,0],"cards":[],"numa_nodes":[],"daemon":null}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, errOut, code := berth(t, tt.environ, append([]string{"machine", "--json"}, tt.args...)...)
			if code != exitOK {
				t.Fatalf("exit %d: %s", code, errOut)
			}
			var compact bytes.Buffer
			if err := json.Compact(&compact, []byte(out)); err != nil {
				t.Fatal(err)
			}
			if compact.String() != tt.want {
				t.Errorf("got  %s\nwant %s", compact.String(), tt.want)
			}
		})
	}
}

func TestMachineOverrideProblems(t *testing.T) {
	tests := []struct {
		name    string
		root    string // the fixture machine; "" is testdata/box
		environ map[string]string
		args    []string
		code    int
		stderr  string
	}{
		{"oversubscribed cores warn", "", nil, []string{"--cpus", "64"}, exitOK,
			"berth: warning: --cpus 64 is more than 4 times the 8 cores this machine has; jobs will be oversubscribed"},
		{"ram without a unit", "", nil, []string{"--ram", "32"}, exitUsage,
			`berth: --ram: size "32" has no unit; write it with one of K, M, G or T (base 1024, optionally followed by "B" or "iB"), e.g. "32M" or "32G" ("32B" is bytes)`},
		{"one core, oversubscribed", "testdata/onecore", nil, []string{"--cpus", "8"}, exitOK,
			"berth: warning: --cpus 8 is more than 4 times the 1 core this machine has; jobs will be oversubscribed"},
		// An override out of range is not a machine that cannot be
		// probed: its sentence says what is accepted, and no more, and
		// it is a usage error (exit 2).
		{"more cards than the mask names", "", map[string]string{"CUDA_VISIBLE_DEVICES": "2,3"}, []string{"--gpus", "3"}, exitUsage,
			"berth: --gpus 3 asks for more cards than the daemon may use: its CUDA_VISIBLE_DEVICES names only 2 cards (2,3); give --gpus 2 or fewer, or change CUDA_VISIBLE_DEVICES in the daemon's environment (systemctl edit berth)"},
		{"no cores", "", nil, []string{"--cpus", "0"}, exitUsage,
			"berth: --cpus 0 is not accepted: give 1 to 65536 cores, or leave --cpus out to use what this machine has (berth machine shows it)"},
		{"no memory", "", nil, []string{"--ram", "0G"}, exitUsage,
			"berth: --ram of 0 bytes is not accepted: give a size above 0, or leave --ram out to use what this machine has (berth machine shows it)"},
		// Not told to write "0G", which it then refuses.
		{"no memory, bare", "", nil, []string{"--ram", "0"}, exitUsage,
			"berth: --ram of 0 bytes is not accepted: give a size above 0, or leave --ram out to use what this machine has (berth machine shows it)"},
		{"cores that cannot be counted", "testdata/nocores", nil, nil, exitFailed,
			"berth: cannot tell what this machine has: probe cores under testdata/nocores: cannot determine the number of cores: open testdata/nocores/sys/devices/system/cpu/online: no such file or directory; open testdata/nocores/proc/cpuinfo: no such file or directory (give --cpus N to say it)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, errOut, code := berthOn(t, cmp.Or(tt.root, "testdata/box"), tt.environ, append([]string{"machine"}, tt.args...)...)
			if code != tt.code {
				t.Errorf("exit %d, want %d", code, tt.code)
			}
			if strings.TrimSpace(errOut) != tt.stderr {
				t.Errorf("stderr:\n got %s\nwant %s", strings.TrimSpace(errOut), tt.stderr)
			}
		})
	}
}

// TestCheckLargerMachineNoWarning: berth check --cpus 64 on a smaller
// machine checks the files for that box, and runs no job: nothing is
// oversubscribed, and nothing warns.
func TestCheckLargerMachineNoWarning(t *testing.T) {
	file := filepath.Join(t.TempDir(), "big.lua")
	if err := os.WriteFile(file, []byte(`job "big" { cmd = "true", cpus = 32 }`), 0o644); err != nil {
		t.Fatal(err)
	}
	out, errOut, code := berthOn(t, "testdata/box", nil, "check", "--cpus", "64", "--socket", filepath.Join(t.TempDir(), "none.sock"), file)
	if code != exitOK || strings.Contains(errOut, "oversubscribed") {
		t.Errorf("check --cpus 64 of a job of 32: exit %d\n%s%s", code, out, errOut)
	}
}

// When the cores cannot be counted, --cpus says how many there are, as the
// message asks; the rest of the machine is still probed.
func TestMachineCoresGiven(t *testing.T) {
	out, errOut, code := berthOn(t, "testdata/nocores", nil, "machine", "--json", "--cpus", "4")
	if code != exitOK || errOut != "" {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, []byte(out)); err != nil {
		t.Fatal(err)
	}
	want := `{"cpus":4,"cpu_ids":[0,1,2,3],"gpus":["0","1"],"ram_bytes":16106127360,"hostname":"gpubox","gpu_mem_bytes":[0,0],"cards":[],"numa_nodes":[],"daemon":null}`
	if compact.String() != want {
		t.Errorf("got  %s\nwant %s", compact.String(), want)
	}
	out, _, _ = berthOn(t, "testdata/nocores", nil, "machine", "--cpus", "4")
	if !strings.Contains(out, "cores could not be counted") {
		t.Errorf("berth machine does not say the cores could not be counted:\n%s", out)
	}
}

func TestDefaultPaths(t *testing.T) {
	tests := []struct {
		name                string
		e                   env
		jobs, state, socket string
	}{
		{"root", env{uid: 0, home: "/root"}, "/etc/berth/jobs.d", "/var/lib/berth", "/run/berth/berth.sock"},
		{"a person", env{uid: 1000, home: "/home/ana"}, "/home/ana/.config/berth/jobs.d", "/home/ana/.local/state/berth", "/tmp/berth-1000/berth.sock"},
		{"XDG", env{uid: 1000, home: "/home/ana", lookup: lookupIn(map[string]string{
			"XDG_CONFIG_HOME": "/x/config", "XDG_STATE_HOME": "/x/state", "XDG_RUNTIME_DIR": "/run/user/1000"})},
			"/x/config/berth/jobs.d", "/x/state/berth", "/run/user/1000/berth.sock"},
		{"BERTH_*", env{uid: 0, lookup: lookupIn(map[string]string{
			"BERTH_JOBS": "/j", "BERTH_STATE": "/s", "BERTH_SOCKET": "/s.sock", "BERTH_USER_JOBS": "/u"})},
			"/j", "/s", "/s.sock"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.e.lookup == nil {
				tt.e.lookup = lookupIn(nil)
			}
			if got := defaultJobsDir(tt.e); got != tt.jobs {
				t.Errorf("jobs %q, want %q", got, tt.jobs)
			}
			if got := defaultStateDir(tt.e); got != tt.state {
				t.Errorf("state %q, want %q", got, tt.state)
			}
			if got := defaultSocket(tt.e); got != tt.socket {
				t.Errorf("socket %q, want %q", got, tt.socket)
			}
			// A client tries the person's own daemon, then the system's.
			want := []string{tt.socket, systemSocket}
			if tt.socket == systemSocket || tt.e.get("BERTH_SOCKET") != "" {
				want = want[:1]
			}
			if got := clientSockets(tt.e); !slices.Equal(got, want) {
				t.Errorf("client sockets %q, want %q", got, want)
			}
			// berth check reads the people's files where the system
			// daemon does, whoever checks.
			if got, want := peoplesJobs(tt.e), cmp.Or(tt.e.get("BERTH_USER_JOBS"), "/var/spool/berth"); got != want {
				t.Errorf("people's jobs for check %q, want %q", got, want)
			}
		})
	}
}

func lookupIn(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

// TestMachineNUMA: on a box whose driver and kernel describe the cards,
// berth machine says each card's model, bus location, NUMA node and local
// cores, and --json carries them; a MIG instance is named as such.
func TestMachineNUMA(t *testing.T) {
	const root = "../../probes/testdata/topology/eight-two-nodes"
	environ := map[string]string{"CUDA_VISIBLE_DEVICES": "5,GPU-a1000000-1111-2222-3333-444455556666,MIG-a1000006-1111-2222-3333-444455556666"}
	out, errOut, code := berthOn(t, root, environ, "machine", "--cpus", "8", "--socket", filepath.Join(t.TempDir(), "none.sock"))
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	testkit.Golden(t, "testdata/machine-numa.golden", []byte(out))
	out, _, _ = berthOn(t, root, environ, "machine", "--json", "--cpus", "8", "--socket", filepath.Join(t.TempDir(), "none.sock"))
	var m machineJSON
	if err := json.Unmarshal([]byte(out), &m); err != nil {
		t.Fatal(err)
	}
	if len(m.Cards) != 2 || m.Cards[0].Name != "5" || m.Cards[0].PCI != "0000:90:00.0" || m.Cards[0].NUMANode != 1 ||
		m.Cards[1].NUMANode != 0 || len(m.Cards[1].LocalCPUs) != 64 || m.Cards[1].Model != "NVIDIA A100-SXM4-80GB" {
		t.Errorf("cards %+v", m.Cards)
	}
	if len(m.NUMANodes) != 2 || m.NUMANodes[1].Node != 1 || len(m.NUMANodes[1].CPUs) != 64 {
		t.Errorf("nodes %+v", m.NUMANodes)
	}
}

// fixedCards is a CardReader with a fixed answer.
type fixedCards []probes.CardUse

func (f fixedCards) ReadCards() ([]probes.CardUse, error) { return f, nil }

// TestMachineNVML: the 8-card box with MIG on two cards, as NVML shows it:
// the cards counted in /dev that are in MIG mode are their instances, on
// their card's node; each card says its memory in use and its processes.
func TestMachineNVML(t *testing.T) {
	const root = "../../probes/testdata/topology/eight-two-nodes"
	topo, _ := probes.Probe(root, nil)
	var uses fixedCards
	for i, c := range topo.Topology.Cards {
		u := probes.CardUse{Index: i, UUID: c.UUID, Model: c.Model, PCI: c.PCI, MemoryTotal: 80 << 30, MemoryUsed: 1 << 30}
		switch i {
		case 1:
			u.MemoryUsed = 22 << 30
			u.Processes = []probes.CardProcess{{PID: 4242, MemoryBytes: 21 << 30}, {PID: 4243, MemoryBytes: -1}}
		case 6, 7:
			for k := range 2 {
				u.MIG = append(u.MIG, probes.CardUse{Index: k, UUID: fmt.Sprintf("MIG-%d-%d", i, k), Model: "NVIDIA A100-SXM4-80GB MIG 3g.40gb",
					PCI: c.PCI, MemoryTotal: 40 << 30, MemoryUsed: 2 << 30})
			}
		}
		uses = append(uses, u)
	}
	run := func(args ...string) string {
		var out, errOut bytes.Buffer
		c := &cli{stdout: &out, stderr: &errOut, root: root, cards: uses,
			env: env{lookup: func(string) (string, bool) { return "", false }, uid: 1000, home: "/home/someone"}}
		if code := c.main(append(args, "--cpus", "8", "--socket", filepath.Join(t.TempDir(), "none.sock"))); code != exitOK {
			t.Fatalf("exit %d: %s", code, errOut.String())
		}
		return out.String()
	}
	testkit.Golden(t, "testdata/machine-nvml.golden", []byte(run("machine")))
	var m machineJSON
	if err := json.Unmarshal([]byte(run("machine", "--json")), &m); err != nil {
		t.Fatal(err)
	}
	if want := []string{"0", "1", "2", "3", "4", "5", "MIG-6-0", "MIG-6-1", "MIG-7-0", "MIG-7-1"}; !slices.Equal(m.GPUs, want) {
		t.Fatalf("cards %v, want %v", m.GPUs, want)
	}
	if len(m.Cards) != 10 || m.Cards[1].MemoryUsedBytes == nil || *m.Cards[1].MemoryUsedBytes != 22<<30 || len(m.Cards[1].Processes) != 2 ||
		m.Cards[9].UUID != "MIG-7-1" || m.Cards[9].NUMANode != 1 || *m.Cards[9].MemoryTotalBytes != 40<<30 {
		t.Errorf("cards %+v", m.Cards)
	}
}

func TestSplitCount(t *testing.T) {
	for _, tt := range []struct{ in, want []string }{
		{[]string{"-n1", "train"}, []string{"-n", "1", "train"}},
		{[]string{"-n", "20"}, []string{"-n", "20"}},
		{[]string{"-nx", "-n-1"}, []string{"-nx", "-n-1"}},
		{[]string{"train", "--", "-n5"}, []string{"train", "--", "-n5"}},
	} {
		if got := splitCount(tt.in); !slices.Equal(got, tt.want) {
			t.Errorf("splitCount(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}
