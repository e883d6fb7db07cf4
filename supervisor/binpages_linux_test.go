package supervisor

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// smapsEntry writes one mapping as the kernel does, the fields the parser
// skips included.
func smapsEntry(header string, rss, anon, swap int) string {
	return fmt.Sprintf("%s\nSize:                100 kB\nKernelPageSize:        4 kB\nRss:                 %d kB\n"+
		"Pss:                 %d kB\nPss_Dirty:             0 kB\nPrivate_Dirty:         0 kB\nReferenced:          %d kB\n"+
		"Anonymous:           %d kB\nSwap:                %d kB\nTHPeligible:    0\nVmFlags: rd ex mr mw me sd\n",
		header, rss, rss, rss, anon, swap)
}

func TestCleanMappings(t *testing.T) {
	const exe = "/usr/bin/berth"
	// A position-independent berth, as packaging/build-deb builds it:
	// its data segment, writable in the file from 0xda5710 on, shares its
	// first page with the end of the constants; the loader relocated its
	// first part and made it read-only (RELRO).
	writable := []fileRange{{0xda5000, 0xe13000}}
	smaps := strings.Join([]string{
		smapsEntry("55d0c0400000-55d0c0411000 r--p 00000000 fe:00 9978294                            /usr/bin/berth", 68, 0, 0),
		smapsEntry("55d0c0411000-55d0c0a98000 r-xp 00011000 fe:00 9978294                            /usr/bin/berth", 5656, 0, 0),
		smapsEntry("55d0c0a98000-55d0c11a6000 r--p 00698000 fe:00 9978294                            /usr/bin/berth", 5948, 0, 0),
		smapsEntry("55d0c11a6000-55d0c1340000 r--p 00da5000 fe:00 9978294                            /usr/bin/berth", 1704, 1436, 0),
		smapsEntry("55d0c1340000-55d0c13ad000 rw-p 00f3f000 fe:00 9978294                            /usr/bin/berth", 292, 100, 0),
		smapsEntry("55d0c13ad000-55d0c33f3000 rw-p 00000000 00:00 0 ", 184, 184, 0),
		smapsEntry("7f803cc6e000-7f803cdc4000 r-xp 00028000 fe:00 1234 /usr/lib/x86_64-linux-gnu/libc.so.6", 1160, 0, 0),
		smapsEntry("7ffd1000-7ffd3000 r-xp 00000000 00:00 0                          [vdso]", 8, 0, 0),
	}, "")
	got, err := cleanMappings(strings.NewReader(smaps), exe, writable)
	if err != nil {
		t.Fatal(err)
	}
	want := []fileMapping{{0x55d0c0400000, 0x55d0c0411000, 68}, {0x55d0c0411000, 0x55d0c0a98000, 5656}, {0x55d0c0a98000, 0x55d0c11a5000, 5948}}
	if !slices.Equal(got, want) {
		t.Errorf("cleanMappings = %+x,\nwant the first three mappings, the third less its last page %+x", got, want)
	}

	for _, tc := range []struct {
		name, header    string
		rss, anon, swap int
		path            string
		want            []fileMapping
	}{
		{"a path with spaces", "00400000-00411000 r--p 00000000 fe:00 12 /opt/my tools/berth", 8, 0, 0, "/opt/my tools/berth", []fileMapping{{0x400000, 0x411000, 8}}},
		{"a binary replaced on disk", "00400000-00411000 r--p 00000000 fe:00 12   /usr/bin/berth (deleted)", 8, 0, 0, "/usr/bin/berth (deleted)", []fileMapping{{0x400000, 0x411000, 8}}},
		{"an inode that reads like the offset", "00400000-00411000 r--p 12345678 fe:00 12345678 /usr/bin/berth", 8, 0, 0, exe, []fileMapping{{0x400000, 0x411000, 8}}},
		// Relocated by the loader, or a breakpoint set: a page written
		// must keep what was written.
		{"a written page", "00400000-00411000 r-xp 00001000 fe:00 12 /usr/bin/berth", 8, 4, 0, exe, nil},
		{"a written page swapped out", "00400000-00411000 r-xp 00001000 fe:00 12 /usr/bin/berth", 8, 0, 4, exe, nil},
		{"in a writable segment, nothing written yet", "00400000-00401000 r--p 00da7000 fe:00 12 /usr/bin/berth", 4, 0, 0, exe, nil},
		{"the page before a writable segment's", "00400000-00401000 r--p 00da4000 fe:00 12 /usr/bin/berth", 4, 0, 0, exe, []fileMapping{{0x400000, 0x401000, 4}}},
		{"a writable segment in the middle", "00400000-00600000 r--p 00d00000 fe:00 12 /usr/bin/berth", 8, 0, 0, exe,
			[]fileMapping{{0x400000, 0x4a5000, 8}, {0x513000, 0x600000, 0}}},
		{"nothing resident", "00400000-00411000 r-xp 00001000 fe:00 12 /usr/bin/berth", 0, 0, 0, exe, nil},
		{"writable", "00400000-00411000 rw-p 00001000 fe:00 12 /usr/bin/berth", 8, 0, 0, exe, nil},
		{"shared", "00400000-00411000 r--s 00001000 fe:00 12 /usr/bin/berth", 8, 0, 0, exe, nil},
		{"another file", "00400000-00411000 r-xp 00001000 fe:00 13 /usr/lib/libc.so.6", 8, 0, 0, exe, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := cleanMappings(strings.NewReader(smapsEntry(tc.header, tc.rss, tc.anon, tc.swap)), tc.path, writable)
			if err != nil || !slices.Equal(got, tc.want) {
				t.Errorf("cleanMappings = %+x, %v; want %+x", got, err, tc.want)
			}
		})
	}

	if _, err := cleanMappings(strings.NewReader(smapsEntry("00400000-00411000 r--p 0 fe:00 1 /b", 8, 0, 0)+"Rss: many\n"), "/b", nil); err == nil {
		t.Error("cleanMappings took a size with no kB")
	}
}

// writableSegments finds where this test binary's writable mapping comes
// from in the file.
func TestWritableSegments(t *testing.T) {
	exe, err := os.Readlink("/proc/self/exe")
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(exe)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	writable, err := writableSegments(f)
	if err != nil {
		t.Fatal(err)
	}
	maps, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		t.Fatal(err)
	}
	seen := 0
	for line := range strings.Lines(string(maps)) {
		fs := strings.Fields(line)
		if len(fs) < 6 || mappedPath(strings.TrimSuffix(line, "\n")) != exe || fs[1][1] != 'w' {
			continue
		}
		seen++
		off, _ := strconv.ParseUint(fs[2], 16, 64)
		if len(outside(fileRange{off, off + 1}, writable)) != 0 {
			t.Errorf("the writable mapping %s is at offset %#x, outside the writable segments %x", fs[0], off, writable)
		}
	}
	if seen == 0 {
		t.Fatalf("no writable mapping of %s in /proc/self/maps", exe)
	}
	if _, err := writableSegments(strings.NewReader("#!/bin/sh\n")); err == nil {
		t.Error("writableSegments read a script as ELF")
	}
}

// TestReleaseCleanPages maps a file three times, the kernel's way: pages
// only read are dropped and read back from the file; a page written before
// the mapping was made read-only again (as the dynamic loader does with
// relocations) keeps what was written; a mapping of what the file says is
// writable is left alone.
func TestReleaseCleanPages(t *testing.T) {
	page := os.Getpagesize()
	// As the kernel names it in smaps: with no link in the way.
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "lib")
	content := bytes.Repeat([]byte("berth"), 4*page/5)
	if err := writeFile(path, content, 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	mapping := func(off, n, prot int) []byte {
		b, err := unix.Mmap(int(f.Fd()), int64(off), n, prot, unix.MAP_PRIVATE)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { unix.Munmap(b) })
		return b
	}
	clean := mapping(0, 2*page, unix.PROT_READ)
	written := mapping(0, 2*page, unix.PROT_READ|unix.PROT_WRITE)
	written[page] = '!'
	if err := unix.Mprotect(written, unix.PROT_READ); err != nil {
		t.Fatal(err)
	}
	reserved := mapping(3*page, len(content)-3*page, unix.PROT_READ)
	writable := []fileRange{{uint64(3 * page), uint64(4 * page)}}
	// Each read reads every page in.
	if !bytes.Equal(clean, content[:2*page]) || !bytes.Equal(reserved, content[3*page:]) {
		t.Fatal("a mapping differs from the file")
	}
	if rss, _ := mappingKiB(t, clean); rss == 0 {
		t.Fatal("the read mapping has no resident page")
	}

	kib, err := releaseCleanPages(path, writable)
	if err != nil {
		t.Fatal(err)
	}
	if rss, _ := mappingKiB(t, clean); rss != 0 || kib == 0 {
		t.Errorf("after release: %d KiB resident in the read mapping, %d KiB released; want none left", rss, kib)
	}
	if _, anon := mappingKiB(t, written); anon == 0 {
		t.Error("the written page is not anonymous any more: it was dropped")
	}
	if rss, _ := mappingKiB(t, reserved); rss == 0 {
		t.Error("the mapping of a writable segment was dropped")
	}
	if written[page] != '!' || !bytes.Equal(clean, content[:2*page]) {
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

// TestReleaseBinaryPages finds this test binary's code among its clean
// mappings and drops it. How much stays out of the RSS is not asked: the
// code that runs next is mapped again, and where the page cache holds the
// binary in 2 MiB folios (one just written by the linker) the kernel maps
// a whole folio at a time.
func TestReleaseBinaryPages(t *testing.T) {
	exe, err := os.Readlink("/proc/self/exe")
	if err != nil {
		t.Fatal(err)
	}
	writable, err := exeWritable()
	if err != nil {
		t.Fatal(err)
	}
	smaps, err := os.Open("/proc/self/smaps")
	if err != nil {
		t.Fatal(err)
	}
	ms, err := cleanMappings(smaps, exe, writable)
	smaps.Close()
	if err != nil {
		t.Fatal(err)
	}
	code := reflect.ValueOf(TestReleaseBinaryPages).Pointer()
	if !slices.ContainsFunc(ms, func(m fileMapping) bool { return m.start <= code && code < m.end }) {
		t.Errorf("no clean mapping of %s holds this test's code at %#x: %+v", exe, code, ms)
	}
	kib, err := releaseBinaryPages()
	if err != nil || kib < 1024 {
		t.Errorf("releaseBinaryPages = %d KiB, %v; want the MiBs of this binary's code", kib, err)
	}
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
