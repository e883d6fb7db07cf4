package main

import (
	"bytes"
	"encoding"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/coreos/go-systemd/v22/journal"
	"github.com/hashicorp/go-hclog"
)

// journalSink sends the daemon's entries to the journal as native entries,
// from the logger's own values: the level becomes PRIORITY (so `journalctl
// -p warning` works; hclog alone writes everything at info), and every
// key/value becomes a field — job → BERTH_JOB, run → BERTH_RUN — so
// `journalctl BERTH_JOB=train` is a job's life story. An entry journald
// refuses goes to fallback instead. The entries once went through hclog's
// JSON format and were parsed back: 12–15 µs and 4.2 KB for each line,
// three of them for each run. The daemon's logger (lineLogger) hands the
// entries over without formatting them first, which hclog's intercept
// logger did, to io.Discard (BenchmarkJournalLine: 2.7–3.2 µs and 1.4 KB,
// against 3.2–3.8 µs and 1.6 KB through hclog).
type journalSink struct {
	level    hclog.Level
	fallback io.Writer
	send     func(msg string, prio journal.Priority, vars map[string]string) error
}

var journalPriority = map[hclog.Level]journal.Priority{
	hclog.Trace: journal.PriDebug,
	hclog.Debug: journal.PriDebug,
	hclog.Info:  journal.PriInfo,
	hclog.Warn:  journal.PriWarning,
	hclog.Error: journal.PriErr,
}

// Accept takes one entry of the logger (hclog.SinkAdapter): every entry,
// whatever its level.
func (s *journalSink) Accept(name string, level hclog.Level, msg string, args ...any) {
	if level < s.level || level == hclog.Off {
		return
	}
	text, vars := journalEntry(name, msg, args)
	prio, ok := journalPriority[level]
	if !ok {
		prio = journal.PriInfo
	}
	if err := s.send(text, prio, vars); err != nil {
		// Each line with the entry's priority: a value's own line break
		// must not start a line whose priority the value chose.
		io.WriteString(s.fallback, prefixLines(fmt.Sprintf("<%d>", prio), text+"\n"))
	}
}

// journalEntry is one entry's message and fields. The message keeps the
// key/values too, so `journalctl` without -o verbose still shows them.
func journalEntry(name, msg string, args []any) (string, map[string]string) {
	if n := len(args); n%2 != 0 {
		// As hclog does: a value without a key.
		if cs, ok := args[n-1].(hclog.CapturedStacktrace); ok {
			args = append(args[:n-1:n-1], "stacktrace", cs)
		} else {
			args = append(args[:n-1:n-1], hclog.MissingKey, args[n-1])
		}
	}
	fields := make(map[string]string, len(args)/2)
	for i := 0; i < len(args); i += 2 {
		k, ok := args[i].(string)
		if !ok {
			k = fmt.Sprintf("%s", args[i])
		}
		if strings.HasPrefix(k, "@") {
			continue // the keys of hclog's own, in its JSON
		}
		fields[k] = journalValue(args[i+1])
	}
	vars := map[string]string{"SYSLOG_IDENTIFIER": "berth"}
	var b strings.Builder
	if name != "" {
		b.WriteString(name)
		b.WriteString(": ")
	}
	b.WriteString(msg)
	for i, k := range slices.Sorted(maps.Keys(fields)) {
		if i == 0 {
			b.WriteString(": ")
		} else {
			b.WriteByte(' ')
		}
		b.WriteString(k)
		b.WriteByte('=')
		b.WriteString(fields[k])
		vars[journalField(k)] = fields[k]
	}
	return b.String(), vars
}

// journalValue is v as an entry shows it, as it read when the entries went
// through hclog's JSON format: a string as it is, a number or a truth value
// in its plain form, an error by its text, anything else as it reads once
// through JSON (a duration in nanoseconds, a time in RFC 3339, a list as
// [a b]).
func journalValue(v any) string {
	switch v := v.(type) {
	case string:
		return v
	case int:
		return strconv.Itoa(v)
	case int64:
		return strconv.FormatInt(v, 10)
	case int32:
		return strconv.FormatInt(int64(v), 10)
	case uint:
		return strconv.FormatUint(uint64(v), 10)
	case uint64:
		return strconv.FormatUint(v, 10)
	case uint32:
		return strconv.FormatUint(uint64(v), 10)
	case bool:
		return strconv.FormatBool(v)
	case hclog.Format:
		return fmt.Sprintf(v[0].(string), v[1:]...)
	case error:
		switch v.(type) {
		case json.Marshaler, encoding.TextMarshaler:
		default:
			return v.Error()
		}
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	var decoded any
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber() // a pid or a byte count stays 2345678, not 2.345678e+06
	if dec.Decode(&decoded) != nil {
		return string(b)
	}
	if s, ok := decoded.(string); ok {
		return s
	}
	return fmt.Sprint(decoded)
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
	if _, err := io.WriteString(s.w, prefixLines(s.prefix, string(p))); err != nil {
		return 0, err
	}
	return len(p), nil
}

// prefixLines puts prefix before each line of text: the first, and each
// after a line break but a last one.
func prefixLines(prefix, text string) string {
	last := strings.HasSuffix(text, "\n")
	text = strings.TrimSuffix(text, "\n")
	text = prefix + strings.ReplaceAll(text, "\n", "\n"+prefix)
	if last {
		text += "\n"
	}
	return text
}
