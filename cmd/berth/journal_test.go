package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/coreos/go-systemd/v22/journal"
	"github.com/hashicorp/go-hclog"
)

// sent is a journal that keeps what it is sent.
type sent struct {
	msgs  []string
	prios []journal.Priority
	vars  []map[string]string
}

func (s *sent) send(msg string, prio journal.Priority, vars map[string]string) error {
	s.msgs, s.prios, s.vars = append(s.msgs, msg), append(s.prios, prio), append(s.vars, vars)
	return nil
}

// sentLogger is the daemon's logger under journald, its entries sent to s.
func sentLogger(level hclog.Level, s *sent) hclog.Logger {
	return journalLogger(level, &journalSink{level: level, fallback: io.Discard, send: s.send})
}

func TestJournalEntry(t *testing.T) {
	var s sent
	sentLogger(hclog.Info, &s).Named("job").With("job", "train").Warn("exited", "run", 7, "exit_code", 3, "reason", "failed", "gpus", []string{"GPU-a"}, "pid", 2345678)
	if len(s.msgs) != 1 {
		t.Fatalf("%d entries sent, want 1", len(s.msgs))
	}
	if want := `berth.job: exited: exit_code=3 gpus=[GPU-a] job=train pid=2345678 reason=failed run=7`; s.msgs[0] != want {
		t.Errorf("message\n got %s\nwant %s", s.msgs[0], want)
	}
	if s.prios[0] != journal.PriWarning {
		t.Errorf("priority %d, want %d", s.prios[0], journal.PriWarning)
	}
	want := map[string]string{
		"SYSLOG_IDENTIFIER": "berth",
		"BERTH_JOB":         "train",
		"BERTH_RUN":         "7",
		"BERTH_EXIT_CODE":   "3",
		"BERTH_REASON":      "failed",
		"BERTH_GPUS":        "[GPU-a]",
		"BERTH_PID":         "2345678",
	}
	if !maps.Equal(s.vars[0], want) {
		t.Errorf("fields\n got %v\nwant %v", s.vars[0], want)
	}
}

// TestJournalEntryLevels: the logger's level holds for the journal, the
// standard logger's lines reach it too, and an entry the journal refuses
// goes to the fallback.
func TestJournalEntryLevels(t *testing.T) {
	var s sent
	l := sentLogger(hclog.Info, &s)
	l.Debug("not sent")
	l.Error("sent", "n", 1)
	l.StandardLogger(&hclog.StandardLoggerOptions{ForceLevel: hclog.Warn}).Print("from the standard logger")
	if want := []string{"berth: sent: n=1", "berth: from the standard logger"}; !slices.Equal(s.msgs, want) {
		t.Errorf("sent %q, want %q", s.msgs, want)
	}
	if want := []journal.Priority{journal.PriErr, journal.PriWarning}; !slices.Equal(s.prios, want) {
		t.Errorf("priorities %v, want %v", s.prios, want)
	}

	var fallback bytes.Buffer
	refused := &journalSink{level: hclog.Info, fallback: &fallback, send: func(string, journal.Priority, map[string]string) error {
		return errors.New("refused")
	}}
	refused.Accept("berth", hclog.Warn, "hello", "k", "v")
	if got, want := fallback.String(), "<4>berth: hello: k=v\n"; got != want {
		t.Errorf("fallback got %q, want %q", got, want)
	}
	// A value's line break starts no line of another priority: journald
	// reads a "<0>" at a line's start as that line's.
	fallback.Reset()
	refused.Accept("berth", hclog.Warn, "hello", "file", "a\n<0>forged")
	if got, want := fallback.String(), "<4>berth: hello: file=a\n<4><0>forged\n"; got != want {
		t.Errorf("fallback got %q, want %q", got, want)
	}
	var abort bytes.Buffer
	fmt.Fprint(syslogPrefixed{w: &abort, prefix: "<3>"}, "stuck: where=\n  | reload\n  | <0>x\n")
	if got, want := abort.String(), "<3>stuck: where=\n<3>  | reload\n<3>  | <0>x\n"; got != want {
		t.Errorf("syslogPrefixed wrote %q, want %q", got, want)
	}
}

// jsonEntry is how an entry read when the daemon's logger wrote hclog's
// JSON format and the journal's writer parsed it back: what journalEntry
// must give for every value, without the JSON.
func jsonEntry(p []byte) (string, map[string]string) {
	var entry map[string]any
	dec := json.NewDecoder(bytes.NewReader(p))
	dec.UseNumber()
	if err := dec.Decode(&entry); err != nil {
		return strings.TrimSpace(string(p)), nil
	}
	msg, _ := entry["@message"].(string)
	vars := map[string]string{"SYSLOG_IDENTIFIER": "berth"}
	var text []string
	for _, k := range slices.Sorted(maps.Keys(entry)) {
		if strings.HasPrefix(k, "@") {
			continue
		}
		v := fmt.Sprint(entry[k])
		if s, ok := entry[k].(string); ok {
			v = s
		}
		vars[journalField(k)] = v
		text = append(text, k+"="+v)
	}
	if module, ok := entry["@module"].(string); ok && module != "" {
		msg = module + ": " + msg
	}
	if len(text) > 0 {
		msg += ": " + strings.Join(text, " ")
	}
	return msg, vars
}

type named int

func (n named) String() string { return fmt.Sprintf("named(%d)", int(n)) }

// TestJournalEntryAsJSON: every kind of value reads in the journal as it
// did when the entries went through hclog's JSON format.
func TestJournalEntryAsJSON(t *testing.T) {
	_, ipnet, _ := net.ParseCIDR("10.0.0.0/8")
	cases := [][]any{
		{"s", "text with spaces", "empty", ""},
		{"i", 7, "i64", int64(-9007199254740993), "i32", int32(-5), "u", uint(3), "u64", uint64(18446744073709551615), "u32", uint32(4)},
		{"yes", true, "no", false},
		{"err", errors.New("it broke"), "wrapped", fmt.Errorf("outer: %w", errors.New("inner"))},
		{"list", []string{"a", "b c"}, "ints", []int{1, 2}, "empty", []string{}, "nil", nil},
		{"f", 1.5, "big", 1e21, "small", 1e-7, "f32", float32(0.1)},
		{"d", 1500 * time.Millisecond, "t", time.Date(2026, 12, 3, 17, 0, 0, 5, time.UTC)},
		{"named", named(3), "fmt", hclog.Fmt("%d-%s", 4, "x"), "net", ipnet},
		{"map", map[string]int{"b": 2, "a": 1}, "struct", struct{ A int }{1}},
		{"odd"},
		{7, "key not a string"},
		{"k", "v", "k", "last"},
	}
	for _, args := range cases {
		var buf bytes.Buffer
		hclog.New(&hclog.LoggerOptions{Name: "berth", Output: &buf, JSONFormat: true, DisableTime: true}).Named("job").Info("an entry", args...)
		wantMsg, wantVars := jsonEntry(buf.Bytes())
		var s sent
		sentLogger(hclog.Info, &s).Named("job").Info("an entry", args...)
		if len(s.msgs) != 1 {
			t.Fatalf("%v: %d entries sent, want 1", args, len(s.msgs))
		}
		if s.msgs[0] != wantMsg {
			t.Errorf("%v: message\n got %s\nwant %s", args, s.msgs[0], wantMsg)
		}
		if !maps.Equal(s.vars[0], wantVars) {
			t.Errorf("%v: fields\n got %v\nwant %v", args, s.vars[0], wantVars)
		}
	}
}

func TestJournalField(t *testing.T) {
	tests := map[string]string{
		"job":       "BERTH_JOB",
		"exit_code": "BERTH_EXIT_CODE",
		"ram-bytes": "BERTH_RAM_BYTES",
		"élan":      "BERTH__LAN",
		"a_very_long_key_that_goes_on_and_on_and_on_and_on_and_on_forever": "BERTH_A_VERY_LONG_KEY_THAT_GOES_ON_AND_ON_AND_ON_AND_ON_AND_ON_F",
	}
	for in, want := range tests {
		if got := journalField(in); got != want {
			t.Errorf("journalField(%q) = %q, want %q", in, got, want)
		}
		if len(journalField(in)) > 64 {
			t.Errorf("journalField(%q) is longer than journald accepts", in)
		}
	}
}

// BenchmarkJournalLine is one of a run's log lines under journald, up to
// the datagram (not sent).
func BenchmarkJournalLine(b *testing.B) {
	l := journalLogger(hclog.Info, &journalSink{level: hclog.Info, fallback: io.Discard, send: func(string, journal.Priority, map[string]string) error { return nil }})
	log := l.Named("job").With("job", "true-03-042")
	b.ReportAllocs()
	for b.Loop() {
		log.Info("exited", "run", 12345, "reason", "exited", "duration_ms", 3, "exit_code", 0)
	}
}
