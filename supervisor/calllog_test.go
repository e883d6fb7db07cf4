package supervisor

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/hashicorp/go-hclog"
	"golang.org/x/sys/unix"

	"github.com/berthd/berth/supervisor/ctlsock"
)

// TestCallLog: one caller's requests write at most callLogLines lines in
// a window, the first line after it says how many were left out, and
// another caller's are not held back by theirs. A job's name as the
// caller gave it is cut.
func TestCallLog(t *testing.T) {
	t.Parallel()
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
	// stopped a job is not left out. One that changes nothing is held to
	// its caller's share (trial AL: a person stopping their own stopped
	// job in a loop wrote 1 160 lines a second); root's are all logged.
	as := func(uid uint32) *http.Request {
		r := httptest.NewRequest("POST", "/v1/jobs/x/stop", nil)
		return r.WithContext(context.WithValue(r.Context(), peerKey{}, ctlsock.Peer{Ucred: unix.Ucred{Uid: uid}}))
	}
	for _, c := range []struct {
		uid     uint32
		changed bool
		want    int
	}{{1001, true, 2 * callLogLines}, {1003, false, callLogLines}, {0, false, 2 * callLogLines}} {
		out.Reset()
		for range 2 * callLogLines {
			d.logCaller(as(c.uid), c.changed, "stop", "job", "x")
		}
		if n := strings.Count(out.String(), "control request: call=stop"); n != c.want {
			t.Errorf("uid %d, calls that change something %v: %d logged of %d, want %d", c.uid, c.changed, n, 2*callLogLines, c.want)
		}
	}
	// A long name is cut where a character begins.
	out.Reset()
	d.logCaller(as(0), true, "stop", "job", strings.Repeat("x", maxLoggedName-1)+"é")
	if strings.Contains(out.String(), "\ufffd") || !strings.Contains(out.String(), strings.Repeat("x", maxLoggedName-1)+"…") {
		t.Errorf("a long name cut inside a character: %q", out.String())
	}
	// A name's bytes that are not UTF-8 are not written as they are.
	out.Reset()
	d.logCaller(as(0), true, "stop", "job", "\xff\xfe")
	if !strings.Contains(out.String(), "\ufffd") || !utf8.ValidString(out.String()) {
		t.Errorf("a name not UTF-8, logged: %q", out.String())
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
