package probes

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

const (
	gib          = int64(1) << 30
	fixtureTotal = 16 * gib // MemTotal in the memory fixtures
)

func TestParseMeminfo(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    int64
		wantErr bool
	}{
		{name: "kB", in: "MemTotal:       24683656 kB\nMemFree:  1 kB\n", want: 24683656 * 1024},
		{name: "not first", in: "Foo: 1 kB\nMemTotal: 2 kB\n", want: 2048},
		{name: "bytes", in: "MemTotal: 4096\n", want: 4096},
		{name: "missing", in: "MemFree: 1 kB\n", wantErr: true},
		{name: "empty", in: "", wantErr: true},
		{name: "negative", in: "MemTotal: -1 kB\n", wantErr: true},
		{name: "overflow", in: "MemTotal: " + strconv.FormatInt(math.MaxInt64/1024+1, 10) + " kB\n", wantErr: true},
		{name: "unit", in: "MemTotal: 1 MB\n", wantErr: true},
		{name: "garbage", in: "MemTotal: lots\n", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseMeminfo(strings.NewReader(tt.in))
			if (err != nil) != tt.wantErr || got != tt.want {
				t.Errorf("parseMeminfo = %d, %v; want %d, error %v", got, err, tt.want, tt.wantErr)
			}
		})
	}
	if _, err := parseMeminfo(strings.NewReader("")); !errors.Is(err, errNoMemTotal) {
		t.Errorf("empty meminfo: error %v, want errNoMemTotal", err)
	}
}

func TestParseProcCgroup(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    cgroupPaths
		wantErr bool
	}{
		{name: "v2", in: "0::/system.slice/berth.service\n", want: cgroupPaths{v2: "/system.slice/berth.service"}},
		{name: "v2 root", in: "0::/\n", want: cgroupPaths{v2: "/"}},
		{name: "v1", in: "12:pids:/a\n4:memory:/docker/abc\n3:cpu,cpuacct:/x\n1:name=systemd:/y\n", want: cgroupPaths{v1Memory: "/docker/abc"}},
		{name: "v1 co-mounted", in: "4:cpu,memory:/m\n", want: cgroupPaths{v1Memory: "/m"}},
		{name: "hybrid", in: "4:memory:/s/b\n1:name=systemd:/s/b\n0::/s/b\n", want: cgroupPaths{v1Memory: "/s/b", v2: "/s/b"}},
		{name: "colon in path", in: "0::/a:b\n", want: cgroupPaths{v2: "/a:b"}},
		{name: "cleaned", in: "0::/../../x/./y/\n", want: cgroupPaths{v2: "/x/y"}},
		{name: "memory name only as part", in: "4:memoryx:/m\n", want: cgroupPaths{}},
		{name: "empty", in: "", want: cgroupPaths{}},
		{name: "too few fields", in: "0:/x\n", wantErr: true},
		{name: "relative path", in: "0::x\n", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseProcCgroup(strings.NewReader(tt.in))
			if (err != nil) != tt.wantErr || got != tt.want {
				t.Errorf("parseProcCgroup = %+v, %v; want %+v, error %v", got, err, tt.want, tt.wantErr)
			}
		})
	}
}

func TestParseCgroupLimit(t *testing.T) {
	tests := []struct {
		in          string
		wantBytes   int64
		wantLimited bool
		wantErr     bool
	}{
		{in: "max\n"},
		{in: "4294967296\n", wantBytes: 4 * gib, wantLimited: true},
		{in: "0", wantBytes: 0, wantLimited: true},
		{in: "9223372036854771712\n"}, // v1's unlimited
		{in: "4611686018427387904"},   // 1<<62
		{in: "4611686018427387903", wantBytes: 1<<62 - 1, wantLimited: true},
		{in: "18446744073709551615"},       // beyond int64
		{in: "99999999999999999999999999"}, // beyond uint64
		{in: "-1", wantErr: true},
		{in: "", wantErr: true},
		{in: "lots", wantErr: true},
		{in: "Max", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, limited, err := parseCgroupLimit(strings.NewReader(tt.in))
			if (err != nil) != tt.wantErr || got != tt.wantBytes || limited != tt.wantLimited {
				t.Errorf("parseCgroupLimit = %d, %v, %v; want %d, %v, error %v", got, limited, err, tt.wantBytes, tt.wantLimited, tt.wantErr)
			}
		})
	}
}

// TestProbeMemory runs the memory probe over the fixture trees in
// testdata/memory. Physical memory there is 16 GiB.
func TestProbeMemory(t *testing.T) {
	tests := []struct {
		tree string
		want Memory
	}{
		{tree: "v2-limit-lower", want: Memory{Bytes: 3 * gib, Known: true, Source: "cgroup v2 memory.max /system.slice/berth.service"}},
		{tree: "v2-max", want: Memory{Bytes: 15 * gib, Known: true, Source: SourceMeminfo}},
		{tree: "v2-ancestor", want: Memory{Bytes: 5 * gib, Known: true, Source: "cgroup v2 memory.max /berth.slice"}},
		{tree: "v2-lowest-of-two", want: Memory{Bytes: 5 * gib, Known: true, Source: "cgroup v2 memory.max /berth.slice"}},
		{tree: "v1-limit", want: Memory{Bytes: 1 * gib, Known: true, Source: "cgroup v1 memory.limit_in_bytes /docker/abc"}},
		{tree: "v1-unlimited", want: Memory{Bytes: 15 * gib, Known: true, Source: SourceMeminfo}},
		// No cgroup namespace: the container's own cgroup is the mount's root.
		{tree: "v1-container-root", want: Memory{Bytes: 2 * gib, Known: true, Source: "cgroup v1 memory.limit_in_bytes /"}},
		{tree: "hybrid", want: Memory{Bytes: 4 * gib, Known: true, Source: "cgroup v1 memory.limit_in_bytes /system.slice/berth.service"}},
		{tree: "hybrid-both", want: Memory{Bytes: 2 * gib, Known: true, Source: "cgroup v2 memory.max /system.slice/berth.service"}},
		// The leaf's memory.max cannot be read; the slice's limit still binds.
		{tree: "unreadable", want: Memory{Bytes: 7 * gib, Known: true, Source: "cgroup v2 memory.max /system.slice"}},
		{tree: "missing-cgroup", want: Memory{Bytes: 15 * gib, Known: true, Source: SourceMeminfo}},
		{tree: "no-proc-cgroup", want: Memory{Bytes: 15 * gib, Known: true, Source: SourceMeminfo}},
		{tree: "garbage-limit", want: Memory{Bytes: 15 * gib, Known: true, Source: SourceMeminfo}},
		{tree: "no-meminfo", want: Memory{}},
		{tree: "no-meminfo-limit", want: Memory{Bytes: 3 * gib, Known: true, Source: "cgroup v2 memory.max /system.slice/berth.service"}},
		{tree: "below-reserve", want: Memory{Bytes: 0, Known: true, Source: "cgroup v2 memory.max /small.service"}},
		// "/../../outside" must not climb out of sys/fs/cgroup.
		{tree: "escape", want: Memory{Bytes: 1 * gib, Known: true, Source: "cgroup v2 memory.max /outside"}},
		{tree: "no-such-tree", want: Memory{}},
	}
	for _, tt := range tests {
		t.Run(tt.tree, func(t *testing.T) {
			if got := probeMemory(filepath.Join("testdata", "memory", tt.tree)); got != tt.want {
				t.Errorf("probeMemory = %+v, want %+v", got, tt.want)
			}
		})
	}
}

// TestUnreadableFixtureIsUnreadable guards the fixture the "unreadable" case
// depends on: a directory where memory.max should be fails to read even as
// root, which chmod 000 would not.
func TestUnreadableFixtureIsUnreadable(t *testing.T) {
	p := filepath.Join("testdata", "memory", "unreadable", "sys", "fs", "cgroup", "system.slice", "berth.service", "memory.max")
	if _, err := os.ReadFile(p); err == nil {
		t.Fatalf("reading %s succeeded; the fixture no longer tests an unreadable file", p)
	}
}

func FuzzParseMeminfo(f *testing.F) {
	for _, s := range []string{"MemTotal:       24683656 kB\n", "MemTotal: 1\n", "MemTotal: -1 kB", "MemTotal: 9223372036854775807 kB", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		n, err := parseMeminfo(strings.NewReader(in))
		if err == nil && n < 0 {
			t.Fatalf("%q gave %d bytes", in, n)
		}
	})
}

func FuzzParseProcCgroup(f *testing.F) {
	for _, s := range []string{"0::/system.slice/berth.service\n", "4:memory:/docker/abc\n0::/\n", "0::/../..", "::", "0:/x", "1:cpu,memory:/a:b\n"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		p, err := parseProcCgroup(strings.NewReader(in))
		if err != nil {
			return
		}
		// Every path is absolute and clean, so joining it below a mount stays below it.
		for _, cg := range []string{p.v1Memory, p.v2} {
			if cg == "" {
				continue
			}
			if !strings.HasPrefix(cg, "/") || strings.Contains(cg, "/../") || strings.HasSuffix(cg, "/..") || filepath.Clean(cg) != cg {
				t.Fatalf("%q gave path %q", in, cg)
			}
		}
	})
}

func FuzzParseCgroupLimit(f *testing.F) {
	for _, s := range []string{"max\n", "4294967296\n", "9223372036854771712\n", "0", "-1", "", "18446744073709551616"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		n, limited, err := parseCgroupLimit(strings.NewReader(in))
		if err != nil && limited {
			t.Fatalf("%q: limited with error %v", in, err)
		}
		if limited && (n < 0 || n >= v1Unlimited) {
			t.Fatalf("%q gave limit %d", in, n)
		}
		if !limited && n != 0 {
			t.Fatalf("%q gave %d bytes without a limit", in, n)
		}
	})
}
