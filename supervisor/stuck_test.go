package supervisor

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/berthd/berth/supervisor/testkit"
)

// TestReportAbortNamesWhereTheLoopIsStuck: a loop held in a call is named
// as such, with how long it has been there.
func TestReportAbortNamesWhereTheLoopIsStuck(t *testing.T) {
	t.Parallel()
	logs := &testkit.Buffer{}
	d, _ := runDaemon(t, "", func(cfg *Config) {
		cfg.Logger = hclog.New(&hclog.LoggerOptions{Output: logs, Level: hclog.Info})
	})
	release := make(chan struct{})
	called := make(chan error, 1)
	go func() {
		_, err := d.call(context.Background(), func() any { <-release; return nil })
		called <- err
	}()
	testkit.WaitFor(t, 20*time.Second, "the loop to be in the call", func() bool {
		return loopTask(d.activity.task.Load()) == loopCall
	})
	d.ReportAbort(d.log, "SIGABRT")
	close(release)
	if err := <-called; err != nil {
		t.Fatal(err)
	}
	all := logs.String()
	i := strings.LastIndex(all, "[ERROR]")
	if i < 0 {
		t.Fatalf("no error line:\n%s", all)
	}
	line := all[i:]
	if strings.Count(all, "aborted") != 1 || !strings.Contains(line, "aborted: the event loop was stuck") ||
		!strings.Contains(line, `loop="answering a call from the control socket"`) || !strings.Contains(line, "for_ms=") {
		t.Errorf("the abort's line:\n%s", line)
	}
	b, err := os.ReadFile(filepath.Join(d.cfg.StateDir, stacksFile))
	if err != nil || !strings.Contains(string(b), "supervisor.(*Daemon).loop") {
		t.Errorf("the stacks file holds no loop: %v", err)
	}
}
