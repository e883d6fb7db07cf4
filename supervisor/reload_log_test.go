package supervisor

import (
	"path/filepath"
	"slices"
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
	t.Parallel()
	logs := &testkit.Buffer{}
	d, jobsDir := runDaemon(t, `job "a" { cmd = "sleep 600" }`, func(cfg *Config) {
		cfg.Logger = hclog.New(&hclog.LoggerOptions{Output: logs, Level: hclog.Info})
		// Only the reloads the test asks for, each of a whole file.
		cfg.Quiet = time.Hour
	})
	write := func(name, text string) {
		t.Helper()
		// A reload that read the file half written (empty) would rightly
		// say its errors were gone, and then back.
		testkit.PutFile(t, filepath.Join(jobsDir, name), text)
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

// TestStopsSayWhy: the log line of each stop says what asked for it, and
// a job whose declaration cannot run any more says so in the log once, not
// only in berth status (its run goes on: TestInvalidRunGoesOn).
func TestStopsSayWhy(t *testing.T) {
	t.Parallel()
	logs := &testkit.Buffer{}
	d, jobsDir := runDaemon(t, `job "edited" { cmd = "sleep 600", cpus = 0 }
job "gone" { cmd = "sleep 600", cpus = 0 }
job "flavored" { cmd = "sleep 600", flavor = "small" }
flavor "small" { cpus = 1 }`, func(cfg *Config) {
		cfg.Logger = hclog.New(&hclog.LoggerOptions{Output: logs, Level: hclog.Info})
		cfg.Quiet = time.Hour
	})
	for _, name := range []string{"edited", "gone", "flavored"} {
		waitJob(t, d, name, "running", func(js JobStatus) bool { return js.State == "running" })
	}
	if err := writeFile(filepath.Join(jobsDir, "jobs.lua"), []byte(`job "edited" { cmd = "sleep 601", cpus = 0 }
job "flavored" { cmd = "sleep 600", flavor = "small" }`), 0o600); err != nil {
		t.Fatal(err)
	}
	reload(t, d)
	waitJob(t, d, "flavored", "running on", func(js JobStatus) bool { return strings.HasPrefix(js.Why, runsOn) })
	testkit.WaitFor(t, 20*time.Second, "two stops logged", func() bool { return strings.Count(logs.String(), "stopping:") == 2 })
	lines := strings.Split(logs.String(), "\n")
	for job, want := range map[string]string{
		"edited": `why="its definition changed"`,
		"gone":   `why="no job file declares it any more"`,
	} {
		if !slices.ContainsFunc(lines, func(l string) bool {
			return strings.Contains(l, "stopping: job="+job+" ") && strings.Contains(l, want)
		}) {
			t.Errorf("no line says %s stops with %s:\n%s", job, want, logs)
		}
	}
	if !strings.Contains(logs.String(), `cannot run again; its run goes on, and it rests once that ends: job=flavored why=`) {
		t.Errorf("the log does not say flavored cannot run again:\n%s", logs)
	}
}
