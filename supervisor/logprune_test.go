package supervisor

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestPruneGoneLogs: the log files of jobs no longer declared go once
// older than the age, then the oldest while they come to more than the
// bound; a declared job's files, a person's job's included, stay.
func TestPruneGoneLogs(t *testing.T) {
	t.Parallel()
	d, _, stop := startDaemon(t, `job "kept" { cmd = "true", cpus = 0, enabled = false }`, nil)
	defer stop()
	waitJob(t, d, "kept", "loaded", func(js JobStatus) bool { return js.State == "disabled" })
	logs := filepath.Join(d.cfg.StateDir, "logs")
	now := time.Now()
	put := func(rel string, size int, age time.Duration) string {
		t.Helper()
		p := filepath.Join(logs, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o750); err != nil {
			t.Fatal(err)
		}
		if err := writeFile(p, make([]byte, size), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(p, now.Add(-age), now.Add(-age)); err != nil {
			t.Fatal(err)
		}
		return p
	}
	kept := put("kept.log", 4000, 90*24*time.Hour) // declared: stays, however old
	ancient := put("renamed.log", 10, 40*24*time.Hour)
	older := put("old-name.log.1", 1000, 3*time.Hour)
	old := put("old-name.log", 1000, 2*time.Hour)
	recent := put("alice/gone.log", 1000, time.Hour)
	other := put("notes.txt", 10, 90*24*time.Hour) // not a log: berth's to leave

	if n := d.pruneGoneLogs(now, 30*24*time.Hour, 2500); n != 2 {
		t.Errorf("removed %d files, want 2: the one past the age, then the oldest past the bound", n)
	}
	for _, c := range []struct {
		path string
		want bool
	}{{kept, true}, {ancient, false}, {older, false}, {old, true}, {recent, true}, {other, true}} {
		if _, err := os.Stat(c.path); (err == nil) != c.want {
			t.Errorf("%s: there %v, want %v", c.path, err == nil, c.want)
		}
	}
}
