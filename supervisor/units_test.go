package supervisor

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"golang.org/x/sys/unix"

	"github.com/berthd/berth/accounting"
	"github.com/berthd/berth/probes"
	"github.com/berthd/berth/supervisor/ctlsock"
	"github.com/berthd/berth/supervisor/store"
	"github.com/berthd/berth/supervisor/testkit"
	"github.com/berthd/berth/supervisor/units"
	"github.com/berthd/berth/supervisor/units/unitstest"
)

// unitsBox is a state and a jobs directory whose daemons run their jobs
// as units of one fake systemd, which outlives each daemon as systemd
// would.
type unitsBox struct {
	t                 *testing.T
	jobsDir, stateDir string
	manager           *unitstest.Manager
	// booted is when the machine the daemons see booted, and initStarted
	// when its PID 1 started (a container's boot).
	booted, initStarted time.Time
	// logs, where not nil, is where the daemons log (Info and above).
	logs io.Writer
	// tune, where not nil, changes each daemon's configuration.
	tune func(cfg *Config)
}

func newUnitsBox(t *testing.T, jobs string) *unitsBox {
	dir := t.TempDir()
	b := &unitsBox{t: t, jobsDir: filepath.Join(dir, "jobs.d"), stateDir: filepath.Join(dir, "state"), manager: unitstest.New()}
	for _, p := range []string{b.jobsDir, b.stateDir} {
		if err := os.Mkdir(p, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if err := writeFile(filepath.Join(b.jobsDir, "jobs.lua"), []byte(jobs), 0o600); err != nil {
		t.Fatal(err)
	}
	return b
}

// stoppingAtCrash writes into the state what a person's stop of job's run,
// begun by a daemon killed since, left there: the job recorded resting
// stopped (life.recorded), since began where it is not zero, and, where
// signalled, the run recorded as being stopped, its signal sent. No daemon
// may have the state open.
func (b *unitsBox) stoppingAtCrash(job string, run uint64, began time.Time, signalled bool) {
	t := b.t
	t.Helper()
	st, err := store.Open(filepath.Join(b.stateDir, "state.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	rec, _, err := st.Job(job)
	if err != nil {
		t.Fatal(err)
	}
	rec.State = store.StateStopped
	if !began.IsZero() {
		rec.Changed = began
	}
	if err := st.PutJob(rec); err != nil {
		t.Fatal(err)
	}
	if signalled {
		st.Later(func(err error) { t.Error(err) }).StopRun(run, store.ReasonStopped, "stopped on request (berth stop)", began)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
}

// start runs a daemon until stop is called (or the test ends).
func (b *unitsBox) start() (d *Daemon, stop func()) {
	d, stop, _ = b.startRun()
	return d, stop
}

// logger is the daemons' logger: nil (the default) unless the test keeps
// the logs.
func (b *unitsBox) logger() hclog.Logger {
	if b.logs == nil {
		return nil
	}
	return hclog.New(&hclog.LoggerOptions{Output: b.logs, Level: hclog.Info})
}

// startRun is start, with what Run returned once it has.
func (b *unitsBox) startRun() (d *Daemon, stop func(), ran <-chan error) {
	runs := units.New(b.manager, units.Events{Updates: b.manager.Updates()})
	cfg := Config{
		JobsDir: b.jobsDir, StateDir: b.stateDir, Evaluator: testEvaluator(), Units: runs,
		Machine: probes.Inventory{CPUs: 4, CPUIDs: []int{0, 1, 2, 3}, OnlineCPUs: 4, GPUs: []string{"5", "7"},
			RAM: probes.Memory{Bytes: 4 * accounting.GiB, Known: true}, Booted: b.booted, InitStarted: b.initStarted},
		Environ: []string{"PATH=/usr/bin:/bin"},
		Logger:  b.logger(),
	}
	if b.tune != nil {
		b.tune(&cfg)
	}
	d, err := Open(cfg)
	if err != nil {
		b.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done, result := make(chan error, 1), make(chan error, 1)
	go func() {
		err := d.Run(ctx)
		done <- err
		result <- err
	}()
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		if err := <-done; err != nil && !errors.Is(err, ErrLostSystemd) {
			b.t.Errorf("Run: %v", err)
		}
		runs.Close()
	}
	b.t.Cleanup(stop)
	return d, stop, result
}

func runsOf(t *testing.T, d *Daemon, job string) []store.RunRecord {
	t.Helper()
	runs, err := d.store.Runs(job, 100)
	if err != nil {
		t.Fatal(err)
	}
	return runs
}

// stopping waits for job to run, has it stopped as berth stop would, and
// returns its run's unit once the stop is under way.
func stopping(t *testing.T, d *Daemon, job string) (unit string) {
	t.Helper()
	js := waitJob(t, d, job, "running", func(js JobStatus) bool { return js.State == "running" })
	d.mu.Lock()
	j := d.jobs[job]
	d.mu.Unlock()
	j.in.post(jobMessage{ev: &event{kind: evStop}})
	waitJob(t, d, job, "stopping", func(js JobStatus) bool { return js.State == "stopping" })
	return units.Name(job, js.Run)
}

// TestUnitsOutliveTheDaemon: runs as units go on while the daemon is
// away; the next daemon takes back the one still running (same run, its
// grant back in the books), records the one that ended meanwhile, and lets
// go of its unit.
func TestUnitsOutliveTheDaemon(t *testing.T) {
	t.Parallel()
	b := newUnitsBox(t, `
job "train" { cmd = { "/bin/sleep", "1000" }, cpus = 2, gpus = 1, ram = "256M" }
job "batch" { cmd = { "/bin/sleep", "1000" }, cpus = 1 }
`)
	d, stop := b.start()
	train := waitJob(t, d, "train", "running", func(js JobStatus) bool { return js.State == "running" })
	batch := waitJob(t, d, "batch", "running", func(js JobStatus) bool { return js.State == "running" })
	trainUnit, batchUnit := units.Name("train", train.Run), units.Name("batch", batch.Run)
	// Which two cores train holds depends on whether batch was placed
	// first; its unit is pinned to those two, whichever they are.
	if len(train.CPUIDs) != 2 || !slices.Equal(train.GPUs, []string{"5"}) {
		t.Errorf("train holds cores %v cards %v, want 2 cores and card 5", train.CPUIDs, train.GPUs)
	}
	var mask byte
	for _, c := range train.CPUIDs {
		mask |= 1 << c
	}
	p := b.manager.Props(trainUnit)
	if p["MemoryMax"] != uint64(256<<20) || !slices.Equal(p["AllowedCPUs"].([]byte), []byte{mask}) || p["Slice"] != units.Slice {
		t.Errorf("train's unit: MemoryMax %v AllowedCPUs %v Slice %v, want 268435456 [%d] %s",
			p["MemoryMax"], p["AllowedCPUs"], p["Slice"], mask, units.Slice)
	}
	// Its environment is not the unit's Environment=, which anyone may read.
	if env, ok := p["Environment"]; ok || p["EnvironmentFiles"] == nil {
		t.Errorf("train's unit: Environment %v, EnvironmentFiles %v; want the file alone", env, p["EnvironmentFiles"])
	}
	if s := d.Status(); s.Runner != "units" {
		t.Errorf("status runner %q", s.Runner)
	}

	stop()
	if killed := b.manager.Killed(); len(killed) > 0 || !b.manager.Active(trainUnit) || !b.manager.Active(batchUnit) {
		t.Fatalf("the daemon's stop reached its units: signals %v", killed)
	}
	// While no daemon runs, batch ends.
	b.manager.End(batchUnit, "exit-code", unitstest.CLDExited, 7)

	d, _ = b.start()
	again := waitJob(t, d, "train", "running", func(js JobStatus) bool { return js.State == "running" })
	if again.Run != train.Run || again.PID != train.PID || !slices.Equal(again.CPUIDs, train.CPUIDs) {
		t.Errorf("train after the restart: run %d pid %d cores %v, want run %d pid %d cores %v",
			again.Run, again.PID, again.CPUIDs, train.Run, train.PID, train.CPUIDs)
	}
	if runs := runsOf(t, d, "train"); len(runs) != 1 {
		t.Errorf("train has %d runs, want its one run taken back", len(runs))
	}
	waitJob(t, d, "batch", "failed", func(js JobStatus) bool { return js.State == "failed" && js.Why == "exit 7" })
	if runs := runsOf(t, d, "batch"); len(runs) != 1 || runs[0].Reason != store.ReasonFailed || runs[0].ExitCode != 7 {
		t.Errorf("batch's runs: %+v", runs)
	}
	testkit.WaitFor(t, 20*time.Second, "batch's unit let go once its end is on record", func() bool {
		return !slices.Contains(b.manager.Names(), batchUnit)
	})
	// The books hold train's grant again: what is left is placed around it.
	s := d.Status()
	if s.Machine.CPUsFree != 2 || s.Machine.Cards[0].Holder != "train" || s.Machine.Cards[1].Holder != "" {
		t.Errorf("the books after the restart: %d cores free, cards %+v", s.Machine.CPUsFree, s.Machine.Cards)
	}

	// The kernel kills train for going over its memory.
	b.manager.End(trainUnit, "oom-kill", unitstest.CLDKilled, int32(syscall.SIGKILL))
	js := waitJob(t, d, "train", "failed", func(js JobStatus) bool { return js.State == "failed" })
	if js.Why != "out of memory: went over its 256M (raise its ram, or make it use less)" {
		t.Errorf("train's why: %q", js.Why)
	}
	if runs := runsOf(t, d, "train"); runs[0].Reason != store.ReasonOOM || runs[0].Signal != "SIGKILL" {
		t.Errorf("train's run: %+v", runs[0])
	}
}

// TestUnitsEndedWhileAway: a run whose unit ended while no daemon ran is
// recorded as ending when its unit says, not when the next daemon found
// it; and so is one whose job is no longer declared.
func TestUnitsEndedWhileAway(t *testing.T) {
	t.Parallel()
	b := newUnitsBox(t, `job "batch" { cmd = { "/bin/sleep", "1000" } }
job "gone" { cmd = { "/bin/sleep", "1000" } }`)
	d, stop := b.start()
	started := map[string]JobStatus{}
	for _, job := range []string{"batch", "gone"} {
		started[job] = waitJob(t, d, job, "running", func(js JobStatus) bool { return js.State == "running" })
	}
	starts := map[string]time.Time{"batch": runsOf(t, d, "batch")[0].Start, "gone": runsOf(t, d, "gone")[0].Start}
	stop()
	if err := writeFile(filepath.Join(b.jobsDir, "jobs.lua"), []byte(`job "batch" { cmd = { "/bin/sleep", "1000" } }`), 0o600); err != nil {
		t.Fatal(err)
	}
	// Each ends half way between its start and now.
	ended := map[string]time.Time{}
	for job, js := range started {
		now := time.Now()
		ago := now.Sub(starts[job]) / 2
		ended[job] = now.Add(-ago)
		result, status := "success", int32(0)
		if job == "gone" {
			result, status = "exit-code", 3
		}
		b.manager.EndedAgo(units.Name(job, js.Run), result, unitstest.CLDExited, status, ago)
	}
	d, _ = b.start()
	batch := waitJob(t, d, "batch", "done", func(js JobStatus) bool { return js.State == "done" })
	// Done since its run ended, not since this daemon saw it (trial AE).
	if end := runsOf(t, d, "batch")[0].End; !batch.Since.Equal(end) {
		t.Errorf("batch done since %v, want since its run's end %v", batch.Since, end)
	}
	testkit.WaitFor(t, 20*time.Second, "gone's run recorded", func() bool {
		runs := runsOf(t, d, "gone")
		return len(runs) == 1 && !runs[0].End.IsZero()
	})
	for job, want := range ended {
		run := runsOf(t, d, job)[0]
		// Within a quarter of its run of when its unit ended (the clocks
		// are read apart); the next daemon came a quarter later than that.
		if off := run.End.Sub(want).Abs(); off > want.Sub(run.Start)/2 {
			t.Errorf("%s's run ended %v, want %v, when its unit ended (its start %v)", job, run.End, want, run.Start)
		}
	}
}

// TestUnitsOrphanKeptForItsOwnFilesOnly: a run taken back whose job no
// file in force declares any more is stopped at the daemon's start though
// a person's file has errors (trial AW: any problem anywhere kept such a
// run, and its grant, for good, shown nowhere). One whose own directory
// holds a file with errors, which may declare it, is kept: shown, and
// stopped by berth stop, where its owner asks; once it ends by itself it
// is recorded.
func TestUnitsOrphanKeptForItsOwnFilesOnly(t *testing.T) {
	t.Parallel()
	needAccounts(t)
	b := newUnitsBox(t, `job "gone" { cmd = { "/bin/sleep", "1000" } }
job "typo" { cmd = { "/bin/sleep", "1000" } }
job "ends" { cmd = { "/bin/sleep", "1000" } }
job "back" { cmd = { "/bin/sleep", "1000" } }`)
	spool := filepath.Join(t.TempDir(), "spool")
	b.tune = func(cfg *Config) { cfg.UserJobs, cfg.Group, cfg.AdminGroup = spool, testGroup, testAdminGroup }
	d, stop := b.start()
	run := map[string]uint64{}
	for _, job := range []string{"gone", "typo", "ends", "back"} {
		run[job] = waitJob(t, d, job, "running", func(js JobStatus) bool { return js.State == "running" }).Run
	}
	stop()
	// gone's declaration goes; alice's file has errors of its own.
	testkit.PutFile(t, filepath.Join(b.jobsDir, "jobs.lua"), `job "typo" { cmd = { "/bin/sleep", "1000" } }
job "ends" { cmd = { "/bin/sleep", "1000" } }
job "back" { cmd = { "/bin/sleep", "1000" } }`)
	alices := filepath.Join(spool, testAlice, "bad.lua")
	testkit.PutFile(t, alices, `job "x" { cmd = "true", gpu = 1 }`)
	if err := os.Chown(alices, uidOf(t, testAlice), -1); err != nil {
		t.Fatal(err)
	}
	d, stop = b.start()
	ended := func(job string) store.RunRecord {
		t.Helper()
		var rec store.RunRecord
		testkit.WaitFor(t, 20*time.Second, job+"'s run recorded as ended", func() bool {
			runs := runsOf(t, d, job)
			rec = runs[0]
			return len(runs) == 1 && !rec.End.IsZero()
		})
		return rec
	}
	obey := func(job string) {
		t.Helper()
		unit := units.Name(job, run[job])
		testkit.WaitFor(t, 20*time.Second, job+"'s unit sent SIGTERM", func() bool {
			return slices.Contains(b.manager.Killed(), unit+" terminated")
		})
		b.manager.End(unit, "signal", unitstest.CLDKilled, int32(syscall.SIGTERM))
	}
	obey("gone")
	if rec := ended("gone"); rec.Reason != store.ReasonStopped || rec.Cause != "no job file declares it any more" {
		t.Errorf("gone's run, alice's file with errors: %s %q, want stopped as no file declares it", rec.Reason, rec.Cause)
	}
	stop()
	// typo's and ends's declarations go to a new file with a mistake, so
	// that no version of them is in force.
	testkit.PutFile(t, filepath.Join(b.jobsDir, "jobs.lua"), `job "other" { cmd = { "/bin/sleep", "1000" } }`)
	testkit.PutFile(t, filepath.Join(b.jobsDir, "typo.lua"), `job "typo" { cmd = { "/bin/sleep", "1000" }, cpu = 1 }
job "ends" { cmd = { "/bin/sleep", "1000" } }
job "back" { cmd = { "/bin/sleep", "1000" } }`)
	d, _ = b.start()
	kept := func() []string {
		var jobs []string
		for _, p := range d.Status().Problems {
			if p.Code == ProblemOrphanKept {
				jobs = append(jobs, p.Job)
			}
		}
		return jobs
	}
	<-d.loaded
	if jobs := kept(); !slices.Equal(jobs, []string{"back", "ends", "typo"}) {
		t.Fatalf("runs shown kept: %v, want back, ends and typo, which typo.lua may declare", jobs)
	}
	if unit := units.Name("typo", run["typo"]); !b.manager.Active(unit) {
		t.Fatalf("typo's unit %s was stopped; typo.lua, which has errors, may declare it", unit)
	}
	if code, body := as(t, d, "root", "GET", jobPath("typo")); code != http.StatusNotFound || !strings.Contains(body, "a run of it taken back at the daemon's start goes on") {
		t.Errorf("show of typo, its run kept: %d %s, want no such job, its run said", code, body)
	}
	if code, body := as(t, d, testAlice, "POST", jobPath("typo")+"/stop"); code != http.StatusForbidden {
		t.Errorf("alice's stop of typo's run: %d %s, want refused", code, body)
	}
	if code, body := as(t, d, "root", "POST", jobPath("typo")+"/stop"); code != http.StatusOK {
		t.Fatalf("root's stop of typo's run: %d %s", code, body)
	}
	obey("typo")
	if rec := ended("typo"); rec.Reason != store.ReasonStopped || rec.Cause != msgStopRequested {
		t.Errorf("typo's run: %s %q, want stopped on request", rec.Reason, rec.Cause)
	}
	// One that ends by itself while kept is recorded so, and gives back
	// what it held.
	b.manager.End(units.Name("ends", run["ends"]), "success", unitstest.CLDExited, 0)
	if rec := ended("ends"); rec.Reason != store.ReasonExited {
		t.Errorf("ends's run, ended by itself: %s %q, want exited", rec.Reason, rec.Cause)
	}
	// What it held goes back once its end is recorded.
	testkit.WaitFor(t, 10*time.Second, "2 cores free (other's and back's held)", func() bool { return d.Status().Machine.CPUsFree == 2 })
	// The file fixed, the job it declares takes its run back.
	testkit.PutFile(t, filepath.Join(b.jobsDir, "typo.lua"), `job "back" { cmd = { "/bin/sleep", "1000" } }`)
	if _, err := d.Reload(t.Context()); err != nil {
		t.Fatal(err)
	}
	if js := waitJob(t, d, "back", "running", func(js JobStatus) bool { return js.State == "running" }); js.Run != run["back"] || !b.manager.Active(units.Name("back", js.Run)) {
		t.Errorf("back, its file fixed: run %d, want its run %d taken back, its unit going on", js.Run, run["back"])
	}
	if jobs := kept(); len(jobs) != 0 {
		t.Errorf("runs shown kept, every file fixed: %v", jobs)
	}
	if free := d.Status().Machine.CPUsFree; free != 2 {
		t.Errorf("cores free: %d, want 2: back's core counted once", free)
	}
}

// TestUnitsResetFailedWhileAway: a run whose unit failed while no daemon ran, its
// result cleared since (systemctl reset-failed), is not said to have been
// stopped outside berth, which the next daemon cannot tell from it: it
// says so (trial AW: "stopped outside berth" of a run that exited 3).
func TestUnitsResetFailedWhileAway(t *testing.T) {
	t.Parallel()
	b := newUnitsBox(t, `job "rf" { cmd = { "/bin/sleep", "1000" } }`)
	b.booted = time.Now().Add(-time.Hour) // its run began in this boot
	d, stop := b.start()
	rf := waitJob(t, d, "rf", "running", func(js JobStatus) bool { return js.State == "running" })
	stop()
	unit := units.Name("rf", rf.Run)
	b.manager.EndedAgo(unit, "exit-code", unitstest.CLDExited, 3, time.Second)
	b.manager.ResetFailed(unit)
	if b.manager.Active(unit) || slices.Contains(b.manager.Names(), unit) {
		t.Fatalf("the unit is still there: %v", b.manager.Names())
	}
	d, _ = b.start()
	waitJob(t, d, "rf", "stopped", func(js JobStatus) bool { return js.State == "stopped" })
	if runs := runsOf(t, d, "rf"); len(runs) != 1 || runs[0].Reason != store.ReasonStopped || runs[0].Cause != msgGoneWhileAway(unit) {
		t.Errorf("rf's runs: %+v, want its one run stopped, saying its unit was gone and why it may be", runs)
	}
}

// TestUnitsDirMissing: a job whose directory is not there is not started
// as a unit to fail in it: its run is a spawn error that says why.
func TestUnitsDirMissing(t *testing.T) {
	t.Parallel()
	b := newUnitsBox(t, `job "nodir" { cmd = { "/bin/true" }, dir = "/nonexistent-berth-dir" }`)
	d, _ := b.start()
	js := waitJob(t, d, "nodir", "failed", func(js JobStatus) bool { return js.State == "failed" })
	if want := "dir /nonexistent-berth-dir does not exist"; !strings.Contains(js.Why, want) {
		t.Errorf("nodir's why: %q, want it to say %q", js.Why, want)
	}
	if names := b.manager.Names(); len(names) != 0 {
		t.Errorf("units started for it: %v", names)
	}
}

// TestUnitsStoppedOutsideFailing: a unit stopped with systemctl whose
// process answers the SIGTERM with a failing status (a shell's 143, a
// JVM's) rests its job stopped, as systemd does not restart a unit it was
// told to stop, and the run keeps the status (trial AG: recorded failed,
// and restarted by restart = "on-failure").
func TestUnitsStoppedOutsideFailing(t *testing.T) {
	t.Parallel()
	b := newUnitsBox(t, `job "svc" { cmd = { "/bin/sleep", "1000" }, restart = "on-failure" }`)
	d, _ := b.start()
	svc := waitJob(t, d, "svc", "running", func(js JobStatus) bool { return js.State == "running" })
	b.manager.StopOutsideFailing(units.Name("svc", svc.Run), "exit-code", unitstest.CLDExited, 143)
	waitJob(t, d, "svc", "stopped", func(js JobStatus) bool { return js.State == "stopped" })
	runs := runsOf(t, d, "svc")
	if len(runs) != 1 || runs[0].Reason != store.ReasonStopped || runs[0].Cause != msgStoppedOutside {
		t.Fatalf("svc's runs: %+v, want its one run stopped outside berth", runs)
	}
	if code := runViewOf(runs[0]).ExitCode; code == nil || *code != 143 {
		t.Errorf("the run's exit code: %v, want 143", code)
	}
}

// TestUnitsStoppedByShutdown: a unit the machine's shutdown stopped, seen
// before the daemon's own stop, is a run lost, not a person's stop: the job
// runs again at the next boot, restart = "no" or not (a review: it rested
// stopped). Nothing is started meanwhile, where systemd would refuse it,
// a job that needs no grant included, and a job waiting says why.
func TestUnitsStoppedByShutdown(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name string
		stop func(m *unitstest.Manager, unit string)
	}{
		{"it obeys", func(m *unitstest.Manager, unit string) { m.StopOutside(unit) }},
		{"it fails on SIGTERM", func(m *unitstest.Manager, unit string) {
			m.StopOutsideFailing(unit, "exit-code", unitstest.CLDExited, 143)
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			b := newUnitsBox(t, shutdownJobs)
			d, stop := b.start()
			runs := b.stoppedByShutdown(d, tt.stop)
			for name := range runs {
				js := waitJob(t, d, name, "waiting", func(js JobStatus) bool { return js.State == "waiting" })
				if js.Why != msgHeldForShutdown {
					t.Errorf("%s waits: %q, want %q", name, js.Why, msgHeldForShutdown)
				}
				if runs := runsOf(t, d, name); len(runs) != 1 || runs[0].Reason != store.ReasonLost || runs[0].Cause != msgLostShuttingDown {
					t.Errorf("%s's runs: %+v, want its one run lost to the shutdown", name, runs)
				}
			}
			stop()
			if n := b.manager.Refused(); n != 0 {
				t.Errorf("%d units started while the machine shut down, want none", n)
			}

			// The next boot.
			b.manager.ShutDown(false)
			b.booted = time.Now()
			d, _ = b.start()
			runAgain(t, d, runs)
		})
	}
}

// shutdownJobs are a job that waits for a grant and one that needs none,
// which a machine's shutdown stops (stoppedByShutdown).
const shutdownJobs = `
job "svc" { cmd = { "/bin/sleep", "1000" }, restart = "no" }
job "free" { cmd = { "/bin/sleep", "1000" }, restart = "no", cpus = 0 }
`

// stoppedByShutdown waits for shutdownJobs to run, then shuts the machine
// down and stops their units with stop, and returns the runs stopped.
func (b *unitsBox) stoppedByShutdown(d *Daemon, stop func(m *unitstest.Manager, unit string)) map[string]uint64 {
	runs := map[string]uint64{}
	for _, name := range []string{"svc", "free"} {
		runs[name] = waitJob(b.t, d, name, "running", func(js JobStatus) bool { return js.State == "running" }).Run
	}
	b.manager.ShutDown(true)
	for name, run := range runs {
		stop(b.manager, units.Name(name, run))
	}
	return runs
}

// runAgain waits for each job of runs to run again, in a run of its own.
func runAgain(t *testing.T, d *Daemon, runs map[string]uint64) {
	t.Helper()
	for name, run := range runs {
		waitJob(t, d, name, "running again", func(js JobStatus) bool { return js.State == "running" && js.Run != run })
	}
}

// TestUnitsShutdownCalledOff: the starts held while the machine shut down
// resume once the shutdown is called off (systemctl cancel), a parked job
// that needs no grant's too.
func TestUnitsShutdownCalledOff(t *testing.T) {
	t.Parallel()
	b := newUnitsBox(t, shutdownJobs)
	d, _ := b.start()
	runs := b.stoppedByShutdown(d, (*unitstest.Manager).StopOutside)
	for name := range runs {
		waitJob(t, d, name, "waiting", func(js JobStatus) bool { return js.State == "waiting" })
	}
	b.manager.ShutDown(false)
	runAgain(t, d, runs)
	if n := b.manager.Refused(); n != 0 {
		t.Errorf("%d units started while the machine shut down, want none", n)
	}
}

// TestUnitsStartRefusedByShutdown: a start systemd refuses as the machine
// shuts down, before any run was seen stopped by it, is no failure of the
// job's: it waits, restart = "no" or not, and runs once the shutdown is
// called off.
func TestUnitsStartRefusedByShutdown(t *testing.T) {
	t.Parallel()
	b := newUnitsBox(t, `job "svc" { cmd = { "/bin/sleep", "1000" }, restart = "no" }`)
	d, _ := b.start()
	waitJob(t, d, "svc", "running", func(js JobStatus) bool { return js.State == "running" })
	b.manager.ShutDown(true)
	if err := writeFile(filepath.Join(b.jobsDir, "late.lua"), []byte(`job "late" { cmd = { "/bin/sleep", "1000" }, restart = "no" }`), 0o600); err != nil {
		t.Fatal(err)
	}
	reload(t, d)
	waitJob(t, d, "late", "refused, and waiting", func(js JobStatus) bool {
		return js.State == "waiting" && b.manager.Refused() == 1 && js.Why == msgHeldForShutdown
	})
	testkit.WaitFor(t, 10*time.Second, "late's refused run recorded", func() bool {
		runs := runsOf(t, d, "late")
		return len(runs) == 1 && runs[0].Reason == store.ReasonSpawnError
	})
	b.manager.ShutDown(false)
	waitJob(t, d, "late", "running", func(js JobStatus) bool { return js.State == "running" })
	if n := b.manager.Refused(); n != 1 {
		t.Errorf("%d starts refused, want the one", n)
	}
}

// TestUnitsDaemonStoppedByShutdownFirst: a daemon that stops with the
// machine's shutdown before its runs do notes that they go down with it:
// the next daemon, finding their units gone, records them lost and runs
// them again, though PID 1 started before them (a soft reboot keeps it).
func TestUnitsDaemonStoppedByShutdownFirst(t *testing.T) {
	t.Parallel()
	b := newUnitsBox(t, `job "svc" { cmd = { "/bin/sleep", "1000" }, restart = "no" }`)
	b.booted = time.Now().Add(-time.Hour)
	d, stop := b.start()
	svc := waitJob(t, d, "svc", "running", func(js JobStatus) bool { return js.State == "running" })
	b.manager.ShutDown(true)
	stop()
	b.manager.StopOutside(units.Name("svc", svc.Run))
	b.manager.ShutDown(false)

	d, _ = b.start()
	waitJob(t, d, "svc", "running again", func(js JobStatus) bool { return js.State == "running" && js.Run != svc.Run })
	if runs := runsOf(t, d, "svc"); len(runs) != 2 || runs[1].Reason != store.ReasonLost || runs[1].Cause != msgLostShuttingDown {
		t.Errorf("svc's runs: %+v, want the first lost to the shutdown", runs)
	}
}

// TestUnitsStoppedOutside: a unit stopped with systemctl rests its job
// stopped; a unit no run accounts for is stopped at start; a job whose file
// went away while the daemon was down has its run stopped.
func TestUnitsStoppedOutside(t *testing.T) {
	t.Parallel()
	b := newUnitsBox(t, `
job "svc" { cmd = { "/bin/sleep", "1000" }, restart = "always" }
job "gone" { cmd = { "/bin/sleep", "1000" } }
`)
	logs := &testkit.Buffer{}
	b.logs = logs
	d, stop := b.start()
	svc := waitJob(t, d, "svc", "running", func(js JobStatus) bool { return js.State == "running" })
	gone := waitJob(t, d, "gone", "running", func(js JobStatus) bool { return js.State == "running" })
	b.manager.StopOutside(units.Name("svc", svc.Run))
	waitJob(t, d, "svc", "stopped", func(js JobStatus) bool { return js.State == "stopped" })
	if runs := runsOf(t, d, "svc"); len(runs) != 1 || runs[0].Reason != store.ReasonStopped || runs[0].Cause != msgStoppedOutside ||
		runViewOf(runs[0]).ExitCode != nil {
		t.Errorf("svc's runs: %+v, want its one run stopped outside berth, with no exit code", runs)
	}
	stop()
	// The journal says it as the history does (trial AG: exit_code=-1).
	exited := ""
	for l := range strings.Lines(logs.String()) {
		if strings.Contains(l, "exited:") && strings.Contains(l, "job=svc") {
			exited = l
		}
	}
	if !strings.Contains(exited, "why=\""+msgStoppedOutside) || strings.Contains(exited, "exit_code") {
		t.Errorf("the daemon's line of svc's end: %q, want its why and no exit code", exited)
	}

	if err := writeFile(filepath.Join(b.jobsDir, "jobs.lua"), []byte(`job "svc" { cmd = { "/bin/sleep", "1000" }, restart = "always" }`), 0o600); err != nil {
		t.Fatal(err)
	}
	// A unit of a run the state does not know.
	stray := units.Name("stray", 999)
	other := units.New(b.manager, units.Events{})
	if _, err := other.Start(context.Background(), units.Spec{Job: "stray", Run: 999, Path: "/bin/sleep", Argv: []string{"sleep", "1"}}); err != nil {
		t.Fatal(err)
	}
	other.Close()

	d, _ = b.start()
	testkit.WaitFor(t, 20*time.Second, "the stray unit stopped and gone's run stopped", func() bool {
		runs := runsOf(t, d, "gone")
		return !slices.Contains(b.manager.Names(), stray) && len(runs) == 1 && runs[0].Reason != 0
	})
	if runs := runsOf(t, d, "gone"); runs[0].ID != gone.Run || (runs[0].Reason != store.ReasonStopped && runs[0].Reason != store.ReasonKilled) {
		t.Errorf("gone's run: %+v", runs[0])
	}
	if js, _ := d.jobStatus("svc"); js.State != "stopped" {
		t.Errorf("svc after the restart: %s, want still stopped", js.State)
	}
}

// TestUnitsGoneWhileAway: a unit stopped from outside while no daemon ran
// (systemctl stop berth.slice with berth stopped) leaves no result: its
// run is recorded stopped and its job rests stopped, as with a daemon
// there. A run begun before the machine booted, or the container berth
// runs in (its PID 1 started), is lost instead, and runs again.
func TestUnitsGoneWhileAway(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name                string
		booted, initStarted time.Time
		reason              store.Reason
		state               string
	}{
		{"in this boot", time.Now().Add(-time.Hour), time.Time{}, store.ReasonStopped, "stopped"},
		{"before this boot", time.Now().Add(time.Hour), time.Time{}, store.ReasonLost, "running"},
		{"in this boot of the container", time.Now().Add(-time.Hour), time.Now().Add(-time.Minute), store.ReasonStopped, "stopped"},
		// Its kernel booted long before: the container's own boot tells.
		{"before this boot of the container", time.Now().Add(-time.Hour), time.Now().Add(time.Hour), store.ReasonLost, "running"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			b := newUnitsBox(t, `job "svc" { cmd = { "/bin/sleep", "1000" }, restart = "always" }`)
			d, stop := b.start()
			svc := waitJob(t, d, "svc", "running", func(js JobStatus) bool { return js.State == "running" })
			stop()
			b.manager.StopOutside(units.Name("svc", svc.Run))

			b.booted, b.initStarted = tt.booted, tt.initStarted
			d, _ = b.start()
			waitJob(t, d, "svc", tt.state, func(js JobStatus) bool { return js.State == tt.state })
			runs := runsOf(t, d, "svc")
			if first := runs[len(runs)-1]; first.ID != svc.Run || first.Reason != tt.reason {
				t.Errorf("svc's first run: %+v, want run %d %s", first, svc.Run, tt.reason)
			}
		})
	}
}

// TestUnitsLostConnection: when the connection to systemd goes, the
// daemon ends (systemd starts it again) and leaves the units running.
func TestUnitsLostConnection(t *testing.T) {
	t.Parallel()
	b := newUnitsBox(t, `job "svc" { cmd = { "/bin/sleep", "1000" } }`)
	d, _, ran := b.startRun()
	svc := waitJob(t, d, "svc", "running", func(js JobStatus) bool { return js.State == "running" })
	b.manager.Disconnect()
	select {
	case err := <-ran:
		if !errors.Is(err, ErrLostSystemd) {
			t.Errorf("Run = %v, want ErrLostSystemd", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the daemon went on without its connection to systemd")
	}
	if !b.manager.Active(units.Name("svc", svc.Run)) || len(b.manager.Killed()) > 0 {
		t.Errorf("the daemon's end reached its units: signals %v", b.manager.Killed())
	}
}

// TestUnitsStopHandedOffAtShutdown: a daemon stopped while a person's
// stop is under way does not wait for its stop_timeout (trial AK: systemctl
// restart berth waited 30 s; one past TimeoutStopSec had the daemon
// killed): it leaves the SIGKILL to a unit of systemd's, sleeping until
// the deadline, and the next daemon sees the stop through as begun, then
// lets go of that unit.
func TestUnitsStopHandedOffAtShutdown(t *testing.T) {
	t.Parallel()
	b := newUnitsBox(t, `job "svc" { cmd = { "/bin/sleep", "1000" }, restart = "always", stop_timeout = "1h" }`)
	d, stop := b.start()
	unit := stopping(t, d, "svc")
	// The fake's processes ignore SIGTERM: only the SIGKILL an hour on
	// would end it, which the daemon does not wait for.
	leavesAtOnce(t, stop)
	if !b.manager.Active(unit) {
		t.Fatal("svc's unit ended: the daemon waited for, or sent, its SIGKILL")
	}
	killer := strings.TrimSuffix(unit, ".service") + "-sigkill.service"
	props := b.manager.Props(killer)
	if props["Type"] != "oneshot" || props["Slice"] != units.Slice {
		t.Fatalf("the unit left to SIGKILL svc's: %v, want a oneshot in berth's slice", props)
	}
	// ExecStart as the fake keeps it: {path [argv…] ignore-failure} each.
	exec := regexp.MustCompile(`^\[\{\S*/sleep \[\S*/sleep ([0-9.]+)\] false\} \{\S*/systemctl \[\S*/systemctl (?:--user )?kill --signal=SIGKILL (\S+)\] true\}\]$`).
		FindStringSubmatch(fmt.Sprint(props["ExecStart"]))
	if exec == nil || exec[2] != unit {
		t.Fatalf("it runs %v, want a sleep, then the SIGKILL of %s", props["ExecStart"], unit)
	}
	if secs, _ := strconv.ParseFloat(exec[1], 64); secs < 3500 || secs > 3600 {
		t.Errorf("it sleeps %ss, want what is left of the hour's stop_timeout", exec[1])
	}

	// The next daemon sees the stop through (its hour cut short here: the
	// process ends by the SIGTERM it was sent, so that the end is not
	// taken for the killer's), and lets go of the killer.
	d, _ = b.start()
	waitJob(t, d, "svc", "stopping", func(js JobStatus) bool { return js.State != "" })
	b.manager.End(unit, "signal", unitstest.CLDKilled, int32(syscall.SIGTERM))
	waitJob(t, d, "svc", "stopped", func(js JobStatus) bool { return js.State == "stopped" })
	if runs := runsOf(t, d, "svc"); len(runs) != 1 || runs[0].Reason != store.ReasonStopped || runs[0].Cause != "stopped on request (berth stop); "+seenThroughCause {
		t.Errorf("svc's runs: %+v, want its one run stopped, the next daemon having seen its stop through", runs)
	}
	testkit.WaitFor(t, 20*time.Second, "the killer gone once the run has ended", func() bool { return !slices.Contains(b.manager.Names(), killer) })
}

// svcStopTimeout is a job "svc" of that stop_timeout, whose processes
// the fake manager's SIGTERM does not end.
func svcStopTimeout(stopTimeout string) string {
	return `job "svc" { cmd = { "/bin/sleep", "1000" }, stop_timeout = "` + stopTimeout + `" }`
}

// rootAsks is berth VERB JOB (start, stop, restart), by root.
func rootAsks(t *testing.T, d *Daemon, verb, job string) {
	t.Helper()
	if code, body := as(t, d, "root", "POST", jobPath(job)+"/"+verb); code != 200 {
		t.Fatalf("berth %s %s: %d %s", verb, job, code, body)
	}
}

// leavesAtOnce stops a daemon, which must not wait for a stop under way
// whose stop_timeout is an hour: it hands it off.
func leavesAtOnce(t *testing.T, stop func()) {
	t.Helper()
	left := make(chan struct{})
	go func() { stop(); close(left) }()
	select {
	case <-left:
	case <-time.After(20 * time.Second):
		t.Fatal("the daemon is still waiting for a stop_timeout of an hour")
	}
}

// signalsSent counts the times sig was sent to unit, by every daemon.
func signalsSent(m *unitstest.Manager, unit string, sig syscall.Signal) int {
	n := 0
	for _, k := range m.Killed() {
		if k == unit+" "+sig.String() {
			n++
		}
	}
	return n
}

// TestUnitsRestartHandedOffAtShutdown: a daemon stopped while a restart
// of a unit is under way leaves at once, as for a person's stop (it waited
// out the stop_timeout); the next one sees the stop through as begun,
// sending no second SIGTERM, and then runs the job again.
func TestUnitsRestartHandedOffAtShutdown(t *testing.T) {
	t.Parallel()
	b := newUnitsBox(t, svcStopTimeout("1h"))
	d, stop := b.start()
	svc := waitJob(t, d, "svc", "running", func(js JobStatus) bool { return js.State == "running" })
	unit := units.Name("svc", svc.Run)
	rootAsks(t, d, "restart", "svc")
	stopping := waitJob(t, d, "svc", "stopping", func(js JobStatus) bool { return js.State == "stopping" && js.KillAt != nil })
	leavesAtOnce(t, stop)
	if !slices.Contains(b.manager.Names(), strings.TrimSuffix(unit, ".service")+"-sigkill.service") {
		t.Fatalf("no unit left to SIGKILL svc's: %v", b.manager.Names())
	}

	d, _ = b.start()
	js := waitJob(t, d, "svc", "stopping", func(js JobStatus) bool { return js.State != "" })
	if js.State != "stopping" || js.Run != svc.Run || js.KillAt == nil || js.KillAt.Sub(*stopping.KillAt).Abs() > time.Second {
		t.Errorf("svc under the next daemon: %+v, want its run stopping, its SIGKILL still at %v", js, stopping.KillAt)
	}
	b.manager.End(unit, "signal", unitstest.CLDKilled, int32(syscall.SIGTERM))
	waitJob(t, d, "svc", "running again", func(js JobStatus) bool { return js.State == "running" && js.Run != svc.Run })
	if n := signalsSent(b.manager, unit, syscall.SIGTERM); n != 1 {
		t.Errorf("SIGTERM sent %d times to svc's first unit, want once", n)
	}
	runs := runsOf(t, d, "svc")
	if len(runs) != 2 || runs[1].ID != svc.Run || runs[1].Reason != store.ReasonStopped ||
		runs[1].Cause != "restarted on request (berth restart); "+seenThroughCause {
		t.Errorf("svc's runs: %+v, want its first run stopped for the restart, seen through, then a second", runs)
	}
}

// TestUnitsHandedOffThenDisabled: a restart handed off, and the job's file
// disabling it before the next daemon came: that one sees the stop
// through, and the job rests disabled rather than running again.
func TestUnitsHandedOffThenDisabled(t *testing.T) {
	t.Parallel()
	b := newUnitsBox(t, svcStopTimeout("1h"))
	d, stop := b.start()
	svc := waitJob(t, d, "svc", "running", func(js JobStatus) bool { return js.State == "running" })
	unit := units.Name("svc", svc.Run)
	rootAsks(t, d, "restart", "svc")
	waitJob(t, d, "svc", "stopping", func(js JobStatus) bool { return js.State == "stopping" })
	leavesAtOnce(t, stop)
	testkit.PutFile(t, filepath.Join(b.jobsDir, "jobs.lua"), `job "svc" { cmd = { "/bin/sleep", "1000" }, stop_timeout = "1h", enabled = false }`)
	d, _ = b.start()
	waitJob(t, d, "svc", "stopping", func(js JobStatus) bool { return js.State == "stopping" && js.Run == svc.Run })
	b.manager.End(unit, "signal", unitstest.CLDKilled, int32(syscall.SIGTERM))
	waitJob(t, d, "svc", "disabled", func(js JobStatus) bool { return js.State == "disabled" })
	if n := signalsSent(b.manager, unit, syscall.SIGTERM); n != 1 {
		t.Errorf("SIGTERM sent %d times to svc's unit, want once", n)
	}
}

// TestUnitsTimeoutHandedOffAtShutdown: a daemon stopped while a run that
// outlived its timeout is being stopped leaves at once; the next one sees
// the stop through, records the run timed out, and the policy restarts it
// once, counted once (the last daemon had counted that restart).
func TestUnitsTimeoutHandedOffAtShutdown(t *testing.T) {
	t.Parallel()
	b := newUnitsBox(t, `job "svc" { cmd = { "/bin/sleep", "1000" }, timeout = "1s", stop_timeout = "1h", restart = "on-failure" }`)
	d, stop := b.start()
	svc := waitJob(t, d, "svc", "stopping for its timeout", func(js JobStatus) bool { return js.State == "stopping" })
	unit := units.Name("svc", svc.Run)
	leavesAtOnce(t, stop)
	d, _ = b.start()
	waitJob(t, d, "svc", "stopping", func(js JobStatus) bool { return js.State == "stopping" && js.Run == svc.Run })
	b.manager.End(unit, "signal", unitstest.CLDKilled, int32(syscall.SIGTERM))
	js := waitJob(t, d, "svc", "restarted", func(js JobStatus) bool {
		return js.State == "backoff" || js.State == "running" && js.Run != svc.Run || js.State == "stopping" && js.Run != svc.Run
	})
	if js.Restarts != 1 {
		t.Errorf("svc restarted after its timeout: %+v, want 1 restart in a row", js)
	}
	if runs := runsOf(t, d, "svc"); len(runs) == 0 || runs[len(runs)-1].ID != svc.Run || runs[len(runs)-1].Reason != store.ReasonTimedOut {
		t.Errorf("svc's runs: %+v, want its first run timed out", runs)
	}
	if n := signalsSent(b.manager, unit, syscall.SIGTERM); n != 1 {
		t.Errorf("SIGTERM sent %d times to svc's first unit, want once", n)
	}
}

// TestUnitsTimeoutHandedOffGivenUp: a run that timed out past its
// max_restarts, its stop handed off: the next daemon sees it through, and
// the job rests failed, as the last daemon had recorded (the review: the
// count, kept without its delay, was taken for a first failure, and the
// job restarted).
func TestUnitsTimeoutHandedOffGivenUp(t *testing.T) {
	t.Parallel()
	b := newUnitsBox(t, `job "svc" { cmd = { "/bin/sleep", "1000" }, timeout = "1s", stop_timeout = "1h", restart = "on-failure", max_restarts = 1 }`)
	d, stop := b.start()
	first := waitJob(t, d, "svc", "stopping for its timeout", func(js JobStatus) bool { return js.State == "stopping" })
	b.manager.End(units.Name("svc", first.Run), "signal", unitstest.CLDKilled, int32(syscall.SIGTERM))
	second := waitJob(t, d, "svc", "its second run stopping for its timeout", func(js JobStatus) bool {
		return js.State == "stopping" && js.Run != first.Run
	})
	leavesAtOnce(t, stop)
	d, _ = b.start()
	waitJob(t, d, "svc", "stopping", func(js JobStatus) bool { return js.State == "stopping" && js.Run == second.Run })
	b.manager.End(units.Name("svc", second.Run), "signal", unitstest.CLDKilled, int32(syscall.SIGTERM))
	js := waitJob(t, d, "svc", "at rest", func(js JobStatus) bool { return js.State != "stopping" })
	if js.State != "failed" || !js.GaveUp || js.Restarts != 1 {
		t.Errorf("svc after its second timeout, max_restarts 1: %+v, want failed, given up after 1 restart", js)
	}
}

// TestUnitsAskedDuringAHandedOffTimeout: what a person asked while a
// timeout's stop was under way stands once it is handed off: a restart
// runs the job again, a stop rests it stopped; the run is recorded timed
// out either way (the review: the restart was lost, the policy judging
// the timeout; a stop recorded the run stopped).
func TestUnitsAskedDuringAHandedOffTimeout(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ verb, then, want string }{
		{"restart", "; then restarted on request", "running again"},
		{"stop", "; then stopped on request", "stopped"},
	} {
		t.Run(c.verb, func(t *testing.T) {
			t.Parallel()
			b := newUnitsBox(t, `job "svc" { cmd = { "/bin/sleep", "1000" }, timeout = "1s", stop_timeout = "1h" }`)
			d, stop := b.start()
			svc := waitJob(t, d, "svc", "stopping for its timeout", func(js JobStatus) bool { return js.State == "stopping" })
			rootAsks(t, d, c.verb, "svc")
			// Taken (a restart is answered before): the stop's why says it.
			waitJob(t, d, "svc", "to say what follows", func(js JobStatus) bool { return strings.Contains(js.Why, c.then) })
			leavesAtOnce(t, stop)
			d, _ = b.start()
			waitJob(t, d, "svc", "stopping", func(js JobStatus) bool { return js.State == "stopping" && js.Run == svc.Run })
			b.manager.End(units.Name("svc", svc.Run), "signal", unitstest.CLDKilled, int32(syscall.SIGTERM))
			waitJob(t, d, "svc", c.want, func(js JobStatus) bool {
				if c.want == "stopped" {
					return js.State == "stopped"
				}
				return js.Run != 0 && js.Run != svc.Run // its next run times out too: any state
			})
			if runs := runsOf(t, d, "svc"); len(runs) == 0 || runs[len(runs)-1].ID != svc.Run || runs[len(runs)-1].Reason != store.ReasonTimedOut {
				t.Errorf("svc's runs: %+v, want its first run timed out", runs)
			}
		})
	}
}

// TestUnitsHandedOffKillerMoves: the daemon that takes a handed-off stop
// up lets go of the last one's killer, whose deadline an edited
// stop_timeout would not move (the review), and leaves one of its own at
// the new deadline should it go too.
func TestUnitsHandedOffKillerMoves(t *testing.T) {
	t.Parallel()
	b := newUnitsBox(t, svcStopTimeout("1h"))
	d, stop := b.start()
	svc := waitJob(t, d, "svc", "running", func(js JobStatus) bool { return js.State == "running" })
	unit := units.Name("svc", svc.Run)
	killer := strings.TrimSuffix(unit, ".service") + "-sigkill.service"
	rootAsks(t, d, "stop", "svc")
	waitJob(t, d, "svc", "stopping", func(js JobStatus) bool { return js.State == "stopping" })
	leavesAtOnce(t, stop)
	if !slices.Contains(b.manager.Names(), killer) {
		t.Fatalf("no unit left to SIGKILL svc's: %v", b.manager.Names())
	}
	d, stop = b.start()
	waitJob(t, d, "svc", "stopping", func(js JobStatus) bool { return js.State == "stopping" && js.Run == svc.Run })
	testkit.WaitFor(t, 20*time.Second, "the last daemon's killer let go of", func() bool { return !slices.Contains(b.manager.Names(), killer) })
	testkit.PutFile(t, filepath.Join(b.jobsDir, "jobs.lua"), svcStopTimeout("3h"))
	reload(t, d)
	waitJob(t, d, "svc", "its SIGKILL moved", func(js JobStatus) bool { return js.KillAt != nil && time.Until(*js.KillAt) > 2*time.Hour })
	leavesAtOnce(t, stop)
	exec := regexp.MustCompile(`/sleep ([0-9.]+)\]`).FindStringSubmatch(fmt.Sprint(b.manager.Props(killer)["ExecStart"]))
	if exec == nil {
		t.Fatalf("no killer left by the second daemon: %v", b.manager.Names())
	}
	if secs, _ := strconv.ParseFloat(exec[1], 64); secs < 2*3600 || secs > 3*3600 {
		t.Errorf("the second killer sleeps %ss, want what is left of the edited 3h", exec[1])
	}
}

// TestUnitsHandedOffThenRemoved: a stop left to the next daemon whose job
// is no longer declared: that daemon stops the run as an orphan, and lets
// go of the unit left to SIGKILL it too (the review).
func TestUnitsHandedOffThenRemoved(t *testing.T) {
	t.Parallel()
	b := newUnitsBox(t, svcStopTimeout("1h"))
	d, stop := b.start()
	unit := stopping(t, d, "svc")
	killer := strings.TrimSuffix(unit, ".service") + "-sigkill.service"
	stop()
	if !slices.Contains(b.manager.Names(), killer) {
		t.Fatalf("no unit left to SIGKILL svc's: %v", b.manager.Names())
	}
	testkit.PutFile(t, filepath.Join(b.jobsDir, "jobs.lua"), `job "other" { cmd = { "/bin/sleep", "1000" } }`)
	d, _ = b.start()
	b.manager.End(unit, "signal", unitstest.CLDKilled, int32(syscall.SIGTERM))
	testkit.WaitFor(t, 20*time.Second, "the orphan's end recorded and its killer gone", func() bool {
		runs := runsOf(t, d, "svc")
		return len(runs) == 1 && !runs[0].End.IsZero() && !slices.Contains(b.manager.Names(), killer)
	})
}

// TestUnitsHandedOffThenKept: a stop left to the next daemon whose job is
// no longer declared, and kept as a file of its directory has errors, is
// recorded as that stop when systemd's SIGKILL ends it, and the journal
// says so (trial AY: "failed (SIGKILL)", and no line).
func TestUnitsHandedOffThenKept(t *testing.T) {
	t.Parallel()
	b := newUnitsBox(t, svcStopTimeout("1h"))
	logs := &testkit.Buffer{}
	b.logs = logs
	d, stop := b.start()
	unit := stopping(t, d, "svc")
	stop()
	testkit.PutFile(t, filepath.Join(b.jobsDir, "jobs.lua"), `job "other" { cmd = { "/bin/sleep", "1000" } }`)
	testkit.PutFile(t, filepath.Join(b.jobsDir, "broken.lua"), `job "x" { cmd = 1 }`)
	d, _ = b.start()
	<-d.loaded
	if !slices.ContainsFunc(d.Status().Problems, func(p Problem) bool { return p.Code == ProblemOrphanKept && p.Job == "svc" }) {
		t.Fatal("svc's run is not kept, broken.lua beside")
	}
	b.manager.End(unit, "signal", unitstest.CLDKilled, int32(syscall.SIGKILL)) // its killer's
	var run store.RunRecord
	testkit.WaitFor(t, 20*time.Second, "svc's run recorded", func() bool {
		runs := runsOf(t, d, "svc")
		run = runs[0]
		return len(runs) == 1 && !run.End.IsZero()
	})
	if run.Reason != store.ReasonKilled || run.Cause != msgStopRequested {
		t.Errorf("svc's run: %s %q, want killed after stop_timeout, stopped on request", run.Reason, run.Cause)
	}
	testkit.WaitFor(t, 10*time.Second, "the line of its end", func() bool {
		return strings.Contains(logs.String(), "exited: job=svc run=")
	})
}

// TestUnitsNoHandOffAsTheMachineStops: a daemon that stops with the
// machine sees a stop under way through, as before: systemd would refuse
// a new unit then, and stops the run's with every other.
func TestUnitsNoHandOffAsTheMachineStops(t *testing.T) {
	t.Parallel()
	b := newUnitsBox(t, `job "svc" { cmd = { "/bin/sleep", "1000" }, stop_timeout = "1s" }`)
	d, stop := b.start()
	unit := stopping(t, d, "svc")
	b.manager.ShutDown(true)
	stop()
	if b.manager.Active(unit) || b.manager.Refused() != 0 {
		t.Errorf("as the machine stops: svc's unit still active %v, starts refused %d; want its stop seen through, no unit asked for",
			b.manager.Active(unit), b.manager.Refused())
	}
}

// TestUnitsStopKilledWhileAway: the SIGKILL left to systemd came while no
// daemon watched: the next daemon records the run killed after its
// stop_timeout, and the job rests stopped.
func TestUnitsStopKilledWhileAway(t *testing.T) {
	t.Parallel()
	b := newUnitsBox(t, `job "svc" { cmd = { "/bin/sleep", "1000" }, stop_timeout = "1s" }`)
	d, stop := b.start()
	svc := waitJob(t, d, "svc", "running", func(js JobStatus) bool { return js.State == "running" })
	unit := units.Name("svc", svc.Run)
	b.manager.IgnoreKills() // the daemon's own SIGKILL, should it come first, ends nothing
	d.mu.Lock()
	j := d.jobs["svc"]
	d.mu.Unlock()
	j.in.post(jobMessage{ev: &event{kind: evStop}})
	js := waitJob(t, d, "svc", "stopping", func(js JobStatus) bool { return js.State == "stopping" })
	stop()
	// The killer's SIGKILL, a moment after the deadline, which is past by
	// the time the next daemon looks (an end said to come later is taken
	// as now, before the deadline: without -race, a fast machine got here
	// within the stop_timeout).
	killed := js.KillAt.Add(10 * time.Millisecond)
	testkit.WaitFor(t, 20*time.Second, "the stop's deadline to pass", func() bool { return time.Now().After(killed) })
	b.manager.EndedAgo(unit, "signal", unitstest.CLDKilled, int32(syscall.SIGKILL), time.Since(killed))
	d, _ = b.start()
	waitJob(t, d, "svc", "stopped", func(js JobStatus) bool { return js.State == "stopped" })
	runs := runsOf(t, d, "svc")
	if len(runs) != 1 || runs[0].Reason != store.ReasonKilled || runs[0].Signal != "SIGKILL" {
		t.Errorf("svc's runs: %+v, want its one run killed after stop_timeout", runs)
	}
}

// TestUnitsStopTimeoutEdited: a stop_timeout edited while its unit is
// being stopped moves that stop's SIGKILL, as for the daemon's own
// children (TestStopTimeoutEditedReachesTheStop).
func TestUnitsStopTimeoutEdited(t *testing.T) {
	t.Parallel()
	b := newUnitsBox(t, svcStopTimeout("1h"))
	d, _ := b.start()
	svc := waitJob(t, d, "svc", "running", func(js JobStatus) bool { return js.State == "running" })
	rootAsks(t, d, "stop", "svc")
	// The fake's processes ignore SIGTERM: only the SIGKILL ends it.
	js := waitJob(t, d, "svc", "stopping", func(js JobStatus) bool { return js.State == "stopping" && js.KillAt != nil })
	began := js.KillAt.Add(-time.Hour)
	testkit.PutFile(t, filepath.Join(b.jobsDir, "jobs.lua"), svcStopTimeout("20m"))
	reload(t, d)
	js = waitJob(t, d, "svc", "its SIGKILL moved sooner", func(js JobStatus) bool {
		return js.KillAt != nil && js.KillAt.Before(began.Add(20*time.Minute+time.Second))
	})
	if js.State != "stopping" || js.KillAt.Before(began.Add(20*time.Minute-time.Second)) {
		t.Errorf("stop_timeout 1h edited to 20m: %+v, want its SIGKILL 20m after the stop began (%v)", js, began.Add(20*time.Minute))
	}
	testkit.PutFile(t, filepath.Join(b.jobsDir, "jobs.lua"), svcStopTimeout("1s"))
	reload(t, d)
	waitJob(t, d, "svc", "stopped", func(js JobStatus) bool { return js.State == "stopped" })
	if runs := runsOf(t, d, "svc"); len(runs) != 1 || runs[0].ID != svc.Run || runs[0].Reason != store.ReasonKilled {
		t.Errorf("svc's runs: %+v, want its one run killed after stop_timeout", runs)
	}
}

// TestUnitsTimeoutEdited: a running job's timeout edited moves its unit's
// own bound too (set for while no daemon watches), which would otherwise
// end the run at the old limit.
func TestUnitsTimeoutEdited(t *testing.T) {
	t.Parallel()
	b := newUnitsBox(t, `job "train" { cmd = { "/bin/sleep", "1000" }, timeout = "5m", stop_timeout = "10s" }`)
	d, _ := b.start()
	train := waitJob(t, d, "train", "running", func(js JobStatus) bool { return js.State == "running" })
	unit := units.Name("train", train.Run)
	if got := b.manager.Props(unit)["RuntimeMaxUSec"]; got != uint64((5*time.Minute + 10*time.Second + time.Minute).Microseconds()) {
		t.Fatalf("its unit's bound at its start: %v", got)
	}
	testkit.PutFile(t, filepath.Join(b.jobsDir, "jobs.lua"), `job "train" { cmd = { "/bin/sleep", "1000" }, timeout = "2h", stop_timeout = "10s" }`)
	reload(t, d)
	want := uint64((2*time.Hour + 10*time.Second + time.Minute).Microseconds())
	testkit.WaitFor(t, 20*time.Second, "its unit's bound moved to the new timeout", func() bool {
		return b.manager.Props(unit)["RuntimeMaxUSec"] == want
	})
	if js, _ := d.jobStatus("train"); js.Run != train.Run {
		t.Errorf("train's run %d, want %d going on", js.Run, train.Run)
	}
}

// TestUnitsStopUnderWayAtCrash: a daemon killed while a person's stop was
// under way left the job recorded as resting stopped (life.recorded); the
// next one finds its unit still running, and sees the stop through rather
// than taking the run back.
func TestUnitsStopUnderWayAtCrash(t *testing.T) {
	t.Parallel()
	b := newUnitsBox(t, `job "svc" { cmd = { "/bin/sleep", "1000" }, restart = "always" }`)
	d, stop := b.start()
	svc := waitJob(t, d, "svc", "running", func(js JobStatus) bool { return js.State == "running" })
	stop() // its unit goes on
	b.stoppingAtCrash("svc", svc.Run, time.Time{}, false)

	d, _ = b.start()
	waitJob(t, d, "svc", "stopped", func(js JobStatus) bool { return js.State == "stopped" })
	testkit.WaitFor(t, 20*time.Second, "svc's run recorded as over", func() bool {
		runs := runsOf(t, d, "svc")
		return len(runs) == 1 && !runs[0].End.IsZero()
	})
	if b.manager.Active(units.Name("svc", svc.Run)) {
		t.Error("svc's unit still runs")
	}
	if js, _ := d.jobStatus("svc"); js.Run != 0 {
		t.Errorf("svc after the restart: %+v, want stopped, no run", js)
	}
}

// TestRedeclaredWhileStopping: a job removed while its run takes a while to
// stop, then declared again, starts its new run only once the old one has
// ended: a job never has two runs, nor a daemon two open runs of one job.
func TestRedeclaredWhileStopping(t *testing.T) {
	t.Parallel()
	const x = `job "x" { cmd = { "/bin/sleep", "1000" }, stop_timeout = "1h" }`
	b := newUnitsBox(t, x+"\n"+`job "other" { cmd = { "/bin/sleep", "1000" } }`)
	d, _ := b.start()
	first := waitJob(t, d, "x", "running", func(js JobStatus) bool { return js.State == "running" })
	reload := func(src string) {
		t.Helper()
		testkit.PutFile(t, filepath.Join(b.jobsDir, "jobs.lua"), src)
		if _, err := d.Reload(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	reload(`job "other" { cmd = { "/bin/sleep", "1000" } }`) // x removed: SIGTERM, which the fake ignores
	reload(x + "\n" + `job "other" { cmd = { "/bin/sleep", "1000" } }`)
	// The first run ends: the new x starts, not before.
	b.manager.End(units.Name("x", first.Run), "signal", unitstest.CLDKilled, int32(syscall.SIGTERM))
	again := waitJob(t, d, "x", "running again", func(js JobStatus) bool { return js.State == "running" && js.Run != first.Run })
	runs := runsOf(t, d, "x") // newest first
	if len(runs) != 2 || runs[1].Reason == 0 || runs[0].Start.Before(runs[1].End) {
		t.Errorf("x's runs: %+v, want run %d to start once the first had ended", runs, again.Run)
	}
}

// TestUnitsStopResumedAsBegun: a person's stop under way when the daemon
// went away is seen through by the next one as it was begun (trial AE: a
// fixed SIGTERM, and SIGKILL 10 s later, cut a 60 s checkpoint short): the
// job is shown stopping, holding its core, its stop_signal is not sent
// again, its SIGKILL comes when the stop_timeout from the stop's start is
// over, and its run's end says why it was stopped.
func TestUnitsStopResumedAsBegun(t *testing.T) {
	t.Parallel()
	b := newUnitsBox(t, `job "svc" { cmd = { "/bin/sleep", "1000" }, cpus = 1, stop_signal = "SIGINT", stop_timeout = "5s" }`)
	d, stop := b.start()
	svc := waitJob(t, d, "svc", "running", func(js JobStatus) bool { return js.State == "running" })
	stop() // its unit goes on
	// Its SIGINT sent 2 s ago.
	b.stoppingAtCrash("svc", svc.Run, time.Now().Add(-2*time.Second), true)
	unit := units.Name("svc", svc.Run)
	sent := len(b.manager.Killed())

	d, _ = b.start()
	js := waitJob(t, d, "svc", "stopping", func(js JobStatus) bool { return js.State != "" })
	if js.State != "stopping" || js.Run != svc.Run || js.CPUs != 1 ||
		js.Why != "stopped on request (berth stop); SIGINT sent by the daemon before this one" ||
		js.KillAt == nil || js.KillAt.After(time.Now().Add(3*time.Second)) {
		t.Errorf("svc in the next daemon: %+v, want stopping its run, on its core, SIGKILL in what is left of 5s", js)
	}
	waitJob(t, d, "svc", "stopped", func(js JobStatus) bool { return js.State == "stopped" })
	if got := b.manager.Killed()[sent:]; !slices.Equal(got, []string{unit + " " + syscall.SIGKILL.String()}) {
		t.Errorf("signals to its unit in the next daemon: %v, want its SIGKILL alone (its SIGINT was sent)", got)
	}
	runs := runsOf(t, d, "svc")
	if len(runs) != 1 || runs[0].Reason != store.ReasonKilled ||
		runs[0].Cause != "stopped on request (berth stop); "+seenThroughCause || runs[0].Signal != "SIGKILL" {
		t.Errorf("svc's runs: %+v, want its one run killed after stop_timeout, saying why it was stopped, and by SIGKILL", runs)
	}
}

// TestUnitsStopResumedThenDisabled: a person's stop under way at a crash,
// the job's file disabling it meanwhile: the next daemon sees the stop
// through and the job rests disabled, the person's stop beneath, so that
// enabled again it rests stopped (the review: it ran).
func TestUnitsStopResumedThenDisabled(t *testing.T) {
	t.Parallel()
	src := func(extra string) string {
		return `job "svc" { cmd = { "/bin/sleep", "1000" }, cpus = 1, stop_timeout = "2s"` + extra + ` }`
	}
	b := newUnitsBox(t, src(""))
	d, stop := b.start()
	svc := waitJob(t, d, "svc", "running", func(js JobStatus) bool { return js.State == "running" })
	stop()
	b.stoppingAtCrash("svc", svc.Run, time.Now().Add(-time.Second), true)
	testkit.PutFile(t, filepath.Join(b.jobsDir, "jobs.lua"), src(", enabled = false"))
	d, _ = b.start()
	waitJob(t, d, "svc", "disabled", func(js JobStatus) bool { return js.State == "disabled" })
	testkit.PutFile(t, filepath.Join(b.jobsDir, "jobs.lua"), src(""))
	reload(t, d)
	if js := waitJob(t, d, "svc", "enabled again", func(js JobStatus) bool { return js.State != "disabled" }); js.State != "stopped" {
		t.Errorf("stopped by a person, disabled, enabled: %s, want stopped", js.State)
	}
	if runs := runsOf(t, d, "svc"); len(runs) != 1 {
		t.Errorf("svc's runs: %+v, want its one run", runs)
	}
}

// TestUnitsLogsOfNoSuchRun: under journald, berth logs --run N of a run a
// job never had says there is no such run, also for a job none of whose
// lines the journal can be asked for (its user unknown, no unit on
// record), which answered nothing (the last review).
func TestUnitsLogsOfNoSuchRun(t *testing.T) {
	t.Parallel()
	b := newUnitsBox(t, `job "ghost" { cmd = { "/bin/true" }, user = "berth-no-such-user" }`)
	b.tune = func(cfg *Config) { cfg.JournalSocket = filepath.Join(b.stateDir, "no-journal") }
	d, _ := b.start()
	<-d.loaded
	waitJob(t, d, "ghost", "declared", func(JobStatus) bool { return true })
	if m := d.journalMatches("ghost", "", false); len(m) != 0 {
		t.Fatalf("the journal is asked %v for a job whose user is unknown and that never ran", m)
	}
	r := httptest.NewRequest("GET", "/v1/jobs/ghost/logs?run=999", nil)
	r = r.WithContext(context.WithValue(r.Context(), peerKey{}, ctlsock.Peer{Ucred: unix.Ucred{Uid: 0}}))
	r.SetPathValue("name", "ghost")
	w := httptest.NewRecorder()
	d.serveLogs(w, r)
	if w.Code != http.StatusNotFound || !strings.Contains(w.Body.String(), CodeNoSuchRun) {
		t.Errorf("logs of run 999: %d %s, want 404 %s", w.Code, w.Body.String(), CodeNoSuchRun)
	}
}
