package supervisor

import (
	"fmt"
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

// TestWithOwner: a line about a person's job names its owner, once; one
// about an administrators' job, none.
func TestWithOwner(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		kv   []any
		want string
	}{
		{[]any{"job", "alice/train", "run", 3}, "[job alice/train run 3 owner alice]"},
		{[]any{"job", "train", "run", 3}, "[job train run 3]"},
		{[]any{"call", "stop", "job", "bob/x", "pids", []int{1}}, "[call stop job bob/x pids [1] owner bob]"},
		{[]any{"job", "alice/train", "owner", "alice"}, "[job alice/train owner alice]"},
		{[]any{"run", 3}, "[run 3]"},
	} {
		if got := fmt.Sprint(withOwner(tt.kv)); got != tt.want {
			t.Errorf("withOwner(%v) = %s, want %s", tt.kv, got, tt.want)
		}
	}
}
