package supervisor

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/berthd/berth/supervisor/store"
	"github.com/berthd/berth/supervisor/testkit"
)

// TestRunShownOnceRecorded: a run's process starts while its record
// commits, and the run is shown — in the status, the started line, the
// history — only once the record is on disk. With the news of every
// commit held back, the process runs and the job shows as starting, with
// no run and no pid; once commits are told, it shows running, its run on
// record.
func TestRunShownOnceRecorded(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex // guards held
	var held chan struct{}
	hold := func() {
		mu.Lock()
		h := held
		mu.Unlock()
		if h != nil {
			<-h
		}
	}
	logs := &testkit.Buffer{}
	d, jobsDir := runDaemon(t, "", func(cfg *Config) {
		cfg.afterCommit = hold
		cfg.Logger = hclog.New(&hclog.LoggerOptions{Output: logs, Level: hclog.Info})
	})
	gate := make(chan struct{})
	release := sync.OnceFunc(func() { close(gate) })
	t.Cleanup(release) // before the daemon's own cleanup, which waits for the writer
	mu.Lock()
	held = gate
	mu.Unlock()

	ran := filepath.Join(t.TempDir(), "ran")
	src := `job "a" { cmd = { "sh", "-c", "touch ` + ran + `; exec sleep 1000" }, cpus = 0 }`
	if err := writeFile(filepath.Join(jobsDir, "jobs.lua"), []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, 20*time.Second, "the job's process to run while no commit is told", func() bool {
		_, err := os.Stat(ran)
		return err == nil
	})
	if js, ok := d.jobStatus("a"); !ok || js.State != "starting" || js.Run != 0 || js.PID != 0 {
		t.Errorf("while its record is not known to be on disk, the job shows %+v, want starting with no run", js)
	}
	if strings.Contains(logs.String(), "started:") {
		t.Errorf("a started line before the run's record is on disk:\n%s", logs.String())
	}

	release()
	js := waitJob(t, d, "a", "running", func(js JobStatus) bool { return js.State == "running" })
	if js.Run == 0 || js.PID == 0 {
		t.Errorf("running, shown as %+v: want its run and pid", js)
	}
	runs, err := d.store.Runs("a", 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 1 || runs[0].ID != js.Run || runs[0].PID != js.PID {
		t.Errorf("history %+v, want run %d of pid %d", runs, js.Run, js.PID)
	}
	if !strings.Contains(logs.String(), "started: job=a run=") {
		t.Errorf("no started line once the run is on record:\n%s", logs.String())
	}
}

// TestRunEndIsItsReap: a run ends when its process is reaped, though a
// process it left behind holds its output open, which the daemon waits
// for a while (trial AX: its end and duration were recorded 2 s late, at
// the wait's end, which the log says).
func TestRunEndIsItsReap(t *testing.T) {
	t.Parallel()
	logs := &testkit.Buffer{}
	d, jobsDir := runDaemon(t, "", func(cfg *Config) {
		cfg.Logger = hclog.New(&hclog.LoggerOptions{Output: logs, Level: hclog.Info})
	})
	dir := t.TempDir()
	release, up := filepath.Join(dir, "release"), filepath.Join(dir, "up")
	t.Cleanup(func() { _ = os.WriteFile(release, nil, 0o600) }) // the process left behind ends
	// The run ends once the process it leaves behind is out of its group
	// (which a run's end would end).
	src := `job "left" { cmd = { "sh", "-c", "setsid sh -c 'touch ` + up + `; while [ ! -e ` + release + ` ]; do sleep 0.05; done' & while [ ! -e ` + up + ` ]; do sleep 0.05; done; echo started" }, cpus = 0 }`
	if err := writeFile(filepath.Join(jobsDir, "jobs.lua"), []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	var run store.RunRecord
	testkit.WaitFor(t, 20*time.Second, "left's run recorded as ended", func() bool {
		runs, err := d.store.Runs("left", 1)
		if err != nil || len(runs) == 0 {
			return false
		}
		run = runs[0]
		return !run.End.IsZero()
	})
	const said = "a process a run left behind holds its output open"
	var line string
	for l := range strings.Lines(logs.String()) {
		if strings.Contains(l, said) {
			line = l
		}
	}
	if line == "" {
		t.Fatalf("no line %q in the log:\n%s", said, logs.String())
	}
	stamp, _, _ := strings.Cut(line, " ")
	waited, err := time.Parse("2006-01-02T15:04:05.000Z0700", stamp)
	if err != nil {
		t.Fatal(err)
	}
	// The wait for the output is 2 s from the reap.
	if !run.End.Before(waited.Add(-time.Second)) {
		t.Errorf("the run ended %v, the wait for its output %v: want the end at the reap, before the wait", run.End, waited)
	}
}
