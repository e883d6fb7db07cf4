package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
)

// loggerPair is the daemon's plain logger and hclog's own, at the same
// level and time: what one writes, the other must. slow is what the
// lineLogger handed to hclog, for the cases that must not need it; it
// reaches out too, in its place among the lines.
type loggerPair struct {
	line, hclog hclog.Logger
	out, slow   bytes.Buffer
	want        bytes.Buffer
}

func newLoggerPair(level hclog.Level, at time.Time) *loggerPair {
	p := &loggerPair{}
	now := func() time.Time { return at }
	slow := hclog.New(&hclog.LoggerOptions{Name: "berth", Level: level, Output: io.MultiWriter(&p.out, &p.slow), Color: hclog.ColorOff, TimeFn: now})
	p.line = newLineLogger(level, &p.out, nil, slow, now)
	p.hclog = hclog.New(&hclog.LoggerOptions{Name: "berth", Level: level, Output: &p.want, Color: hclog.ColorOff, TimeFn: now})
	return p
}

// both applies f to each logger.
func (p *loggerPair) both(f func(hclog.Logger)) {
	f(p.line)
	f(p.hclog)
}

func (p *loggerPair) got() string { return p.out.String() }

var lineTimes = []time.Time{
	time.Date(2026, 12, 4, 7, 57, 3, 238_999_999, time.UTC),
	time.Date(2026, 1, 2, 3, 4, 5, 0, time.FixedZone("CET", 3600)),
	time.Date(1999, 12, 31, 23, 59, 59, 999_000_000, time.FixedZone("", -(9*3600+30*60))),
	time.Date(2026, 6, 30, 12, 0, 0, 7_000_000, time.Local),
}

// TestLineLoggerMatchesHclog: every line is hclog's, byte for byte, and
// the lines of a run (strings, numbers, lists) are written without hclog.
func TestLineLoggerMatchesHclog(t *testing.T) {
	type stringer struct{ s string }
	cases := []struct {
		name string
		fast bool // written without hclog
		log  func(hclog.Logger)
	}{
		{"started", true, func(l hclog.Logger) {
			l.Named("job").With("job", "true-01-002").Info("started", "run", uint64(1234), "pid", 56789, "gpus", []string{}, "cpus", 1, "grant_to_running_us", int64(564))
		}},
		{"placed with cards", true, func(l hclog.Logger) {
			l.Named("job").With("job", "train").Info("placed", "cpus", 4, "gpus", []string{"0", "GPU-4f2a", `odd"name`}, "ram_bytes", int64(1<<36), "gpu_mem_bytes", int64(0), "waited_ms", int64(12))
		}},
		{"exited", true, func(l hclog.Logger) {
			l.Named("job").With("job", "a").Warn("exited", "run", uint64(7), "reason", "failed", "duration_ms", int64(3), "exit_code", 3, "signal", "", "oom", false, "ids", []int{3, 1, 2})
		}},
		{"quoted strings", true, func(l hclog.Logger) {
			l.Error("cannot start", "error", "start /bin/x: no such file", "why", `say "hi"`, "a", "(paren)", "b", "back\\slash", "c", "a=b,c", "d", "~-", "e", " ")
		}},
		{"every level", true, func(l hclog.Logger) {
			l.Trace("t", "n", int32(-1))
			l.Debug("d", "n", uint32(2))
			l.Info("i", "n", uint(3))
			l.Warn("w", "n", true)
			l.Error("e")
			l.Log(hclog.Info, "via Log", "k", "v")
		}},
		{"names", true, func(l hclog.Logger) {
			l.Info("")
			l.ResetNamed("").Info("no name")
			l.ResetNamed("").Info("")
			l.ResetNamed("").Info("", "k", 1)
			l.Named("a").Named("b").Info("nested")
			l.Named("a").ResetNamed("x").Info("reset")
			l.ResetNamed("").Named("first").Info("named from nothing")
		}},
		{"with, combined as hclog does", true, func(l hclog.Logger) {
			w := l.With("z", 1, "a", "x").With("m", 2, "a", "y")
			w.Info("sorted, the last a wins", "k", "v")
			w.Named("sub").Info("kept through Named")
			w.ResetNamed("r").Info("and ResetNamed")
			l.With().Info("empty With")
		}},
		{"below the level", true, func(l hclog.Logger) {
			l.Debug("not written", "k", "v")
			l.Log(hclog.NoLevel, "not written either")
		}},
		{"values hclog formats", false, func(l hclog.Logger) {
			l.Info("x", "err", errors.New("boom"), "f", 1.5, "d", 1500*time.Millisecond, "nil", nil,
				"s", stringer{"v"}, "m", map[string]int{"a": 1}, "i8", int8(-3), "u16", uint16(9), "fmt", hclog.Fmt("%03d", 7),
				"hex", hclog.Hex(255), "q", hclog.Quote("a b"), "b", []byte("ab"), "sl", []any{"a b", 1})
		}},
		{"multi-line and non-ASCII strings", false, func(l hclog.Logger) {
			l.Info("x", "out", "line one\nline two", "name", "zürich", "tab", "a\tb", "bell", "\a")
		}},
		{"odd arguments", false, func(l hclog.Logger) {
			l.Info("x", "k", "v", "lonely")
			l.Info("y", hclog.CapturedStacktrace("stack\n  here"))
			l.Info("z", 7, "key not a string")
		}},
		{"implied values hclog formats", false, func(l hclog.Logger) {
			l.With("err", errors.New("e"), "k", "v").Info("x", "n", 1)
		}},
		{"a list given to With, written as it is at the line", true, func(l hclog.Logger) {
			gpus := []string{"0"}
			w := l.With("gpus", gpus, "job", "a")
			gpus[0] = "changed"
			w.Info("x")
		}},
		{"a key With holds twice", true, func(l hclog.Logger) {
			l.With(hclog.MissingKey, 1, 2).With("a", 3).Info("x")
		}},
		{"the standard library's logger", false, func(l hclog.Logger) {
			l.With("z", 1, "odd").StandardLogger(&hclog.StandardLoggerOptions{ForceLevel: hclog.Info}).Print("std")
			l.Named("http").With("k", "v").StandardWriter(&hclog.StandardLoggerOptions{InferLevels: true}).Write([]byte("[WARN] from a writer\n"))
		}},
		{"a value without a key in With", true, func(l hclog.Logger) {
			l.With("odd").Info("y")
			l.With("k", "v", "odd").Info("z")
		}},
		{"levels hclog formats", false, func(l hclog.Logger) {
			l.Log(hclog.Off, "off is above error")
			l.Log(hclog.Level(99), "and this")
		}},
	}
	for _, at := range lineTimes {
		for _, c := range cases {
			t.Run(at.Format(time.RFC3339Nano)+"/"+c.name, func(t *testing.T) {
				p := newLoggerPair(hclog.Info, at)
				p.both(c.log)
				if p.got() != p.want.String() {
					t.Errorf("the line logger wrote\n%s\nhclog\n%s", p.got(), p.want.String())
				}
				if c.fast && p.slow.Len() > 0 {
					t.Errorf("hclog wrote lines the fast path should have:\n%s", p.slow.String())
				}
				if !c.fast && p.slow.Len() == 0 {
					t.Errorf("hclog wrote none of these lines, so the case does not test the way to it")
				}
			})
		}
	}
}

// FuzzLineLogger: whatever the message, key, values, time and level, the
// line logger writes what hclog does.
func FuzzLineLogger(f *testing.F) {
	f.Add("started", "job", "train-01", int64(12), true, int64(1_764_835_023), int64(238_999_999), int32(0), uint8(3))
	f.Add("a b", "k", `x "y" z`, int64(-1), false, int64(0), int64(0), int32(3600), uint8(1))
	f.Add("", "", "", int64(0), false, int64(-1), int64(999_999_999), int32(-34200), uint8(0))
	f.Add("msg\n", "k=", "é\n\t", int64(1<<62), true, int64(253_402_300_799), int64(1), int32(86399), uint8(6))
	f.Fuzz(func(t *testing.T, msg, key, val string, n int64, b bool, sec, nsec int64, zone int32, level uint8) {
		at := time.Unix(sec%(1<<40), nsec).In(time.FixedZone("", int(zone%(48*3600))))
		p := newLoggerPair(hclog.Info, at)
		lvl := hclog.Level(level % 8)
		p.both(func(l hclog.Logger) {
			l.Log(lvl, msg, key, val, "n", n, "b", b, "l", []string{val, key})
			l.Named(key).With(key, val).Warn(msg, "v", val)
		})
		if p.got() != p.want.String() {
			t.Errorf("the line logger wrote\n%q\nhclog\n%q", p.got(), p.want.String())
		}
	})
}

// TestLineLoggerLevels: at every level, the same lines are written, and
// IsTrace… say the same, as hclog's; no level at all is hclog's default.
func TestLineLoggerLevels(t *testing.T) {
	for _, level := range []hclog.Level{hclog.NoLevel, hclog.Trace, hclog.Debug, hclog.Info, hclog.Warn, hclog.Error, hclog.Off} {
		p := newLoggerPair(level, lineTimes[0])
		var is [2][]bool
		for i, l := range []hclog.Logger{p.line, p.hclog} {
			is[i] = []bool{l.IsTrace(), l.IsDebug(), l.IsInfo(), l.IsWarn(), l.IsError()}
			if l.GetLevel() != p.hclog.GetLevel() {
				t.Errorf("level %v: GetLevel %v, hclog's %v", level, l.GetLevel(), p.hclog.GetLevel())
			}
			for _, at := range []hclog.Level{hclog.NoLevel, hclog.Trace, hclog.Debug, hclog.Info, hclog.Warn, hclog.Error, hclog.Off} {
				l.Log(at, "at", "level", int(at))
			}
		}
		if fmt.Sprint(is[0]) != fmt.Sprint(is[1]) {
			t.Errorf("level %v: Is… %v, hclog's %v", level, is[0], is[1])
		}
		if p.got() != p.want.String() {
			t.Errorf("level %v: the line logger wrote\n%s\nhclog\n%s", level, p.got(), p.want.String())
		}
	}
}

// TestLineLoggerSetLevel: a level set on any logger holds for all that
// share its root, on the fast path and hclog's alike.
func TestLineLoggerSetLevel(t *testing.T) {
	p := newLoggerPair(hclog.Info, lineTimes[0])
	sub := p.line.Named("job").With("job", "a")
	p.line.Debug("not yet")
	sub.SetLevel(hclog.Debug)
	if !p.line.IsDebug() || p.line.GetLevel() != hclog.Debug || p.line.IsTrace() {
		t.Errorf("after SetLevel(Debug) on a sub-logger the root is at %v", p.line.GetLevel())
	}
	p.line.Debug("now", "k", 1)
	p.line.Debug("and hclog's", "err", errors.New("x"))
	got := p.got()
	if strings.Contains(got, "not yet") || !strings.Contains(got, "[DEBUG] berth: now: k=1") || !strings.Contains(got, "[DEBUG] berth: and hclog's: err=x") {
		t.Errorf("lines:\n%s", got)
	}
}

// TestLineLoggerJournal: under journald every entry, on whichever path,
// reaches the sink with its name, level, and the logger's key/values
// before the line's, as hclog's intercept logger gave them; nothing is
// written.
func TestLineLoggerJournal(t *testing.T) {
	var got, want sent
	l := journalLogger(hclog.Info, &journalSink{level: hclog.Info, fallback: io.Discard, send: got.send})
	h := hclog.NewInterceptLogger(&hclog.LoggerOptions{Name: "berth", Level: hclog.Info, Output: io.Discard})
	h.RegisterSink(&journalSink{level: hclog.Info, fallback: io.Discard, send: want.send})
	for _, lg := range []hclog.Logger{l, h} {
		lg.Named("job").With("job", "train", "z", 2).Warn("exited", "run", 7, "err", errors.New("boom"), "out", "two\nlines")
		lg.Debug("below the level")
		lg.StandardLogger(&hclog.StandardLoggerOptions{ForceLevel: hclog.Error}).Print("from the standard logger")
		lg.With("odd").Info("x", "k")
		// The sink's level decides, not the logger's.
		lg.SetLevel(hclog.Error)
		lg.Warn("after SetLevel")
	}
	if fmt.Sprint(got.msgs) != fmt.Sprint(want.msgs) || fmt.Sprint(got.prios) != fmt.Sprint(want.prios) || fmt.Sprint(got.vars) != fmt.Sprint(want.vars) {
		t.Errorf("sent\n%q %v %v\nwant\n%q %v %v", got.msgs, got.prios, got.vars, want.msgs, want.prios, want.vars)
	}
	if len(got.msgs) != 4 {
		t.Errorf("%d entries, want 4: %q", len(got.msgs), got.msgs)
	}
}

// TestLineLoggerConcurrent: lines written from many goroutines at once,
// some by hclog, come out whole, one write each, to a writer that is not
// safe for concurrent use: hclog takes the line logger's lock.
func TestLineLoggerConcurrent(t *testing.T) {
	var out bytes.Buffer
	l := plainLogger(hclog.Info, &out, time.Now)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			job := l.Named("job").With("job", fmt.Sprintf("j%d", g))
			for i := range 200 {
				if i%2 == 0 {
					job.Info("started", "run", i, "gpus", []string{"0"})
				} else {
					job.Info("started", "run", i, "gpus", []string{"0"}, "share", 0.5) // hclog's
				}
			}
		})
	}
	wg.Wait()
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if len(lines) != 8*200 {
		t.Fatalf("%d lines, want %d", len(lines), 8*200)
	}
	for _, line := range lines {
		if !strings.Contains(line, " [INFO]  berth.job: started: job=j") || !strings.Contains(line, ` gpus=["0"]`) {
			t.Fatalf("a line not whole: %q", line)
		}
	}
}

// BenchmarkLogLine is a run's started line written as plain text, by the
// daemon's logger and by hclog's.
func BenchmarkLogLine(b *testing.B) {
	for _, c := range []struct {
		name string
		root hclog.Logger
	}{
		{"line", plainLogger(hclog.Info, io.Discard, time.Now)},
		{"hclog", hclog.New(&hclog.LoggerOptions{Name: "berth", Level: hclog.Info, Output: io.Discard, Color: hclog.ColorOff})},
	} {
		b.Run(c.name, func(b *testing.B) {
			log := c.root.Named("job").With("job", "true-03-042")
			b.ReportAllocs()
			for b.Loop() {
				log.Info("started", "run", uint64(12345), "pid", 45678, "gpus", []string{}, "cpus", 1, "grant_to_running_us", int64(564))
			}
		})
	}
}

// TestLineLoggerWithKeyNotString: a key that is not a string, on which
// hclog's With panics, is named by its text.
func TestLineLoggerWithKeyNotString(t *testing.T) {
	var out bytes.Buffer
	plainLogger(hclog.Info, &out, func() time.Time { return lineTimes[0] }).With(7, "v").Info("x")
	if want := "2026-12-04T07:57:03.238Z [INFO]  berth: x: 7=v\n"; out.String() != want {
		t.Errorf("got %q, want %q", out.String(), want)
	}
}
