package supervisor

import (
	"bytes"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
)

// TestCallLog: one caller's requests write at most callLogLines lines in
// a window, the first line after it says how many were left out, and
// another caller's are not held back by theirs. A job's name as the
// caller gave it is cut.
func TestCallLog(t *testing.T) {
	var out bytes.Buffer
	d := &Daemon{log: hclog.New(&hclog.LoggerOptions{Output: &out})}
	for range 3 * callLogLines {
		d.logRefused(1001, "control request refused: not the job's owner", "job", strings.Repeat("x", 1<<20), "uid", 1001)
	}
	d.logRefused(1002, "control request refused: not the job's owner", "job", "alice/train", "uid", 1002)
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != callLogLines+1 {
		t.Fatalf("%d lines, want %d", len(lines), callLogLines+1)
	}
	if !strings.Contains(lines[0], strings.Repeat("x", maxLoggedName)+"…") || len(lines[0]) > 2*maxLoggedName {
		t.Errorf("a long name is not cut: %.300s", lines[0])
	}
	if !strings.Contains(lines[callLogLines], "uid=1002") {
		t.Errorf("another caller's line was held back: %s", lines[callLogLines])
	}

	// A call let in that changes something is logged every time: who
	// stopped a job is not left out.
	out.Reset()
	for range 2 * callLogLines {
		d.logCaller(httptest.NewRequest("POST", "/v1/jobs/x/stop", nil), "stop", "job", "x")
	}
	if n := strings.Count(out.String(), "control request: call=stop"); n != 2*callLogLines {
		t.Errorf("%d accepted calls logged of %d", n, 2*callLogLines)
	}

	var l callLog
	now := time.Now()
	for range callLogLines + 5 {
		l.take(7, now)
	}
	if ok, left := l.take(7, now.Add(callLogWindow)); !ok || left != 5 {
		t.Errorf("the first line of the next window: %v, %d left out before it; want true, 5", ok, left)
	}
	if ok, left := l.take(7, now.Add(callLogWindow)); !ok || left != 0 {
		t.Errorf("the second line of the next window: %v, %d; want true, 0", ok, left)
	}
}
