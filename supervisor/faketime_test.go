package supervisor

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/berthd/berth/accounting"
	"github.com/berthd/berth/supervisor/clock"
	"github.com/berthd/berth/supervisor/store"
	"github.com/berthd/berth/supervisor/testkit"
)

// fakeTimeDaemon runs a daemon over jobs, a job file's source, on a fake
// clock: restart delays and timeouts fire only when the test moves it.
func fakeTimeDaemon(t *testing.T, jobs string) (*Daemon, *clock.Fake) {
	t.Helper()
	clk := clock.NewFake(time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC))
	d, _ := runDaemon(t, jobs, func(cfg *Config) { cfg.Clock = clk })
	return d, clk
}

// waitJob waits until job's status satisfies cond, and returns it.
func waitJob(t *testing.T, d *Daemon, job, what string, cond func(JobStatus) bool) JobStatus {
	t.Helper()
	var js JobStatus
	testkit.WaitFor(t, 20*time.Second, "job "+job+" "+what, func() bool {
		var ok bool
		js, ok = d.jobStatus(job)
		return ok && cond(js)
	})
	return js
}

// waitRuns waits until job has n runs on record, the newest ended, and
// returns that one.
func waitRuns(t *testing.T, d *Daemon, job string, n int) store.RunRecord {
	t.Helper()
	var runs []store.RunRecord
	testkit.WaitFor(t, 20*time.Second, fmt.Sprintf("job %s to have run %d times", job, n), func() bool {
		var err error
		runs, err = d.store.Runs(job, n)
		return err == nil && len(runs) == n && !runs[0].End.IsZero()
	})
	return runs[0]
}

// start asks for a start of job, as root would.
func start(t *testing.T, d *Daemon, job string) {
	t.Helper()
	if code, body := as(t, d, "root", "POST", jobPath(job)+"/start"); code != http.StatusOK {
		t.Fatalf("start %s: %d %s", job, code, body)
	}
}

// TestFakeTimeRestartDelays: a failing job's restarts wait 1 s, then 2 s,
// on the daemon's clock, and not a moment less.
func TestFakeTimeRestartDelays(t *testing.T) {
	t.Parallel()
	d, clk := fakeTimeDaemon(t, `job "flaky" { cmd = "exit 3", restart = "on-failure" }`)
	for i, delay := range []time.Duration{time.Second, 2 * time.Second} {
		js := waitJob(t, d, "flaky", "backed off", func(js JobStatus) bool {
			return js.State == "backoff" && js.Restarts == i+1
		})
		if js.Why != "exit 3" {
			t.Errorf("backoff %d: why %q, want exit 3", i+1, js.Why)
		}
		if js.RetryAt == nil || !js.RetryAt.Equal(clk.Now().Add(delay)) {
			t.Errorf("backoff %d: retry_at %v, want %v", i+1, js.RetryAt, clk.Now().Add(delay))
		}
		// The restart delay is the one timer on the fake clock: it has
		// not fired a millisecond early, and fires on time.
		clk.Advance(delay - time.Millisecond)
		if n := clk.Pending(); n != 1 {
			t.Fatalf("backoff %d: %d timers pending a millisecond before the delay, want the restart's", i+1, n)
		}
		clk.Advance(time.Millisecond)
		if n := clk.Pending(); n != 0 {
			t.Fatalf("backoff %d: the restart delay did not fire after %v", i+1, delay)
		}
	}
	waitJob(t, d, "flaky", "backed off a third time", func(js JobStatus) bool { return js.Restarts == 3 })
}

// TestFakeTimeGaveUp: a service (restart = "always") out of max_restarts
// rests failed, though its last run exited 0, and says it gave up.
func TestFakeTimeGaveUp(t *testing.T) {
	t.Parallel()
	d, clk := fakeTimeDaemon(t, `job "svc" { cmd = "exit 0", restart = "always", max_restarts = 1 }`)
	waitJob(t, d, "svc", "backed off", func(js JobStatus) bool { return js.State == "backoff" })
	clk.Advance(time.Second)
	js := waitJob(t, d, "svc", "given up", func(js JobStatus) bool {
		return js.State != "backoff" && js.State != "waiting" && js.State != "running" && js.State != "starting"
	})
	if js.State != "failed" || !js.GaveUp || js.Restarts != 1 {
		t.Errorf("out of restarts: %s, gave up %v, %d restarts; want failed, given up after 1", js.State, js.GaveUp, js.Restarts)
	}
}

// TestFakeTimeNoRestartAllowed: a job whose policy would restart it but
// for max_restarts = 0 gave up too, with no restart made; one whose policy
// would not restart it did not give up.
func TestFakeTimeNoRestartAllowed(t *testing.T) {
	t.Parallel()
	d, _ := fakeTimeDaemon(t, `job "zero" { cmd = "exit 3", restart = "on-failure", max_restarts = 0 }
job "no" { cmd = "exit 3", restart = "no" }`)
	for name, gaveUp := range map[string]bool{"zero": true, "no": false} {
		js := waitJob(t, d, name, "failed", func(js JobStatus) bool { return js.State == "failed" })
		if js.GaveUp != gaveUp || js.Restarts != 0 {
			t.Errorf("%s: gave up %v with %d restarts, want %v with none", name, js.GaveUp, js.Restarts, gaveUp)
		}
	}
}

// TestFakeTimePolicyEditInBackoff: an edit of the restart policy calls
// off the restart already armed where the new policy would not make it
// (it ran once more).
func TestFakeTimePolicyEditInBackoff(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC))
	d, jobsDir := runDaemon(t, `job "flaky" { cmd = "exit 3", restart = "on-failure" }`, func(cfg *Config) { cfg.Clock = clk })
	waitJob(t, d, "flaky", "backed off", func(js JobStatus) bool { return js.State == "backoff" && js.Restarts == 1 })
	if err := writeFile(filepath.Join(jobsDir, "jobs.lua"), []byte(`job "flaky" { cmd = "exit 3", restart = "no" }`), 0o600); err != nil {
		t.Fatal(err)
	}
	reload(t, d)
	waitJob(t, d, "flaky", "failed, its restart called off", func(js JobStatus) bool { return js.State == "failed" })
	if n := clk.Pending(); n != 0 {
		t.Errorf("%d timers pending: the restart delay was not called off", n)
	}
	if runs, err := d.store.Runs("flaky", 10); err != nil || len(runs) != 1 {
		t.Errorf("runs %+v (%v), want the first alone", runs, err)
	}
}

// TestFakeTimeTimeout: a run that outlives its timeout on the daemon's
// clock is stopped and recorded as timed out.
func TestFakeTimeTimeout(t *testing.T) {
	t.Parallel()
	d, clk := fakeTimeDaemon(t, `job "slow" { cmd = "sleep 600", timeout = "2h", stop_timeout = "5s" }`)
	waitJob(t, d, "slow", "running", func(js JobStatus) bool { return js.State == "running" })
	clk.Advance(2 * time.Hour)
	js := waitJob(t, d, "slow", "failed", func(js JobStatus) bool { return js.State == "failed" })
	if js.Why != "timed out after 2h" {
		t.Errorf("why %q, want timed out after 2h", js.Why)
	}
	runs, err := d.store.Runs("slow", 1)
	if err != nil || len(runs) != 1 || runs[0].Reason != store.ReasonTimedOut {
		t.Fatalf("history %+v %v, want one run that timed out", runs, err)
	}
	if got := runs[0].End.Sub(runs[0].Start); got != 2*time.Hour {
		t.Errorf("the run lasted %v on the daemon's clock, want 2h", got)
	}
}

// daemonLives starts daemons one after another over the same jobs and
// state directories, as systemd starts berth again: the first over a jobs
// directory holding jobs.lua, tune setting what the test needs.
type daemonLives struct {
	t                 *testing.T
	jobs              string
	tune              func(cfg *Config)
	jobsDir, stateDir string // the first daemon's
}

// start starts the next daemon; stopped must stop it before the next.
func (l *daemonLives) start() (*Daemon, func() error) {
	d, _, stop := startDaemon(l.t, l.jobs, func(cfg *Config) {
		if l.tune != nil {
			l.tune(cfg)
		}
		if l.jobsDir != "" {
			cfg.JobsDir, cfg.StateDir = l.jobsDir, l.stateDir
		}
	})
	l.jobsDir, l.stateDir = d.cfg.JobsDir, d.cfg.StateDir
	return d, stop
}

// startOnKept starts the next daemon where jobs.lua, which declared
// "persist", now declares "other" but cannot be read (why says so): the
// version kept is in force, and why is shown.
func (l *daemonLives) startOnKept(why string) (*Daemon, func() error) {
	t := l.t
	t.Helper()
	d, stop := l.start()
	waitJob(t, d, "persist", "running on the version kept", func(js JobStatus) bool { return js.State == "running" })
	if _, ok := d.jobStatus("other"); ok {
		t.Error("the new version, which cannot be read, is in force")
	}
	if st := d.Status(); len(st.Errors) != 1 || !strings.Contains(st.Errors[0], why) {
		t.Errorf("%q is not shown: %q", why, st.Errors)
	}
	return d, stop
}

func (l *daemonLives) stopped(stop func() error) {
	l.t.Helper()
	if err := stop(); err != nil {
		l.t.Fatal(err)
	}
}

// TestRestartsOutliveTheDaemon: the restarts in a row a job has used go on
// in the next daemon, so max_restarts bounds a job that fails at once
// however often the daemon starts; and a job at rest is shown why it
// rests after a restart of the daemon as before it.
func TestRestartsOutliveTheDaemon(t *testing.T) {
	t.Parallel()
	mark := filepath.Join(t.TempDir(), "ran")
	jobs := `job "flaky" { cmd = "exit 3", restart = "on-failure", max_restarts = 2 }
job "held" { cmd = "exit 4", restart = "on-failure" }
job "steady" { cmd = "if [ -e ` + mark + ` ]; then exec sleep 600; fi; touch ` + mark + `; exit 1", restart = "on-failure", cpus = 0 }`
	clk := clock.NewFake(time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC))
	sock := filepath.Join(t.TempDir(), "berth.sock")
	lives := daemonLives{t: t, jobs: jobs, tune: func(cfg *Config) {
		l, err := net.Listen("unix", sock)
		if err != nil {
			t.Fatal(err)
		}
		cfg.Clock, cfg.Listener = clk, l
	}}
	start, stopped := lives.start, lives.stopped

	d, stop := start()
	waitJob(t, d, "flaky", "backed off", func(js JobStatus) bool { return js.State == "backoff" && js.Restarts == 1 })
	waitJob(t, d, "held", "backed off", func(js JobStatus) bool { return js.State == "backoff" })
	waitJob(t, d, "steady", "backed off", func(js JobStatus) bool { return js.State == "backoff" && js.Restarts == 1 })
	clk.Advance(time.Second)
	waitJob(t, d, "flaky", "backed off again", func(js JobStatus) bool { return js.State == "backoff" && js.Restarts == 2 })
	waitJob(t, d, "steady", "running", func(js JobStatus) bool { return js.State == "running" })
	// Stopped between restarts: the last run's end is not why it rests.
	resp, err := unixClient(sock).Post("http://berth"+APIVersion+"/jobs/held/stop", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if js := waitJob(t, d, "held", "stopped", func(js JobStatus) bool { return js.State == "stopped" }); js.Why != "stopped" {
		t.Errorf("held, stopped in backoff: why %q, want stopped", js.Why)
	}
	stopped(stop)

	// Two restarts used: its next failure is its last. It waits out the
	// rest of the delay the last daemon began (2 s, begun when the clock
	// last moved), not a moment less.
	d, stop = start()
	js := waitJob(t, d, "flaky", "ended or backing off", func(js JobStatus) bool { return js.State == "failed" || js.State == "backoff" })
	if want := clk.Now().Add(2 * time.Second); js.State != "backoff" || js.Restarts != 2 || js.RetryAt == nil || !js.RetryAt.Equal(want) || js.Why != "exit 3" {
		t.Fatalf("after the daemon's restart: %s, %d restarts, retry at %v, why %q; want backoff, 2, %v, exit 3", js.State, js.Restarts, js.RetryAt, js.Why, want)
	}
	clk.Advance(2*time.Second - time.Millisecond)
	if js, _ := d.jobStatus("flaky"); js.State != "backoff" {
		t.Fatalf("a millisecond before its delay ends: %s, want backoff", js.State)
	}
	clk.Advance(time.Millisecond)
	js = waitJob(t, d, "flaky", "ended", func(js JobStatus) bool { return js.State == "failed" || js.Restarts > 2 })
	if js.State != "failed" || js.Restarts != 2 || js.Why != "exit 3" {
		t.Errorf("after the daemon's restart: %s, %d restarts, why %q; want failed, 2, exit 3", js.State, js.Restarts, js.Why)
	}
	if runs, err := d.store.Runs("flaky", 10); err != nil || len(runs) != 3 {
		t.Errorf("%d runs (%v), want 3: the first and max_restarts more", len(runs), err)
	}
	// steady, between two restarts of the daemon, runs as long as a
	// healthy run: its restart in a row is forgotten.
	if js := waitJob(t, d, "steady", "running", func(js JobStatus) bool { return js.State == "running" }); js.Restarts != 1 {
		t.Errorf("steady, restarted once in a row: %d restarts", js.Restarts)
	}
	clk.Advance(healthyRun)
	stopped(stop)

	d, stop = start()
	defer stopped(stop)
	if js := waitJob(t, d, "steady", "running", func(js JobStatus) bool { return js.State == "running" }); js.Restarts != 0 {
		t.Errorf("a job whose run had lasted comes back with %d restarts, want 0", js.Restarts)
	}
	js = waitJob(t, d, "flaky", "failed", func(js JobStatus) bool { return js.State == "failed" })
	if js.Why != "exit 3" || js.Restarts != 2 {
		t.Errorf("failed, after another restart of the daemon: why %q, %d restarts; want exit 3, 2", js.Why, js.Restarts)
	}
	if js := waitJob(t, d, "held", "stopped", func(js JobStatus) bool { return js.State == "stopped" }); js.Why != "stopped" {
		t.Errorf("held, after a restart of the daemon: why %q, want stopped", js.Why)
	}
}

// TestBrokenFileAtStartKeepsItsVersion: a file broken while the daemon was
// down keeps the version that was in force, as it would have had it been
// broken while the daemon ran; its error is shown; fixed, the new version
// is in force and kept; removed while the daemon is down, its copy goes.
func TestBrokenFileAtStartKeepsItsVersion(t *testing.T) {
	t.Parallel()
	lives := daemonLives{t: t, jobs: `job "persist" { cmd = "sleep 600", cpus = 0 }`}
	start, stopped := lives.start, lives.stopped
	file := func(src string) {
		t.Helper()
		if err := writeFile(filepath.Join(lives.jobsDir, "jobs.lua"), []byte(src), 0o600); err != nil {
			t.Fatal(err)
		}
	}

	d, stop := start()
	waitJob(t, d, "persist", "running", func(js JobStatus) bool { return js.State == "running" })
	stopped(stop)

	file(`job "persist" { cmd = "sleep 600", cpus = 0 `) // the brace forgotten
	d, stop = start()
	waitJob(t, d, "persist", "running on the version kept", func(js JobStatus) bool { return js.State == "running" })
	if st := d.Status(); len(st.Errors) != 1 || !strings.Contains(st.Errors[0], "jobs.lua") {
		t.Errorf("the broken file's error is not shown: %q", st.Errors)
	}
	file(`job "fixed" { cmd = "sleep 600", cpus = 0 }`)
	reload(t, d)
	waitJob(t, d, "fixed", "running", func(js JobStatus) bool { return js.State == "running" })
	stopped(stop)
	if kept, err := os.ReadDir(filepath.Join(lives.stateDir, keptDir)); err != nil || len(kept) != 2 {
		t.Errorf("copies kept of the one file (its copy, and its path): %v %v", kept, err)
	}
	// Removed while the daemon is down: its copy goes at the next start.
	if err := os.Remove(filepath.Join(lives.jobsDir, "jobs.lua")); err != nil {
		t.Fatal(err)
	}
	d, stop = start()
	reload(t, d)
	stopped(stop)
	if kept, err := os.ReadDir(filepath.Join(lives.stateDir, keptDir)); err != nil || len(kept) != 0 {
		t.Errorf("copies kept of a removed file: %v %v", kept, err)
	}
}

// TestRefusedFileAtStartKeepsItsVersion: a file refused at the daemon's
// start (made writable by others while it was down) keeps the version
// last accepted, from its kept copy, as it would in a running daemon; the
// refusal is shown, and once the file is fixed, it is read again.
func TestRefusedFileAtStartKeepsItsVersion(t *testing.T) {
	t.Parallel()
	lives := daemonLives{t: t, jobs: `job "persist" { cmd = "sleep 600", cpus = 0 }`}
	d, stop := lives.start()
	waitJob(t, d, "persist", "running", func(js JobStatus) bool { return js.State == "running" })
	lives.stopped(stop)

	path := filepath.Join(lives.jobsDir, "jobs.lua")
	if err := writeFile(path, []byte(`job "other" { cmd = "sleep 600", cpus = 0 }`), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, 0o666); err != nil {
		t.Fatal(err)
	}
	d, stop = lives.startOnKept("writable by others")
	defer lives.stopped(stop)
	if err := os.Chmod(path, 0o600); err != nil {
		t.Fatal(err)
	}
	reload(t, d)
	waitJob(t, d, "other", "running once its file is fixed", func(js JobStatus) bool { return js.State == "running" })
	// Shown stopping until its run has ended, then gone.
	testkit.WaitFor(t, 20*time.Second, "the kept version's job gone once the file is fixed", func() bool {
		_, ok := d.jobStatus("persist")
		return !ok
	})
}

// TestWritingFileAtStartKeepsItsVersion: a file the daemon finds being
// saved when it starts is one it has not read: the version that was in
// force stays, from its kept copy, with the save shown, until the writer
// closes it.
func TestWritingFileAtStartKeepsItsVersion(t *testing.T) {
	t.Parallel()
	lives := daemonLives{t: t, jobs: `job "persist" { cmd = "sleep 600", cpus = 0 }`}
	d, stop := lives.start()
	waitJob(t, d, "persist", "running", func(js JobStatus) bool { return js.State == "running" })
	lives.stopped(stop)
	needLeases(t, lives.jobsDir)

	f, err := os.OpenFile(filepath.Join(lives.jobsDir, "jobs.lua"), os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(`job "other" { cmd = "sleep 600", cpus = 0 }` + "\n"); err != nil {
		t.Fatal(err)
	}
	d, stop = lives.startOnKept("is open for writing")
	defer lives.stopped(stop)
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	waitJob(t, d, "other", "running once its file is closed", func(js JobStatus) bool { return js.State == "running" })
	// Shown stopping until its run has ended, then gone.
	testkit.WaitFor(t, 20*time.Second, "the kept version's job gone once the file is closed", func() bool {
		_, ok := d.jobStatus("persist")
		return !ok
	})
	if st := d.Status(); len(st.Errors) != 0 {
		t.Errorf("errors once the file is closed: %q", st.Errors)
	}
}

// TestWaitOutlivesTheDaemon: a job that waited when the daemon stopped
// waits on from when it began in the next one, and keeps its place in
// line, rather than arriving anew.
func TestWaitOutlivesTheDaemon(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC))
	t0 := clk.Now()
	// The hold of jobs born together lasts: the order is the test's, and a
	// goroutine slow on a loaded machine must not end it early.
	lives := daemonLives{t: t, jobs: `job "holder" { cmd = "sleep 600", cpus = 2 }`, tune: func(cfg *Config) {
		cfg.Clock, cfg.bornHold = clk, time.Minute
	}}
	d, stop := lives.start()
	waitJob(t, d, "holder", "running", func(js JobStatus) bool { return js.State == "running" })
	clk.Advance(time.Minute)
	if err := writeFile(filepath.Join(lives.jobsDir, "late.lua"), []byte(`job "late" { cmd = "sleep 600", cpus = 2 }`), 0o600); err != nil {
		t.Fatal(err)
	}
	reload(t, d)
	if js := waitJob(t, d, "late", "waiting", func(js JobStatus) bool { return js.State == "waiting" }); !js.Since.Equal(t0.Add(time.Minute)) {
		t.Fatalf("late waits since %v, want %v", js.Since, t0.Add(time.Minute))
	}
	lives.stopped(stop)

	// Both need the whole machine. Each time the daemon starts again,
	// holder, which began to wait first (its run was cut short by the
	// daemon going away), is placed, and late waits on from when it
	// began to wait in the first daemon.
	for life := 2; life <= 3; life++ {
		clk.Advance(time.Minute)
		d, stop = lives.start()
		// One placed and the other waiting: not merely one in the queue,
		// which is also how it stands while the other has not yet looked
		// (they are held, born together, until both have).
		var waiting []accounting.Waiter
		testkit.WaitFor(t, 20*time.Second, "one of them to run and the other to wait", func() bool {
			waiting = d.placer.Waiting()
			holder, _ := d.jobStatus("holder")
			late, _ := d.jobStatus("late")
			return len(waiting) == 1 && (holder.State == "running" || late.State == "running")
		})
		if w := waiting[0]; w.Holder != "late" || !w.Since.Equal(t0.Add(time.Minute)) {
			t.Errorf("daemon %d: %s waits in the placer's queue since %v; want late, since %v, when it began in the first daemon",
				life, w.Holder, w.Since, t0.Add(time.Minute))
		}
		if js, _ := d.jobStatus("late"); !js.Since.Equal(t0.Add(time.Minute)) {
			t.Errorf("daemon %d: late is shown waiting since %v, want %v", life, js.Since, t0.Add(time.Minute))
		}
		// holder keeps its place, but it ran meanwhile: its wait is
		// measured from this daemon's start, not from its first wait.
		srv := httptest.NewServer(d.meters.handler(d))
		if n, sum, ok := scrapeMetrics(t, http.DefaultClient, srv.URL).histogram("berth_placement_wait_seconds"); !ok || n != 1 || sum != 0 {
			t.Errorf("daemon %d: berth_placement_wait_seconds %d observed, sum %v; want holder's, 0 s (the clock stands still)", life, n, sum)
		}
		srv.Close()
		lives.stopped(stop)
	}
}

// TestWaitOutlivesTheDaemonAfterAnEdit: a job edited while it waited (its
// command or size), whose run the daemon's going away then cut short,
// queues again in the next daemon from when it first waited, ahead of a
// job that came after it (trial AZ: the record first written as it ran
// said its run's start, and it went behind).
func TestWaitOutlivesTheDaemonAfterAnEdit(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC))
	lives := daemonLives{t: t, jobs: `job "holder" { cmd = "sleep 600", cpus = 2 }`, tune: func(cfg *Config) {
		cfg.Clock, cfg.bornHold = clk, time.Minute
	}}
	d, stop := lives.start()
	waitJob(t, d, "holder", "running", func(js JobStatus) bool { return js.State == "running" })
	write := func(file, src string) {
		t.Helper()
		testkit.PutFile(t, filepath.Join(lives.jobsDir, file), src)
		reload(t, d)
	}
	clk.Advance(time.Minute)
	write("first.lua", `job "first" { cmd = "sleep 600", cpus = 2 }`)
	waitJob(t, d, "first", "waiting", func(js JobStatus) bool { return js.State == "waiting" })
	clk.Advance(time.Minute)
	write("first.lua", `job "first" { cmd = "sleep 600", cpus = 2, env = { EDITED = "1" } }`)
	waitJob(t, d, "first", "waiting, edited", func(js JobStatus) bool { return js.State == "waiting" })
	clk.Advance(time.Minute)
	write("jobs.lua", ``)
	waitJob(t, d, "first", "running", func(js JobStatus) bool { return js.State == "running" })
	clk.Advance(time.Minute)
	write("later.lua", `job "later" { cmd = "sleep 600", cpus = 2 }`)
	waitJob(t, d, "later", "waiting", func(js JobStatus) bool { return js.State == "waiting" })
	lives.stopped(stop)

	clk.Advance(time.Minute)
	d, stop = lives.start()
	defer lives.stopped(stop)
	var waiting []accounting.Waiter
	testkit.WaitFor(t, 20*time.Second, "one of them to run and the other to wait", func() bool {
		waiting = d.placer.Waiting()
		first, _ := d.jobStatus("first")
		later, _ := d.jobStatus("later")
		return len(waiting) == 1 && (first.State == "running" || later.State == "running")
	})
	if w := waiting[0]; w.Holder != "later" {
		t.Errorf("%s waits, since %v; want later, which came after first began to wait", w.Holder, w.Since)
	}
}

// TestRemovedWaitIsForgotten: a waiting job whose file is removed and
// put back is a new arrival: it waits from when it came back, behind those
// that came meanwhile, and not from when it first began to wait; so too
// one removed and put back across a restart of the daemon, and one that
// had run.
func TestRemovedWaitIsForgotten(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC))
	lives := daemonLives{t: t, jobs: `job "holder" { cmd = "sleep 600", cpus = 2 }`, tune: func(cfg *Config) { cfg.Clock = clk }}
	d, stop := lives.start()
	waitJob(t, d, "holder", "running", func(js JobStatus) bool { return js.State == "running" })
	put := func(file, src string) {
		t.Helper()
		testkit.PutFile(t, filepath.Join(lives.jobsDir, file), src)
		reload(t, d)
	}
	remove := func(file string) {
		t.Helper()
		if err := os.Remove(filepath.Join(lives.jobsDir, file)); err != nil {
			t.Fatal(err)
		}
		reload(t, d)
	}
	waiting := func(job string, since time.Time) {
		t.Helper()
		js := waitJob(t, d, job, "waiting", func(js JobStatus) bool { return js.State == "waiting" })
		if !js.Since.Equal(since) {
			t.Errorf("%s waits since %v, want %v", job, js.Since, since)
		}
	}
	rq := `job "rq" { cmd = "sleep 600", cpus = 2 }`
	put("rq.lua", rq)
	waiting("rq", clk.Now())
	clk.Advance(time.Minute)
	remove("rq.lua")
	clk.Advance(time.Minute)
	put("bq.lua", `job "bq" { cmd = "sleep 600", cpus = 2 }`)
	waiting("bq", clk.Now())
	clk.Advance(time.Minute)
	put("rq.lua", rq)
	waiting("rq", clk.Now())
	if w := d.placer.Waiting(); len(w) != 2 || w[0].Holder != "bq" {
		t.Errorf("the placer's line: %+v, want bq first", w)
	}

	// Removed, then the daemon starts again, then it comes back.
	clk.Advance(time.Minute)
	remove("rq.lua")
	lives.stopped(stop)
	clk.Advance(time.Minute)
	d, stop = lives.start()
	defer func() { lives.stopped(stop) }()
	waitJob(t, d, "holder", "running", func(js JobStatus) bool { return js.State == "running" })
	clk.Advance(time.Minute)
	put("rq.lua", rq)
	waiting("rq", clk.Now())

	// One that ran: bq, once holder is gone.
	remove("jobs.lua")
	waitJob(t, d, "bq", "running", func(js JobStatus) bool { return js.State == "running" })
	clk.Advance(time.Minute)
	remove("bq.lua")
	clk.Advance(time.Minute)
	put("bq.lua", `job "bq" { cmd = "sleep 600", cpus = 2 }`)
	waiting("bq", clk.Now())
}

// TestShorterTimeoutMovesTheHeadsStart: a running job's timeout edited
// shorter applies to its run in progress, and so to the end of its grant:
// the head's expected start, and the backfill planned on it, follow.
func TestShorterTimeoutMovesTheHeadsStart(t *testing.T) {
	t.Parallel()
	d, clk := fakeTimeDaemon(t, `job "holder" { cmd = "sleep 600", cpus = 2, timeout = "10m" }`)
	t0 := clk.Now()
	waitJob(t, d, "holder", "running", func(js JobStatus) bool { return js.State == "running" })
	write := func(file, src string) {
		t.Helper()
		testkit.PutFile(t, filepath.Join(d.cfg.JobsDir, file), src)
		reload(t, d)
	}
	write("head.lua", `job "head" { cmd = "true", cpus = 2 }`)
	expected := func() time.Time {
		h, _ := d.placer.Head()
		return h.ExpectedStart
	}
	stop := 10 * time.Second // the default stop_timeout, which the grant's end includes
	testkit.WaitFor(t, 20*time.Second, "head's expected start at holder's timeout", func() bool {
		return expected().Equal(t0.Add(10*time.Minute + stop))
	})
	write("jobs.lua", `job "holder" { cmd = "sleep 600", cpus = 2, timeout = "1m" }`)
	testkit.WaitFor(t, 20*time.Second, "head's expected start at holder's shorter timeout", func() bool {
		return expected().Equal(t0.Add(time.Minute + stop))
	})
	// Longer again: the run goes on to the new limit, and the head's
	// start moves with it.
	write("jobs.lua", `job "holder" { cmd = "sleep 600", cpus = 2, timeout = "20m" }`)
	testkit.WaitFor(t, 20*time.Second, "head's expected start at holder's longer timeout", func() bool {
		return expected().Equal(t0.Add(20*time.Minute + stop))
	})
	clk.Advance(19 * time.Minute)
	clk.Advance(2 * time.Minute)
	var runs []store.RunRecord
	var err error
	testkit.WaitFor(t, 20*time.Second, "holder's run to end", func() bool {
		runs, err = d.store.Runs("holder", 1)
		return err != nil || len(runs) == 1 && !runs[0].End.IsZero()
	})
	if err != nil || len(runs) != 1 || runs[0].Reason != store.ReasonTimedOut || runs[0].End.Before(t0.Add(20*time.Minute)) {
		t.Errorf("holder's run: %+v (%v), want timed out at its longer limit, 20m after its start", runs, err)
	}
}

// TestDoneOutlivesInvalid: a batch job runs to completion once per
// definition, whatever comes between: done, then invalid (its flavor
// gone) or disabled, it is done again once its definition is back, in
// this daemon or the next, and so is its dependant; a run that ended
// done while its definition could not run counts too. A new definition
// runs again. A job a person stopped stays stopped.
func TestDoneOutlivesInvalid(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	gate := filepath.Join(dir, "gate")
	lives := daemonLives{t: t, jobs: `flavor "small" { cpus = 1 }`, tune: func(cfg *Config) {
		cfg.Machine.CPUs, cfg.Machine.CPUIDs, cfg.Machine.OnlineCPUs = 4, []int{0, 1, 2, 3}, 4
	}}
	d, stop := lives.start()
	flavors := filepath.Join(lives.jobsDir, "jobs.lua")
	put := func(d *Daemon, name, src string) {
		t.Helper()
		testkit.PutFile(t, filepath.Join(lives.jobsDir, name), src)
		reload(t, d)
	}
	work := func(prep string) string {
		return `job "prep" { cmd = "` + prep + `", flavor = "small" }
job "train" { cmd = "true", flavor = "small", after = "prep" }
job "slow" { cmd = "while [ ! -e ` + gate + ` ]; do sleep 0.05; done", flavor = "small" }
job "held" { cmd = "sleep 600", flavor = "small" }`
	}
	put(d, "work.lua", work("true"))
	// Each done after n runs: a job that is to run again may still be
	// done from before when it is first looked at (train, until it sees
	// prep's new run), so the count is waited for too.
	runs := func(d *Daemon, want map[string]int, when string) {
		t.Helper()
		for job, n := range want {
			waitJob(t, d, job, fmt.Sprintf("done after %d runs %s", n, when), func(js JobStatus) bool {
				got, err := d.store.Runs(job, 0)
				return js.State == "done" && err == nil && len(got) == n
			})
		}
	}
	waitJob(t, d, "slow", "running", func(js JobStatus) bool { return js.State == "running" })
	waitJob(t, d, "train", "done", func(js JobStatus) bool { return js.State == "done" })
	waitJob(t, d, "held", "running", func(js JobStatus) bool { return js.State == "running" })
	if code, body := as(t, d, "root", "POST", jobPath("held")+"/stop"); code != 200 {
		t.Fatalf("stop held: %d %s", code, body)
	}
	waitJob(t, d, "held", "stopped", func(js JobStatus) bool { return js.State == "stopped" })
	// A person's stop holds too.
	stayedStopped := func(d *Daemon, when string) {
		t.Helper()
		js := waitJob(t, d, "held", "back "+when, func(js JobStatus) bool { return js.State != "invalid" && js.State != "disabled" })
		if runs, _ := d.store.Runs("held", 0); js.State != "stopped" || len(runs) != 1 {
			t.Errorf("%s: held is %s with %d runs, want stopped after its one run", when, js.State, len(runs))
		}
	}

	// Its flavor gone while slow runs: slow runs on and ends done.
	put(d, "jobs.lua", `-- no flavors`)
	waitJob(t, d, "prep", "invalid", func(js JobStatus) bool { return js.State == "invalid" })
	if err := writeFile(gate, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	waitJob(t, d, "slow", "invalid once its run ended", func(js JobStatus) bool { return js.State == "invalid" })
	put(d, "jobs.lua", `flavor "small" { cpus = 1 }`)
	runs(d, map[string]int{"prep": 1, "train": 1, "slow": 1}, "with the flavor back")
	stayedStopped(d, "with the flavor back")

	put(d, "work.lua", strings.Replace(work("true"), `"prep" {`, `"prep" { enabled = false,`, 1))
	// Its why says where it is disabled, and how to enable it.
	if js := waitJob(t, d, "prep", "disabled", func(js JobStatus) bool { return js.State == "disabled" }); !strings.Contains(js.Why, "work.lua:1 says enabled = false (set it to true there") {
		t.Errorf("disabled, its why %q", js.Why)
	}
	put(d, "work.lua", work("true"))
	runs(d, map[string]int{"prep": 1, "train": 1}, "enabled again")

	// Invalid when the daemon stops; the flavor back while it is away,
	// or once the next daemon runs.
	put(d, "jobs.lua", `-- no flavors`)
	waitJob(t, d, "train", "invalid", func(js JobStatus) bool { return js.State == "invalid" })
	lives.stopped(stop)
	d, stop = lives.start()
	waitJob(t, d, "prep", "invalid in the next daemon", func(js JobStatus) bool { return js.State == "invalid" })
	put(d, "jobs.lua", `flavor "small" { cpus = 1 }`)
	runs(d, map[string]int{"prep": 1, "train": 1, "slow": 1}, "with the flavor back in the next daemon")
	stayedStopped(d, "with the flavor back in the next daemon")
	put(d, "jobs.lua", `-- no flavors`)
	waitJob(t, d, "train", "invalid", func(js JobStatus) bool { return js.State == "invalid" })
	lives.stopped(stop)
	testkit.PutFile(t, flavors, `flavor "small" { cpus = 1 }`)
	d, stop = lives.start()
	runs(d, map[string]int{"prep": 1, "train": 1, "slow": 1}, "with the flavor back while the daemon was away")
	stayedStopped(d, "with the flavor back while the daemon was away")

	// A new definition, invalid meanwhile, runs again, and train after it.
	put(d, "jobs.lua", `-- no flavors`)
	waitJob(t, d, "prep", "invalid", func(js JobStatus) bool { return js.State == "invalid" })
	put(d, "work.lua", work("exit 0"))
	put(d, "jobs.lua", `flavor "small" { cpus = 1 }`)
	runs(d, map[string]int{"prep": 2, "train": 2, "slow": 1}, "edited while invalid")
	lives.stopped(stop)
}

// leftOnTheirWay rewrites, in the state under stateDir, the records of
// jobs names, each of which ran once, as a daemon killed as their runs
// ended leaves them: on their way to that run (running, since just before
// it began), no done record; adjust, where not nil, changes one further.
func leftOnTheirWay(t *testing.T, stateDir string, adjust func(name string, rec *store.JobRecord, last store.RunRecord), names ...string) {
	t.Helper()
	st, err := store.Open(filepath.Join(stateDir, "state.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := st.Close(); err != nil {
			t.Fatal(err)
		}
	}()
	for _, name := range names {
		rec, _, err := st.Job(name)
		runs, rerr := st.Runs(name, 1)
		if err != nil || rerr != nil || len(runs) != 1 {
			t.Fatalf("%s: %v %v %d runs", name, err, rerr, len(runs))
		}
		rec.State, rec.DoneFingerprint, rec.Changed = store.StateRunning, "", runs[0].Start.Add(-time.Millisecond)
		if adjust != nil {
			adjust(name, &rec, runs[0])
		}
		if err := st.PutJob(rec); err != nil {
			t.Fatal(err)
		}
	}
}

// TestEndedRunsComeToRest: a daemon killed after a run ended, before its
// job's resting state was recorded (the run's end may have reached the
// state only through the intents, store.Intend), leaves the job's record
// on its way; the next daemon takes the run's end as the job's: a batch
// job that exited 0 is done and not run again, one with restart "no" that
// failed is failed. A job asked to run again after its run ended, and a
// service, run.
func TestEndedRunsComeToRest(t *testing.T) {
	t.Parallel()
	out := filepath.Join(t.TempDir(), "ran")
	lives := daemonLives{t: t, jobs: `job "once" { cmd = "echo once >> ` + out + `", cpus = 0 }
job "bad" { cmd = "echo bad >> ` + out + `; exit 3", cpus = 0 }
job "again" { cmd = "echo again >> ` + out + `", cpus = 0 }`}
	d, stop := lives.start()
	waitJob(t, d, "once", "done", func(js JobStatus) bool { return js.State == "done" })
	waitJob(t, d, "bad", "failed", func(js JobStatus) bool { return js.State == "failed" })
	waitJob(t, d, "again", "done", func(js JobStatus) bool { return js.State == "done" })
	lives.stopped(stop)

	// As a daemon killed at the runs' ends leaves them: each job's record
	// in the passing state it was recorded in before its run; "again"'s
	// since its run ended (a restart asked for after it).
	leftOnTheirWay(t, lives.stateDir, func(name string, rec *store.JobRecord, last store.RunRecord) {
		if name == "again" {
			rec.State, rec.Changed = store.StateWaiting, last.End.Add(time.Millisecond)
		}
	}, "once", "bad", "again")

	d, stop = lives.start()
	waitJob(t, d, "again", "done after its second run", func(js JobStatus) bool {
		runs, err := d.store.Runs("again", 0)
		return js.State == "done" && err == nil && len(runs) == 2
	})
	if js, _ := d.jobStatus("once"); js.State != "done" {
		t.Errorf("once is %s, want done", js.State)
	}
	if js, _ := d.jobStatus("bad"); js.State != "failed" {
		t.Errorf("bad is %s, want failed", js.State)
	}
	lives.stopped(stop)
	b, _ := os.ReadFile(out)
	for _, name := range []string{"once", "bad"} {
		if n := strings.Count(string(b), name+"\n"); n != 1 {
			t.Errorf("%s ran %d times, want once:\n%s", name, n, b)
		}
	}
}

// TestEndedRunsComeToRestForTheirDependants: a parent that came to rest
// done across a restart of the daemon (TestEndedRunsComeToRest) is done
// to its dependants too, at that start and every one after (trial AU: a
// daemon killed as a parent's run ended left the parent's record on its
// way, and its dependant ran again at every start). One dependant had run
// after it, and stays done; one had not, and runs once. An array's
// indices count as the parent's.
func TestEndedRunsComeToRestForTheirDependants(t *testing.T) {
	t.Parallel()
	out := filepath.Join(t.TempDir(), "ran")
	echo := func(name string) string { return `cmd = "echo ` + name + ` >> ` + out + `", cpus = 0` }
	jobs := `job "a" { ` + echo("a") + ` }
job "sweep" { ` + echo("sweep") + `, array = 2 }
job "ran" { ` + echo("ran") + `, after = { "a", "sweep" } }`
	lives := daemonLives{t: t, jobs: jobs}
	d, stop := lives.start()
	waitJob(t, d, "ran", "done", func(js JobStatus) bool { return js.State == "done" })
	lives.stopped(stop)
	testkit.PutFile(t, filepath.Join(lives.jobsDir, "jobs.lua"), jobs+`
job "new" { `+echo("new")+`, after = { "a", "sweep" } }`)

	// As a daemon killed as the parents' runs ended leaves them: their
	// records on their way; new, declared since, has not run.
	leftOnTheirWay(t, lives.stateDir, nil, "a", "sweep[1]", "sweep[2]")

	for life := 2; life <= 4; life++ {
		d, stop = lives.start()
		waitJob(t, d, "new", "done", func(js JobStatus) bool { return js.State == "done" })
		waitJob(t, d, "ran", "done", func(js JobStatus) bool { return js.State == "done" })
		lives.stopped(stop)
		if life > 2 {
			continue
		}
		// The rest is recorded as the next daemon made the jobs: their
		// dependants read it there, not only as that daemon found it.
		st, err := store.Open(filepath.Join(lives.stateDir, "state.db"), store.Options{})
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range []string{"a", "sweep[1]", "sweep[2]"} {
			if rec, _, err := st.Job(name); err != nil || rec.State != store.StateDone || rec.DoneFingerprint == "" {
				t.Errorf("%s's record after the restart: %+v %v, want done", name, rec, err)
			}
		}
		if err := st.Close(); err != nil {
			t.Fatal(err)
		}
	}
	b, _ := os.ReadFile(out)
	for name, want := range map[string]int{"a": 1, "sweep": 2, "ran": 1, "new": 1} {
		if n := strings.Count(string(b), name+"\n"); n != want {
			t.Errorf("%s ran %d times, want %d:\n%s", name, n, want, b)
		}
	}
}

// TestRunPastUndeclaredParentStaysDone: a job run past a parent no file
// declares any more (--ignore-deps), done, is done after a restart of the
// daemon too, whatever that parent's old record says (the review: the
// next daemon took the parent's last done record for a new one, and the
// job waited again).
func TestRunPastUndeclaredParentStaysDone(t *testing.T) {
	t.Parallel()
	out := filepath.Join(t.TempDir(), "ran")
	lives := daemonLives{t: t, jobs: `job "a" { cmd = "true", cpus = 0 }
job "b" { cmd = "echo b >> ` + out + `", cpus = 0, after = "a" }`}
	d, stop := lives.start()
	waitJob(t, d, "b", "done", func(js JobStatus) bool { return js.State == "done" })
	testkit.PutFile(t, filepath.Join(lives.jobsDir, "jobs.lua"), `job "b" { cmd = "echo b2 >> `+out+`", cpus = 0, after = "a" }`)
	reload(t, d)
	waitJob(t, d, "b", "held by a, which no file declares", func(js JobStatus) bool { return js.State == "waiting" && js.Run == 0 })
	if code, body := as(t, d, "root", "POST", jobPath("b")+"/start?ignore_deps=1"); code != http.StatusOK {
		t.Fatalf("start --ignore-deps: %d %s", code, body)
	}
	waitJob(t, d, "b", "done past a", func(js JobStatus) bool { return js.State == "done" })
	lives.stopped(stop)

	d, stop = lives.start()
	defer lives.stopped(stop)
	if js := waitJob(t, d, "b", "loaded", func(js JobStatus) bool { return js.State != "" }); js.State != "done" {
		t.Errorf("b after a restart: %s (%s), want done", js.State, js.Why)
	}
	if b, _ := os.ReadFile(out); string(b) != "b\nb2\n" {
		t.Errorf("b ran %q, want its first definition once, then its second", b)
	}
}

// TestStopOfJobThatCannotRun: a stop of an unplaceable job stops it, and
// one of an invalid job is kept for when it may run: each stays stopped
// once it could run (a larger machine, the flavor declared), and neither
// answer says "already", as the stop of a stopped job does (and the start
// of a job waiting its turn).
func TestStopOfJobThatCannotRun(t *testing.T) {
	t.Parallel()
	lives := daemonLives{t: t, jobs: `job "big" { cmd = "sleep 600", cpus = 3 }
job "inv" { cmd = "sleep 600", flavor = "later" }
job "hog" { cmd = "sleep 600", cpus = 2 }
job "wait" { cmd = "sleep 600", cpus = 1 }`}
	d, stop := lives.start()
	waitJob(t, d, "big", "unplaceable", func(js JobStatus) bool { return js.State == "unplaceable" })
	// (A start or restart of a job waiting its turn changes nothing, and
	// says so.)
	waitJob(t, d, "wait", "waiting", func(js JobStatus) bool { return js.State == "waiting" })
	for _, verb := range []string{"start", "restart"} {
		if code, body := as(t, d, "root", "POST", jobPath("wait")+"/"+verb); code != 200 || !strings.Contains(body, `"already":"waiting"`) {
			t.Errorf("%s of a waiting job: %d %s; want it already waiting", verb, code, body)
		}
	}
	waitJob(t, d, "inv", "invalid", func(js JobStatus) bool { return js.State == "invalid" })
	for _, name := range []string{"big", "inv"} {
		code, body := as(t, d, "root", "POST", jobPath(name)+"/stop")
		var ans ControlAnswer
		if code != 200 || json.Unmarshal([]byte(body), &ans) != nil || ans.Already != "" {
			t.Errorf("stop %s: %d %s; want it taken, not already", name, code, body)
		}
	}
	if js := waitJob(t, d, "big", "stopped", func(js JobStatus) bool { return js.State == "stopped" }); js.Why != "stopped" {
		t.Errorf("big, stopped while unplaceable: why %q, want stopped", js.Why)
	}
	testkit.PutFile(t, filepath.Join(lives.jobsDir, "flavors.lua"), `flavor "later" { cpus = 1 }`)
	reload(t, d)
	js := waitJob(t, d, "inv", "stopped", func(js JobStatus) bool { return js.State == "stopped" })
	if js.Why != "stopped" {
		t.Errorf("inv, stopped once its flavor is there: why %q, want stopped", js.Why)
	}
	lives.stopped(stop)

	// A machine that fits it: still stopped.
	lives.tune = func(cfg *Config) {
		cfg.Machine.CPUs, cfg.Machine.CPUIDs, cfg.Machine.OnlineCPUs = 4, []int{0, 1, 2, 3}, 4
	}
	d, stop = lives.start()
	for _, name := range []string{"big", "inv"} {
		if js := waitJob(t, d, name, "known", func(JobStatus) bool { return true }); js.State != "stopped" {
			t.Errorf("%s is %s on a machine it fits, want stopped", name, js.State)
		}
	}
	lives.stopped(stop)
}

// TestStopAskedDuringATimeoutsStop: a stop or a start asked while a
// timeout's stop is under way is said beside it: the job then rests
// stopped, or runs again, once the run has ended.
func TestStopAskedDuringATimeoutsStop(t *testing.T) {
	t.Parallel()
	free, trapped := filepath.Join(t.TempDir(), "free"), filepath.Join(t.TempDir(), "trapped")
	d, clk := fakeTimeDaemon(t, `job "tmo" { cmd = { "sh", "-c", "trap '' TERM; touch `+trapped+`; while [ ! -e `+free+` ]; do sleep 0.05; done" },
		cpus = 1, timeout = "1m", stop_timeout = "1h", restart = "on-failure" }`)
	waitJob(t, d, "tmo", "running", func(js JobStatus) bool { return js.State == "running" })
	waitFiles(t, trapped)
	clk.Advance(time.Minute)
	waitJob(t, d, "tmo", "stopping", func(js JobStatus) bool { return js.State == "stopping" })
	for _, c := range []struct{ verb, then string }{
		{"start", "then started on request (berth start): it runs again once this run has ended"},
		{"stop", "then stopped on request (berth stop): it rests stopped once this run has ended"},
	} {
		if code, body := as(t, d, "root", "POST", jobPath("tmo")+"/"+c.verb); code != 200 {
			t.Fatalf("%s: %d %s", c.verb, code, body)
		}
		js := waitJob(t, d, "tmo", "its stop to say the "+c.verb, func(js JobStatus) bool { return strings.Contains(js.Why, c.then) })
		if !strings.HasPrefix(js.Why, "it ran past its timeout of 1m; SIGTERM sent") || strings.Count(js.Why, "; then ") != 1 {
			t.Errorf("after a %s: why %q", c.verb, js.Why)
		}
	}
	if err := writeFile(free, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	waitJob(t, d, "tmo", "stopped", func(js JobStatus) bool { return js.State == "stopped" })
}

// TestStoppedEditedStaysStopped: a job a person stopped, then edited, rests
// stopped in this daemon and in the next, which ran it again (trial AE:
// after systemctl restart berth, and so after every upgrade); so does one
// edited while no daemon runs.
func TestStoppedEditedStaysStopped(t *testing.T) {
	t.Parallel()
	lives := daemonLives{t: t, jobs: `job "held" { cmd = "sleep 600", cpus = 0 }`}
	d, stop := lives.start()
	waitJob(t, d, "held", "running", func(js JobStatus) bool { return js.State == "running" })
	if code, body := as(t, d, "root", "POST", jobPath("held")+"/stop"); code != 200 {
		t.Fatalf("stop held: %d %s", code, body)
	}
	waitJob(t, d, "held", "stopped", func(js JobStatus) bool { return js.State == "stopped" })
	testkit.PutFile(t, filepath.Join(lives.jobsDir, "jobs.lua"), `job "held" { cmd = "sleep 601", cpus = 0 }`)
	reload(t, d)
	restedStopped := func(d *Daemon, when string) {
		t.Helper()
		js := waitJob(t, d, "held", "at rest or running "+when, func(js JobStatus) bool { return js.State == "stopped" || js.State == "running" })
		if runs, _ := d.store.Runs("held", 0); js.State != "stopped" || len(runs) != 1 {
			t.Errorf("%s: held is %s with %d runs, want stopped after its one run", when, js.State, len(runs))
		}
	}
	restedStopped(d, "once edited")
	lives.stopped(stop)
	d, stop = lives.start()
	restedStopped(d, "in the next daemon")
	lives.stopped(stop)
	testkit.PutFile(t, filepath.Join(lives.jobsDir, "jobs.lua"), `job "held" { cmd = "sleep 602", cpus = 0 }`)
	d, stop = lives.start()
	restedStopped(d, "edited while no daemon ran")
	lives.stopped(stop)
}

// TestInvalidSinceOutlivesTheDaemon: a job invalid when the daemon stopped,
// and invalid still, has been so since it first was, not since the next
// daemon started (trial AI).
func TestInvalidSinceOutlivesTheDaemon(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC))
	lives := daemonLives{t: t, jobs: `job "broken" { cmd = "true", flavor = "nope" }`, tune: func(cfg *Config) { cfg.Clock = clk }}
	d, stop := lives.start()
	since := waitJob(t, d, "broken", "invalid", func(js JobStatus) bool { return js.State == "invalid" }).Since
	lives.stopped(stop)

	clk.Advance(time.Hour)
	d, stop = lives.start()
	defer lives.stopped(stop)
	if js := waitJob(t, d, "broken", "invalid", func(js JobStatus) bool { return js.State == "invalid" }); !js.Since.Equal(since) {
		t.Errorf("invalid since %v in the next daemon, want %v, when it became so", js.Since, since)
	}
}

// TestWaitAfterStopOutlivesTheDaemon: a job started again while its run
// stopped waits, once that run has ended, from then, and keeps that place
// across a restart of the daemon (trial AK: it waited from the next
// daemon's start, behind a job that came later).
func TestWaitAfterStopOutlivesTheDaemon(t *testing.T) {
	t.Parallel()
	gate, trapped := filepath.Join(t.TempDir(), "go"), filepath.Join(t.TempDir(), "trapped")
	slowJob := `job "slow" { cmd = { "sh", "-c", "trap 'while [ ! -e ` + gate + ` ]; do sleep 0.05; done; exit 0' TERM; touch ` + trapped + `; while true; do sleep 0.05; done" }, cpus = 1, stop_timeout = "5m" }`
	lives := daemonLives{t: t, jobs: slowJob, tune: func(cfg *Config) { cfg.Machine.CPUs, cfg.Machine.CPUIDs = 1, []int{0} }}
	d, stop := lives.start()
	slow := waitJob(t, d, "slow", "running", func(js JobStatus) bool { return js.State == "running" })
	waitFiles(t, trapped)
	if err := writeFile(filepath.Join(lives.jobsDir, "hog.lua"), []byte(`job "hog" { cmd = "sleep 600", cpus = 1 }`), 0o600); err != nil {
		t.Fatal(err)
	}
	reload(t, d)
	waitJob(t, d, "hog", "waiting", func(js JobStatus) bool { return js.State == "waiting" })
	d.mu.Lock()
	j := d.jobs["slow"]
	d.mu.Unlock()
	j.in.post(jobMessage{ev: &event{kind: evStop}})
	waitJob(t, d, "slow", "stopping", func(js JobStatus) bool { return js.State == "stopping" })
	j.in.post(jobMessage{ev: &event{kind: evStart}})
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	waitJob(t, d, "hog", "running", func(js JobStatus) bool { return js.State == "running" })
	since := waitJob(t, d, "slow", "waiting again", func(js JobStatus) bool { return js.State == "waiting" && js.Run == 0 }).Since
	if !since.After(slow.Since) {
		t.Fatalf("slow waits since %v, before its run ended", since)
	}
	lives.stopped(stop)

	// Stopped at the end: its hog runs, which a daemon left running would
	// leave behind the test.
	d, stop = lives.start()
	defer lives.stopped(stop)
	if js := waitJob(t, d, "slow", "waiting", func(js JobStatus) bool { return js.State == "waiting" }); !js.Since.Equal(since) {
		t.Errorf("slow waits since %v in the next daemon, want %v, when its wait began", js.Since, since)
	}
}
