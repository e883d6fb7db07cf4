package probes

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestParseBootTime(t *testing.T) {
	for in, want := range map[string]int64{
		"cpu  1 2 3\nintr 5\nbtime 1764633600\nprocesses 9\n": 1764633600,
		"btime 1764633600":    1764633600,
		"ctxt 4\n":            0,
		"btime x\n":           0,
		"btime -5\n":          0,
		"":                    0,
		"xbtime 1764633600\n": 0,
	} {
		got, err := parseBootTime(strings.NewReader(in))
		if want == 0 {
			if err == nil {
				t.Errorf("parseBootTime(%q) = %v, want an error", in, got)
			}
			continue
		}
		if err != nil || !got.Equal(time.Unix(want, 0)) {
			t.Errorf("parseBootTime(%q) = %v, %v; want %v", in, got, err, time.Unix(want, 0))
		}
	}
}

func TestProbeBootTime(t *testing.T) {
	root := t.TempDir()
	if got := probeBootTime(root); !got.IsZero() {
		t.Errorf("probeBootTime of an empty tree = %v, want the zero time", got)
	}
	if err := os.MkdirAll(filepath.Join(root, "proc"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "proc", "stat"), []byte("cpu 1\nbtime 1700000000\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := probeBootTime(root); !got.Equal(time.Unix(1700000000, 0)) {
		t.Errorf("probeBootTime = %v", got)
	}
	// This machine's own.
	if got := probeBootTime("/"); got.IsZero() || got.After(time.Now()) {
		t.Errorf("this machine booted at %v?", got)
	}
}

func FuzzParseBootTime(f *testing.F) {
	for _, s := range []string{"btime 1764633600\n", "", "btime \n", "cpu 1\nbtime 99999999999999999999\n"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		got, err := parseBootTime(strings.NewReader(in))
		if err == nil && got.Unix() <= 0 {
			t.Fatalf("%q gave %v", in, got)
		}
	})
}

// initStat is a proc/1/stat whose command name holds what could be taken
// for fields, started at ticks.
func initStat(ticks string) string {
	return "1 (sys temd) (x) 5) S 0 1 1 0 -1 4194560 79403 3218466 129 1296 246 186 7327 4203 20 0 1 0 " + ticks + " 22777856 3259 18446744073709551615 1 1 0 0 0 0 671173123 4096 1260 0 0 0 17 0 0 0 0 0 0\n"
}

func TestParseStartTicks(t *testing.T) {
	for in, want := range map[string]int64{
		initStat("2512"):          2512,
		initStat("0"):             0,
		initStat("x"):             -1,
		initStat("-3"):            -1,
		initStat("9999999999999"): -1, // past a century
		"1 (init) S 0 1":          -1,
		"1 init S 0 1 1 0 -1 4194560 79403 3218466 129 1296 246 186 7327 4203 20 0 1 0 25 22777856": -1,
		"": -1,
	} {
		got, err := parseStartTicks(strings.NewReader(in))
		if want < 0 {
			if err == nil {
				t.Errorf("parseStartTicks(%q) = %d, want an error", in, got)
			}
			continue
		}
		if err != nil || got != uint64(want) {
			t.Errorf("parseStartTicks(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
}

func TestProbeInitStarted(t *testing.T) {
	root := t.TempDir()
	booted := time.Unix(1700000000, 0)
	if got := probeInitStarted(root, booted); !got.IsZero() {
		t.Errorf("probeInitStarted of an empty tree = %v, want the zero time", got)
	}
	if err := os.MkdirAll(filepath.Join(root, "proc", "1"), 0o755); err != nil {
		t.Fatal(err)
	}
	// A container started 3 days and 2.5 s after its kernel booted.
	if err := os.WriteFile(filepath.Join(root, "proc", "1", "stat"), []byte(initStat("25920250")), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, want := probeInitStarted(root, booted), booted.Add(72*time.Hour+2500*time.Millisecond); !got.Equal(want) {
		t.Errorf("probeInitStarted = %v, want %v", got, want)
	}
	if got := probeInitStarted(root, time.Time{}); !got.IsZero() {
		t.Errorf("probeInitStarted with no boot time = %v, want the zero time", got)
	}
	// This machine's own: no earlier than its boot, and past.
	if _, err := os.ReadFile("/proc/1/stat"); err != nil {
		t.Skipf("this machine's PID 1 cannot be read here: %v", err)
	}
	inv, _ := Probe("/", nil)
	if got := inv.InitStarted; got.IsZero() || got.Before(inv.Booted) || got.After(time.Now()) {
		t.Errorf("PID 1 here started at %v, its kernel booted at %v?", got, inv.Booted)
	}
}

func FuzzParseStartTicks(f *testing.F) {
	for _, s := range []string{initStat("2512"), "", "1 ()", "1 (a) b c", initStat("18446744073709551615")} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		got, err := parseStartTicks(strings.NewReader(in))
		if err == nil && got > maxStartTicks {
			t.Fatalf("%q gave %d ticks", in, got)
		}
	})
}
