package probes

import (
	"path/filepath"
	"strings"
	"testing"
)

func TestParseHostname(t *testing.T) {
	for in, want := range map[string]string{
		"gpubox\n":        "gpubox",
		"gpubox":          "gpubox",
		"  gpubox \nx\n":  "gpubox",
		"":                "",
		"a.example.org\n": "a.example.org",
	} {
		if got, err := parseHostname(strings.NewReader(in)); err != nil || got != want {
			t.Errorf("parseHostname(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
}

func TestProbeHostname(t *testing.T) {
	if got := probeHostname(filepath.Join("testdata", "hostname", "plain")); got != "gpubox" {
		t.Errorf("probeHostname = %q, want gpubox", got)
	}
	if got := probeHostname(t.TempDir()); got != "" {
		t.Errorf("probeHostname of an empty tree = %q, want empty", got)
	}
}

func FuzzParseHostname(f *testing.F) {
	for _, s := range []string{"gpubox\n", "", "\n\n", " x "} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		name, err := parseHostname(strings.NewReader(in))
		if err == nil && (strings.Contains(name, "\n") || name != strings.TrimSpace(name)) {
			t.Fatalf("%q gave %q", in, name)
		}
	})
}
