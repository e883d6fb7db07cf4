package probes

import (
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestParseCPUList(t *testing.T) {
	tests := []struct {
		in      string
		want    []int
		wantErr bool
	}{
		{in: "0-3\n", want: []int{0, 1, 2, 3}},
		{in: "0", want: []int{0}},
		{in: "0-1,4-7", want: []int{0, 1, 4, 5, 6, 7}},
		{in: "0-3,8,10-11", want: []int{0, 1, 2, 3, 8, 10, 11}},
		{in: "5,1,3-4,1", want: []int{1, 3, 4, 5}},
		{in: "2-2", want: []int{2}},
		{in: "", want: nil},
		{in: " \n", want: nil},
		{in: "65535", want: []int{65535}},
		{in: "65536", wantErr: true},
		{in: "0-999999999", wantErr: true},
		{in: "99999999999999999999999", wantErr: true},
		{in: "3-1", wantErr: true},
		{in: "0-", wantErr: true},
		{in: "-1", wantErr: true},
		{in: "+1", wantErr: true},
		{in: "0,,1", wantErr: true},
		{in: "0-7:2", wantErr: true},
		{in: "a", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := parseCPUList(strings.NewReader(tt.in))
			if (err != nil) != tt.wantErr {
				t.Fatalf("parseCPUList(%q) error = %v, want error %v", tt.in, err, tt.wantErr)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("parseCPUList(%q) = %v, want %v", tt.in, got, tt.want)
			}
		})
	}
}

func TestParseCPUInfo(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    []int
		wantErr bool
	}{
		{name: "x86", in: "processor\t: 0\nmodel name\t: X\n\nprocessor\t: 1\nflags\t: fpu: vme\n", want: []int{0, 1}},
		{name: "gaps", in: "processor : 0\nprocessor : 2\n", want: []int{0, 2}},
		{name: "none", in: "vendor_id : X\n", want: nil},
		{name: "bad number", in: "processor : zero\n", wantErr: true},
		{name: "too large", in: "processor : 70000\n", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseCPUInfo(strings.NewReader(tt.in))
			if (err != nil) != tt.wantErr {
				t.Fatalf("error = %v, want error %v", err, tt.wantErr)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}

func TestParseCPUsAllowed(t *testing.T) {
	tests := []struct {
		name      string
		in        string
		want      []int
		wantFound bool
		wantErr   bool
	}{
		{name: "present", in: "Name:\tx\nCpus_allowed:\tf\nCpus_allowed_list:\t0-3\n", want: []int{0, 1, 2, 3}, wantFound: true},
		{name: "sparse", in: "Cpus_allowed_list:\t1,3-4\n", want: []int{1, 3, 4}, wantFound: true},
		{name: "absent", in: "Name:\tx\nCpus_allowed:\tf\n"},
		{name: "garbage", in: "Cpus_allowed_list:\tx\n", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, found, err := parseCPUsAllowed(strings.NewReader(tt.in))
			if (err != nil) != tt.wantErr {
				t.Fatalf("error = %v, want error %v", err, tt.wantErr)
			}
			if found != tt.wantFound || !slices.Equal(got, tt.want) {
				t.Errorf("got %v, %v, want %v, %v", got, found, tt.want, tt.wantFound)
			}
		})
	}
}

// TestProbeCPUs runs the CPU probe over the fixture trees in testdata/cpu.
func TestProbeCPUs(t *testing.T) {
	tests := []struct {
		tree          string
		wantUsable    []int
		wantHighest   int
		wantJobCPUIDs []int
	}{
		{tree: "online-0-3", wantUsable: []int{0, 1, 2, 3}, wantHighest: 3, wantJobCPUIDs: []int{2, 3}},
		{tree: "online-0", wantUsable: []int{0}, wantHighest: 0, wantJobCPUIDs: []int{0}},
		{tree: "online-0-1", wantUsable: []int{0, 1}, wantHighest: 1, wantJobCPUIDs: []int{1}},
		{tree: "online-sparse", wantUsable: []int{0, 1, 4, 5, 6, 7}, wantHighest: 7, wantJobCPUIDs: []int{4, 5, 6, 7}},
		{tree: "allowed-restricted", wantUsable: []int{2, 3, 4, 5}, wantHighest: 7, wantJobCPUIDs: []int{4, 5}},
		{tree: "allowed-sparse", wantUsable: []int{1, 4, 5, 7}, wantHighest: 7, wantJobCPUIDs: []int{5, 7}},
		// Lists that share nothing: one of them lies, and the online list stands.
		{tree: "allowed-disjoint", wantUsable: []int{0, 1, 2, 3}, wantHighest: 3, wantJobCPUIDs: []int{2, 3}},
		{tree: "allowed-absent", wantUsable: []int{0, 1, 2, 3}, wantHighest: 3, wantJobCPUIDs: []int{2, 3}},
		{tree: "cpuinfo-fallback", wantUsable: []int{0, 1, 2, 3, 4}, wantHighest: 4, wantJobCPUIDs: []int{2, 3, 4}},
		{tree: "online-empty", wantUsable: []int{0, 1, 2}, wantHighest: 2, wantJobCPUIDs: []int{2}},
		{tree: "online-garbage", wantUsable: []int{0, 1, 2}, wantHighest: 2, wantJobCPUIDs: []int{2}},
	}
	for _, tt := range tests {
		t.Run(tt.tree, func(t *testing.T) {
			got, err := probeCPUs(filepath.Join("testdata", "cpu", tt.tree))
			if err != nil {
				t.Fatalf("probeCPUs: %v", err)
			}
			if !slices.Equal(got.usable, tt.wantUsable) || got.highestOnline != tt.wantHighest {
				t.Errorf("probeCPUs = %+v, want usable %v highest %d", got, tt.wantUsable, tt.wantHighest)
			}
			if ids := jobCPUs(got.usable); !slices.Equal(ids, tt.wantJobCPUIDs) {
				t.Errorf("jobCPUs(%v) = %v, want %v", got.usable, ids, tt.wantJobCPUIDs)
			}
		})
	}
}

func TestProbeCPUsUnknown(t *testing.T) {
	for _, root := range []string{t.TempDir(), filepath.Join("testdata", "cpu", "nothing-usable")} {
		_, err := probeCPUs(root)
		if !errors.Is(err, ErrCoresUnknown) {
			t.Errorf("probeCPUs(%s) error = %v, want ErrCoresUnknown", root, err)
		}
	}
}

func TestJobCPUsDoesNotAlias(t *testing.T) {
	usable := []int{0, 1, 2, 3}
	ids := jobCPUs(usable)
	ids[0] = 99
	if usable[2] != 2 {
		t.Errorf("jobCPUs shares its result with its argument")
	}
}

// checkCPUIDs holds for every list a parser returns: ascending, unique, in range.
func checkCPUIDs(t *testing.T, in string, ids []int) {
	t.Helper()
	for i, id := range ids {
		if id < 0 || id >= maxCPUs {
			t.Fatalf("%q gave id %d outside [0, %d)", in, id, maxCPUs)
		}
		if i > 0 && ids[i-1] >= id {
			t.Fatalf("%q gave %v: not ascending and unique", in, ids)
		}
	}
}

func FuzzParseCPUList(f *testing.F) {
	for _, s := range []string{"0-3", "0", "0-1,4-7", "0-3,8,10-11\n", "", "3-1", "0-999999999", "65535", "1,1,1", "-", ",", "0-65535"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		ids, err := parseCPUList(strings.NewReader(in))
		if err != nil {
			if ids != nil {
				t.Fatalf("%q: error %v with ids %v", in, err, ids)
			}
			return
		}
		checkCPUIDs(t, in, ids)
	})
}

func FuzzParseCPUInfo(f *testing.F) {
	for _, s := range []string{"processor\t: 0\n\nprocessor\t: 1\n", "processor : x\n", "", "processor:", "processor : 70000"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		ids, err := parseCPUInfo(strings.NewReader(in))
		if err == nil {
			checkCPUIDs(t, in, ids)
		}
	})
}

func FuzzParseCPUsAllowed(f *testing.F) {
	for _, s := range []string{"Cpus_allowed_list:\t0-3\n", "Name:\tx\n", "Cpus_allowed_list:", "Cpus_allowed_list:\t9-1\n"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		ids, found, err := parseCPUsAllowed(strings.NewReader(in))
		if err == nil {
			checkCPUIDs(t, in, ids)
		}
		if !found && ids != nil {
			t.Fatalf("%q: ids %v without the field", in, ids)
		}
	})
}
