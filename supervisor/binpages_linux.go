package supervisor

import (
	"bufio"
	"debug/elf"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

// Handing back the pages of the daemon's own binary.
//
// Go binaries are large (berth's code and constants are some 14 MB), and
// start-up touches them all over: every package's init, the Lua compiler,
// the first evaluation. The kernel maps 64 KiB around each page faulted in,
// so a daemon that has started has 12 MB of its binary mapped, and counted
// in its RSS, of which it then uses a part: a quiet daemon with 1 000 jobs
// maps 2–3 MB of it again. Unmapping the rest when the daemon is quiet
// (settled) takes it out of the RSS; the pages stay in the page cache, and
// a page wanted again is mapped back by a minor fault. What this does not
// change: the page cache stays charged to the daemon's cgroup (systemd's
// MemoryCurrent), and once unmapped the pages lose the kernel's preference
// for keeping mapped code, so under memory pressure they are reclaimed
// sooner and the next work reads them back from disk.
//
// Only pages that are the file's own bytes may be dropped: a private
// mapping can hold pages written since, and MADV_DONTNEED would replace
// those with the file's bytes. The dynamic loader writes relocations into
// the data segment and then makes part of it read-only (RELRO), and a
// debugger or uprobe writes breakpoints into the code. So a mapping is
// dropped only if it has no page written, resident (Anonymous) or swapped
// out (Swap), and only where it lies outside every writable segment of
// the file. A breakpoint set between the reading of smaps and the madvise
// would be lost. And only the executable's mappings, which stay for the
// process's life: a library could be unloaded (dlclose) between the two,
// and its addresses reused for the heap.

// fileMapping is the part of a mapping of /proc/self/smaps that may be
// dropped. rssKiB is the whole mapping's, on its first part.
type fileMapping struct {
	start, end uintptr
	rssKiB     int
}

// fileRange is a range of offsets in a file, [off, end).
type fileRange struct{ off, end uint64 }

// cleanMappings reads smaps and returns what of path's mappings may be
// dropped: those private and read-only, with pages resident and none
// written (no Anonymous, no Swap), less what of them maps the file's
// writable ranges. (A read-only segment's last page may be a writable
// one's first in the file.)
func cleanMappings(r io.Reader, path string, writable []fileRange) ([]fileMapping, error) {
	var (
		out []fileMapping
		// The current mapping, when in: it is path's, private and
		// read-only; written: it has a page written.
		start, end uintptr
		off        uint64
		rssKiB     int
		in         bool
		written    bool
	)
	flush := func() {
		if in && !written && rssKiB > 0 {
			for _, p := range outside(fileRange{off, off + uint64(end-start)}, writable) {
				out = append(out, fileMapping{start + uintptr(p.off-off), start + uintptr(p.end-off), rssKiB})
				rssKiB = 0
			}
		}
		in, written = false, false
	}
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := sc.Text()
		key, rest, ok := strings.Cut(line, ":")
		if ok && !strings.ContainsAny(key, " -") {
			// A field of the current mapping ("Rss:      68 kB").
			if !in {
				continue
			}
			switch key {
			case "Rss", "Anonymous", "Swap":
				n, err := kiB(rest)
				if err != nil {
					return nil, fmt.Errorf("smaps: %s: %w", line, err)
				}
				if key == "Rss" {
					rssKiB = n
				} else if n > 0 {
					written = true
				}
			}
			continue
		}
		// A mapping's header: "start-end perms offset dev inode path".
		flush()
		f := strings.Fields(line)
		if len(f) < 6 {
			continue // anonymous memory
		}
		perms := f[1]
		if len(perms) != 4 || perms[0] != 'r' || perms[1] != '-' || perms[3] != 'p' {
			continue
		}
		if mappedPath(line) != path {
			continue
		}
		lo, hi, _ := strings.Cut(f[0], "-")
		s, err1 := strconv.ParseUint(lo, 16, 64)
		e, err2 := strconv.ParseUint(hi, 16, 64)
		o, err3 := strconv.ParseUint(f[2], 16, 64)
		if err1 != nil || err2 != nil || err3 != nil || e <= s {
			return nil, fmt.Errorf("smaps: bad range in %q", line)
		}
		start, end, off, rssKiB, in = uintptr(s), uintptr(e), o, 0, true
	}
	flush()
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("smaps: %w", err)
	}
	return out, nil
}

// outside returns the parts of r that no range of in covers.
func outside(r fileRange, in []fileRange) []fileRange {
	parts := []fileRange{r}
	for _, w := range in {
		var next []fileRange
		for _, p := range parts {
			if w.end <= p.off || p.end <= w.off {
				next = append(next, p)
				continue
			}
			if p.off < w.off {
				next = append(next, fileRange{p.off, w.off})
			}
			if w.end < p.end {
				next = append(next, fileRange{w.end, p.end})
			}
		}
		parts = next
	}
	return parts
}

// mappedPath is the rest of a header after its fifth field (the inode):
// the path, which may hold spaces.
func mappedPath(header string) string {
	rest := header
	for range 5 {
		_, rest, _ = strings.Cut(strings.TrimLeft(rest, " "), " ")
	}
	return strings.TrimLeft(rest, " ")
}

// kiB parses smaps' "   68 kB".
func kiB(s string) (int, error) {
	n, ok := strings.CutSuffix(strings.TrimSpace(s), " kB")
	if !ok {
		return 0, fmt.Errorf("not a size in kB")
	}
	return strconv.Atoi(n)
}

// writableSegments returns the file ranges of the ELF file's writable
// loaded segments, widened to whole pages: whatever of the file may be
// mapped writable, RELRO included, which the loader makes read-only only
// once it has written it.
func writableSegments(r io.ReaderAt) ([]fileRange, error) {
	f, err := elf.NewFile(r)
	if err != nil {
		return nil, err
	}
	page := uint64(os.Getpagesize())
	var out []fileRange
	for _, p := range f.Progs {
		if p.Type == elf.PT_LOAD && p.Flags&elf.PF_W != 0 {
			out = append(out, fileRange{p.Off &^ (page - 1), (p.Off + p.Filesz + page - 1) &^ (page - 1)})
		}
	}
	return out, nil
}

// releaseBinaryPages unmaps the daemon's binary's clean pages (see above)
// and returns how many KiB were resident.
func releaseBinaryPages() (int, error) {
	exe, err := os.Readlink("/proc/self/exe")
	if err != nil {
		return 0, err
	}
	writable, err := exeWritable()
	if err != nil {
		return 0, fmt.Errorf("read the segments of %s: %w", exe, err)
	}
	return releaseCleanPages(exe, writable)
}

// exeWritable is writableSegments of the file this process runs, read
// once it could be: opened through /proc, it is that file even if its path
// now names another or none.
func exeWritable() ([]fileRange, error) {
	exeSegments.mu.Lock()
	defer exeSegments.mu.Unlock()
	if exeSegments.read {
		return exeSegments.writable, nil
	}
	f, err := os.Open("/proc/self/exe")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	w, err := writableSegments(f)
	if err != nil {
		return nil, err
	}
	exeSegments.writable, exeSegments.read = w, true
	return w, nil
}

var exeSegments struct {
	mu       sync.Mutex // guards what follows
	read     bool
	writable []fileRange
}

// releaseCleanPages unmaps the pages of path's clean mappings
// (cleanMappings) and returns how many KiB were resident. path must stay
// mapped meanwhile.
func releaseCleanPages(path string, writable []fileRange) (int, error) {
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	ms, err := cleanMappings(f, path, writable)
	if err != nil {
		return 0, err
	}
	released := 0
	for _, m := range ms {
		// Raw, as unix.Madvise wants a []byte over the range, which
		// would take unsafe to make from an address.
		_, _, errno := unix.Syscall(unix.SYS_MADVISE, m.start, m.end-m.start, unix.MADV_DONTNEED)
		if errno != 0 {
			return released, fmt.Errorf("madvise %#x-%#x: %w", m.start, m.end, errno)
		}
		released += m.rssKiB
	}
	return released, nil
}
