package supervisor

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/berthd/berth/supervisor/testkit"
)

// TestRecordFollowsTheJobsFile: a job that moves to another file, the
// same in every other way, is recorded with its new file, though nothing
// else about it changes: the file recorded is the one that wins the name
// after a restart.
func TestRecordFollowsTheJobsFile(t *testing.T) {
	t.Parallel()
	const svc = `job "svc" { cmd = "sleep 600" }`
	d, _ := fakeTimeDaemon(t, svc)
	first := filepath.Join(d.cfg.JobsDir, "jobs.lua")
	recorded := func(file string) {
		t.Helper()
		testkit.WaitFor(t, 20*time.Second, "job svc recorded as declared in "+file, func() bool {
			rec, ok, err := d.store.Job("svc")
			return err == nil && ok && rec.File == file
		})
	}
	waitJob(t, d, "svc", "running", func(js JobStatus) bool { return js.State == "running" })
	recorded(first)

	moved := filepath.Join(d.cfg.JobsDir, "other.lua")
	if err := writeFile(moved, []byte(svc), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := writeFile(first, []byte("-- moved to other.lua\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	res, err := d.Reload(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Errors) > 0 || len(res.Changed) > 0 {
		t.Fatalf("reload: %+v, want no change to the job and no error", res)
	}
	js := waitJob(t, d, "svc", "declared in other.lua", func(js JobStatus) bool { return js.File == moved })
	if js.State != "running" {
		t.Errorf("svc is %s after moving to another file, want still running", js.State)
	}
	recorded(moved)
}
