package supervisor

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

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
