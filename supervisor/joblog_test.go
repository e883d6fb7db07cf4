package supervisor

import (
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"
)

// TestJobLoggerNamesTheOwner: the lines about a person's job name its
// owner, which the journal keeps as BERTH_OWNER (trial AW).
func TestJobLoggerNamesTheOwner(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	log := hclog.New(&hclog.LoggerOptions{Output: &b, Level: hclog.Info})
	jobLogger(log, "alice/train", "alice").Info("started")
	jobLogger(log, "train", "").Info("started")
	if got := b.String(); !strings.Contains(got, "started: job=alice/train owner=alice\n") || !strings.Contains(got, "started: job=train\n") {
		t.Errorf("log lines:\n%s", got)
	}
}
