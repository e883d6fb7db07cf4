package main

import (
	"fmt"
	"io"
	"log"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
)

// lineLogger is the daemon's root logger. It is an hclog.Logger that
// writes hclog's plain format itself, or hands each entry to the journal
// sink, so that a line costs neither hclog's formatting nor, under
// journald, hclog's formatting of a line it then throws away: three lines
// for every run, and hclog's time format alone was 3 % of the daemon's
// CPU in a stream of short runs (berth-bench -cpuprofile).
//
// The lines are hclog's, byte for byte: TestLineLoggerMatchesHclog and
// FuzzLineLogger hold it to hclog's own output. A line whose values the
// fast path does not know (an error, a float, a string with a newline or
// beyond ASCII, an odd argument) is formatted by hclog instead, over the
// same output; so are colour, which only a terminal gets, and the
// standard library loggers.
type lineLogger struct {
	core *lineCore
	name string
	// implied are With's key/values, in hclog's order (sorted by key, a
	// key given again replacing the value). withs are the arguments of
	// each With that made them, in order, for the hclog logger that
	// StandardLogger gives.
	implied []any
	withs   [][]any
	// fixed: implied's values are written once, impliedText, " k=v…":
	// each is a string, a number or a truth value, which cannot change.
	// Otherwise they are written at each line, as hclog writes them then.
	fixed       bool
	impliedText string
}

// lineCore is what a root logger and every logger named or made With from
// it share.
type lineCore struct {
	level atomic.Int32 // an hclog.Level
	// sink, under journald, takes every entry at or above its own level
	// instead of out, as it took them from hclog's intercept logger.
	sink *journalSink
	out  io.Writer
	// slow is hclog's own logger over the same output, at the same level:
	// it formats the lines the fast path does not.
	slow hclog.Logger
	now  func() time.Time

	// mu guards buf and stamp, and every write to out: slow takes it too
	// (plainLogger), and is never called with it held.
	mu sync.Mutex
	// buf is the line being formatted, kept for the next.
	buf   []byte
	stamp timeStamp
}

// plainLogger is the root logger writing plain lines to out, each with
// the time now gives.
func plainLogger(level hclog.Level, out io.Writer, now func() time.Time) *lineLogger {
	l := newLineLogger(level, out, nil, nil, now)
	l.core.slow = hclog.New(&hclog.LoggerOptions{Name: "berth", Level: level, Output: out, Color: hclog.ColorOff, TimeFn: now, Mutex: &l.core.mu})
	return l
}

// journalLogger is the root logger handing every entry to sink. hclog's
// own logger under it, for the standard library's loggers, sends to the
// same sink and writes nothing.
func journalLogger(level hclog.Level, sink *journalSink) *lineLogger {
	slow := hclog.NewInterceptLogger(&hclog.LoggerOptions{Name: "berth", Level: level, Output: io.Discard})
	slow.RegisterSink(sink)
	return newLineLogger(level, nil, sink, slow, time.Now)
}

func newLineLogger(level hclog.Level, out io.Writer, sink *journalSink, slow hclog.Logger, now func() time.Time) *lineLogger {
	if level == hclog.NoLevel {
		level = hclog.DefaultLevel // as hclog.New does
	}
	c := &lineCore{out: out, sink: sink, slow: slow, now: now}
	c.level.Store(int32(level))
	return &lineLogger{core: c, name: "berth", fixed: true}
}

// bracket is each level as hclog's plain format shows it.
var bracket = [...]string{
	hclog.Trace: "[TRACE]",
	hclog.Debug: "[DEBUG]",
	hclog.Info:  "[INFO] ",
	hclog.Warn:  "[WARN] ",
	hclog.Error: "[ERROR]",
}

func (l *lineLogger) Log(level hclog.Level, msg string, args ...any) { l.log(level, msg, args) }
func (l *lineLogger) Trace(msg string, args ...any)                  { l.log(hclog.Trace, msg, args) }
func (l *lineLogger) Debug(msg string, args ...any)                  { l.log(hclog.Debug, msg, args) }
func (l *lineLogger) Info(msg string, args ...any)                   { l.log(hclog.Info, msg, args) }
func (l *lineLogger) Warn(msg string, args ...any)                   { l.log(hclog.Warn, msg, args) }
func (l *lineLogger) Error(msg string, args ...any)                  { l.log(hclog.Error, msg, args) }

func (l *lineLogger) log(level hclog.Level, msg string, args []any) {
	c := l.core
	if c.sink != nil {
		if level >= c.sink.level && level != hclog.Off {
			all := make([]any, 0, len(l.implied)+len(args))
			c.sink.Accept(l.name, level, msg, append(append(all, l.implied...), args...)...)
		}
		return
	}
	if level < c.GetLevel() {
		return
	}
	if level > hclog.NoLevel && int(level) < len(bracket) && c.write(l, level, msg, args) {
		return
	}
	all := make([]any, 0, len(l.implied)+len(args))
	c.slow.ResetNamed(l.name).Log(level, msg, append(append(all, l.implied...), args...)...)
}

// write formats the line and writes it, or reports false, having written
// nothing, where a value needs hclog's format.
func (c *lineCore) write(l *lineLogger, level hclog.Level, msg string, args []any) bool {
	if len(args)%2 != 0 {
		return false // a value without a key, or a stack trace
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	b := c.stamp.append(c.buf[:0], c.now())
	b = append(b, ' ')
	b = append(b, bracket[level]...)
	b = append(b, ' ')
	switch {
	case l.name != "" && msg != "":
		b = append(append(append(b, l.name...), ": "...), msg...)
	case l.name != "":
		b = append(b, l.name...)
	default:
		b = append(b, msg...)
	}
	if len(l.implied) > 0 || len(args) > 0 {
		b = append(b, ':')
		ok := true
		if l.fixed {
			b = append(b, l.impliedText...)
		} else {
			b, ok = appendPairs(b, l.implied)
		}
		if ok {
			b, ok = appendPairs(b, args)
		}
		if !ok {
			c.buf = b
			return false
		}
	}
	b = append(b, '\n')
	c.buf = b
	_, _ = c.out.Write(b)
	return true
}

// appendPairs appends " key=value" for each pair as hclog's plain format
// does, or reports false where a key is not a string or a value is not
// one the fast path formats.
func appendPairs(b []byte, args []any) ([]byte, bool) {
	for i := 0; i < len(args); i += 2 {
		key, ok := args[i].(string)
		if !ok {
			return b, false
		}
		b = append(append(append(b, ' '), key...), '=')
		if b, ok = appendValue(b, args[i+1]); !ok {
			return b, false
		}
	}
	return b, true
}

// appendValue is the value of a pair as hclog writes it: a number as it
// is; a string as it is if every byte is between '-' and '~', quoted
// otherwise, and "" if empty; a list of strings or numbers as [a, b], the
// strings quoted Go's way.
func appendValue(b []byte, v any) ([]byte, bool) {
	switch v := v.(type) {
	case string:
		return appendString(b, v)
	case int:
		return strconv.AppendInt(b, int64(v), 10), true
	case int64:
		return strconv.AppendInt(b, v, 10), true
	case int32:
		return strconv.AppendInt(b, int64(v), 10), true
	case uint:
		return strconv.AppendUint(b, uint64(v), 10), true
	case uint64:
		return strconv.AppendUint(b, v, 10), true
	case uint32:
		return strconv.AppendUint(b, uint64(v), 10), true
	case bool:
		return strconv.AppendBool(b, v), true
	case []string:
		return appendList(b, v, strconv.AppendQuote), true
	case []int:
		return appendList(b, v, func(b []byte, n int) []byte { return strconv.AppendInt(b, int64(n), 10) }), true
	}
	return b, false
}

// appendList is a list as hclog writes one: [a, b].
func appendList[T any](b []byte, v []T, elem func([]byte, T) []byte) []byte {
	b = append(b, '[')
	for i, x := range v {
		if i > 0 {
			b = append(b, ", "...)
		}
		b = elem(b, x)
	}
	return append(b, ']')
}

// appendString is a string value: hclog quotes one with a byte outside
// '-'…'~' and escapes what it quotes; only printable ASCII, where that
// escaping is of '"' alone, is done here.
func appendString(b []byte, s string) ([]byte, bool) {
	if s == "" {
		return append(b, `""`...), true
	}
	quote := false
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c < ' ' || c > '~':
			return b, false // a newline, a control character, UTF-8
		case c < '-':
			quote = true
		}
	}
	if !quote {
		return append(b, s...), true
	}
	b = append(b, '"')
	for i := 0; i < len(s); i++ {
		if s[i] == '"' {
			b = append(b, '\\')
		}
		b = append(b, s[i])
	}
	return append(b, '"'), true
}

// timeStamp writes hclog's time format, 2006-01-02T15:04:05.000Z0700,
// formatting the date, the time and the zone once a second.
type timeStamp struct {
	sec          int64
	loc          *time.Location
	second, zone []byte
}

func (s *timeStamp) append(b []byte, t time.Time) []byte {
	if sec := t.Unix(); sec != s.sec || t.Location() != s.loc || s.second == nil {
		s.sec, s.loc = sec, t.Location()
		s.second = t.AppendFormat(s.second[:0], "2006-01-02T15:04:05")
		s.zone = t.AppendFormat(s.zone[:0], "Z0700")
	}
	ms := t.Nanosecond() / int(time.Millisecond) // truncated, as Go formats .000
	b = append(b, s.second...)
	b = append(b, '.', byte('0'+ms/100), byte('0'+ms/10%10), byte('0'+ms%10))
	return append(b, s.zone...)
}

func (l *lineLogger) IsTrace() bool { return l.core.GetLevel() == hclog.Trace } // as hclog's
func (l *lineLogger) IsDebug() bool { return l.core.GetLevel() <= hclog.Debug }
func (l *lineLogger) IsInfo() bool  { return l.core.GetLevel() <= hclog.Info }
func (l *lineLogger) IsWarn() bool  { return l.core.GetLevel() <= hclog.Warn }
func (l *lineLogger) IsError() bool { return l.core.GetLevel() <= hclog.Error }

func (l *lineLogger) ImpliedArgs() []any { return l.implied }
func (l *lineLogger) Name() string       { return l.name }

// With is a logger with these key/values on every line, combined with
// the ones it has as hclog combines them: sorted by key, a key given
// again replacing the value, a last value without a key kept under
// hclog.MissingKey.
func (l *lineLogger) With(args ...any) hclog.Logger {
	withs := append(slices.Clip(l.withs), args)
	var extra any
	if len(args)%2 != 0 {
		extra = args[len(args)-1]
		args = args[:len(args)-1]
	}
	values := make(map[string]any, len(l.implied)/2+len(args)/2)
	keys := make([]string, 0, len(l.implied)/2+len(args)/2)
	for i := 0; i < len(l.implied); i += 2 {
		// A key these hold twice (a MissingKey from two Withs) stays
		// twice, as in hclog.
		k := l.implied[i].(string)
		keys = append(keys, k)
		values[k] = l.implied[i+1]
	}
	for i := 0; i < len(args); i += 2 {
		k, ok := args[i].(string)
		if !ok {
			k = fmt.Sprint(args[i]) // where hclog would panic
		}
		if _, seen := values[k]; !seen {
			keys = append(keys, k)
		}
		values[k] = args[i+1]
	}
	slices.Sort(keys)
	sub := &lineLogger{core: l.core, name: l.name, withs: withs, implied: make([]any, 0, 2*len(keys)+2)}
	for _, k := range keys {
		sub.implied = append(sub.implied, k, values[k])
	}
	if extra != nil {
		sub.implied = append(sub.implied, hclog.MissingKey, extra)
	}
	sub.fixed = true
	for i := 1; i < len(sub.implied); i += 2 {
		switch sub.implied[i].(type) {
		case string, int, int64, int32, uint, uint64, uint32, bool:
		default:
			sub.fixed = false // a list may change before a line
		}
	}
	if sub.fixed {
		// A value the fast path cannot write leaves every line to hclog.
		text, ok := appendPairs(nil, sub.implied)
		sub.impliedText, sub.fixed = string(text), ok
	}
	return sub
}

// Named is a logger whose name is this one's, a dot, and name.
func (l *lineLogger) Named(name string) hclog.Logger {
	if l.name != "" {
		name = l.name + "." + name
	}
	return l.ResetNamed(name)
}

// ResetNamed is a logger named name, whatever this one's name.
func (l *lineLogger) ResetNamed(name string) hclog.Logger {
	sub := *l
	sub.name = name
	return &sub
}

// SetLevel sets the level of this logger and of every logger that shares
// its root, as hclog's do.
func (l *lineLogger) SetLevel(level hclog.Level) {
	l.core.level.Store(int32(level))
	l.core.slow.SetLevel(level)
}

func (l *lineLogger) GetLevel() hclog.Level { return l.core.GetLevel() }

func (c *lineCore) GetLevel() hclog.Level { return hclog.Level(c.level.Load()) }

// StandardLogger and StandardWriter are hclog's, for this logger's name
// and key/values.
func (l *lineLogger) StandardLogger(opts *hclog.StandardLoggerOptions) *log.Logger {
	return l.hclog().StandardLogger(opts)
}

func (l *lineLogger) StandardWriter(opts *hclog.StandardLoggerOptions) io.Writer {
	return l.hclog().StandardWriter(opts)
}

func (l *lineLogger) hclog() hclog.Logger {
	h := l.core.slow.ResetNamed(l.name)
	for _, args := range l.withs {
		h = h.With(args...)
	}
	return h
}
