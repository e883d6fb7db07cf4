package supervisor

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/berthd/berth/supervisor/testkit"
)

// TestProblemsLoggedOnce: a broken file's error is logged once when it
// appears, not again at each reload while it stands (another file's change,
// the same bytes saved again), and once more for each change of the file;
// its fix is said once.
func TestProblemsLoggedOnce(t *testing.T) {
	logs := &testkit.Buffer{}
	d, jobsDir := runDaemon(t, `job "a" { cmd = "sleep 600" }`, func(cfg *Config) {
		cfg.Logger = hclog.New(&hclog.LoggerOptions{Output: logs, Level: hclog.Info})
		// Only the reloads the test asks for, each of a whole file.
		cfg.Quiet = time.Hour
	})
	write := func(name, text string) {
		t.Helper()
		// Renamed into place: a reload that read the file half written
		// (empty) would rightly say its errors were gone, and then back.
		tmp := filepath.Join(jobsDir, "."+name+".tmp")
		if err := os.WriteFile(tmp, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, filepath.Join(jobsDir, name)); err != nil {
			t.Fatal(err)
		}
	}
	reloaded := func(want int) {
		t.Helper()
		if res := reload(t, d); len(res.Errors) != want {
			t.Fatalf("reload: errors %q, want %d", res.Errors, want)
		}
	}
	count := func(text string) int { return strings.Count(logs.String(), text) }

	write("broken.lua", `job "b" { cmd = "true", cpus = "x" }`)
	reloaded(1)
	write("other.lua", `job "c" { cmd = "sleep 600" }`)
	reloaded(1)
	write("broken.lua", `job "b" { cmd = "true", cpus = "x" }`) // saved again, unchanged
	reloaded(1)
	if n := count("[ERROR] configuration error"); n != 1 {
		t.Errorf("the error was logged %d times over three reloads, want once:\n%s", n, logs)
	}
	if !strings.Contains(logs.String(), "broken.lua") || !strings.Contains(logs.String(), "line=1") {
		t.Errorf("the error's line names no file and line:\n%s", logs)
	}

	// Saved again with the same error, but changed: a change, so one line.
	write("broken.lua", `job "b" { cmd = "true", cpus = "x" } -- still broken`)
	reloaded(1)
	if n := count("[ERROR] configuration error"); n != 2 {
		t.Errorf("a changed file with the same error: logged %d times in all, want 2:\n%s", n, logs)
	}

	write("broken.lua", `job "b" { cmd = "true", gpus = "y" }`)
	reloaded(1)
	if n := count("[ERROR] configuration error"); n != 3 {
		t.Errorf("a changed error was logged %d times in all, want 3:\n%s", n, logs)
	}

	write("broken.lua", `job "b" { cmd = "true" }`)
	reloaded(0)
	reloaded(0)
	if n := count("configuration errors are gone"); n != 1 {
		t.Errorf("the fix was said %d times, want once:\n%s", n, logs)
	}
	if n := count("[ERROR] configuration error"); n != 3 {
		t.Errorf("errors logged after the fix: %d in all, want 3:\n%s", n, logs)
	}
}
