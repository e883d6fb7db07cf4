package supervisor

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/berthd/berth/supervisor/testkit"
)

// TestNotEvaluatedIsRetried: a file refused as "not evaluated" (the
// reload's deadline came first) is evaluated again, by the reload that
// follows at once and by berth reload, although its content did not change;
// the file that took the whole deadline is charged for it.
func TestNotEvaluatedIsRetried(t *testing.T) {
	// The slow file takes the whole deadline; the good one, alone, takes
	// a fraction of it even on a busy machine.
	d, jobsDir := runDaemon(t, "", func(cfg *Config) {
		cfg.Evaluator.Budget = 10 * time.Second
		cfg.Evaluator.Deadline = 3 * time.Second
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// Wait for the first (empty) reload.
	if _, err := d.Reload(ctx); err != nil {
		t.Fatal(err)
	}
	if err := writeFile(filepath.Join(jobsDir, "a-slow.lua"), []byte("while true do end\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := writeFile(filepath.Join(jobsDir, "b-good.lua"), []byte(`job "good" { cmd = "sleep 600" }`), 0o600); err != nil {
		t.Fatal(err)
	}
	res, err := d.Reload(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("first: %q", res.Errors)
	if !strings.Contains(strings.Join(res.Errors, "\n"), "b-good.lua: not evaluated") ||
		!strings.Contains(strings.Join(res.Errors, "\n"), "a-slow.lua: still running when the reload reached its deadline") {
		t.Fatalf("the deadline: %q", res.Errors)
	}
	// The reload that follows at once evaluates it, unchanged.
	testkit.WaitFor(t, 20*time.Second, "the good job from the not-evaluated file", func() bool {
		_, ok := d.jobStatus("good")
		return ok
	})
	// The operator follows the advice: fix the slow file away, berth reload.
	if err := os.Remove(filepath.Join(jobsDir, "a-slow.lua")); err != nil {
		t.Fatal(err)
	}
	res, err = d.Reload(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("second: %+v", res)
	if len(res.Errors) > 0 {
		t.Errorf("berth reload after a-slow.lua went: %q", res.Errors)
	}
}
