package probes

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/berthd/berth/supervisor/testkit"
)

func TestProbeWorkstation(t *testing.T) {
	root := filepath.Join("testdata", "inventory", "workstation")
	got, err := Probe(root, env(nil))
	if err != nil {
		t.Fatalf("Probe: %v", err)
	}
	want := Inventory{
		CPUs:       6,
		CPUIDs:     []int{2, 3, 4, 5, 6, 7},
		OnlineCPUs: 8,
		GPUs:       []string{"0", "1"},
		GPUSource:  SourceDev,
		CardsSeen:  2,
		RAM:        Memory{Bytes: 31 * gib, Known: true, Source: "cgroup v2 memory.max /system.slice/berth.service"},
		Hostname:   "gpubox",
		Booted:     time.Unix(1764633600, 0),
		// Its systemd started 3.12 s after its kernel booted.
		InitStarted:     time.Unix(1764633603, 120_000_000),
		highestOnlineID: 7,
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Probe =\n%+v\nwant\n%+v", got, want)
	}

	got, err = Probe(root, env(map[string]string{"CUDA_VISIBLE_DEVICES": "GPU-aaa"}))
	if err != nil {
		t.Fatalf("Probe: %v", err)
	}
	if !slices.Equal(got.GPUs, []string{"GPU-aaa"}) || got.GPUSource != SourceCUDAVisibleDevices {
		t.Errorf("Probe under CUDA_VISIBLE_DEVICES=GPU-aaa: GPUs %q from %s", got.GPUs, got.GPUSource)
	}
}

func TestProbeSmallMachines(t *testing.T) {
	for tree, wantOnline := range map[string]int{"online-0": 1, "online-0-1": 2} {
		inv, err := Probe(filepath.Join("testdata", "cpu", tree), nil)
		if err != nil {
			t.Fatalf("Probe(%s): %v", tree, err)
		}
		if inv.CPUs != 1 || len(inv.CPUIDs) != 1 || inv.OnlineCPUs != wantOnline {
			t.Errorf("Probe(%s): CPUs %d IDs %v online %d; want 1 core of %d", tree, inv.CPUs, inv.CPUIDs, inv.OnlineCPUs, wantOnline)
		}
		if inv.RAM.Known || inv.GPUs != nil || inv.Hostname != "" {
			t.Errorf("Probe(%s) found things the tree lacks: %+v", tree, inv)
		}
	}
}

func TestProbeNoCores(t *testing.T) {
	if _, err := Probe(t.TempDir(), nil); !errors.Is(err, ErrCoresUnknown) {
		t.Errorf("Probe of an empty tree: error %v, want ErrCoresUnknown", err)
	}
	// The rest of the machine is probed all the same, and --cpus makes
	// the inventory whole; none of its cores is known to be real.
	inv, err := Probe(t.TempDir(), env(map[string]string{"CUDA_VISIBLE_DEVICES": "3"}))
	if !errors.Is(err, ErrCoresUnknown) || !slices.Equal(inv.GPUs, []string{"3"}) {
		t.Fatalf("Probe = %+v, %v; want the cards, and ErrCoresUnknown", inv, err)
	}
	given, _, err := inv.Apply(Overrides{CPUs: intp(3)})
	if err != nil {
		t.Fatal(err)
	}
	if given.CPUs != 3 || !slices.Equal(given.CPUIDs, []int{0, 1, 2}) || !slices.Equal(given.GPUs, []string{"3"}) {
		t.Errorf("with --cpus 3: %+v", given)
	}
	if got := given.Pinnable(given.CPUIDs); got != nil {
		t.Errorf("Pinnable(%v) = %v; cores never probed cannot be pinned", given.CPUIDs, got)
	}
}

// TestProbeThisMachine runs against the real root, where the layout is
// whatever this kernel and container make it.
func TestProbeThisMachine(t *testing.T) {
	inv, err := Probe("/", os.LookupEnv)
	if err != nil {
		t.Fatalf("Probe(/): %v", err)
	}
	t.Logf("this machine: %+v", inv)
	if inv.CPUs < 1 || len(inv.CPUIDs) != inv.CPUs || inv.OnlineCPUs < inv.CPUs {
		t.Errorf("Probe(/): CPUs %d, IDs %v, online %d", inv.CPUs, inv.CPUIDs, inv.OnlineCPUs)
	}
	if !slices.IsSorted(inv.CPUIDs) {
		t.Errorf("Probe(/): CPU IDs %v not ascending", inv.CPUIDs)
	}
	if inv.RAM.Known && (inv.RAM.Bytes < 0 || inv.RAM.Source == "") {
		t.Errorf("Probe(/): memory %+v", inv.RAM)
	}
}

func intp(n int) *int       { return &n }
func int64p(n int64) *int64 { return &n }

func TestApply(t *testing.T) {
	// An 8-core machine with two cards found in /dev.
	base := Inventory{
		CPUs: 6, CPUIDs: []int{2, 3, 4, 5, 6, 7}, OnlineCPUs: 8,
		GPUs: []string{"0", "1"}, GPUSource: SourceDev,
		RAM:      Memory{Bytes: 15 * gib, Known: true, Source: SourceMeminfo},
		Hostname: "gpubox", highestOnlineID: 7,
	}
	// The same machine under CUDA_VISIBLE_DEVICES=2,3.
	cuda := base
	cuda.GPUs, cuda.GPUSource = []string{"2", "3"}, SourceCUDAVisibleDevices
	// A machine whose online IDs have a gap, and a Cpus_allowed_list that
	// leaves out its highest CPUs.
	restricted := base
	restricted.CPUs, restricted.CPUIDs, restricted.OnlineCPUs, restricted.highestOnlineID = 2, []int{4, 5}, 4, 15

	with := func(inv Inventory, f func(*Inventory)) Inventory {
		inv.CPUIDs, inv.GPUs = slices.Clone(inv.CPUIDs), slices.Clone(inv.GPUs)
		f(&inv)
		return inv
	}
	tests := []struct {
		name         string
		inv          Inventory
		o            Overrides
		want         Inventory
		wantWarnings []Warning
		wantErrs     []error
	}{
		{name: "none", inv: base, want: base},
		{name: "fewer cores", inv: base, o: Overrides{CPUs: intp(2)}, want: with(base, func(i *Inventory) { i.CPUs, i.CPUIDs = 2, []int{2, 3} })},
		{name: "all cores", inv: base, o: Overrides{CPUs: intp(8)}, want: with(base, func(i *Inventory) { i.CPUs, i.CPUIDs = 8, []int{2, 3, 4, 5, 6, 7, 8, 9} })},
		{name: "4x is allowed quietly", inv: base, o: Overrides{CPUs: intp(32)}, want: with(base, func(i *Inventory) {
			i.CPUs, i.CPUIDs = 32, nil
			for id := 2; id < 34; id++ {
				i.CPUIDs = append(i.CPUIDs, id)
			}
		})},
		{
			name: "more than 4x warns", inv: base, o: Overrides{CPUs: intp(33)},
			want: with(base, func(i *Inventory) {
				i.CPUs, i.CPUIDs = 33, nil
				for id := 2; id < 35; id++ {
					i.CPUIDs = append(i.CPUIDs, id)
				}
			}),
			wantWarnings: []Warning{{Kind: CoresOversubscribed, Flag: "--cpus", Asked: 33, Online: 8}},
		},
		// Virtual IDs start past the highest online CPU, not past the highest usable one.
		{name: "virtual past highest online", inv: restricted, o: Overrides{CPUs: intp(4)}, want: with(restricted, func(i *Inventory) { i.CPUs, i.CPUIDs = 4, []int{4, 5, 16, 17} })},
		{name: "zero cores", inv: base, o: Overrides{CPUs: intp(0)}, wantErrs: []error{&OverrideError{Flag: "--cpus", Value: 0, Min: 1, Max: maxOverride}}},
		{name: "negative cores", inv: base, o: Overrides{CPUs: intp(-3)}, wantErrs: []error{&OverrideError{Flag: "--cpus", Value: -3, Min: 1, Max: maxOverride}}},
		{name: "absurd cores", inv: base, o: Overrides{CPUs: intp(1 << 30)}, wantErrs: []error{&OverrideError{Flag: "--cpus", Value: 1 << 30, Min: 1, Max: maxOverride}}},
		{name: "gpus from /dev", inv: base, o: Overrides{GPUs: intp(4)}, want: with(base, func(i *Inventory) { i.GPUs, i.GPUSource = []string{"0", "1", "2", "3"}, SourceOverride })},
		{name: "no gpus", inv: base, o: Overrides{GPUs: intp(0)}, want: with(base, func(i *Inventory) { i.GPUs, i.GPUSource = nil, SourceOverride })},
		{name: "gpus under CUDA_VISIBLE_DEVICES, fewer", inv: cuda, o: Overrides{GPUs: intp(1)}, want: with(cuda, func(i *Inventory) { i.GPUs = []string{"2"} })},
		{name: "gpus under CUDA_VISIBLE_DEVICES, all", inv: cuda, o: Overrides{GPUs: intp(2)}, want: cuda},
		{name: "gpus under CUDA_VISIBLE_DEVICES, none", inv: cuda, o: Overrides{GPUs: intp(0)}, want: with(cuda, func(i *Inventory) { i.GPUs = nil })},
		{name: "gpus beyond CUDA_VISIBLE_DEVICES", inv: cuda, o: Overrides{GPUs: intp(3)}, wantErrs: []error{&GPUListError{Asked: 3, Listed: []string{"2", "3"}}}},
		{name: "negative gpus", inv: base, o: Overrides{GPUs: intp(-1)}, wantErrs: []error{&OverrideError{Flag: "--gpus", Value: -1, Min: 0, Max: maxOverride}}},
		{name: "ram", inv: base, o: Overrides{RAMBytes: int64p(64 * gib)}, want: with(base, func(i *Inventory) { i.RAM = Memory{Bytes: 64 * gib, Known: true, Source: SourceOverride} })},
		{name: "ram over unknown", inv: with(base, func(i *Inventory) { i.RAM = Memory{} }), o: Overrides{RAMBytes: int64p(gib)}, want: with(base, func(i *Inventory) { i.RAM = Memory{Bytes: gib, Known: true, Source: SourceOverride} })},
		{name: "zero ram", inv: base, o: Overrides{RAMBytes: int64p(0)}, wantErrs: []error{&OverrideError{Flag: "--ram", Value: 0, Min: 1}}},
		{
			name: "every error at once", inv: cuda, o: Overrides{CPUs: intp(0), GPUs: intp(5), RAMBytes: int64p(-1)},
			wantErrs: []error{
				&OverrideError{Flag: "--cpus", Value: 0, Min: 1, Max: maxOverride},
				&GPUListError{Asked: 5, Listed: []string{"2", "3"}},
				&OverrideError{Flag: "--ram", Value: -1, Min: 1},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := with(tt.inv, func(*Inventory) {})
			got, warnings, err := tt.inv.Apply(tt.o)
			if !reflect.DeepEqual(tt.inv, before) {
				t.Errorf("Apply changed its receiver: %+v", tt.inv)
			}
			if tt.wantErrs != nil {
				if err == nil {
					t.Fatalf("Apply = %+v, want errors %v", got, tt.wantErrs)
				}
				joined, ok := err.(interface{ Unwrap() []error })
				if !ok || !reflect.DeepEqual(joined.Unwrap(), tt.wantErrs) {
					t.Errorf("Apply error = %#v, want %#v", err, tt.wantErrs)
				}
				var oe *OverrideError
				var ge *GPUListError
				if !errors.As(err, &oe) && !errors.As(err, &ge) {
					t.Errorf("Apply error %v is neither *OverrideError nor *GPUListError", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Apply: %v", err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Apply =\n%+v\nwant\n%+v", got, tt.want)
			}
			if !reflect.DeepEqual(warnings, tt.wantWarnings) {
				t.Errorf("Apply warnings = %v, want %v", warnings, tt.wantWarnings)
			}
			if got.CPUs != len(got.CPUIDs) || !slices.IsSorted(got.CPUIDs) {
				t.Errorf("Apply gave CPUs %d with IDs %v", got.CPUs, got.CPUIDs)
			}
		})
	}
}

func TestApplyDoesNotAlias(t *testing.T) {
	inv := Inventory{CPUs: 2, CPUIDs: []int{2, 3}, OnlineCPUs: 4, GPUs: []string{"2", "3"}, GPUSource: SourceCUDAVisibleDevices}
	got, _, err := inv.Apply(Overrides{CPUs: intp(1), GPUs: intp(1)})
	if err != nil {
		t.Fatal(err)
	}
	got.CPUIDs[0], got.GPUs[0] = 99, "x"
	if inv.CPUIDs[0] != 2 || inv.GPUs[0] != "2" {
		t.Errorf("Apply's result shares memory with its receiver: %+v", inv)
	}
}

// TestMessagesGolden pins every sentence this package gives a person.
func TestMessagesGolden(t *testing.T) {
	messages := []string{
		Warning{Kind: CoresOversubscribed, Flag: "--cpus", Asked: 64, Online: 8}.String(),
		(&OverrideError{Flag: "--cpus", Value: 0, Min: 1, Max: maxOverride}).Error(),
		(&OverrideError{Flag: "--gpus", Value: -1, Min: 0, Max: maxOverride}).Error(),
		(&OverrideError{Flag: "--gpus", Value: -1, Min: 0}).Error(),
		(&OverrideError{Flag: "--ram", Value: 0, Min: 1}).Error(),
		(&GPUListError{Asked: 4, Listed: []string{"2", "3"}}).Error(),
		(&GPUListError{Asked: 2, Listed: []string{"GPU-aaa"}}).Error(),
		(&GPUListError{Asked: 1, Listed: nil}).Error(),
		ErrCoresUnknown.Error(),
	}
	got := strings.Join(messages, "\n") + "\n"
	testkit.Golden(t, filepath.Join("testdata", "messages.golden"), []byte(got))
}

// The virtual cores of a --cpus above the machine's count cannot be pinned.
func TestPinnable(t *testing.T) {
	restricted := Inventory{CPUs: 2, CPUIDs: []int{4, 5}, OnlineCPUs: 4, highestOnlineID: 15}
	over, _, err := restricted.Apply(Overrides{CPUs: intp(4)})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ ids, want []int }{
		{over.CPUIDs, []int{4, 5}},
		{[]int{5, 16}, []int{5}},
		{[]int{16, 17}, nil},
	} {
		if got := over.Pinnable(tc.ids); !slices.Equal(got, tc.want) {
			t.Errorf("Pinnable(%v) = %v, want %v", tc.ids, got, tc.want)
		}
	}
	// An inventory not probed (a test's) knows no real cores.
	if got := (Inventory{CPUs: 2, CPUIDs: []int{0, 1}}).Pinnable([]int{7}); !slices.Equal(got, []int{7}) {
		t.Errorf("unprobed Pinnable = %v", got)
	}
}
