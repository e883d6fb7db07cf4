package watch

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestScanLifecycle walks one directory through the changes a person makes,
// checking after each that the scan reports exactly that change.
func TestScanLifecycle(t *testing.T) {
	dir := jobsDir(t)
	p := func(name string) string { return filepath.Join(dir, name) }
	s := newTestScanner(dir)

	steps := []struct {
		name string
		do   func(t *testing.T)
		want string
	}{
		{"new files", func(t *testing.T) {
			writeFile(t, p("a.lua"), "a1")
			writeFile(t, p("b.lua"), "b1")
		}, "changed a.lua=a1 b.lua=b1"},
		{"nothing", func(t *testing.T) {}, ""},
		{"modified content", func(t *testing.T) { writeFile(t, p("a.lua"), "a2") }, "changed a.lua=a2"},
		{"same size, new content", func(t *testing.T) { writeFile(t, p("a.lua"), "a3") }, "changed a.lua=a3"},
		{"touched, same content", func(t *testing.T) {
			future := time.Now().Add(time.Hour)
			if err := os.Chtimes(p("b.lua"), future, future); err != nil {
				t.Fatal(err)
			}
		}, ""},
		{"rewritten with the same content", func(t *testing.T) { writeFile(t, p("b.lua"), "b1") }, ""},
		{"forgotten: read again, unchanged", func(t *testing.T) { s.Forget(p("b.lua")) }, "changed b.lua=b1"},
		{"once", func(t *testing.T) {}, ""},
		{"forgetting what it never saw does nothing", func(t *testing.T) { s.Forget(p("zz.lua")) }, ""},
		{"chmod, same content", func(t *testing.T) {
			if err := os.Chmod(p("b.lua"), 0o600); err != nil {
				t.Fatal(err)
			}
		}, ""},
		{"renamed", func(t *testing.T) {
			if err := os.Rename(p("a.lua"), p("c.lua")); err != nil {
				t.Fatal(err)
			}
		}, "changed c.lua=a3; removed a.lua"},
		{"removed", func(t *testing.T) {
			if err := os.Remove(p("b.lua")); err != nil {
				t.Fatal(err)
			}
		}, "removed b.lua"},
		{"replaced by atomic rename", func(t *testing.T) {
			writeFile(t, p(".c.lua.tmp"), "c2")
			if err := os.Rename(p(".c.lua.tmp"), p("c.lua")); err != nil {
				t.Fatal(err)
			}
		}, "changed c.lua=c2"},
		{"replaced by atomic rename, same content", func(t *testing.T) {
			writeFile(t, p(".c.lua.tmp"), "c2")
			if err := os.Rename(p(".c.lua.tmp"), p("c.lua")); err != nil {
				t.Fatal(err)
			}
		}, ""},
		{"emptied", func(t *testing.T) { writeFile(t, p("c.lua"), "") }, "changed c.lua="},
	}
	for _, step := range steps {
		step.do(t)
		if got := summary(dir, scan(t, s)); got != step.want {
			t.Fatalf("%s: scan says %q, want %q", step.name, got, step.want)
		}
	}
}

func TestScanIgnoresNames(t *testing.T) {
	dir := jobsDir(t)
	for _, name := range []string{
		".hidden.lua", ".#x.lua", "x.lua~", "x.lua.swp", ".x.lua.swp", "x.lua.tmp",
		"notes.txt", "4913", "#x.lua#", "..data", "README",
	} {
		writeFile(t, filepath.Join(dir, name), "ignored")
	}
	writeFile(t, filepath.Join(dir, "x.lua"), "job")
	s := newTestScanner(dir)
	if got, want := summary(dir, scan(t, s)), "changed x.lua=job"; got != want {
		t.Fatalf("scan says %q, want %q", got, want)
	}
}

func TestIsJobFile(t *testing.T) {
	for name, want := range map[string]bool{
		"x.lua": true, "train-resnet.lua": true, "#x.lua": true, "a.b.lua": true,
		".hidden.lua": false, ".#x.lua": false, "x.lua~": false, "x.lua.swp": false,
		"x.lua.tmp": false, "notes.txt": false, "#x.lua#": false, ".lua": false,
		"x.LUA": false, "x.lua/": false, "4913": false, "..data": false,
	} {
		if got := IsJobFile(name); got != want {
			t.Errorf("IsJobFile(%q) = %v, want %v", name, got, want)
		}
	}
}

// TestScanRenameWhileListing: a file renamed after the directory was
// listed and before it was looked at is seen whole, in the same scan: gone
// by its old name, there by its new one; not as a removal first.
func TestScanRenameWhileListing(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"x.lua", "y.lua"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(name), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var renamed string
	hook := func(path string, _ *unix.Stat_t) {
		// At the first look at one of the two, the other is renamed.
		other := map[string]string{"x.lua": "y.lua", "y.lua": "x.lua"}[filepath.Base(path)]
		if renamed != "" || other == "" || filepath.Dir(path) != dir {
			return
		}
		renamed = other
		if err := os.Rename(filepath.Join(dir, other), filepath.Join(dir, "z.lua")); err != nil {
			t.Error(err)
		}
	}
	s := NewScanner(dir, ScanOptions{DaemonUID: os.Getuid()})
	scan(t, s)
	s.statHook = hook
	got := summary(dir, scan(t, s))
	if want := "changed z.lua=" + renamed + "; removed " + renamed; got != want {
		t.Errorf("a rename while the directory was read: %q, want %q", got, want)
	}
}

func TestScanDirMissingThenCreated(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "jobs.d")
	s := newTestScanner(dir)
	if got, want := summary(dir, scan(t, s)), "dir missing"; got != want {
		t.Fatalf("scan says %q, want %q", got, want)
	}
	mkdir(t, dir)
	writeFile(t, filepath.Join(dir, "a.lua"), "a1")
	if got, want := summary(dir, scan(t, s)), "changed a.lua=a1"; got != want {
		t.Fatalf("scan says %q, want %q", got, want)
	}
	// Gone again: everything seen is removed, and comes back as new.
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if got, want := summary(dir, scan(t, s)), "removed a.lua; dir missing"; got != want {
		t.Fatalf("scan says %q, want %q", got, want)
	}
	mkdir(t, dir)
	writeFile(t, filepath.Join(dir, "a.lua"), "a1")
	if got, want := summary(dir, scan(t, s)), "changed a.lua=a1"; got != want {
		t.Fatalf("scan says %q, want %q", got, want)
	}
}

func TestScanDirIsAFile(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "jobs.d")
	writeFile(t, dir, "not a directory")
	got := scan(t, newTestScanner(dir))
	var re *RefusedError
	if !got.DirMissing || !errors.As(got.DirRefused, &re) || re.Reason != NotDirectory {
		t.Fatalf("scan says %q, DirRefused %v; want a NotDirectory refusal", summary(dir, got), got.DirRefused)
	}
}

// TestScanSymlink follows a link to its target, as a ConfigMap volume
// needs, and sees a change of target or of the target's content.
func TestScanSymlink(t *testing.T) {
	dir := jobsDir(t)
	shared := filepath.Join(filepath.Dir(dir), "shared")
	mkdir(t, shared)
	openToAll(t, shared)
	writeFile(t, filepath.Join(shared, "x.lua"), "x1")
	writeFile(t, filepath.Join(shared, "y.lua"), "y1")
	link := filepath.Join(dir, "x.lua")
	if err := os.Symlink("../shared/x.lua", link); err != nil {
		t.Fatal(err)
	}
	s := newTestScanner(dir)
	if got, want := summary(dir, scan(t, s)), "changed x.lua=x1"; got != want {
		t.Fatalf("scan says %q, want %q", got, want)
	}
	writeFile(t, filepath.Join(shared, "x.lua"), "x2")
	if got, want := summary(dir, scan(t, s)), "changed x.lua=x2"; got != want {
		t.Fatalf("after editing the target: scan says %q, want %q", got, want)
	}
	// Point the link elsewhere, atomically.
	if err := os.Symlink("../shared/y.lua", link+".tmp"); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(link+".tmp", link); err != nil {
		t.Fatal(err)
	}
	if got, want := summary(dir, scan(t, s)), "changed x.lua=y1"; got != want {
		t.Fatalf("after re-pointing the link: scan says %q, want %q", got, want)
	}
	// The target's mode is what counts, not the link's.
	if err := os.Chmod(filepath.Join(shared, "y.lua"), 0o666); err != nil {
		t.Fatal(err)
	}
	if got, want := summary(dir, scan(t, s)), "removed x.lua; refused x.lua(writable by others)"; got != want {
		t.Fatalf("after chmod o+w on the target: scan says %q, want %q", got, want)
	}
	// A link to nothing is refused, with where it points.
	if err := os.Remove(filepath.Join(shared, "y.lua")); err != nil {
		t.Fatal(err)
	}
	got := scan(t, s)
	if want := "refused x.lua(dangling link)"; summary(dir, got) != want {
		t.Fatalf("after removing the target: scan says %q, want %q", summary(dir, got), want)
	}
	if msg := got.Refused[link].Error(); !strings.Contains(msg, "../shared/y.lua") {
		t.Errorf("dangling link message %q does not say where the link points", msg)
	}
}

func TestScanRefusesNonRegular(t *testing.T) {
	dir := jobsDir(t)
	mkdir(t, filepath.Join(dir, "x.lua"))
	if err := syscall.Mkfifo(filepath.Join(dir, "pipe.lua"), 0o644); err != nil {
		t.Fatal(err)
	}
	// Opening a FIFO would block until a writer came; the scan must not.
	got, want := summary(dir, scan(t, newTestScanner(dir))), "refused pipe.lua(not regular) x.lua(not regular)"
	if got != want {
		t.Fatalf("scan says %q, want %q", got, want)
	}
}

func TestScanTooBig(t *testing.T) {
	dir := jobsDir(t)
	path := filepath.Join(dir, "big.lua")
	s := NewScanner(dir, ScanOptions{DaemonUID: os.Getuid(), MaxFileBytes: 16})
	writeFile(t, path, "0123456789abcdef")
	if got, want := summary(dir, scan(t, s)), "changed big.lua=0123456789abcdef"; got != want {
		t.Fatalf("at the limit: scan says %q, want %q", got, want)
	}
	writeFile(t, path, "0123456789abcdefX")
	got := scan(t, s)
	if want := "removed big.lua; refused big.lua(too big)"; summary(dir, got) != want {
		t.Fatalf("over the limit: scan says %q, want %q", summary(dir, got), want)
	}
	var re *RefusedError
	if !errors.As(got.Refused[path], &re) || re.Size != 17 || re.MaxBytes != 16 {
		t.Fatalf("refusal %#v does not carry size 17 and limit 16", got.Refused[path])
	}
	// Still refused at the next scan, but removed only once.
	if got, want := summary(dir, scan(t, s)), "refused big.lua(too big)"; got != want {
		t.Fatalf("next scan says %q, want %q", got, want)
	}
	writeFile(t, path, "small")
	if got, want := summary(dir, scan(t, s)), "changed big.lua=small"; got != want {
		t.Fatalf("after the fix: scan says %q, want %q", got, want)
	}
}

func TestScanDefaultMaxFileBytes(t *testing.T) {
	dir := jobsDir(t)
	writeFile(t, filepath.Join(dir, "big.lua"), strings.Repeat("x", DefaultMaxFileBytes+1))
	if got, want := summary(dir, scan(t, newTestScanner(dir))), "refused big.lua(too big)"; got != want {
		t.Fatalf("scan says %q, want %q", got, want)
	}
}

// TestScanRacyStamp checks the racily-clean rule: a stamp taken within
// racyWindow of the file's last change is not trusted at the next scan.
// The kernel's timestamps cannot be made to collide on demand, so the test
// corrupts the remembered hash instead: a scan that reads the file again
// reports it, one that trusts the stamp does not.
func TestScanRacyStamp(t *testing.T) {
	dir := jobsDir(t)
	writeFile(t, filepath.Join(dir, "a.lua"), "a1")
	s := newTestScanner(dir)
	scan(t, s)
	if !s.seen["a.lua"].racy {
		t.Fatal("a file written a moment ago is not marked racy")
	}
	corrupt := func() {
		f := s.seen["a.lua"]
		f.sum[0] ^= 0xff
		s.seen["a.lua"] = f
	}
	corrupt()
	if got, want := summary(dir, scan(t, s)), "changed a.lua=a1"; got != want {
		t.Fatalf("racy stamp: scan says %q, want %q (the file must be read again)", got, want)
	}
	// Later, the same stamp is trusted and the file is not read.
	s.now = func() time.Time { return time.Now().Add(racyWindow + time.Second) }
	scan(t, s) // reads it once more and finds it settled
	if s.seen["a.lua"].racy {
		t.Fatal("a file last changed long before the scan is still racy")
	}
	corrupt()
	if got := summary(dir, scan(t, s)); got != "" {
		t.Fatalf("settled stamp: scan says %q, want nothing (the file must not be read)", got)
	}
}

// TestScanDirUnreadable: a directory the daemon cannot list is refused,
// with a fix, rather than failing every scan.
func TestScanDirUnreadable(t *testing.T) {
	if os.Getuid() == 0 {
		t.Skip("root reads a directory whatever its mode")
	}
	dir := jobsDir(t)
	writeFile(t, filepath.Join(dir, "a.lua"), "a1")
	s := newTestScanner(dir)
	scan(t, s)
	if err := os.Chmod(dir, 0o311); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Chmod(dir, 0o755) })
	got := scan(t, s)
	var re *RefusedError
	if !got.DirMissing || !errors.As(got.DirRefused, &re) || re.Reason != Unreadable {
		t.Fatalf("scan says %q, DirRefused %v; want Unreadable", summary(dir, got), got.DirRefused)
	}
}

// A file someone has open for writing is a save in progress: the scan
// leaves it as it was (what it read before stands, a new one is not there
// yet) and says so, and reads it once the writer has closed it, or has not
// written for WriteGrace.
func TestScanWriting(t *testing.T) {
	dir := jobsDir(t)
	p := func(name string) string { return filepath.Join(dir, name) }
	s := newTestScanner(dir)
	writeFile(t, p("a.lua"), "s1\ns2\n")
	if got := scan(t, s); string(got.Changed[p("a.lua")]) != "s1\ns2\n" {
		t.Fatalf("first scan: %+v", got)
	}
	probe, err := os.Open(p("a.lua"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := unix.FcntlInt(probe.Fd(), unix.F_SETLEASE, unix.F_RDLCK); err != nil {
		t.Skipf("this file system gives no read lease: %v", err)
	}
	probe.Close()

	// An editor that writes in place: truncate, then one line at a time.
	w, err := os.OpenFile(p("a.lua"), os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if _, err := w.WriteString("s1\n"); err != nil {
		t.Fatal(err)
	}
	writing := func(got Scan, path string) {
		t.Helper()
		if len(got.Changed) != 0 || len(got.Removed) != 0 || len(got.Refused) != 0 {
			t.Fatalf("a save in progress changed something: %+v", got)
		}
		var r *RefusedError
		if err := got.Writing[path]; !errors.As(err, &r) || r.Reason != Writing ||
			!strings.Contains(err.Error(), "is open for writing") || !strings.Contains(err.Error(), "fuser -v "+path) {
			t.Fatalf("Writing[%s] = %v", path, err)
		}
	}
	writing(scan(t, s), p("a.lua"))
	// A file named outright (berth check) is read as it is.
	if got, err := ReadJobFile(p("a.lua"), ScanOptions{DaemonUID: os.Getuid()}); err != nil || string(got) != "s1\n" {
		t.Fatalf("ReadJobFile while written: %q, %v", got, err)
	}
	if _, err := w.WriteString("s2\ns3\n"); err != nil {
		t.Fatal(err)
	}
	writing(scan(t, s), p("a.lua"))
	// A new file is not there until it is written.
	n, err := os.OpenFile(p("new.lua"), os.O_WRONLY|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	if got := scan(t, s); len(got.Writing) != 2 || got.Writing[p("new.lua")] == nil || len(got.Changed) != 0 {
		t.Fatalf("a new file being written: %+v", got)
	}

	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	got := scan(t, s)
	if string(got.Changed[p("a.lua")]) != "s1\ns2\ns3\n" || len(got.Changed) != 1 || len(got.Removed) != 0 || got.Writing[p("a.lua")] != nil {
		t.Fatalf("closed: %+v", got)
	}

	// A writer that keeps it open but has not written for WriteGrace
	// does not hold it back for ever.
	s.now = func() time.Time { return time.Now().Add(WriteGrace) }
	if got := scan(t, s); len(got.Writing) != 0 || len(got.Changed) != 1 {
		t.Fatalf("open, unchanged for WriteGrace: %+v", got)
	}
}

// TestScanBoundedDir: a directory bounded in all (a person's) is read in
// name order until a file would take it past its count of files or its
// bytes; that one is refused, unread, and so is every file past the
// count. Removing one lets the next in.
func TestScanBoundedDir(t *testing.T) {
	dir := jobsDir(t)
	for _, name := range []string{"a.lua", "b.lua", "c.lua", "d.lua"} {
		writeFile(t, filepath.Join(dir, name), strings.Repeat("x", 30))
	}
	writeFile(t, filepath.Join(dir, "e.lua"), "e")
	s := NewScanner(dir, ScanOptions{DaemonUID: os.Getuid(), MaxFiles: 3, MaxTotalBytes: 70})
	got := scan(t, s)
	x := strings.Repeat("x", 30)
	if want := "changed a.lua=" + x + " b.lua=" + x + " e.lua=e; refused c.lua(too many) d.lua(too many)"; summary(dir, got) != want {
		t.Fatalf("scan says %q, want %q", summary(dir, got), want)
	}
	msg := got.Refused[filepath.Join(dir, "c.lua")].Error()
	if !strings.Contains(msg, "3 files and 70 bytes of them in all") {
		t.Errorf("the refusal: %s", msg)
	}
	if err := os.Remove(filepath.Join(dir, "a.lua")); err != nil {
		t.Fatal(err)
	}
	if want := "changed c.lua=" + x + "; removed a.lua; refused d.lua(too many)"; summary(dir, scan(t, s)) != want {
		t.Errorf("after a.lua's removal: %q, want %q", summary(dir, scan(t, s)), want)
	}
}
