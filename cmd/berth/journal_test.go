package main

import (
	"bytes"
	"maps"
	"testing"

	"github.com/hashicorp/go-hclog"
)

func TestJournalEntry(t *testing.T) {
	// What hclog writes in JSON mode, as the daemon configures it.
	var buf bytes.Buffer
	log := hclog.New(&hclog.LoggerOptions{Name: "berth", Output: &buf, JSONFormat: true, DisableTime: true})
	log.Named("job").With("job", "train").Warn("exited", "run", 7, "exit_code", 3, "reason", "failed", "gpus", []string{"GPU-a"}, "pid", 2345678)

	msg, vars := journalEntry(buf.Bytes())
	if want := `berth.job: exited: exit_code=3 gpus=[GPU-a] job=train pid=2345678 reason=failed run=7`; msg != want {
		t.Errorf("message\n got %s\nwant %s", msg, want)
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
	if !maps.Equal(vars, want) {
		t.Errorf("fields\n got %v\nwant %v", vars, want)
	}
}

func TestJournalEntryNotJSON(t *testing.T) {
	msg, vars := journalEntry([]byte("plain text\n"))
	if msg != "plain text" || vars != nil {
		t.Errorf("got %q %v", msg, vars)
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
