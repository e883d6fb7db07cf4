package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/berthd/berth/supervisor"
	"github.com/berthd/berth/supervisor/testkit"
)

// TestDaemonStartErrorsNameTheCause: a job that cannot start says what is
// at fault in berth status — its dir, its program — never the kernel's
// errno against the program ("fork/exec /bin/sh: no such file or
// directory" for a missing dir).
func TestDaemonStartErrorsNameTheCause(t *testing.T) {
	t.Parallel()
	d := newTestDaemon(t, nil)
	if err := os.WriteFile(filepath.Join(d.out, "file"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	jobs := `
job "no-dir" { cmd = { "true" }, dir = "OUT/missing" }
job "file-dir" { cmd = "true", dir = "OUT/file" }
job "no-program" { cmd = { "no-such-program-berth", "--flag" }, env = { PATH = "/nonexistent:/usr/bin" } }
`
	want := map[string]string{
		"no-dir":     "cannot start: dir OUT/missing does not exist (berth show no-dir shows its command, directory and user)",
		"file-dir":   "cannot start: dir OUT/file is not a directory (berth show file-dir shows its command, directory and user)",
		"no-program": `cannot start: program "no-such-program-berth" was not found in the job's PATH, /nonexistent:/usr/bin; give its full path in cmd, or set PATH in env (berth show no-program shows its command, directory and user)`,
	}
	if os.Geteuid() == 0 {
		// t.TempDir is mode 0700: uid 65534 may not enter it.
		jobs += `job "denied" { cmd = { "true" }, dir = "OUT", user = "nobody" }` + "\n"
		want["denied"] = "cannot start: dir OUT is not accessible to uid 65534: it may not enter " + filepath.Dir(filepath.Dir(d.out)) +
			" (mode 0700, owner 0:0) (berth show denied shows its command, directory and user)"
	}
	d.write("bad.lua", jobs)
	d.start(daemonOptions{args: []string{"--cpus", "4"}})
	for name, why := range want {
		why = d.lua(why)
		j := d.waitJob(name, "refused to start", func(j supervisor.JobStatus) bool { return strings.HasPrefix(j.Why, "cannot start") })
		if j.Why != why {
			t.Errorf("job %s: why\n  %s\nwant\n  %s", name, j.Why, why)
		}
	}
	// The run keeps its cause: history shows it, and the next daemon
	// says it again.
	cause := d.lua("dir OUT/missing does not exist")
	out, _, code := d.cli("history", "no-dir")
	if code != 0 || !strings.Contains(out, "spawn error: "+cause) {
		t.Errorf("berth history no-dir (exit %d):\n%s\nwant the cause, %q", code, out, cause)
	}
	var runs []supervisor.RunView
	out, _, _ = d.cli("history", "no-dir", "--json")
	if err := json.Unmarshal([]byte(out), &runs); err != nil || len(runs) != 1 || runs[0].Reason != "spawn error" || runs[0].Cause != cause {
		t.Errorf("berth history no-dir --json: %+v, %v", runs, err)
	}
	d.stop()
	d.start(daemonOptions{args: []string{"--cpus", "4"}})
	if j := d.waitState("no-dir", "failed"); j.Why != d.lua(want["no-dir"]) {
		t.Errorf("after a restart of the daemon, job no-dir: why\n  %s\nwant\n  %s", j.Why, d.lua(want["no-dir"]))
	}
	d.stop()
}

// openTree is a directory every user may walk into (t.TempDir is mode
// 0700), with out/ and state/ owned by uid 65534, so that jobs and a
// daemon run as nobody can write there.
func openTree(t *testing.T) (dir, out, state string) {
	t.Helper()
	dir, err := os.MkdirTemp("", "berth-open-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	out, state = filepath.Join(dir, "out"), filepath.Join(dir, "state")
	for _, p := range []string{out, state} {
		if err := os.Mkdir(p, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(p, 65534, 65534); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir, out, state
}

func needNobody(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root, to run as uid 65534")
	}
	if c, err := supervisor.LookupCredentials("nobody", "nogroup"); err != nil || c.UID != 65534 || c.GID != 65534 {
		t.Skip("needs the user nobody and the group nogroup, both 65534")
	}
}

// writeIDs is a job command that records the IDs it runs with.
func writeIDs(name string) string {
	return fmt.Sprintf(`{ "sh", "-c", "echo $(id -u) $(id -g) $(id -G) > OUT/%[1]s.tmp && mv OUT/%[1]s.tmp OUT/%[1]s" }`, name)
}

// TestDaemonRunsJobsAsTheirUser: a job with user = gets that user's IDs
// and login variables, over the daemon's own; its declared env still
// wins. A job with group = alone runs as the daemon (root here) with that
// group as its only one: not root's supplementary groups.
func TestDaemonRunsJobsAsTheirUser(t *testing.T) {
	t.Parallel()
	needNobody(t)
	d := newTestDaemon(t, nil)
	_, d.out, _ = openTree(t)
	d.write("users.lua", `
job "as-nobody" { cmd = `+writeEnv("as-nobody")+`, user = "nobody" }
job "declared" { cmd = `+writeEnv("declared")+`, user = "nobody", env = { HOME = "/srv/ml", SHELL = "/bin/dash" } }
job "as-daemon" { cmd = `+writeEnv("as-daemon")+` }
job "group-only" { cmd = `+writeIDs("group-only")+`, group = "nogroup" }
`)
	d.start(daemonOptions{args: []string{"--cpus", "4"}, env: []string{"HOME=/root", "USER=root", "LOGNAME=root", "SHELL=/bin/bash"}})

	check := func(job string, want map[string]string) {
		t.Helper()
		env := d.readEnv(job)
		for k, v := range want {
			if env[k] != v {
				t.Errorf("job %s: %s=%q, want %q", job, k, env[k], v)
			}
		}
	}
	check("as-nobody", map[string]string{"HOME": "/nonexistent", "USER": "nobody", "LOGNAME": "nobody", "SHELL": "/usr/sbin/nologin"})
	check("declared", map[string]string{"HOME": "/srv/ml", "USER": "nobody", "LOGNAME": "nobody", "SHELL": "/bin/dash"})
	check("as-daemon", map[string]string{"HOME": "/root", "USER": "root", "LOGNAME": "root", "SHELL": "/bin/bash"})
	if ids := strings.TrimSpace(d.waitFile("group-only")); ids != "0 65534 65534" {
		t.Errorf("group-only job: uid gid groups = %q, want \"0 65534 65534\"", ids)
	}
	// berth show previews what the next run gets, the user's login too.
	var detail supervisor.JobDetail
	out, _, _ := d.cli("show", "as-nobody", "--json")
	if err := json.Unmarshal([]byte(out), &detail); err != nil || !containsLine(detail.NextEnv, "HOME=/nonexistent") {
		t.Errorf("berth show as-nobody: next env %q (%v), want HOME=/nonexistent", detail.NextEnv, err)
	}
	d.stop()
}

// TestDaemonRunByAPerson: a daemon that is not root runs a job as itself
// when its user or group is the daemon's own, and refuses, when the file is
// loaded, one that asks for another user or group — it can never switch to
// them, and group = alone never means uid 0.
func TestDaemonRunByAPerson(t *testing.T) {
	t.Parallel()
	needNobody(t)
	d := newTestDaemon(t, nil)
	tree, out, state := openTree(t)
	d.dir, d.out, d.state, d.socket = tree, out, state, filepath.Join(state, "berth.sock")
	d.jobs = filepath.Join(tree, "jobs.d")
	if err := os.Mkdir(d.jobs, 0o755); err != nil {
		t.Fatal(err)
	}
	exe := filepath.Join(tree, "berth")
	testkit.CopyExecutable(t, os.Args[0], exe, 0o755)
	d.write("person.lua", `
job "own-group" { cmd = `+writeIDs("own-group")+`, group = "nogroup" }
job "itself" { cmd = `+writeEnv("itself")+`, user = "nobody" }
job "other-group" { cmd = { "true" }, group = "root" }
job "other-user" { cmd = { "true" }, user = "root" }
`)
	d.start(daemonOptions{args: []string{"--cpus", "4"}, exe: exe, env: []string{"HOME=/root"},
		cred: &syscall.Credential{Uid: 65534, Gid: 65534, Groups: []uint32{}}})

	if ids := strings.TrimSpace(d.waitFile("own-group")); ids != "65534 65534 65534" {
		t.Errorf("own-group job: uid gid groups = %q, want \"65534 65534 65534\"", ids)
	}
	if env := d.readEnv("itself"); env["HOME"] != "/nonexistent" || env["USER"] != "nobody" {
		t.Errorf("itself: HOME=%q USER=%q, want nobody's", env["HOME"], env["USER"])
	}
	for job, want := range map[string]string{
		"other-group": `group "root": this berth daemon runs as uid 65534, group 65534, and only a daemon running as root may run a job in another group`,
		"other-user":  `user "root": this berth daemon runs as uid 65534, and only a daemon running as root may run a job as another user`,
	} {
		if j := d.waitState(job, "invalid"); !strings.Contains(j.Why, want) {
			t.Errorf("job %s: why %q, want it to say %q", job, j.Why, want)
		}
	}
	d.stop()
}
