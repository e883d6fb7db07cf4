package supervisor

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Handing back the pages of the daemon's own binary.
//
// Go binaries are large (berth's code and constants are some 14 MB), and
// start-up touches them all over: every package's init, the Lua compiler,
// the first evaluation. The kernel maps 64 KiB around each page faulted in,
// so a daemon that has started has 12 MB of its binary mapped, and counted
// in its RSS, of which it then uses a small part: an idle daemon with
// 1 000 jobs runs a few hundred KiB of code. Unmapping the rest when the
// daemon is quiet (settled) takes it out of the RSS and leaves it in the
// page cache, which is shared and which the kernel reclaims first when
// memory is short; a page wanted again is mapped back by a minor fault.
//
// Only pages that are the file's own content may be dropped: a private
// mapping can hold pages written since (the relocations the dynamic loader
// made read-only again), and MADV_DONTNEED would replace those with the
// file's bytes. So only mappings with no anonymous page are touched, and
// only the executable's, which stays mapped for the process's life: a
// library could be unloaded (dlclose) between reading smaps and the
// madvise, and its addresses reused for the heap.

// fileMapping is one mapping of /proc/self/smaps that may be dropped.
type fileMapping struct {
	start, end uintptr
	rssKiB     int
}

// cleanMappings reads smaps and returns the private, read-only mappings of
// path that have resident pages and no anonymous page.
func cleanMappings(r io.Reader, path string) ([]fileMapping, error) {
	var (
		out []fileMapping
		cur fileMapping
		// in: the current mapping is path's, private and read-only;
		// anon: it has an anonymous page.
		in, anon bool
	)
	flush := func() {
		if in && !anon && cur.rssKiB > 0 {
			out = append(out, cur)
		}
		in, anon = false, false
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
			case "Rss", "Anonymous":
				n, err := kiB(rest)
				if err != nil {
					return nil, fmt.Errorf("smaps: %s: %w", line, err)
				}
				if key == "Rss" {
					cur.rssKiB = n
				} else {
					anon = n > 0
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
		start, err1 := strconv.ParseUint(lo, 16, 64)
		end, err2 := strconv.ParseUint(hi, 16, 64)
		if err1 != nil || err2 != nil || end <= start {
			return nil, fmt.Errorf("smaps: bad range in %q", line)
		}
		cur = fileMapping{start: uintptr(start), end: uintptr(end)}
		in = true
	}
	flush()
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("smaps: %w", err)
	}
	return out, nil
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

// releaseBinaryPages unmaps the daemon's binary's clean pages (see above)
// and returns how many KiB were resident.
func releaseBinaryPages() (int, error) {
	exe, err := os.Readlink("/proc/self/exe")
	if err != nil {
		return 0, err
	}
	return releaseCleanPages(exe)
}

// releaseCleanPages unmaps the pages of path's clean mappings
// (cleanMappings) and returns how many KiB were resident. path must stay
// mapped meanwhile.
func releaseCleanPages(path string) (int, error) {
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	ms, err := cleanMappings(f, path)
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
