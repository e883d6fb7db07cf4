package supervisor

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"golang.org/x/sys/unix"

	"github.com/berthd/berth/supervisor/clock"
	"github.com/berthd/berth/supervisor/ctlsock"
	"github.com/berthd/berth/supervisor/store"
	"github.com/berthd/berth/supervisor/testkit"
)

// then merges two reloads' results as one.
func TestReloadResultThen(t *testing.T) {
	t.Parallel()
	earlier := ReloadResult{Files: 2, Added: []string{"a", "b"}, Changed: []string{"c", "d"}, Removed: []string{"e", "f"}, Errors: []string{"old"}}
	next := ReloadResult{Files: 3, Added: []string{"e", "g"}, Changed: []string{"a", "h"}, Removed: []string{"b", "d"}, Errors: []string{"new"}}
	got := earlier.then(next)
	want := ReloadResult{Files: 3,
		Added:   []string{"a", "g"},      // b added, then removed: neither
		Changed: []string{"c", "e", "h"}, // e removed, then added again
		Removed: []string{"d", "f"},      // d changed, then removed
		Errors:  []string{"new"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got  %+v\nwant %+v", got, want)
	}
	if got := (&ReloadResult{}).then(ReloadResult{Files: 1}); got.Added != nil || got.Changed != nil || got.Removed != nil {
		t.Errorf("nothing then nothing: %+v", got)
	}
}

// TestReloadAfterTheWatcher: a berth reload after an edit the daemon read
// as it was saved changed nothing, and says what the reload that read it
// changed, and when (trial AH: "nothing changed" left the person unsure
// the edit was taken).
func TestReloadAfterTheWatcher(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC))
	d, jobsDir := runDaemon(t, `job "prep" { cmd = "sleep 600", cpus = 0 }`, func(cfg *Config) { cfg.Clock = clk })
	waitJob(t, d, "prep", "running", func(js JobStatus) bool { return js.State == "running" })
	if res := reload(t, d); res.Earlier != nil {
		t.Errorf("a reload of nothing, nothing changed since the start: earlier %+v", res.Earlier)
	}
	clk.Advance(time.Minute)
	edited := clk.Now()
	testkit.PutFile(t, filepath.Join(jobsDir, "jobs.lua"), `job "prep" { cmd = "sleep 601", cpus = 0 }`)
	// The watcher may have read it first, or this reload does: either
	// way the second finds nothing new, and says what the change was.
	if res := reload(t, d); !slices.Equal(res.Changed, []string{"prep"}) && (res.Earlier == nil || !slices.Equal(res.Earlier.Changed, []string{"prep"})) {
		t.Errorf("the reload after the edit: %+v", res)
	}
	clk.Advance(time.Minute)
	res := reload(t, d)
	if len(res.Changed) != 0 || res.Earlier == nil || !slices.Equal(res.Earlier.Changed, []string{"prep"}) ||
		len(res.Earlier.Added)+len(res.Earlier.Removed) != 0 || !res.Earlier.At.Equal(edited) {
		t.Errorf("a reload after the edit was taken: %+v, earlier %+v", res, res.Earlier)
	}
	// An edit of long ago is not said: it may be anyone's, and nothing to
	// do with the file saved now.
	clk.Advance(2 * time.Minute)
	if res := reload(t, d); res.Earlier != nil {
		t.Errorf("a reload 3 minutes after the edit: earlier %+v", res.Earlier)
	}
}

// A reload asked for while another is being evaluated answers what both
// did: the one under way applied its files after the call, and a person
// who saved a file and ran berth reload is told it was added, not that
// nothing changed.
func TestReloadAskedDuringAnother(t *testing.T) {
	d, jobsDir := runDaemon(t, "", func(cfg *Config) { cfg.Evaluator.Budget = time.Minute })
	ctx := context.Background()
	// Past the daemon's first reload, which would take the file in.
	if _, err := d.Reload(ctx); err != nil {
		t.Fatal(err)
	}
	// Long enough to evaluate that the second call comes while it is.
	slow := `local n = 0
for i = 1, 3e6 do n = n + i end
job "slow" { cmd = "true" }
`
	if err := writeFile(filepath.Join(jobsDir, "slow.lua"), []byte(slow), 0o600); err != nil {
		t.Fatal(err)
	}
	evaluating := false
	if _, err := d.call(ctx, func() any {
		d.reload(false, true)
		evaluating = d.reloading != nil
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if !evaluating {
		t.Fatal("the first reload is not being evaluated")
	}
	res, err := d.Reload(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(res.Added, []string{"slow"}) {
		t.Errorf("berth reload during another: added %v, want [slow]; %+v", res.Added, res)
	}
	// What it did not do is [], as any reload's answer has it.
	if res.Changed == nil || res.Removed == nil || res.Errors == nil || res.Problems == nil {
		t.Errorf("berth reload during another: a list is nil: %+v", res)
	}
}

// TestJobsDirMissing: a jobs directory that does not exist (a typo in
// --jobs) is a problem berth status shows, until it is made.
func TestJobsDirMissing(t *testing.T) {
	t.Parallel()
	var missing string
	d, _ := runDaemon(t, "", func(cfg *Config) {
		missing = filepath.Join(filepath.Dir(cfg.JobsDir), "jobs.d-typo")
		cfg.JobsDir = missing
	})
	if _, err := d.Reload(t.Context()); err != nil {
		t.Fatal(err)
	}
	if ps := d.Status().Problems; len(ps) != 1 || ps[0].Code != ProblemDirMissing || ps[0].File != missing || ps[0].Text != msgJobsDirMissing(missing, false) {
		t.Fatalf("problems with no jobs directory: %+v", ps)
	}
	if line := d.statusLine(); !strings.HasSuffix(line, "; no jobs directory") {
		t.Errorf("status line with no jobs directory: %q", line)
	}
	if err := os.Mkdir(missing, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := writeFile(filepath.Join(missing, "a.lua"), []byte(`job "a" { cmd = "true", cpus = 0 }`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Reload(t.Context()); err != nil {
		t.Fatal(err)
	}
	waitJob(t, d, "a", "declared", func(JobStatus) bool { return true })
	if ps := d.Status().Problems; len(ps) != 0 {
		t.Errorf("problems once the directory is there: %+v", ps)
	}
}

// TestEditedWaiterKeepsItsPlace: a waiting job edited to ask for another
// size is queued again with it, and keeps its place in line: the jobs that
// came after it are still behind it.
func TestEditedWaiterKeepsItsPlace(t *testing.T) {
	t.Parallel()
	d, dir := runDaemon(t, `job "holder" { cmd = "sleep 1000", cpus = 2 }`, nil)
	waitJob(t, d, "holder", "running", func(js JobStatus) bool { return js.State == "running" })
	write := func(file, src string) {
		t.Helper()
		testkit.PutFile(t, filepath.Join(dir, file), src)
		if _, err := d.Reload(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	write("w0.lua", `job "first" { cmd = "true", cpus = 1 }`)
	write("w1.lua", `job "second" { cmd = "true", cpus = 1 }`)
	order := func() string {
		var out []string
		for _, w := range d.placer.Waiting() {
			out = append(out, w.Holder)
		}
		return strings.Join(out, " ")
	}
	testkit.WaitFor(t, 20*time.Second, "both to wait in the placer's queue", func() bool {
		return len(d.placer.Waiting()) == 2
	})
	if got := order(); got != "first second" {
		t.Fatalf("queue before the edit: %s", got)
	}
	write("w0.lua", `job "first" { cmd = "true", cpus = 1, ram = "64M" }`)
	testkit.WaitFor(t, 20*time.Second, "first to be queued again with its new size", func() bool {
		for _, w := range d.placer.Waiting() {
			if w.Holder == "first" && w.RAMBytes == 64<<20 {
				return true
			}
		}
		return false
	})
	if got := order(); got != "first second" {
		t.Errorf("queue after first's edit: %s, want first still ahead of second", got)
	}
}

// TestEditedHeadKeepsItsReservation: the head of the queue edited (its
// priority here) leaves the queue and comes back in one step: a job behind
// it is not placed on what its reservation held back in between.
func TestEditedHeadKeepsItsReservation(t *testing.T) {
	t.Parallel()
	d, dir := runDaemon(t, `job "hog" { cmd = "sleep 1000", cpus = 1, gpus = 3 }`, func(cfg *Config) {
		cfg.Machine.GPUs, cfg.Machine.CardsSeen = []string{"0", "1", "2", "3"}, 4
	})
	waitJob(t, d, "hog", "running", func(js JobStatus) bool { return js.State == "running" })
	write := func(file, src string) {
		t.Helper()
		testkit.PutFile(t, filepath.Join(dir, file), src)
		reload(t, d)
	}
	write("head.lua", `job "head" { cmd = "true", cpus = 1, gpus = 4 }`)
	write("later.lua", `job "later" { cmd = "sleep 1000", cpus = 1, gpus = 1 }`)
	testkit.WaitFor(t, 20*time.Second, "head and later in the queue", func() bool { return len(d.placer.Waiting()) == 2 })
	for round := range 5 {
		write("head.lua", fmt.Sprintf(`job "head" { cmd = "true", cpus = 1, gpus = 4, priority = %d }`, round+1))
		testkit.WaitFor(t, 20*time.Second, "head queued again with its new priority", func() bool {
			w := d.placer.Waiting()
			return len(w) > 0 && w[0].Holder == "head" && w[0].Priority == round+1
		})
		if w := d.placer.Waiting(); len(w) != 2 || w[1].Holder != "later" {
			t.Fatalf("after head's edit %d, the queue is %+v: later took a card head's reservation held back", round+1, w)
		}
	}
}

// TestWhyNamesTheFirstInLine: a job that would fit, but waits because the
// first in line holds its place, names that job.
func TestWhyNamesTheFirstInLine(t *testing.T) {
	t.Parallel()
	d, dir := runDaemon(t, `job "holder" { cmd = "sleep 1000", cpus = 1 }`, nil)
	waitJob(t, d, "holder", "running", func(js JobStatus) bool { return js.State == "running" })
	for i, src := range []string{
		`job "big" { cmd = "true", cpus = 2 }`,
		`job "small" { cmd = "true", cpus = 1 }`,
	} {
		if err := writeFile(filepath.Join(dir, fmt.Sprintf("w%d.lua", i)), []byte(src), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := d.Reload(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	js := waitJob(t, d, "small", "waiting", func(js JobStatus) bool { return js.State == "waiting" })
	if want := "queued behind a job ahead of it; " + msgFirstInLine("big"); js.Why != want {
		t.Errorf("small waits: %q, want %q", js.Why, want)
	}
	if js := waitJob(t, d, "big", "waiting", func(js JobStatus) bool { return js.State == "waiting" }); strings.Contains(js.Why, "first in line") {
		t.Errorf("big, itself first in line: %q", js.Why)
	}
}

// TestQuotaOfNoAccount: a quota that names no account is shown as a
// problem of its file and line, and the file stays in force.
func TestQuotaOfNoAccount(t *testing.T) {
	t.Parallel()
	d, _ := runDaemon(t, `quota "nobody-here" { cpus = 1 }
job "fine" { cmd = "sleep 100", cpus = 0 }`, nil)
	waitJob(t, d, "fine", "running", func(js JobStatus) bool { return js.State == "running" })
	ps := d.Status().Problems
	if len(ps) != 1 || ps[0].Code != ProblemCredentials || ps[0].Line != 1 || !strings.Contains(ps[0].Text, `quota "nobody-here" names no account`) {
		t.Errorf("problems: %+v", ps)
	}
	// systemd's status line counts its file, as berth status does.
	if line := d.statusLine(); !strings.HasSuffix(line, "; 1 file with errors") {
		t.Errorf("the status line: %q", line)
	}
}

// TestJobProblemsShown: a job's mistakes that leave its file in force (a
// cycle, a job in both after and after_any, a flavor not declared) are
// shown among the problems, with file and line, as a file's are.
func TestJobProblemsShown(t *testing.T) {
	t.Parallel()
	d, _ := runDaemon(t, `job "a" { cmd = "true", after = "b" }
job "b" { cmd = "true", after = "a" }
job "prep" { cmd = "true" }
job "both" { cmd = "true", after = "prep", after_any = "prep" }
job "sized" { cmd = "true", flavor = "nosuch" }`, nil)
	waitJob(t, d, "sized", "invalid", func(js JobStatus) bool { return js.State == "invalid" })
	codes := map[string][]int{}
	for _, p := range d.Status().Problems {
		codes[p.Code] = append(codes[p.Code], p.Line)
	}
	if want := map[string][]int{"cycle": {1, 2}, "conflict": {4}, "unknown_flavor": {5}}; !reflect.DeepEqual(codes, want) {
		t.Errorf("problems by code and line: %v, want %v", codes, want)
	}
	// The file is in force, its jobs listed: no refused file may declare
	// a name asked for that no job has. A name near one is told it.
	if got := d.msgNoSuch(caller{}, "nosuch"); got != msgNoSuchJob("nosuch", "", 0) {
		t.Errorf("no such job, the file with errors in force: %q", got)
	}
	if got := d.msgNoSuch(caller{}, "perp"); got != msgNoSuchJob("perp", "prep", 0) {
		t.Errorf("a name one swap from prep: %q", got)
	}
	// An array's index written otherwise, or after a typo of its name
	// (trial AI).
	testkit.PutFile(t, filepath.Join(d.cfg.JobsDir, "sweep.lua"), `job "sweep" { cmd = "true", array = 4, enabled = false }`)
	reload(t, d)
	for _, tt := range []struct{ name, want string }{{"sweep[01]", "sweep[1]"}, {"swep[2]", "sweep[2]"}, {"swep[99]", ""}} {
		if got := d.msgNoSuch(caller{}, tt.name); got != msgNoSuchJob(tt.name, tt.want, 0) {
			t.Errorf("%s: %q, want it told %s", tt.name, got, tt.want)
		}
	}
	// A file whose latest version is refused may declare it.
	testkit.PutFile(t, filepath.Join(d.cfg.JobsDir, "broken.lua"), `job "new" { cmd = "true", cpu = 1 }`)
	reload(t, d)
	if got := d.msgNoSuch(caller{}, "new"); got != msgNoSuchJob("new", "", 1) {
		t.Errorf("no such job, a refused file: %q", got)
	}
}

// TestBornTogetherQueueInOrder: jobs that arrive in one reload are placed
// in the queue's order, priority first, not in the order their goroutines
// happened to reach the placer.
func TestBornTogetherQueueInOrder(t *testing.T) {
	t.Parallel()
	for range 5 {
		d, _ := runDaemon(t, `job "lo" { cmd = "sleep 600", cpus = 2 }
job "mid" { cmd = "sleep 600", cpus = 2, priority = 5 }
job "hi" { cmd = "sleep 600", cpus = 2, priority = 10 }`, nil)
		waitJob(t, d, "hi", "running", func(js JobStatus) bool { return js.State == "running" })
		for _, name := range []string{"lo", "mid"} {
			if js, _ := d.jobStatus(name); js.State != "waiting" {
				t.Errorf("%s is %s, want waiting behind hi", name, js.State)
			}
		}
	}
}

// TestBornTogetherInFileOrder: jobs of one priority declared together
// start, and wait, in the order their file declares them (not by name, nor
// the order their goroutines reached the placer in), also those a loop
// declares on one line.
func TestBornTogetherInFileOrder(t *testing.T) {
	t.Parallel()
	for range 5 {
		d, _ := runDaemon(t, `job "zeta" { cmd = "sleep 600", cpus = 2 }
job "alpha" { cmd = "sleep 600", cpus = 2 }
job "mu" { cmd = "sleep 600", cpus = 2 }
for i = 1, 11 do job ("j" .. i) { cmd = "sleep 600", cpus = 2 } end`, nil)
		waitJob(t, d, "zeta", "running", func(js JobStatus) bool { return js.State == "running" })
		var queue []string
		testkit.WaitFor(t, 20*time.Second, "the others to wait", func() bool {
			queue = queue[:0]
			for _, w := range d.placer.Waiting() {
				queue = append(queue, w.Holder)
			}
			return len(queue) == 13
		})
		if got, want := fmt.Sprint(queue), "[alpha mu j1 j2 j3 j4 j5 j6 j7 j8 j9 j10 j11]"; got != want {
			t.Errorf("the queue is %s, want %s, as declared", got, want)
		}
	}
}

// writeAndReload is a function that writes job file name of jobsDir and
// has d reload.
func writeAndReload(t *testing.T, d *Daemon, jobsDir string) func(name, src string) {
	return func(name, src string) {
		t.Helper()
		testkit.PutFile(t, filepath.Join(jobsDir, name), src)
		reload(t, d)
	}
}

// TestInvalidRunGoesOn: a running job whose flavor is removed is not
// killed for it: its run goes on, saying why it will not run again, and
// the job rests invalid once the run ends, whatever its restart policy;
// the flavor back, it runs again.
func TestInvalidRunGoesOn(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	mark := filepath.Join(dir, "end")
	d, jobsDir := runDaemon(t, "", nil)
	write := writeAndReload(t, d, jobsDir)
	write("flavors.lua", `flavor "small" { cpus = 1 }`)
	write("train.lua", fmt.Sprintf(`job "train" { cmd = "while [ ! -e %s ]; do sleep 0.05; done; echo ran >> %s", flavor = "small", restart = "always" }`,
		mark, filepath.Join(dir, "runs")))
	running := waitJob(t, d, "train", "running", func(js JobStatus) bool { return js.State == "running" })

	write("flavors.lua", `-- small went away`)
	js := waitJob(t, d, "train", "running on, saying why", func(js JobStatus) bool { return js.Why != "" })
	if js.State != "running" || js.Run != running.Run || !strings.HasPrefix(js.Why, runsOn) || !strings.Contains(js.Why, `flavor "small" does not exist`) {
		t.Fatalf("after its flavor went: %s, run %d (was %d), why %q", js.State, js.Run, running.Run, js.Why)
	}
	if err := writeFile(mark, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	js = waitJob(t, d, "train", "invalid once its run ended", func(js JobStatus) bool { return js.State != "running" })
	if js.State != "invalid" {
		t.Errorf("once its run ended: %s, want invalid (its restart policy does not apply)", js.State)
	}
	if runs, _ := d.store.Runs("train", 0); len(runs) != 1 || runs[0].Reason != store.ReasonExited {
		t.Errorf("its runs: %+v, want the one, exited on its own", runs)
	}

	if err := os.Remove(mark); err != nil {
		t.Fatal(err)
	}
	write("flavors.lua", `flavor "small" { cpus = 1 }`)
	running = waitJob(t, d, "train", "running again with its flavor back", func(js JobStatus) bool { return js.State == "running" && js.Run != running.Run })

	// Its flavor made larger than the machine: the same, said at once,
	// not when the run ends.
	write("flavors.lua", `flavor "small" { cpus = 64 }`)
	js = waitJob(t, d, "train", "running on, saying it will not fit", func(js JobStatus) bool { return js.Why != "" })
	if js.State != "running" || js.Run != running.Run || !strings.HasPrefix(js.Why, runsOn) || !strings.Contains(js.Why, "asks for 64 cores") {
		t.Fatalf("after its flavor grew past the machine: %s, run %d (was %d), why %q", js.State, js.Run, running.Run, js.Why)
	}
	if err := writeFile(mark, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	waitJob(t, d, "train", "unplaceable once its run ended", func(js JobStatus) bool { return js.State == "unplaceable" })

	// The job's own size edited past the machine, its process changed
	// with it (its OMP_NUM_THREADS): the same, whatever its on_change
	// (trial AR: a typo, gpus = 3 for 2, stopped the run); and a restart,
	// which would stop the run and start nothing, is refused.
	if err := os.Remove(mark); err != nil {
		t.Fatal(err)
	}
	write("flavors.lua", `flavor "small" { cpus = 1 }`)
	running = waitJob(t, d, "train", "running again with its flavor fine", func(js JobStatus) bool { return js.State == "running" && js.Run != running.Run })
	write("train.lua", fmt.Sprintf(`job "train" { cmd = "while [ ! -e %s ]; do sleep 0.05; done; echo ran >> %s", cpus = 64, restart = "always" }`,
		mark, filepath.Join(dir, "runs")))
	js = waitJob(t, d, "train", "running on, saying it will not fit", func(js JobStatus) bool { return js.Why != "" })
	if js.State != "running" || js.Run != running.Run || !strings.HasPrefix(js.Why, runsOn) || !strings.Contains(js.Why, "asks for 64 cores") {
		t.Fatalf("after its own size grew past the machine: %s, run %d (was %d), why %q", js.State, js.Run, running.Run, js.Why)
	}
	if code, body := as(t, d, "root", "POST", jobPath("train")+"/restart"); code != http.StatusConflict || !strings.Contains(body, "asks for 64 cores") {
		t.Errorf("a restart of a run that will not run again: %d %s, want it refused", code, body)
	}
	if js, _ := d.jobStatus("train"); js.State != "running" || js.Run != running.Run {
		t.Errorf("after the restart refused: %s, run %d, want run %d running on", js.State, js.Run, running.Run)
	}
	// Stopped, it is not started again (it would be found unplaceable at
	// once), and the refusal no longer says its run goes on (trial AS).
	if code, body := as(t, d, "root", "POST", jobPath("train")+"/stop"); code != http.StatusOK {
		t.Fatalf("stop: %d %s", code, body)
	}
	waitJob(t, d, "train", "stopped", func(js JobStatus) bool { return js.State == "stopped" })
	if code, body := as(t, d, "root", "POST", jobPath("train")+"/start"); code != http.StatusConflict || !strings.Contains(body, "asks for 64 cores") || strings.Contains(body, "goes on") {
		t.Errorf("a start of it stopped: %d %s, want it refused, as it fits no machine", code, body)
	}
	if js, _ := d.jobStatus("train"); js.State != "stopped" {
		t.Errorf("after the start refused: %s, want stopped", js.State)
	}
}

// TestOutdatedRunRestartedOnceItCan: a run of an earlier definition than
// the job's is restarted once the job can run again, though the edit that
// changed the process came while it could not (its new flavor not
// declared yet), or while the run was let finish (on_change = "finish",
// then "restart"); one edited back to its run's definition goes on.
func TestOutdatedRunRestartedOnceItCan(t *testing.T) {
	t.Parallel()
	d, jobsDir := runDaemon(t, "", nil)
	write := writeAndReload(t, d, jobsDir)
	write("flavors.lua", `flavor "small" { cpus = 1 }`)
	write("train.lua", `job "train" { cmd = "sleep 600", flavor = "small", restart = "always" }`)
	running := waitJob(t, d, "train", "running", func(js JobStatus) bool { return js.State == "running" })
	write("train.lua", `job "train" { cmd = "sleep 600", flavor = "large", restart = "always" }`)
	js := waitJob(t, d, "train", "running on, saying why", func(js JobStatus) bool { return js.Why != "" })
	if js.State != "running" || js.Run != running.Run {
		t.Fatalf("its flavor unknown: %s, run %d (was %d)", js.State, js.Run, running.Run)
	}
	// Edited back while it could not run: its run is of the definition
	// in force again, and goes on.
	write("train.lua", `job "train" { cmd = "sleep 600", flavor = "small", restart = "always" }`)
	waitJob(t, d, "train", "fine again", func(js JobStatus) bool { return js.State == "running" && js.Why == "" })
	if js, _ := d.jobStatus("train"); js.Run != running.Run {
		t.Errorf("edited back: run %d, want run %d going on", js.Run, running.Run)
	}
	write("train.lua", `job "train" { cmd = "sleep 600", flavor = "large", restart = "always" }`)
	waitJob(t, d, "train", "running on, saying why", func(js JobStatus) bool { return js.Why != "" })
	write("flavors.lua", `flavor "small" { cpus = 1 }`+"\n"+`flavor "large" { cpus = 2 }`)
	js = waitJob(t, d, "train", "running its new definition", func(js JobStatus) bool { return js.State == "running" && js.Run != running.Run })
	if js.CPUs != 2 {
		t.Errorf("its new run has %d cores, want the 2 of its new flavor", js.CPUs)
	}

	write("serve.lua", `job "serve" { cmd = "sleep 600", cpus = 0, on_change = "finish" }`)
	running = waitJob(t, d, "serve", "running", func(js JobStatus) bool { return js.State == "running" })
	write("serve.lua", `job "serve" { cmd = "sleep 601", cpus = 0, on_change = "finish" }`)
	write("serve.lua", `job "serve" { cmd = "sleep 601", cpus = 0, on_change = "restart" }`)
	js = waitJob(t, d, "serve", "running its new definition", func(js JobStatus) bool { return js.State == "running" && js.Run != running.Run })
	if runs, _ := d.store.Runs("serve", 0); len(runs) != 2 || runs[1].ID != running.Run || runs[1].Reason != store.ReasonStopped {
		t.Errorf("its runs: %+v, want its first stopped for the second, run %d", runs, js.Run)
	}
}

// TestRestartKeepsPriority: what a running job gives back as it restarts
// (berth restart, an edit of its command) goes to it again, not to a job
// of lower priority that waited meanwhile.
func TestRestartKeepsPriority(t *testing.T) {
	t.Parallel()
	lo := `job "lo" { cmd = "sleep 600", cpus = 2, priority = 0 }` + "\n"
	d, dir := runDaemon(t, `job "hi" { cmd = "sleep 600", cpus = 2, priority = 10 }`+"\n"+lo, nil)
	hi := waitJob(t, d, "hi", "running", func(js JobStatus) bool { return js.State == "running" })
	waitJob(t, d, "lo", "waiting", func(js JobStatus) bool { return js.State == "waiting" })
	// One of the two runs on the machine's two cores once hi restarted.
	runningAgain := func(after string) {
		t.Helper()
		testkit.WaitFor(t, 20*time.Second, "hi or lo running "+after, func() bool {
			js, _ := d.jobStatus("hi")
			other, _ := d.jobStatus("lo")
			if js.State == "running" && js.Run != hi.Run || other.State == "running" {
				hi = js
				return true
			}
			return false
		})
		if js, _ := d.jobStatus("lo"); js.State != "waiting" {
			t.Errorf("%s, lo is %s, want waiting behind hi", after, js.State)
		}
	}
	if code, body := as(t, d, "root", "POST", jobPath("hi")+"/restart"); code != 200 {
		t.Fatalf("restart: %d %s", code, body)
	}
	runningAgain("after hi's restart")
	testkit.PutFile(t, filepath.Join(dir, "jobs.lua"), `job "hi" { cmd = "sleep 601", cpus = 2, priority = 10 }`+"\n"+lo)
	reload(t, d)
	runningAgain("after hi's edit")
}

// TestJobsDirGoneKeepsJobs: a jobs directory gone a moment (an rm -rf
// and a git clone, a remount) is a problem, not the removal of every
// file: what was in force stays in force, running on, until it is back
// and has settled (a clone makes it before its files); then a file that
// did not come back with it is gone.
func TestJobsDirGoneKeepsJobs(t *testing.T) {
	t.Parallel()
	d, dir := runDaemon(t, `job "svc" { cmd = "sleep 600", cpus = 0, restart = "always" }`, nil)
	testkit.PutFile(t, filepath.Join(dir, "other.lua"), `job "other" { cmd = "sleep 600", cpus = 0 }`)
	reload(t, d)
	svc := waitJob(t, d, "svc", "running", func(js JobStatus) bool { return js.State == "running" })
	waitJob(t, d, "other", "running", func(js JobStatus) bool { return js.State == "running" })
	away := dir + ".away"
	if err := os.Rename(dir, away); err != nil {
		t.Fatal(err)
	}
	reload(t, d)
	if ps := d.Status().Problems; len(ps) != 1 || ps[0].Code != ProblemDirMissing || ps[0].Text != msgJobsDirMissing(dir, true) {
		t.Errorf("problems with the directory gone: %+v", ps)
	}
	for _, name := range []string{"svc", "other"} {
		if js, _ := d.jobStatus(name); js.State != "running" {
			t.Errorf("%s with the directory gone: %s, want running on", name, js.State)
		}
	}
	if err := os.Remove(filepath.Join(away, "other.lua")); err != nil {
		t.Fatal(err)
	}
	// Back empty first, as a git clone makes it before its files.
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	reload(t, d)
	for _, name := range []string{"svc", "other"} {
		if js, _ := d.jobStatus(name); js.State != "running" {
			t.Errorf("%s with the directory back empty: %s, want running on", name, js.State)
		}
	}
	if err := os.Rename(filepath.Join(away, "jobs.lua"), filepath.Join(dir, "jobs.lua")); err != nil {
		t.Fatal(err)
	}
	reload(t, d)
	testkit.WaitFor(t, 20*time.Second, "other to go: its file did not come back", func() bool {
		_, there := d.jobStatus("other")
		return !there
	})
	if js, _ := d.jobStatus("svc"); js.State != "running" || js.Run != svc.Run {
		t.Errorf("svc with the directory back: %s, run %d; want its run %d going on", js.State, js.Run, svc.Run)
	}
	if ps := d.Status().Problems; len(ps) != 0 {
		t.Errorf("problems with the directory back: %+v", ps)
	}
}

// TestReloadSaysWhatCannotRun: a reload says at once, as berth check
// does, a job that fits no machine and one whose user does not exist,
// each with its file and line, but not of a disabled job; fixed, they are
// said no more.
func TestReloadSaysWhatCannotRun(t *testing.T) {
	t.Parallel()
	d, dir := runDaemon(t, "", nil)
	path := filepath.Join(dir, "jobs.lua")
	testkit.PutFile(t, path, `job "big" { cmd = "true", cpus = 64 }
job "who" { cmd = "true", cpus = 0, user = "no-such-user-berth" }
job "off" { cmd = "true", cpus = 64, user = "no-such-user-berth", enabled = false }
job "late" { cmd = "true", cpus = 0, after = "no-such-job" }`)
	res := reload(t, d)
	// Top to bottom, whatever kind of problem each is.
	lines := problemLines(res.Problems)
	if !slices.Equal(lines, []int{1, 2, 4}) {
		t.Errorf("problems on lines %v, want 1, 2, 4 in that order: %+v", lines, res.Problems)
	}
	codes := map[string]Problem{}
	for _, p := range res.Problems {
		codes[p.Code+" "+p.Job] = p
	}
	if p, ok := codes[ProblemUnplaceable+" big"]; !ok || p.File != path || p.Line != 1 || !strings.Contains(p.Text, "asks for 64 cores") {
		t.Errorf("a job that fits no machine: problems %+v", res.Problems)
	}
	if p, ok := codes[ProblemCredentials+" who"]; !ok || p.Line != 2 {
		t.Errorf("a job whose user does not exist: problems %+v", res.Problems)
	}
	if len(res.Errors) != 3 {
		t.Errorf("errors %q, want the three (a disabled job is not to run)", res.Errors)
	}
	waitJob(t, d, "off", "disabled", func(js JobStatus) bool { return js.State == "disabled" })
	testkit.PutFile(t, path, `job "big" { cmd = "true", cpus = 1 }`)
	if res := reload(t, d); len(res.Problems) != 0 {
		t.Errorf("fixed: problems %+v", res.Problems)
	}
}

// TestProblemOnTheFieldsLine: the problems found once a file has run
// (a user not there, a size no machine has) are said on the line of the
// field, where the job's table was written at its declaration.
func TestProblemOnTheFieldsLine(t *testing.T) {
	t.Parallel()
	d, dir := runDaemon(t, "", nil)
	testkit.PutFile(t, filepath.Join(dir, "jobs.lua"), "job \"a\" {\n  cmd = \"true\",\n  user = \"no-such-user-berth\",\n}\njob \"b\" {\n  cmd = \"true\",\n  cpus = 64,\n}\n")
	res := reload(t, d)
	lines := map[string]int{}
	for _, p := range res.Problems {
		lines[p.Code] = p.Line
	}
	if lines[ProblemCredentials] != 3 || lines[ProblemUnplaceable] != 7 {
		t.Errorf("problems %+v, want the user's on line 3 and the cores' on line 7", res.Problems)
	}
}

// TestReloadSaysEveryMistakeOfAFile: a file refused for one job's mistake
// has its other jobs' problems said too, as berth check says them, and the
// jobs of the version in force run on.
func TestReloadSaysEveryMistakeOfAFile(t *testing.T) {
	t.Parallel()
	d, dir := runDaemon(t, "", nil)
	path := filepath.Join(dir, "jobs.lua")
	testkit.PutFile(t, path, `job "keep" { cmd = "sleep 600", cpus = 0 }`)
	reload(t, d)
	waitJob(t, d, "keep", "running", func(js JobStatus) bool { return js.State == "running" })
	testkit.PutFile(t, path, `job "keep" { cmd = "sleep 600", cpus = 0 }
job "typo" { cmd = "true", gpu = 1 }
job "big" { cmd = "true", cpus = 64 }
job "lost" { cmd = "true", flavor = "nope" }
job "next" { cmd = "true", cpus = 0, after = "typo" }`)
	res := reload(t, d)
	lines := problemLines(res.Problems)
	if !slices.Equal(lines, []int{2, 3, 4}) {
		t.Errorf("problems on lines %v, want 2, 3 and 4 (not 5: typo is declared, with its own mistake): %+v", lines, res.Problems)
	}
	if js, _ := d.jobStatus("keep"); js.State != "running" {
		t.Errorf("keep: %s, want running on the version in force", js.State)
	}
	if _, ok := d.jobStatus("big"); ok {
		t.Error("a job of the refused version is in force")
	}
}

// TestRemovedWhileStopping: a job whose file is removed is shown stopping,
// and why, until its run has ended; declared again meanwhile, the new one
// is shown waiting for it, and runs once it has ended.
func TestRemovedWhileStopping(t *testing.T) {
	t.Parallel()
	d, dir := runDaemon(t, "", nil)
	path, free, trapped := filepath.Join(dir, "deaf.lua"), filepath.Join(t.TempDir(), "free"), filepath.Join(t.TempDir(), "trapped")
	src := `job "deaf" { cmd = { "sh", "-c", "trap '' TERM; touch ` + trapped + `; while [ ! -e ` + free + ` ]; do sleep 0.05; done" }, cpus = 1, stop_timeout = "1m" }`
	testkit.PutFile(t, path, src)
	reload(t, d)
	first := waitJob(t, d, "deaf", "running", func(js JobStatus) bool { return js.State == "running" })
	waitFiles(t, trapped)
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	reload(t, d)
	shown := func() (JobStatus, bool) {
		for _, js := range d.Status().Jobs {
			if js.Name == "deaf" {
				return js, true
			}
		}
		return JobStatus{}, false
	}
	var js JobStatus
	testkit.WaitFor(t, 20*time.Second, "deaf shown stopping", func() bool {
		var ok bool
		js, ok = shown()
		return ok && js.State == "stopping"
	})
	if js.Run != first.Run || !strings.HasPrefix(js.Why, "no job file declares it any more") {
		t.Errorf("removed, its run stopping: %+v", js)
	}
	// Shown, it is known to show, stop, start and the metrics too.
	if code, body := as(t, d, "root", "GET", jobPath("deaf")); code != 200 || !strings.Contains(body, `"state":"stopping"`) {
		t.Errorf("berth show of the removed job stopping: %d %s", code, body)
	}
	if code, body := as(t, d, "root", "POST", jobPath("deaf")+"/stop"); code != 200 || !strings.Contains(body, `"already":"stopping"`) {
		t.Errorf("berth stop of the removed job stopping: %d %s, want already stopping", code, body)
	}
	for _, verb := range []string{"start", "restart"} {
		if code, body := as(t, d, "root", "POST", jobPath("deaf")+"/"+verb); code != 409 || !strings.Contains(body, `"code":"removed"`) ||
			!strings.Contains(body, "declare it again") {
			t.Errorf("berth %s of the removed job stopping: %d %s, want it refused as removed", verb, code, body)
		}
	}
	srv := httptest.NewServer(d.meters.handler(d))
	defer srv.Close()
	if n, _ := scrapeMetrics(t, http.DefaultClient, srv.URL).value("berth_jobs", "state", "stopping"); n != 1 {
		t.Errorf("berth_jobs{state=stopping} %v, want 1 as status counts it", n)
	}
	testkit.PutFile(t, path, src)
	reload(t, d)
	if js, ok := shown(); !ok || js.State != "waiting" || js.Why != msgAfterRemoved {
		t.Errorf("declared again while the old run stops: shown %v, %+v", ok, js)
	}
	if err := writeFile(free, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	// Its run, once the old one has ended, sees free and ends at once.
	waitJob(t, d, "deaf", "its own run, done", func(js JobStatus) bool { return js.State == "done" && js.Run == 0 })
	if runs, err := d.store.Runs("deaf", 10); err != nil || len(runs) != 2 || runs[1].ID != first.Run || runs[1].Reason != store.ReasonStopped {
		t.Errorf("runs %+v (%v), want the old one stopped and one after it", runs, err)
	}
}

// TestStopTimeoutEditedReachesTheStop: a stop_timeout edited while the
// job is being stopped moves that stop's SIGKILL (trial AM: the edit
// waited for the next stop), later or sooner; one already over SIGKILLs
// now, and the run is recorded killed after its stop_timeout.
func TestStopTimeoutEditedReachesTheStop(t *testing.T) {
	t.Parallel()
	d, dir := runDaemon(t, "", nil)
	path, free, trapped := filepath.Join(dir, "deaf.lua"), filepath.Join(t.TempDir(), "free"), filepath.Join(t.TempDir(), "trapped")
	t.Cleanup(func() { _ = writeFile(free, nil, 0o600) }) // should the test fail with it stopping
	deaf := func(stopTimeout string) string {
		return `job "deaf" { cmd = { "sh", "-c", "trap '' TERM; touch ` + trapped + `; while [ ! -e ` + free + ` ]; do sleep 0.05; done" }, cpus = 1, stop_timeout = "` + stopTimeout + `" }`
	}
	testkit.PutFile(t, path, deaf("1h"))
	reload(t, d)
	first := waitJob(t, d, "deaf", "running", func(js JobStatus) bool { return js.State == "running" })
	waitFiles(t, trapped)
	if code, body := as(t, d, "root", "POST", jobPath("deaf")+"/stop"); code != 200 {
		t.Fatalf("berth stop deaf: %d %s", code, body)
	}
	stopping := waitJob(t, d, "deaf", "stopping", func(js JobStatus) bool { return js.State == "stopping" && js.KillAt != nil })
	began := stopping.KillAt.Add(-time.Hour)

	testkit.PutFile(t, path, deaf("2h"))
	// Said should the wait below time out (once in CI, under load).
	t.Logf("the edit to 2h: %+v", reload(t, d))
	js := waitJob(t, d, "deaf", "its SIGKILL moved later", func(js JobStatus) bool {
		return js.KillAt != nil && !js.KillAt.Before(began.Add(2*time.Hour-time.Second))
	})
	if js.State != "stopping" || js.Run != first.Run || js.KillAt.After(began.Add(2*time.Hour+time.Second)) {
		t.Errorf("stop_timeout 1h edited to 2h: %+v, want its SIGKILL 2h after the stop began (%v)", js, began.Add(2*time.Hour))
	}

	testkit.PutFile(t, path, deaf("1s"))
	reload(t, d)
	waitJob(t, d, "deaf", "stopped", func(js JobStatus) bool { return js.State == "stopped" })
	runs := runsOf(t, d, "deaf")
	if len(runs) != 1 || runs[0].ID != first.Run || runs[0].Reason != store.ReasonKilled || runs[0].Signal != "SIGKILL" {
		t.Errorf("runs %+v, want its one run killed after its stop_timeout", runs)
	}
}

// TestTimeoutEditedDuringItsStop: a run that outlived its timeout of 1s,
// the timeout edited to an hour while the run is being stopped: its end
// is said as it was, after 1s (trial AP: "timed out after 1h").
func TestTimeoutEditedDuringItsStop(t *testing.T) {
	t.Parallel()
	d, dir := runDaemon(t, "", nil)
	path := filepath.Join(dir, "deaf.lua")
	deaf := func(timeout string) string {
		return `job "deaf" { cmd = { "sh", "-c", "trap '' TERM; while true; do sleep 0.05; done" }, cpus = 1, timeout = "` + timeout + `", stop_timeout = "2s" }`
	}
	testkit.PutFile(t, path, deaf("1s"))
	reload(t, d)
	waitJob(t, d, "deaf", "stopping for its timeout", func(js JobStatus) bool { return js.State == "stopping" })
	testkit.PutFile(t, path, deaf("1h"))
	reload(t, d)
	js := waitJob(t, d, "deaf", "failed", func(js JobStatus) bool { return js.State == "failed" })
	if !strings.HasPrefix(js.Why, "timed out after 1s") {
		t.Errorf("deaf's why: %q, want it timed out after the 1s it outlived", js.Why)
	}
}

// TestRestartDuringAStopIsShown: a restart asked while a person's stop is
// under way is said in the stop's why, as a start is (trial AP: it was
// not), and the job runs again once the run has ended.
func TestRestartDuringAStopIsShown(t *testing.T) {
	t.Parallel()
	d, dir := runDaemon(t, "", nil)
	free, trapped := filepath.Join(t.TempDir(), "free"), filepath.Join(t.TempDir(), "trapped")
	t.Cleanup(func() { _ = writeFile(free, nil, 0o600) }) // should the test fail with it stopping
	testkit.PutFile(t, filepath.Join(dir, "deaf.lua"), `job "deaf" { cmd = { "sh", "-c", "trap '' TERM; touch `+trapped+`; while [ ! -e `+free+` ]; do sleep 0.05; done" }, cpus = 1, stop_timeout = "1h", restart = "always" }`)
	reload(t, d)
	first := waitJob(t, d, "deaf", "running", func(js JobStatus) bool { return js.State == "running" })
	waitFiles(t, trapped)
	for _, verb := range []string{"stop", "restart"} {
		if code, body := as(t, d, "root", "POST", jobPath("deaf")+"/"+verb); code != 200 {
			t.Fatalf("berth %s deaf: %d %s", verb, code, body)
		}
	}
	// A restart is answered once it is posted, not once taken.
	js := waitJob(t, d, "deaf", "to say it runs again", func(js JobStatus) bool { return strings.Contains(js.Why, "; then ") })
	if js.State != "stopping" || !strings.Contains(js.Why, "; then restarted on request (berth restart): it runs again once this run has ended") {
		t.Errorf("deaf restarted while being stopped: %s, %q", js.State, js.Why)
	}
	if err := writeFile(free, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	// Its next run sees free too, and ends at once: its start is the proof.
	testkit.WaitFor(t, 20*time.Second, "deaf to run again", func() bool { return len(runsOf(t, d, "deaf")) >= 2 })
	if runs := runsOf(t, d, "deaf"); runs[len(runs)-1].ID != first.Run || runs[len(runs)-1].Reason != store.ReasonStopped {
		t.Errorf("deaf's runs: %+v, want the first stopped, then another", runs)
	}
}

// TestRedeclaredStoppedKeepsItsSince: a job a person stopped, its file
// removed, then declared again in another file, rests stopped as the
// stop left it, since the stop (trial AO: since its declaration, the
// removed job, at rest already, taken for one still stopping).
func TestRedeclaredStoppedKeepsItsSince(t *testing.T) {
	t.Parallel()
	d, dir := runDaemon(t, "", nil)
	testkit.PutFile(t, filepath.Join(dir, "g1.lua"), `job "ghost" { cmd = "sleep 100", cpus = 0 }`)
	reload(t, d)
	waitJob(t, d, "ghost", "running", func(js JobStatus) bool { return js.State == "running" })
	if code, body := as(t, d, "root", "POST", jobPath("ghost")+"/stop"); code != 200 {
		t.Fatalf("berth stop ghost: %d %s", code, body)
	}
	stopped := waitJob(t, d, "ghost", "stopped", func(js JobStatus) bool { return js.State == "stopped" })
	if err := os.Remove(filepath.Join(dir, "g1.lua")); err != nil {
		t.Fatal(err)
	}
	reload(t, d)
	testkit.PutFile(t, filepath.Join(dir, "g2.lua"), `job "ghost" { cmd = "echo a new one", cpus = 0 }`)
	if res := reload(t, d); !slices.Equal(res.Added, []string{"ghost"}) {
		t.Fatalf("declared again: %+v", res)
	}
	js := waitJob(t, d, "ghost", "declared again", func(js JobStatus) bool { return strings.HasSuffix(js.File, "g2.lua") })
	if js.State != "stopped" || !js.Since.Equal(stopped.Since) {
		t.Errorf("declared again: %s since %v, want stopped since its stop (%v)", js.State, js.Since, stopped.Since)
	}
}

// TestRenameKeepsTheName: a file renamed as it is (a git mv, a
// renumbering) holds the names it held: a file refused for declaring one
// of them again does not take it, and the job runs on.
func TestRenameKeepsTheName(t *testing.T) {
	t.Parallel()
	d, dir := runDaemon(t, "", nil)
	testkit.PutFile(t, filepath.Join(dir, "train.lua"), `job "train" { cmd = "sleep 600", cpus = 0 } -- the real one`)
	reload(t, d)
	running := waitJob(t, d, "train", "running", func(js JobStatus) bool { return js.State == "running" })
	testkit.PutFile(t, filepath.Join(dir, "draft.lua"), `job "train" { cmd = "sleep 7", cpus = 0 } -- a colleague's draft`)
	if res := reload(t, d); len(res.Problems) != 1 || res.Problems[0].File != filepath.Join(dir, "draft.lua") {
		t.Fatalf("the draft: problems %+v, want the draft refused", res.Problems)
	}
	if err := os.Rename(filepath.Join(dir, "train.lua"), filepath.Join(dir, "zz-train.lua")); err != nil {
		t.Fatal(err)
	}
	res := reload(t, d)
	if len(res.Problems) != 1 || res.Problems[0].File != filepath.Join(dir, "draft.lua") {
		t.Errorf("after the rename: problems %+v, want the draft still refused", res.Problems)
	}
	moved := filepath.Join(dir, "zz-train.lua")
	if js := waitJob(t, d, "train", "declared at its new name", func(js JobStatus) bool { return js.File != running.File }); js.Run != running.Run || js.File != moved {
		t.Errorf("after the rename: run %d of %s, want run %d going on, of %s", js.Run, js.File, running.Run, moved)
	}
}

// TestRenameOfFailingFile: a file with a mistake in it, renamed as it is
// (a git mv), keeps its version in force, now declared at its new name:
// its jobs run on, across a restart of the daemon too (its kept copy goes
// with it), and its error is said of the new name.
func TestRenameOfFailingFile(t *testing.T) {
	t.Parallel()
	lives := daemonLives{t: t, jobs: `job "web" { cmd = "sleep 600", cpus = 0, restart = "always" }`}
	d, stop := lives.start()
	running := waitJob(t, d, "web", "running", func(js JobStatus) bool { return js.State == "running" })
	testkit.PutFile(t, filepath.Join(lives.jobsDir, "jobs.lua"), `job "web" { cmd = "sleep 600", cpus = 0, restart = "always", gpu = 1 }`)
	reload(t, d)
	moved := filepath.Join(lives.jobsDir, "10-web.lua")
	if err := os.Rename(filepath.Join(lives.jobsDir, "jobs.lua"), moved); err != nil {
		t.Fatal(err)
	}
	res := reload(t, d)
	if len(res.Problems) != 1 || res.Problems[0].File != moved || len(res.Removed) != 0 {
		t.Errorf("renamed with its mistake: %+v, want its error at %s and nothing removed", res, moved)
	}
	if js := waitJob(t, d, "web", "declared at its new name", func(js JobStatus) bool { return js.File != running.File }); js.State != "running" || js.Run != running.Run || js.File != moved {
		t.Errorf("renamed with its mistake: %s, run %d of %s; want run %d going on, declared at %s", js.State, js.Run, js.File, running.Run, moved)
	}
	lives.stopped(stop)
	d, stop = lives.start()
	if js := waitJob(t, d, "web", "running again", func(js JobStatus) bool { return js.State == "running" }); js.File != moved {
		t.Errorf("after a restart of the daemon: declared at %s, want %s", js.File, moved)
	}
	lives.stopped(stop)
}

// TestReloadCountsEveryFile: a reload counts the job files there are, not
// only those in force: a broken file with a version kept in force once, a
// file never good and a refused one too.
func TestReloadCountsEveryFile(t *testing.T) {
	t.Parallel()
	d, dir := runDaemon(t, `job "kept" { cmd = "true", cpus = 0 }`, nil)
	testkit.PutFile(t, filepath.Join(dir, "good.lua"), `job "good" { cmd = "true", cpus = 0 }`)
	if res := reload(t, d); res.Files != 2 || len(res.Errors) != 0 {
		t.Fatalf("two good files: %d files, errors %q", res.Files, res.Errors)
	}
	testkit.PutFile(t, filepath.Join(dir, "jobs.lua"), `job "kept" { cmd = "true" cpus = 0 }`)
	testkit.PutFile(t, filepath.Join(dir, "broken.lua"), `job "broken" {`)
	testkit.PutFile(t, filepath.Join(dir, "open.lua"), `job "open" { cmd = "true", cpus = 0 }`)
	if err := os.Chmod(filepath.Join(dir, "open.lua"), 0o666); err != nil {
		t.Fatal(err)
	}
	// A file written a moment ago may be left for the next reload (it
	// could be half written): the reload after it counts it.
	var res ReloadResult
	held := false
	defer func() {
		if !held {
			t.Errorf("a kept version, a file never good, a refused one and a good one: %d files, errors %q; want 4 files, 3 errors", res.Files, res.Errors)
		}
	}()
	testkit.WaitFor(t, 20*time.Second, "a reload that counts every file", func() bool {
		res = reload(t, d)
		return res.Files == 4 && len(res.Errors) == 3
	})
	held = true
}

// A job file saved in several writes (an editor that writes in place, scp,
// a script writing line by line) is applied whole: while its writer holds
// it open, what was in force of it stays, so a save that declares the
// second job a moment after the first never stops it; once the writer
// closes it, which raises no event, its new version applies.
func TestSlowSave(t *testing.T) {
	t.Parallel()
	s1 := `job "s1" { cmd = "sleep 600", cpus = 0 }` + "\n"
	s2 := `job "s2" { cmd = "sleep 600", cpus = 0 }` + "\n"
	s3 := `job "s3" { cmd = "sleep 600", cpus = 0 }` + "\n"
	d, jobsDir := runDaemon(t, s1+s2, nil)
	needLeases(t, jobsDir)
	running := func(js JobStatus) bool { return js.State == "running" }
	run1 := waitJob(t, d, "s1", "running", running).Run
	run2 := waitJob(t, d, "s2", "running", running).Run
	ctx := context.Background()

	f, err := os.OpenFile(filepath.Join(jobsDir, "jobs.lua"), os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(s1); err != nil {
		t.Fatal(err)
	}
	// berth reload scans now, halfway through the save.
	res, err := d.Reload(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Removed)+len(res.Added)+len(res.Changed)+len(res.Errors) != 0 {
		t.Fatalf("a reload halfway through a save did something: %+v", res)
	}
	if want := filepath.Join(jobsDir, "jobs.lua"); !slices.Equal(res.Writing, []string{want}) {
		t.Errorf("a reload halfway through a save: writing %q, want %s", res.Writing, want)
	}
	if _, err := f.WriteString(s2 + s3); err != nil {
		t.Fatal(err)
	}
	if res, err := d.Reload(ctx); err != nil || len(res.Added) != 0 {
		t.Fatalf("a reload before the save's end: %+v, %v", res, err)
	}
	// Once the daemon looks again at its slowest, the events of the
	// writes are long dealt with: only its own looking can see the close.
	testkit.WaitFor(t, 20*time.Second, "the daemon looking again every second", func() bool {
		wait, err := d.call(ctx, func() any { return d.writingWait })
		return err == nil && wait.(time.Duration) == time.Second
	})
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	// No event comes; the daemon looks again by itself.
	waitJob(t, d, "s3", "running", running)
	for job, run := range map[string]uint64{"s1": run1, "s2": run2} {
		if js, _ := d.jobStatus(job); js.State != "running" || js.Run != run {
			t.Errorf("%s: %s, run %d; want still running run %d", job, js.State, js.Run, run)
		}
	}
}

// TestRemovedWhileDirRefused: a file removed while its directory was
// refused is removed once the directory is read again and has settled
// (dirSettle): its jobs stop. What was in force stayed in force while the
// directory was refused, and the scanner reported the removal then; a job
// so hidden ran on until the daemon's restart.
func TestRemovedWhileDirRefused(t *testing.T) {
	t.Parallel()
	d, jobsDir := runDaemon(t, `job "gone" { cmd = "sleep 600", cpus = 0 }`, nil)
	if err := writeFile(filepath.Join(jobsDir, "stays.lua"), []byte(`job "stays" { cmd = "sleep 600", cpus = 0 }`), 0o600); err != nil {
		t.Fatal(err)
	}
	reload(t, d)
	waitJob(t, d, "gone", "running", func(js JobStatus) bool { return js.State == "running" })
	waitJob(t, d, "stays", "running", func(js JobStatus) bool { return js.State == "running" })
	if err := os.Chmod(jobsDir, 0o777); err != nil {
		t.Fatal(err)
	}
	reload(t, d)
	if err := os.Remove(filepath.Join(jobsDir, "jobs.lua")); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(jobsDir, 0o700); err != nil {
		t.Fatal(err)
	}
	reload(t, d)
	testkit.WaitFor(t, 20*time.Second, "gone to go", func() bool {
		_, ok := d.jobStatus("gone")
		return !ok
	})
	if js, _ := d.jobStatus("stays"); js.State != "running" {
		t.Errorf("stays: %s, want running still", js.State)
	}
}

// TestRefusedGoneWhileDirSettles: a refused file removed while its
// directory, back from being refused, settles is no longer said to be
// refused (berth reload told its owner to fix a file that was not
// there), and what is in force of the directory stays until it settles.
func TestRefusedGoneWhileDirSettles(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)) // the settle never ends
	d, jobsDir := runDaemon(t, `job "stays" { cmd = "sleep 600", cpus = 0 }`, func(cfg *Config) { cfg.Clock = clk })
	waitJob(t, d, "stays", "running", func(js JobStatus) bool { return js.State == "running" })
	if err := os.Chmod(jobsDir, 0o777); err != nil {
		t.Fatal(err)
	}
	reload(t, d)
	plant := filepath.Join(jobsDir, "plant.lua")
	if err := writeFile(plant, []byte(`job "plant" { cmd = "true" }`), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(plant, 0o666); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(jobsDir, 0o700); err != nil {
		t.Fatal(err)
	}
	said := func(res ReloadResult) bool {
		return slices.ContainsFunc(res.Errors, func(e string) bool { return strings.Contains(e, plant) })
	}
	if res := reload(t, d); !said(res) {
		t.Fatalf("the planted file is not refused: %q", res.Errors)
	}
	if err := os.Remove(plant); err != nil {
		t.Fatal(err)
	}
	if res := reload(t, d); said(res) {
		t.Errorf("a reload after its removal still says: %q", res.Errors)
	}
	if js, _ := d.jobStatus("stays"); js.State != "running" {
		t.Errorf("stays: %s, want running still", js.State)
	}
}

// TestProblemOfVersionInForce: a job's problem in the version of a file
// kept in force, while the file on disk has errors, says so: its line is
// that version's, not the file's on disk.
func TestProblemOfVersionInForce(t *testing.T) {
	t.Parallel()
	d, jobsDir := runDaemon(t, "", nil)
	path := filepath.Join(jobsDir, "pipe.lua")
	if err := writeFile(path, []byte("job \"prep\" { cmd = \"true\", cpus = 0 }\njob \"train\" { cmd = \"true\", cpus = 0, after = \"prepp\" }\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	reload(t, d)
	if err := writeFile(path, []byte(`job "prep" { cmd = "true", cpus = "one" }`), 0o600); err != nil {
		t.Fatal(err)
	}
	reload(t, d)
	var after, own bool
	for _, p := range d.Status().Problems {
		switch {
		case strings.Contains(p.Text, `"prepp"`):
			after = true
			if !strings.HasSuffix(p.Text, "(in the version in force, kept while the file on disk has errors: its lines may differ)") {
				t.Errorf("the kept version's problem does not say whose it is: %s", p.Text)
			}
		case p.File == path && p.Line == 1:
			own = true
		}
	}
	if !after || !own {
		t.Errorf("problems %+v: want the file's own error and the kept version's", d.Status().Problems)
	}
}

func TestSomeNames(t *testing.T) {
	t.Parallel()
	var many []string
	for i := range 12 {
		many = append(many, "j"+strconv.Itoa(i))
	}
	for _, tt := range []struct {
		names []string
		want  string
	}{
		{[]string{"a"}, "a"},
		{[]string{"a", "b"}, "a b"},
		{many, "j0 j1 j2 j3 j4 j5 j6 j7 j8 j9 and 2 more"},
	} {
		if got := someNames(tt.names); got != tt.want {
			t.Errorf("someNames(%q) = %q, want %q", tt.names, got, tt.want)
		}
	}
}

// problemLines are the lines of ps, in their order.
func problemLines(ps []Problem) []int {
	lines := make([]int, 0, len(ps))
	for _, p := range ps {
		lines = append(lines, p.Line)
	}
	return lines
}

// TestStatusWhileLoading: until the daemon has read its job files at
// start, its status says it is loading, a job it does not know yet is not
// said to be gone, and berth_ready is 0 (trial AC: "no jobs declared",
// and "no job file declares it any more", while a slow file was read).
func TestStatusWhileLoading(t *testing.T) {
	d, _, stop := startDaemon(t, "while true do end\n", nil) // its budget, a second of CPU, to be read
	defer stop()
	if s := d.Status(); !s.Daemon.Loading {
		t.Errorf("the status before the first load: %+v", s.Daemon)
	}
	if got := d.msgNoSuch(caller{}, "train"); got != msgNotLoadedYet("train") {
		t.Errorf("a job asked for before the first load: %q", got)
	}
	if got := testutil.ToFloat64(d.meters.ready); got != 0 {
		t.Errorf("berth_ready before the first load: %v", got)
	}
	// A list of the jobs, or of the flavors, whose wait for the load is
	// cut short (TestRequestsWaitForTheLoad) says it is not all there is
	// yet (a header: berth jobs says it on stderr).
	loading := func(path string) string {
		req := httptest.NewRequest(http.MethodGet, "http://berth"+APIVersion+path, nil)
		ctx, cancel := context.WithCancel(context.WithValue(req.Context(), peerKey{}, ctlsock.Peer{Ucred: unix.Ucred{Pid: int32(os.Getpid())}, GroupsKnown: true})) // root
		cancel()
		req = req.WithContext(ctx)
		rec := httptest.NewRecorder()
		d.api().ServeHTTP(rec, req)
		if rec.Code != http.StatusOK {
			t.Fatalf("GET %s: %d %s", path, rec.Code, rec.Body)
		}
		return rec.Header().Get(HeaderLoading)
	}
	for _, path := range []string{"/jobs", "/flavors"} {
		if got := loading(path); got != "1" {
			t.Errorf("GET %s before the first load: %s %q, want 1", path, HeaderLoading, got)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := d.Reload(ctx); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{"/jobs", "/flavors"} {
		if got := loading(path); got != "" {
			t.Errorf("GET %s once loaded: %s %q", path, HeaderLoading, got)
		}
	}
	if s := d.Status(); s.Daemon.Loading {
		t.Errorf("the status once loaded: %+v", s.Daemon)
	}
	if got := d.msgNoSuch(caller{}, "train"); got == msgNotLoadedYet("train") {
		t.Errorf("a job asked for once loaded: %q", got)
	}
	if got := testutil.ToFloat64(d.meters.ready); got != 1 {
		t.Errorf("berth_ready once loaded: %v", got)
	}
}

// TestReloadSaysQuotas: a reload says which quotas it declared, changed
// or took away, and one after it that changed nothing says what that one
// did (trial AS: a reload that changed only a quota listed no change).
func TestReloadSaysQuotas(t *testing.T) {
	t.Parallel()
	d, dir := runDaemon(t, `job "a" { cmd = "true", cpus = 0 }`, nil)
	reload(t, d) // after the first, which says nothing of quotas
	path := filepath.Join(dir, "quotas.lua")
	for _, step := range []struct {
		src  string
		want []string
	}{
		{`quota "*" { cpus = 1 }`, []string{"*"}},
		{`quota "*" { cpus = 2 }
quota "alice" { gpus = 1 }`, []string{"*", "alice"}},
		{`quota "alice" { gpus = 1 }`, []string{"*"}},
	} {
		testkit.PutFile(t, path, step.src)
		res := reload(t, d)
		if res.Earlier != nil {
			// The watcher read the file first: its reload is the one.
			res.Quotas = res.Earlier.Quotas
		}
		if !slices.Equal(res.Quotas, step.want) {
			t.Errorf("%q: quotas %q, want %q", step.src, res.Quotas, step.want)
		}
	}
	if res := reload(t, d); len(res.Quotas) != 0 {
		t.Errorf("a reload that changed nothing: quotas %q", res.Quotas)
	}
}

// TestRequestsWaitForTheLoad: a request about jobs made while the daemon
// reads its job files at start waits for them to be read, and is answered
// as things are then: a job declared is found, and a list is all there is
// (trial AT: a job not read yet was no_such_job, and berth jobs --json an
// empty list, with exit 0).
func TestRequestsWaitForTheLoad(t *testing.T) {
	t.Parallel()
	d, _, stop := startDaemon(t, "while true do end\n", func(cfg *Config) {
		if err := writeFile(filepath.Join(cfg.JobsDir, "train.lua"), []byte(`job "train" { cmd = "sleep 600", cpus = 0 }`), 0o600); err != nil {
			t.Fatal(err)
		}
	})
	defer stop()
	if !d.Status().Daemon.Loading {
		t.Fatal("loaded already: the file that takes its whole budget was read at once")
	}
	get := func(path string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodGet, "http://berth"+APIVersion+path, nil)
		req = req.WithContext(context.WithValue(req.Context(), peerKey{}, ctlsock.Peer{Ucred: unix.Ucred{Pid: int32(os.Getpid())}, GroupsKnown: true})) // root
		rec := httptest.NewRecorder()
		d.api().ServeHTTP(rec, req)
		return rec
	}
	if rec := get("/jobs/train"); rec.Code != http.StatusOK {
		t.Errorf("GET /jobs/train while loading: %d %s, want the job once loaded", rec.Code, rec.Body)
	}
	rec := get("/jobs")
	if rec.Code != http.StatusOK || rec.Header().Get(HeaderLoading) != "" || !strings.Contains(rec.Body.String(), `"train"`) {
		t.Errorf("GET /jobs while loading: %d %q %s, want every job once loaded", rec.Code, rec.Header().Get(HeaderLoading), rec.Body)
	}
}

// TestLoadingUntilEveryFileRead: the daemon is loading until the reloads
// at start have read every file, not only until the first, which the
// reload's deadline cut short here (review).
func TestLoadingUntilEveryFileRead(t *testing.T) {
	t.Parallel()
	d, _, stop := startDaemon(t, "while true do end\n", func(cfg *Config) {
		// A second of CPU each, two of them: the first reload, bound to
		// 1.5 s, reads one, and the next the other.
		if err := writeFile(filepath.Join(cfg.JobsDir, "more.lua"), []byte("while true do end\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		cfg.Evaluator.Deadline = 1500 * time.Millisecond
	})
	defer stop()
	var m dto.Metric
	reloads := func() uint64 {
		m.Reset()
		d.meters.reloadSeconds.Write(&m)
		return m.GetHistogram().GetSampleCount()
	}
	testkit.WaitFor(t, 30*time.Second, "the first reload", func() bool { return reloads() >= 1 })
	if reloads() == 1 && !d.Status().Daemon.Loading {
		t.Error("loaded once the first reload was applied, a file not read")
	}
	testkit.WaitFor(t, 30*time.Second, "every file read", func() bool { return !d.Status().Daemon.Loading })
	if got := testutil.ToFloat64(d.meters.ready); got != 1 {
		t.Errorf("berth_ready once every file is read: %v", got)
	}
}

// TestRequestToEndedJob: a request that reaches a job after its goroutine
// ended for good (a stop racing the removal of a job at rest) is told it
// is done at once; before, the stop's answer waited its whole 2 s on a
// mailbox nobody read.
func TestRequestToEndedJob(t *testing.T) {
	t.Parallel()
	d, dir := runDaemon(t, "", nil)
	path := filepath.Join(dir, "gone.lua")
	testkit.PutFile(t, path, `job "gone" { cmd = "true", cpus = 1 }`)
	reload(t, d)
	waitJob(t, d, "gone", "done", func(js JobStatus) bool { return js.State == "done" })
	d.mu.Lock()
	j := d.jobs["gone"]
	d.mu.Unlock()
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	reload(t, d)
	select {
	case <-j.done:
	case <-time.After(20 * time.Second):
		t.Fatal("the removed job's goroutine did not end")
	}
	msg := jobMessage{ev: &event{kind: evStop}, done: make(chan struct{})}
	j.in.post(msg)
	select {
	case <-msg.done:
	case <-time.After(10 * time.Second):
		t.Fatal("a stop posted to the ended job was never answered")
	}
}

// TestWaiterKeepsItsPlaceThroughABadEdit: a waiting job edited into one it
// cannot run with (unplaceable: a typo; invalid: its flavor gone a moment),
// then back, waits again as having waited as long as it had: ahead of
// those that came well after it (trial AF: it went to the back of the
// line, its age 0s), the time it could not run not counted. One that was
// unplaceable from its birth had waited for nothing (the review).
func TestWaiterKeepsItsPlaceThroughABadEdit(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC))
	d, dir := runDaemon(t, `job "holder" { cmd = "sleep 1000", cpus = 2 }
flavor "one" { cpus = 1 }`, func(cfg *Config) { cfg.Clock = clk })
	waitJob(t, d, "holder", "running", func(js JobStatus) bool { return js.State == "running" })
	write := func(file, src string) {
		t.Helper()
		testkit.PutFile(t, filepath.Join(dir, file), src)
		reload(t, d)
	}
	waitingSince := func(name string) time.Time {
		d.mu.Lock()
		j := d.jobs[name]
		d.mu.Unlock()
		return j.view().WaitingSince
	}
	write("w0.lua", `job "first" { cmd = "true", flavor = "one" }`)
	waitJob(t, d, "first", "waiting", func(js JobStatus) bool { return js.State == "waiting" })
	clk.Advance(10 * time.Second)
	write("w1.lua", `job "second" { cmd = "true", cpus = 1 }`)
	testkit.WaitFor(t, 20*time.Second, "both to wait in the placer's queue", func() bool { return len(d.placer.Waiting()) == 2 })
	began := waitingSince("first")
	paused := time.Duration(0)
	for _, c := range []struct{ state, bad string }{
		{"unplaceable", `job "first" { cmd = "true", cpus = 3 }`},
		{"invalid", `job "first" { cmd = "true", flavor = "gone" }`},
	} {
		clk.Advance(10 * time.Second)
		write("w0.lua", c.bad)
		waitJob(t, d, "first", c.state, func(js JobStatus) bool { return js.State == c.state })
		clk.Advance(2 * time.Second)
		paused += 2 * time.Second
		write("w0.lua", `job "first" { cmd = "true", flavor = "one" }`)
		// In the placer's queue again: its place is given as it enters.
		js := waitJob(t, d, "first", "waiting again", func(js JobStatus) bool { return js.State == "waiting" && js.QueuePosition != 0 })
		if since := waitingSince("first"); js.QueuePosition != 1 || !since.Equal(began.Add(paused)) {
			t.Errorf("first, %s 2s, waits again at place %d since %v, want first in line since %v", c.state, js.QueuePosition, since, began.Add(paused))
		}
	}
	write("w2.lua", `job "late" { cmd = "true", cpus = 3 }`)
	waitJob(t, d, "late", "unplaceable", func(js JobStatus) bool { return js.State == "unplaceable" })
	clk.Advance(time.Hour)
	write("w2.lua", `job "late" { cmd = "true", cpus = 1 }`)
	js := waitJob(t, d, "late", "waiting", func(js JobStatus) bool { return js.State == "waiting" && js.QueuePosition != 0 })
	if since := waitingSince("late"); js.QueuePosition != 3 || !since.Equal(clk.Now()) {
		t.Errorf("late, unplaceable from its birth, waits at place %d since %v, want last since %v", js.QueuePosition, since, clk.Now())
	}
}

// TestWaiterKeepsItsPlaceAcrossDaemons: the place a waiting job keeps
// through an edit that leaves it unplaceable is kept by the next daemon
// too (trial AH: restarted meanwhile, it came back last in line, its wait
// begun anew).
func TestWaiterKeepsItsPlaceAcrossDaemons(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC))
	lives := &daemonLives{t: t, jobs: `job "holder" { cmd = "sleep 1000", cpus = 2, priority = 10 }`,
		tune: func(cfg *Config) { cfg.Clock = clk }}
	d, stop := lives.start()
	waitJob(t, d, "holder", "running", func(js JobStatus) bool { return js.State == "running" })
	write := func(d *Daemon, file, src string) {
		t.Helper()
		testkit.PutFile(t, filepath.Join(lives.jobsDir, file), src)
		reload(t, d)
	}
	write(d, "w0.lua", `job "first" { cmd = "true", cpus = 1 }`)
	waitJob(t, d, "first", "waiting", func(js JobStatus) bool { return js.State == "waiting" })
	began := clk.Now()
	clk.Advance(10 * time.Second)
	write(d, "w1.lua", `job "second" { cmd = "true", cpus = 1 }`)
	waitJob(t, d, "second", "waiting", func(js JobStatus) bool { return js.State == "waiting" })
	clk.Advance(10 * time.Second)
	write(d, "w0.lua", `job "first" { cmd = "true", cpus = 3 }`)
	waitJob(t, d, "first", "unplaceable", func(js JobStatus) bool { return js.State == "unplaceable" })
	lives.stopped(stop)

	// A daemon starts and stops meanwhile, first still unplaceable; the
	// next starts 2 s after the first's stop, first mended meanwhile.
	d, stop = lives.start()
	waitJob(t, d, "first", "unplaceable", func(js JobStatus) bool { return js.State == "unplaceable" })
	lives.stopped(stop)
	testkit.PutFile(t, filepath.Join(lives.jobsDir, "w0.lua"), `job "first" { cmd = "true", cpus = 1 }`)
	clk.Advance(2 * time.Second)
	d, stop = lives.start()
	defer lives.stopped(stop)
	waitJob(t, d, "holder", "running", func(js JobStatus) bool { return js.State == "running" })
	js := waitJob(t, d, "first", "waiting", func(js JobStatus) bool { return js.State == "waiting" && js.QueuePosition != 0 })
	// Its 20 s of waiting go on, ahead of second's 12 s; the time it
	// could not run is not counted.
	if want := clk.Now().Add(-20 * time.Second); js.QueuePosition != 1 || !js.Since.Equal(want) {
		t.Errorf("first waits at place %d since %v, want first in line since %v (it began at %v)", js.QueuePosition, js.Since, want, began)
	}
}

// TestRemovedWaiterForgetsItsPlace: a job whose file went away while an
// edit kept it from running is, declared again later, a new arrival: the
// wait it had is not taken up (the review: it came back a day later first
// in line).
func TestRemovedWaiterForgetsItsPlace(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC))
	d, dir := runDaemon(t, `job "holder" { cmd = "sleep 1000", cpus = 2 }`, func(cfg *Config) { cfg.Clock = clk })
	waitJob(t, d, "holder", "running", func(js JobStatus) bool { return js.State == "running" })
	write := func(file, src string) {
		t.Helper()
		testkit.PutFile(t, filepath.Join(dir, file), src)
		reload(t, d)
	}
	write("w0.lua", `job "first" { cmd = "true", cpus = 1 }`)
	waitJob(t, d, "first", "waiting", func(js JobStatus) bool { return js.State == "waiting" })
	clk.Advance(time.Hour)
	write("w0.lua", `job "first" { cmd = "true", cpus = 3 }`)
	waitJob(t, d, "first", "unplaceable", func(js JobStatus) bool { return js.State == "unplaceable" })
	if err := os.Remove(filepath.Join(dir, "w0.lua")); err != nil {
		t.Fatal(err)
	}
	reload(t, d)
	testkit.WaitFor(t, 20*time.Second, "first to be gone", func() bool { _, ok := d.jobStatus("first"); return !ok })
	clk.Advance(24 * time.Hour)
	write("w1.lua", `job "third" { cmd = "true", cpus = 1 }`)
	waitJob(t, d, "third", "waiting", func(js JobStatus) bool { return js.State == "waiting" })
	clk.Advance(10 * time.Second)
	write("w0.lua", `job "first" { cmd = "true", cpus = 1 }`)
	js := waitJob(t, d, "first", "waiting", func(js JobStatus) bool { return js.State == "waiting" && js.QueuePosition != 0 })
	if js.QueuePosition != 2 || !js.Since.Equal(clk.Now()) {
		t.Errorf("first, declared again, waits at place %d since %v, want behind third since %v", js.QueuePosition, js.Since, clk.Now())
	}
}

// TestDepsGoneUnderADoneJob: a done job told to look at its parents when no
// job runs after another any more (a reload took the last after away while
// the message was on its way) looks at nothing (the review: a nil graph
// crashed the daemon).
func TestDepsGoneUnderADoneJob(t *testing.T) {
	t.Parallel()
	d, _ := runDaemon(t, `job "a" { cmd = "true", cpus = 0 }
job "b" { cmd = "true", cpus = 0, after_any = "a" }`, nil)
	waitJob(t, d, "b", "done", func(js JobStatus) bool { return js.State == "done" })
	d.mu.Lock()
	j := d.jobs["b"]
	d.mu.Unlock()
	d.deps.Store(nil)
	j.in.post(jobMessage{deps: true})
	looked := jobMessage{done: make(chan struct{})}
	j.in.post(looked)
	select {
	case <-looked.done:
	case <-time.After(20 * time.Second):
		t.Fatal("b took no message after it was told to look at its parents")
	}
}

// TestReloadSaysAJobNowRuns: a reload that finds a job's group made since,
// so that the job, invalid, may run, says it changed that job (trial AX:
// "nothing changed", and the job ran).
func TestReloadSaysAJobNowRuns(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to make a group")
	}
	const later = "btslater"
	d, _ := runDaemon(t, `job "late" { cmd = "true", cpus = 0, group = "`+later+`" }`, nil)
	waitJob(t, d, "late", "invalid", func(js JobStatus) bool { return js.State == "invalid" })
	remove, err := testkit.MakeAccounts([]string{later}, nil)
	if err != nil {
		t.Skipf("cannot make the group: %v", err)
	}
	t.Cleanup(remove)
	res, err := d.Reload(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(res.Changed, "late") {
		t.Errorf("the reload changed %v, want late, which may run now", res.Changed)
	}
	waitJob(t, d, "late", "done", func(js JobStatus) bool { return js.State == "done" })
}
