package supervisor

import (
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/berthd/berth/supervisor/runner"
)

// A job's log file is read after the file it was rotated to, and --run
// picks one run's lines out of both: those after its header, up to the
// next run's, a last line without its newline included.
func TestStreamFileRuns(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "train.log")
	start := time.Date(2026, 12, 4, 9, 0, 0, 0, time.UTC)
	h := func(run uint64) string { return runner.RunHeader(run, start) }
	if err := os.WriteFile(path+".1", []byte(h(1)+"a\n"+h(2)+"b1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte("b2\n"+h(3)+"c1\nc2"), 0o600); err != nil {
		t.Fatal(err)
	}
	d := &Daemon{log: hclog.NewNullLogger()}
	read := func(only *runLines) string {
		rec := httptest.NewRecorder()
		d.streamFile(rec, httptest.NewRequest("GET", "/", nil), path, false, only)
		return rec.Body.String()
	}
	if got, want := read(nil), h(1)+"a\n"+h(2)+"b1\nb2\n"+h(3)+"c1\nc2"; got != want {
		t.Errorf("the whole log:\n%q\nwant\n%q", got, want)
	}
	for run, want := range map[uint64]string{1: "a\n", 2: "b1\nb2\n", 3: "c1\nc2", 4: ""} {
		if got := read(&runLines{run: run}); got != want {
			t.Errorf("run %d: %q, want %q", run, got, want)
		}
	}
	// Followed, a run whose output is over (a later run's header came)
	// ends the stream: the request has no deadline to end it.
	rec := httptest.NewRecorder()
	d.streamFile(rec, httptest.NewRequest("GET", "/", nil), path, true, &runLines{run: 2})
	if got := rec.Body.String(); got != "b1\nb2\n" {
		t.Errorf("run 2 followed: %q", got)
	}
}
