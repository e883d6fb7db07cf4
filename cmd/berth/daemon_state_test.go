package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/berthd/berth/supervisor"
	"github.com/berthd/berth/supervisor/store"
	"github.com/berthd/berth/supervisor/testkit"
)

// The state directory's tests: what the daemon does with a state file it
// did not write, and with one taken away under it.

// refused starts a daemon over the test's directories that must refuse to
// start, and returns what it said and its exit code.
func (d *testDaemon) refused(args ...string) (string, int) {
	d.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	all := append([]string{"daemon", "--jobs", d.jobs, "--state", d.state, "--cpus", "2"}, args...)
	cmd := exec.CommandContext(ctx, os.Args[0], all...)
	cmd.Env = append(os.Environ(), "BERTH_TEST_BE_BERTH=1", "NOTIFY_SOCKET=", "JOURNAL_STREAM=")
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		d.t.Fatalf("the daemon did not refuse to start within %v:\n%s", waitLong, out)
	}
	if err == nil {
		d.t.Fatalf("the daemon exited 0:\n%s", out)
	}
	return string(out), cmd.ProcessState.ExitCode()
}

// TestDaemonRefusesAnEmptyState: a state file of 0 bytes (a full disk, a
// careless `> state.db`) is refused with what to do, and the batch job it
// had recorded done does not run again. bbolt alone makes an empty file a
// new database: the daemon started afresh, and every done job ran again.
func TestDaemonRefusesAnEmptyState(t *testing.T) {
	t.Parallel()
	d := newTestDaemon(t, map[string]string{"batch.lua": `job "batch" { cmd = { "sh", "-c", "echo ran >> OUT/batch" } }`})
	d.start(daemonOptions{args: []string{"--cpus", "2"}})
	d.waitState("batch", "done")
	d.stop()

	path := filepath.Join(d.state, "state.db")
	if err := os.Truncate(path, 0); err != nil {
		t.Fatal(err)
	}
	out, code := d.refused("--socket", d.socket)
	want := msgOpenState(d.state, &store.NotStateError{Path: path, Problem: store.NotStateEmpty})
	if code != exitFailed || !strings.Contains(out, want) {
		t.Errorf("exit %d, said:\n%s\nwant exit %d and\n%s", code, out, exitFailed, want)
	}
	if !strings.Contains(want, "mv "+path+" "+path+".bad") {
		t.Errorf("the message %q does not say how to move the file aside", want)
	}
	if fi, err := os.Stat(path); err != nil || fi.Size() != 0 {
		t.Errorf("the refused file was changed: %v, %v", fi, err)
	}
	if data, _ := os.ReadFile(filepath.Join(d.out, "batch")); string(data) != "ran\n" {
		t.Errorf("the batch job ran %d times, want once", strings.Count(string(data), "ran"))
	}
}

// TestDaemonStateRemovedUnderIt: the state directory's lock is its lock
// file, so a state file removed under a running daemon lets no second
// daemon start there (before, the second made a new state.db, took its
// lock, and ran the done batch job again); and the running daemon says
// the file is gone, in berth status and once in its log.
func TestDaemonStateRemovedUnderIt(t *testing.T) {
	t.Parallel()
	d := newTestDaemon(t, map[string]string{"batch.lua": `job "batch" { cmd = { "sh", "-c", "echo ran >> OUT/batch" } }`})
	d.start(daemonOptions{args: []string{"--cpus", "2"}})
	d.waitState("batch", "done")
	path := filepath.Join(d.state, "state.db")
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}

	out, code := d.refused("--socket", filepath.Join(d.dir, "second.sock"))
	want := msgOpenState(d.state, &store.LockedError{Path: path, HolderPID: d.cmd.Process.Pid})
	if code != exitFailed || !strings.Contains(out, want) {
		t.Errorf("second daemon: exit %d, said:\n%s\nwant exit %d and\n%s", code, out, exitFailed, want)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("the refused daemon made a state file: %v", err)
	}

	// The next commit notices; more commits say nothing more.
	const logged = "the state file was removed while the daemon runs"
	for i, name := range []string{"one", "two"} {
		d.write(name+".lua", `job "`+name+`" { cmd = { "true" } }`)
		d.waitState(name, "done")
		if i == 0 {
			d.waitLog(logged)
		}
	}
	var s supervisor.Status
	testkit.WaitFor(t, waitLong, "berth status to say the state file is gone", func() bool {
		s = d.status()
		return len(s.Problems) > 0 && s.Problems[0].Code == supervisor.ProblemStateGone
	})
	gone := &store.GoneError{Path: path}
	if p := s.Problems[0]; p.File != path || p.Text != supervisor.MsgStateGone(gone, d.cmd.Process.Pid) || s.Errors[0] != p.Text {
		t.Errorf("problem %+v (errors %q), want the state file gone at %s", p, s.Errors, path)
	}
	if n := strings.Count(d.logs.String(), logged); n != 1 {
		t.Errorf("the log says %d times that the state file was removed, want once", n)
	}
	testkit.WaitFor(t, waitLong, "systemd's status line to say so", func() bool {
		d.mu.Lock()
		defer d.mu.Unlock()
		for _, n := range d.notified {
			if strings.HasPrefix(n, "STATUS=") && strings.Contains(n, "state file removed (berth status)") {
				return true
			}
		}
		return false
	})
	// The words as berth status wraps them.
	if stdout, _, _ := d.cli("status"); !strings.Contains(strings.Join(strings.Fields(stdout), " "), "was removed while the daemon runs") {
		t.Errorf("berth status does not say the state file was removed:\n%s", stdout)
	}
	if data, _ := os.ReadFile(filepath.Join(d.out, "batch")); string(data) != "ran\n" {
		t.Errorf("the batch job ran %d times, want once", strings.Count(string(data), "ran"))
	}
	d.stop()
	// Its last line says what went with the file, and the next daemon's
	// log that it begins a new state (trial AC: a plain "stopped").
	if !strings.Contains(d.logs.String(), "[ERROR] berth: stopped with the state file removed under the daemon: what it recorded is lost") {
		t.Error("the daemon stopped without saying its state went with the file")
	}
	d.start(daemonOptions{})
	if !strings.Contains(d.logs.String(), "no state file: beginning a new state") {
		t.Error("the next daemon did not say it begins a new state")
	}
	d.stop()
}

// TestDaemonNameWinnerSurvivesRestart: when two files declare one job
// name, the file already in force keeps it, and keeps it after a restart
// too, even when it sorts later. Before, the restarted daemon gave the name
// to the file that sorts first, and a different command ran under it.
func TestDaemonNameWinnerSurvivesRestart(t *testing.T) {
	t.Parallel()
	service := func(who string) string {
		return `job "x" { cmd = { "sh", "-c", "echo ` + who + ` >> OUT/x; exec sleep 1000" }, restart = "always" }`
	}
	d := newTestDaemon(t, map[string]string{"b.lua": service("b")})
	a, b := filepath.Join(d.jobs, "a.lua"), filepath.Join(d.jobs, "b.lua")
	d.start(daemonOptions{args: []string{"--cpus", "2"}})
	d.waitState("x", "running")
	d.write("a.lua", service("a"))

	// checkWinner checks that b.lua holds the name and a.lua is refused for it.
	checkWinner := func(life string) {
		t.Helper()
		var s supervisor.Status
		testkit.WaitFor(t, waitLong, life+": a.lua refused for the name b.lua holds", func() bool {
			s = d.status()
			for _, p := range s.Problems {
				if p.Code == supervisor.ProblemNameTaken && p.File == a && p.Job == "x" {
					return true
				}
			}
			return false
		})
		if j, ok := d.job("x"); !ok || j.File != b {
			t.Errorf("%s: job x is declared by %q, want %s (problems %+v)", life, j.File, b, s.Problems)
		}
	}
	checkWinner("first life")
	d.stop()

	d.start(daemonOptions{args: []string{"--cpus", "2"}})
	d.waitState("x", "running")
	checkWinner("after a restart")
	d.stop()
	if data, _ := os.ReadFile(filepath.Join(d.out, "x")); string(data) != "b\nb\n" {
		t.Errorf("job x ran %q, want b's command twice", data)
	}
}

// TestEditedWhileDownKeepsItsVersionInForce: a file edited while no
// daemon ran, whose new version the rules across files refuse (a name
// another file holds), keeps its version in force at the next start, as a
// reload keeps it; it had lost its jobs.
func TestEditedWhileDownKeepsItsVersionInForce(t *testing.T) {
	t.Parallel()
	d := newTestDaemon(t, map[string]string{
		"a.lua": `job "a" { cmd = "sleep 1000", cpus = 0 }`,
		"b.lua": `job "b" { cmd = "sleep 1000", cpus = 0 }`,
	})
	d.start(daemonOptions{args: []string{"--cpus", "2"}})
	d.waitState("a", "running")
	d.waitState("b", "running")
	d.stop()
	d.write("a.lua", `job "a" { cmd = "sleep 1000", cpus = 0 }
job "b" { cmd = "sleep 2000", cpus = 0 }`)
	d.start(daemonOptions{args: []string{"--cpus", "2"}})
	a := filepath.Join(d.jobs, "a.lua")
	testkit.WaitFor(t, waitLong, "a.lua's edit refused for the name b.lua holds", func() bool {
		return slices.ContainsFunc(d.status().Problems, func(p supervisor.Problem) bool {
			return p.Code == supervisor.ProblemNameTaken && p.File == a && p.Job == "b"
		})
	})
	if j := d.waitState("a", "running"); j.File != a {
		t.Errorf("job a is declared by %q, want %s", j.File, a)
	}
	if j := d.waitState("b", "running"); j.File != filepath.Join(d.jobs, "b.lua") {
		t.Errorf("job b is declared by %q, want b.lua", j.File)
	}
	d.stop()
}

// TestDoneKeepsItsRestarts: a job that came to rest done after restarts
// shows them after the daemon's restart too, as one whose policy gave up
// (max_restarts) shows that it did.
func TestDoneKeepsItsRestarts(t *testing.T) {
	t.Parallel()
	d := newTestDaemon(t, map[string]string{"jobs.lua": `job "once" { cmd = { "sh", "-c", "test -e OUT/failed || { touch OUT/failed; exit 1; }" }, cpus = 0, restart = "on-failure" }
job "alw" { cmd = "true", cpus = 0, restart = "always", max_restarts = 1 }`})
	d.start(daemonOptions{})
	st := d.waitJob("once", "done after its restart", func(js supervisor.JobStatus) bool { return js.State == "done" })
	if st.Restarts != 1 {
		t.Fatalf("once: done with %d restarts, want 1", st.Restarts)
	}
	st = d.waitJob("alw", "given up after its restart", func(js supervisor.JobStatus) bool { return js.State == "failed" })
	if st.Restarts != 1 || !st.GaveUp {
		t.Fatalf("alw: failed with %d restarts, gave up %v; want 1, given up", st.Restarts, st.GaveUp)
	}
	d.stop()
	d.start(daemonOptions{})
	if st, _ := d.job("once"); st.State != "done" || st.Restarts != 1 {
		t.Errorf("once after the daemon's restart: %s with %d restarts, want done with 1", st.State, st.Restarts)
	}
	if st, _ := d.job("alw"); st.State != "failed" || st.Restarts != 1 || !st.GaveUp {
		t.Errorf("alw after the daemon's restart: %s with %d restarts, gave up %v; want failed with 1, given up", st.State, st.Restarts, st.GaveUp)
	}
	d.stop()
}
