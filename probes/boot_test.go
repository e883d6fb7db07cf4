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
