package supervisor

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// smapsEntry writes one mapping as the kernel does, the fields the parser
// skips included.
func smapsEntry(header string, rss, anon int) string {
	return fmt.Sprintf("%s\nSize:                100 kB\nKernelPageSize:        4 kB\nRss:                 %d kB\n"+
		"Pss:                 %d kB\nPss_Dirty:             0 kB\nPrivate_Dirty:         0 kB\nReferenced:          %d kB\n"+
		"Anonymous:           %d kB\nTHPeligible:    0\nVmFlags: rd ex mr mw me sd\n", header, rss, rss, rss, anon)
}

func TestCleanMappings(t *testing.T) {
	const exe = "/usr/bin/berth"
	smaps := strings.Join([]string{
		smapsEntry("00400000-00411000 r--p 00000000 fe:00 9978294                            /usr/bin/berth", 68, 0),
		smapsEntry("00411000-00a98000 r-xp 00011000 fe:00 9978294                            /usr/bin/berth", 5656, 0),
		// Relocated by the loader and made read-only again: its written
		// page is anonymous and must not be replaced by the file's.
		smapsEntry("011a7000-011a8000 r--p 00da6000 fe:00 9978294                            /usr/bin/berth", 4, 4),
		smapsEntry("011a8000-01213000 rw-p 00da7000 fe:00 9978294                            /usr/bin/berth", 292, 100),
		smapsEntry("01213000-03259000 rw-p 00000000 00:00 0 ", 184, 184),
		smapsEntry("0a000000-0a100000 r-xp 00000000 fe:00 9978294                            /usr/bin/berth", 0, 0),
		smapsEntry("7f803cc6e000-7f803cdc4000 r-xp 00028000 fe:00 1234 /usr/lib/x86_64-linux-gnu/libc.so.6", 1160, 0),
		smapsEntry("7f803cd00000-7f803cd10000 r--s 00000000 fe:00 9978294                            /usr/bin/berth", 64, 0),
		smapsEntry("7ffd1000-7ffd3000 r-xp 00000000 00:00 0                          [vdso]", 8, 0),
	}, "")
	got, err := cleanMappings(strings.NewReader(smaps), exe)
	if err != nil {
		t.Fatal(err)
	}
	want := []fileMapping{{0x400000, 0x411000, 68}, {0x411000, 0xa98000, 5656}}
	if !slices.Equal(got, want) {
		t.Errorf("cleanMappings = %+v, want the first two mappings %+v", got, want)
	}

	for _, tc := range []struct{ name, header, path string }{
		{"a path with spaces", "00400000-00411000 r--p 00000000 fe:00 12 /opt/my tools/berth", "/opt/my tools/berth"},
		{"a binary replaced on disk", "00400000-00411000 r--p 00000000 fe:00 12   /usr/bin/berth (deleted)", "/usr/bin/berth (deleted)"},
		{"an inode that reads like the offset", "00400000-00411000 r--p 12345678 fe:00 12345678 /usr/bin/berth", "/usr/bin/berth"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := cleanMappings(strings.NewReader(smapsEntry(tc.header, 8, 0)), tc.path)
			if err != nil || len(got) != 1 {
				t.Errorf("cleanMappings = %+v, %v; want the one mapping of %q", got, err, tc.path)
			}
		})
	}

	if _, err := cleanMappings(strings.NewReader(smapsEntry("00400000-00411000 r--p 0 fe:00 1 /b", 8, 0)+"Rss: many\n"), "/b"); err == nil {
		t.Error("cleanMappings took a size with no kB")
	}
}

// TestReleaseCleanPages maps two copies of a file, the kernel's way:
// pages only read are dropped and read back from the file; a page written
// before the mapping was made read-only again (as the dynamic loader does
// with relocations) keeps what was written.
func TestReleaseCleanPages(t *testing.T) {
	page := os.Getpagesize()
	path := filepath.Join(t.TempDir(), "lib")
	content := bytes.Repeat([]byte("berth"), 4*page/5)
	if err := os.WriteFile(path, content, 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	mapping := func(prot int) []byte {
		b, err := unix.Mmap(int(f.Fd()), 0, len(content), prot, unix.MAP_PRIVATE)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { unix.Munmap(b) })
		return b
	}
	clean := mapping(unix.PROT_READ)
	written := mapping(unix.PROT_READ | unix.PROT_WRITE)
	written[page] = '!'
	if err := unix.Mprotect(written, unix.PROT_READ); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(clean, content) { // reads every page in
		t.Fatal("the read mapping differs from the file")
	}
	if rss, _ := mappingKiB(t, clean); rss == 0 {
		t.Fatal("the read mapping has no resident page")
	}
	kib, err := releaseCleanPages(path)
	if err != nil {
		t.Fatal(err)
	}
	if rss, _ := mappingKiB(t, clean); rss != 0 || kib == 0 {
		t.Errorf("after release: %d KiB resident in the read mapping, %d KiB released; want none left", rss, kib)
	}
	if _, anon := mappingKiB(t, written); anon == 0 {
		t.Error("the written page is not anonymous any more: it was dropped")
	}
	if written[page] != '!' || !bytes.Equal(clean, content) {
		t.Errorf("after release the mappings hold %q and %q", written[page], clean[:5])
	}
}

// mappingKiB is the Rss and Anonymous of the mapping that starts at b.
func mappingKiB(t *testing.T, b []byte) (rss, anon int) {
	t.Helper()
	smaps, err := os.ReadFile("/proc/self/smaps")
	if err != nil {
		t.Fatal(err)
	}
	start := fmt.Sprintf("%x-", uintptr(unsafe.Pointer(&b[0])))
	in := false
	sc := bufio.NewScanner(bytes.NewReader(smaps))
	for sc.Scan() {
		line := sc.Text()
		key, rest, _ := strings.Cut(line, ":")
		if strings.ContainsAny(key, " -") {
			if in {
				break
			}
			in = strings.HasPrefix(line, start)
			continue
		}
		if !in {
			continue
		}
		switch key {
		case "Rss":
			rss, _ = kiB(rest)
		case "Anonymous":
			anon, _ = kiB(rest)
		}
	}
	if !in {
		t.Fatalf("no mapping starts at %s in /proc/self/smaps", start)
	}
	return rss, anon
}

// TestReleaseBinaryPages drops the test binary's pages from this process's
// RSS. Not all of them stay out: the code that runs next is mapped again,
// and where the page cache holds the binary in 2 MiB folios (one just
// written by the linker) the kernel maps a whole folio at a time.
func TestReleaseBinaryPages(t *testing.T) {
	before := statusKiB(t, "RssFile")
	kib, err := releaseBinaryPages()
	if err != nil {
		t.Fatal(err)
	}
	after := statusKiB(t, "RssFile")
	if kib < 1024 || after >= before {
		t.Errorf("released %d KiB of the binary; RssFile went from %d to %d KiB", kib, before, after)
	}
}

func statusKiB(t *testing.T, field string) int {
	t.Helper()
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(status)) {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			n, err := kiB(rest)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatalf("no %s in /proc/self/status", field)
	return 0
}

// BenchmarkReleaseBinaryPages: what a hand-back costs beyond its
// collection. Each round starts with a collection, which maps much of the
// binary's type data and tables again, as in the daemon.
func BenchmarkReleaseBinaryPages(b *testing.B) {
	released := 0
	for b.Loop() {
		b.StopTimer()
		runtime.GC()
		b.StartTimer()
		kib, err := releaseBinaryPages()
		if err != nil {
			b.Fatal(err)
		}
		released += kib
	}
	b.ReportMetric(float64(released)/float64(b.N), "KiB/op")
}
