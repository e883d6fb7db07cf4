package probes

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// env returns a lookupEnv that knows only the given variables.
func env(vars map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) {
		v, ok := vars[k]
		return v, ok
	}
}

func TestProbeGPUsCUDAVisibleDevices(t *testing.T) {
	// Every case sits on a tree with two cards in /dev, so a case that wrongly
	// falls through to /dev shows up as ["0" "1"].
	root := filepath.Join("testdata", "gpu", "two")
	tests := []struct {
		name       string
		vars       map[string]string
		wantNames  []string
		wantSource string
	}{
		{name: "unset", vars: nil, wantNames: []string{"0", "1"}, wantSource: SourceDev},
		{name: "empty", vars: map[string]string{"CUDA_VISIBLE_DEVICES": ""}, wantNames: nil, wantSource: SourceCUDAVisibleDevices},
		{name: "minus one", vars: map[string]string{"CUDA_VISIBLE_DEVICES": "-1"}, wantNames: nil, wantSource: SourceCUDAVisibleDevices},
		{name: "none", vars: map[string]string{"CUDA_VISIBLE_DEVICES": "none"}, wantNames: nil, wantSource: SourceCUDAVisibleDevices},
		{name: "NoDevFiles", vars: map[string]string{"CUDA_VISIBLE_DEVICES": "NoDevFiles"}, wantNames: nil, wantSource: SourceCUDAVisibleDevices},
		{name: "indices", vars: map[string]string{"CUDA_VISIBLE_DEVICES": "0,1"}, wantNames: []string{"0", "1"}, wantSource: SourceCUDAVisibleDevices},
		{name: "indices kept as written", vars: map[string]string{"CUDA_VISIBLE_DEVICES": "2,3"}, wantNames: []string{"2", "3"}, wantSource: SourceCUDAVisibleDevices},
		{name: "more than /dev has", vars: map[string]string{"CUDA_VISIBLE_DEVICES": "0,1,2,3"}, wantNames: []string{"0", "1", "2", "3"}, wantSource: SourceCUDAVisibleDevices},
		{name: "UUIDs", vars: map[string]string{"CUDA_VISIBLE_DEVICES": "GPU-aaa,GPU-bbb"}, wantNames: []string{"GPU-aaa", "GPU-bbb"}, wantSource: SourceCUDAVisibleDevices},
		{
			name:       "MIG",
			vars:       map[string]string{"CUDA_VISIBLE_DEVICES": "MIG-4f7e2c1a-0b3d-5e6f-8a9b-1c2d3e4f5a6b,MIG-GPU-5d2b9c1e-2f3a-4b5c-6d7e-8f9a0b1c2d3e/1/0"},
			wantNames:  []string{"MIG-4f7e2c1a-0b3d-5e6f-8a9b-1c2d3e4f5a6b", "MIG-GPU-5d2b9c1e-2f3a-4b5c-6d7e-8f9a0b1c2d3e/1/0"},
			wantSource: SourceCUDAVisibleDevices,
		},
		{name: "spaces around commas", vars: map[string]string{"CUDA_VISIBLE_DEVICES": " 2 , 3 ,GPU-aaa "}, wantNames: []string{"2", "3", "GPU-aaa"}, wantSource: SourceCUDAVisibleDevices},
		// CUDA shows only the devices before the first invalid entry.
		{name: "stops at -1", vars: map[string]string{"CUDA_VISIBLE_DEVICES": "0,2,-1,1"}, wantNames: []string{"0", "2"}, wantSource: SourceCUDAVisibleDevices},
		{name: "stops at empty entry", vars: map[string]string{"CUDA_VISIBLE_DEVICES": "0,,1"}, wantNames: []string{"0"}, wantSource: SourceCUDAVisibleDevices},
		{name: "stops at repeat", vars: map[string]string{"CUDA_VISIBLE_DEVICES": "1,0,1"}, wantNames: []string{"1", "0"}, wantSource: SourceCUDAVisibleDevices},
		{name: "stops at a repeat written otherwise", vars: map[string]string{"CUDA_VISIBLE_DEVICES": "01,1"}, wantNames: []string{"01"}, wantSource: SourceCUDAVisibleDevices},
		{name: "trailing comma", vars: map[string]string{"CUDA_VISIBLE_DEVICES": "0,1,"}, wantNames: []string{"0", "1"}, wantSource: SourceCUDAVisibleDevices},
		{name: "other variables ignored", vars: map[string]string{"NVIDIA_VISIBLE_DEVICES": "all"}, wantNames: []string{"0", "1"}, wantSource: SourceDev},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			names, source, _ := probeGPUs(root, env(tt.vars))
			if !slices.Equal(names, tt.wantNames) || source != tt.wantSource {
				t.Errorf("probeGPUs = %q from %s, want %q from %s", names, source, tt.wantNames, tt.wantSource)
			}
		})
	}
}

func TestProbeGPUsDev(t *testing.T) {
	tests := []struct {
		tree string
		want []string
	}{
		{tree: "zero", want: nil},
		{tree: "two", want: []string{"0", "1"}},
		{tree: "eight", want: []string{"0", "1", "2", "3", "4", "5", "6", "7"}},
		{tree: "no-such-tree", want: nil},
	}
	for _, tt := range tests {
		t.Run(tt.tree, func(t *testing.T) {
			names, source, _ := probeGPUs(filepath.Join("testdata", "gpu", tt.tree), nil)
			if !slices.Equal(names, tt.want) || source != SourceDev {
				t.Errorf("probeGPUs = %q from %s, want %q from %s", names, source, tt.want, SourceDev)
			}
		})
	}
}

func TestCountNvidiaNodes(t *testing.T) {
	names := []string{
		"nvidia0", "nvidia1", "nvidia12",
		"nvidiactl", "nvidia-uvm", "nvidia-uvm-tools", "nvidia-modeset", "nvidia-caps",
		"nvidia", "nvidia0a", "nvidia-1", "xnvidia0", "null",
	}
	if got := countNvidiaNodes(names); got != 3 {
		t.Errorf("countNvidiaNodes = %d, want 3", got)
	}
}

// TestCardsCut: a list that ends before cards it names later, or on a
// repeat, says where and which; one that ends as meant (on its last
// entry, or before nothing more) says nothing.
func TestCardsCut(t *testing.T) {
	for _, tt := range []struct {
		value    string
		at       string
		repeated bool
		left     []string // nil with at "": no cut
		warning  string
	}{
		{value: "0,1"},
		{value: "0,2,-1"},
		{value: "-1"},
		{value: ""},
		{value: "0,1,"},
		{value: "0,-1,2", at: "-1", left: []string{"2"},
			warning: `CUDA_VISIBLE_DEVICES=0,-1,2: the cards after "-1" (2) are not the daemon's, as CUDA reads the list no further than an entry CUDA cannot read; write CUDA_VISIBLE_DEVICES=0,2 if they are meant to be`},
		{value: "2,,3,2", at: "", left: []string{"3"},
			warning: `CUDA_VISIBLE_DEVICES=2,,3,2: the cards after an empty entry (3) are not the daemon's, as CUDA reads the list no further than an entry CUDA cannot read; write CUDA_VISIBLE_DEVICES=2,3 if they are meant to be`},
		{value: "2,2", at: "2", repeated: true, left: []string{},
			warning: `CUDA_VISIBLE_DEVICES=2,2 names card 2 twice; the daemon's cards end at the second, as CUDA's do (write each card once: CUDA_VISIBLE_DEVICES=2)`},
		{value: "1,01", at: "01", repeated: true, left: []string{},
			warning: `CUDA_VISIBLE_DEVICES=1,01 names card 1 twice (as 1 and 01); the daemon's cards end at the second, as CUDA's do (write each card once: CUDA_VISIBLE_DEVICES=1)`},
		{value: "01,1,GPU-a", at: "1", repeated: true, left: []string{"GPU-a"},
			warning: `CUDA_VISIBLE_DEVICES=01,1,GPU-a: the cards after "1" (GPU-a) are not the daemon's, as CUDA reads the list no further than a card named twice; write CUDA_VISIBLE_DEVICES=01,GPU-a if they are meant to be`},
	} {
		names, cut := parseCUDAVisibleDevices(tt.value)
		if tt.left == nil {
			if cut != nil {
				t.Errorf("%q: cut %+v, want none", tt.value, cut)
			}
			continue
		}
		if cut == nil || cut.At != tt.at || cut.Repeated != tt.repeated || !slices.Equal(cut.Left, tt.left) {
			t.Errorf("%q: cut %+v, want at %q (repeated %v), left %q", tt.value, cut, tt.at, tt.repeated, tt.left)
			continue
		}
		inv, warnings, err := Inventory{GPUs: names, GPUsCut: cut}.Apply(Overrides{})
		if err != nil || len(warnings) != 1 || warnings[0].String() != tt.warning || len(inv.GPUs) != len(names) {
			t.Errorf("%q: warnings %v (%v), want\n%s", tt.value, warnings, err, tt.warning)
		}
	}
}

func FuzzParseCUDAVisibleDevices(f *testing.F) {
	for _, s := range []string{"", "-1", "none", "NoDevFiles", "0,1", "2,3", "GPU-aaa,GPU-bbb", "MIG-x", " 0 , 1 ", "0,2,-1,1", "0,0", "GPU-", ",,,"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		names, cut := parseCUDAVisibleDevices(in)
		if cut != nil && (len(cut.Left) == 0 && !cut.Repeated || cut.Value != in) {
			t.Fatalf("%q gave a cut of nothing: %+v", in, cut)
		}
		if len(names) > strings.Count(in, ",")+1 {
			t.Fatalf("%q gave %d names from %d entries", in, len(names), strings.Count(in, ",")+1)
		}
		seen := map[string]bool{}
		for _, n := range names {
			if n == "" || n != strings.TrimSpace(n) || strings.Contains(n, ",") {
				t.Fatalf("%q gave name %q", in, n)
			}
			if seen[n] {
				t.Fatalf("%q gave %q twice", in, n)
			}
			seen[n] = true
			if !strings.Contains(in, n) {
				t.Fatalf("%q gave %q, which it does not contain", in, n)
			}
		}
	})
}
