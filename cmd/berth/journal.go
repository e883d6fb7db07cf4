package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/coreos/go-systemd/v22/journal"
	"github.com/hashicorp/go-hclog"
)

// journalWriter turns hclog's JSON entries into native journal entries: the
// level becomes PRIORITY (so `journalctl -p warning` works; hclog alone
// writes everything at info), and every key/value becomes a field —
// job → BERTH_JOB, run → BERTH_RUN — so `journalctl BERTH_JOB=train` is a
// job's life story. An entry journald refuses goes to fallback instead.
type journalWriter struct {
	fallback io.Writer
}

var journalPriority = map[hclog.Level]journal.Priority{
	hclog.Trace: journal.PriDebug,
	hclog.Debug: journal.PriDebug,
	hclog.Info:  journal.PriInfo,
	hclog.Warn:  journal.PriWarning,
	hclog.Error: journal.PriErr,
}

func (w journalWriter) Write(p []byte) (int, error) { return w.LevelWrite(hclog.Info, p) }

func (w journalWriter) LevelWrite(level hclog.Level, p []byte) (int, error) {
	msg, vars := journalEntry(p)
	prio, ok := journalPriority[level]
	if !ok {
		prio = journal.PriInfo
	}
	if err := journal.Send(msg, prio, vars); err != nil {
		fmt.Fprintf(w.fallback, "<%d>%s", prio, p)
	}
	return len(p), nil
}

// journalEntry reads one hclog JSON entry into a message and fields. The
// message keeps the key/values too, so `journalctl` without -o verbose still
// shows them.
func journalEntry(p []byte) (string, map[string]string) {
	var entry map[string]any
	dec := json.NewDecoder(bytes.NewReader(p))
	dec.UseNumber() // a pid or a byte count stays 2345678, not 2.345678e+06
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

// journalField makes a key a valid journal field name: uppercase letters,
// digits and underscores, not starting with one, at most 64 characters —
// journald silently drops anything else.
func journalField(k string) string {
	var b strings.Builder
	b.WriteString("BERTH_")
	for _, r := range strings.ToUpper(k) {
		if r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	s := b.String()
	if len(s) > 64 {
		s = s[:64]
	}
	return s
}

// syslogPrefixed writes each line with a syslog priority prefix ("<3>"),
// which journald takes from a stream as the line's priority.
type syslogPrefixed struct {
	w      io.Writer
	prefix string
}

func (s syslogPrefixed) Write(p []byte) (int, error) {
	if _, err := io.WriteString(s.w, s.prefix+string(p)); err != nil {
		return 0, err
	}
	return len(p), nil
}
