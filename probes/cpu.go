package probes

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math/bits"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// maxCPUs bounds the CPU IDs a list may name. It is far above any machine
// Linux runs on; its job is to keep a corrupt or hostile "0-999999999" from
// making us allocate gigabytes.
const maxCPUs = 1 << 16

// Where the kernel says which CPUs exist and which the daemon may use.
const (
	onlinePath  = "sys/devices/system/cpu/online"
	cpuinfoPath = "proc/cpuinfo"
	statusPath  = "proc/self/status"
)

var errNoCPUs = errors.New("lists no CPUs")

// cpuSet is a set of CPU IDs below maxCPUs. A bitmap keeps the result sorted
// and unique however the input repeats or overlaps itself, in 8 KiB.
type cpuSet [maxCPUs / 64]uint64

func (s *cpuSet) add(id int) { s[id/64] |= 1 << (id % 64) }

// ids returns the members in ascending order, nil when empty.
func (s *cpuSet) ids() []int {
	var out []int
	for w, word := range s {
		for word != 0 {
			b := bits.TrailingZeros64(word)
			out = append(out, w*64+b)
			word &^= 1 << b
		}
	}
	return out
}

// parseCPUList reads the kernel's CPU list format ("0-3,8,10-11"), as in
// sys/devices/system/cpu/online and Cpus_allowed_list. The IDs come back
// ascending and unique; an empty list gives nil.
func parseCPUList(r io.Reader) ([]int, error) {
	b, err := io.ReadAll(io.LimitReader(r, maxProbeFileBytes))
	if err != nil {
		return nil, fmt.Errorf("read cpu list: %w", err)
	}
	s := strings.TrimSpace(string(b))
	if s == "" {
		return nil, nil
	}
	var set cpuSet
	for field := range strings.SplitSeq(s, ",") {
		lo, hi, isRange := strings.Cut(field, "-")
		first, err := parseCPUID(lo)
		if err != nil {
			return nil, fmt.Errorf("parse cpu list %q: %w", field, err)
		}
		last := first
		if isRange {
			if last, err = parseCPUID(hi); err != nil {
				return nil, fmt.Errorf("parse cpu list %q: %w", field, err)
			}
			if last < first {
				return nil, fmt.Errorf("parse cpu list %q: range runs backwards", field)
			}
		}
		for id := first; id <= last; id++ {
			set.add(id)
		}
	}
	return set.ids(), nil
}

// parseCPUID accepts only plain decimal digits: strconv.Atoi would also take
// a sign, which no kernel list contains.
func parseCPUID(s string) (int, error) {
	if s == "" || strings.TrimLeft(s, "0123456789") != "" {
		return 0, fmt.Errorf("cpu id %q is not a number", s)
	}
	id, err := strconv.Atoi(s)
	if err != nil || id >= maxCPUs {
		return 0, fmt.Errorf("cpu id %q is not below %d", s, maxCPUs)
	}
	return id, nil
}

// parseCPUInfo returns the IDs on the "processor : N" lines of /proc/cpuinfo,
// the fallback for kernels or sandboxes that hide sys/devices/system/cpu.
// Only online CPUs are listed there, which is what we want.
func parseCPUInfo(r io.Reader) ([]int, error) {
	var set cpuSet
	sc := bufio.NewScanner(io.LimitReader(r, maxProbeFileBytes))
	sc.Buffer(nil, maxProbeFileBytes)
	for sc.Scan() {
		key, value, ok := strings.Cut(sc.Text(), ":")
		if !ok || strings.TrimSpace(key) != "processor" {
			continue
		}
		id, err := parseCPUID(strings.TrimSpace(value))
		if err != nil {
			return nil, fmt.Errorf("parse cpuinfo processor line: %w", err)
		}
		set.add(id)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read cpuinfo: %w", err)
	}
	return set.ids(), nil
}

// parseCPUsAllowed finds Cpus_allowed_list in /proc/self/status: the CPUs the
// daemon's affinity mask and cpuset let it run on, and so the most its jobs
// can use. found is false when the field is absent (old kernels, gVisor).
func parseCPUsAllowed(r io.Reader) (ids []int, found bool, err error) {
	sc := bufio.NewScanner(io.LimitReader(r, maxProbeFileBytes))
	sc.Buffer(nil, maxProbeFileBytes)
	for sc.Scan() {
		value, ok := strings.CutPrefix(sc.Text(), "Cpus_allowed_list:")
		if !ok {
			continue
		}
		ids, err := parseCPUList(strings.NewReader(value))
		if err != nil {
			return nil, false, fmt.Errorf("parse Cpus_allowed_list: %w", err)
		}
		return ids, true, nil
	}
	if err := sc.Err(); err != nil {
		return nil, false, fmt.Errorf("read status: %w", err)
	}
	return nil, false, nil
}

// cpuProbe is what the machine's CPUs look like before the daemon's reserve.
type cpuProbe struct {
	usable        []int // online and allowed to the daemon, ascending
	highestOnline int   // the highest online ID, allowed or not
}

// probeCPUs reads the CPUs below root. Its error wraps ErrCoresUnknown.
func probeCPUs(root string) (cpuProbe, error) {
	online, errOnline := readProbeFile(root, onlinePath, parseCPUList)
	if errOnline == nil && len(online) == 0 {
		errOnline = fmt.Errorf("%s %w", filepath.Join(root, onlinePath), errNoCPUs)
	}
	if errOnline != nil {
		var errInfo error
		online, errInfo = readProbeFile(root, cpuinfoPath, parseCPUInfo)
		if errInfo == nil && len(online) == 0 {
			errInfo = fmt.Errorf("%s %w", filepath.Join(root, cpuinfoPath), errNoCPUs)
		}
		if errInfo != nil {
			return cpuProbe{}, fmt.Errorf("probe cores under %s: %w: %w; %w", root, ErrCoresUnknown, errOnline, errInfo)
		}
	}
	p := cpuProbe{usable: online, highestOnline: online[len(online)-1]}

	// An unreadable or absent allowed list leaves every online CPU usable. One
	// that shares nothing with the online list means one of the two files is
	// not telling the truth; trusting it would report no cores and stall
	// every job, so the online list stands.
	allowed, err := readProbeFile(root, statusPath, func(r io.Reader) ([]int, error) {
		ids, _, err := parseCPUsAllowed(r)
		return ids, err
	})
	if err == nil {
		if both := intersect(online, allowed); len(both) > 0 {
			p.usable = both
		}
	}
	return p, nil
}

// intersect returns the IDs in both ascending lists.
func intersect(a, b []int) []int {
	var out []int
	for i, j := 0, 0; i < len(a) && j < len(b); {
		switch {
		case a[i] < b[j]:
			i++
		case a[i] > b[j]:
			j++
		default:
			out = append(out, a[i])
			i++
			j++
		}
	}
	return out
}

// jobCPUs leaves the lowest ReservedCPUs IDs to the daemon, because core 0
// usually takes the interrupts, and gives jobs the rest. A machine too small
// for the reserve still gives jobs its highest core: a supervisor that can
// run nothing is worse than one that shares a core with its jobs.
func jobCPUs(usable []int) []int {
	if len(usable) == 0 {
		return nil
	}
	keep := min(ReservedCPUs, len(usable)-1)
	return slices.Clone(usable[keep:])
}
