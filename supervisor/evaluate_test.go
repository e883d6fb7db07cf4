package supervisor

import (
	"bytes"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"
)

// TestRelayLog: the child's hclog lines reach the daemon's log as entries of
// their own, and what is not a log line is kept for the cause of its death.
func TestRelayLog(t *testing.T) {
	var logged bytes.Buffer
	e := &Evaluator{Log: hclog.New(&hclog.LoggerOptions{Output: &logged, DisableTime: true})}
	var tail stderrTail
	e.relayLog(strings.NewReader(`{"@level":"info","@message":"print","file":"a.lua","line":3,"text":"hello"}
fatal error: runtime: out of memory
goroutine 1 [running]:
`), &tail)
	if got := logged.String(); got != "[INFO]  print: file=a.lua line=3 text=hello\n" {
		t.Errorf("relayed %q", got)
	}
	if got := firstLine(tail.String()); got != "fatal error: runtime: out of memory" {
		t.Errorf("kept %q first", got)
	}
}

// FuzzRelayLog: whatever a child writes on its stderr, relaying it neither
// panics nor keeps more than its bound.
func FuzzRelayLog(f *testing.F) {
	f.Add([]byte(`{"@level":"info","@message":"print","file":"a.lua"}` + "\n"))
	f.Add([]byte("fatal error: out of memory\n\x00\xff{\"@message\":[1,2]}\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		e := &Evaluator{Log: hclog.NewNullLogger()}
		var tail stderrTail
		e.relayLog(bytes.NewReader(b), &tail)
		if n := len(tail.String()); n > 2*stderrKeepBytes {
			t.Fatalf("kept %d bytes", n)
		}
	})
}
