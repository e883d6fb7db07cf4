package store

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestLockOutlivesTheStateFile: the lock is the lock file's, so a state
// file removed under an open store lets no second store open on the same
// directory (before, the second made a new state.db, locked that, and
// a second daemon ran every job again). The lock file names its holder.
func TestLockOutlivesTheStateFile(t *testing.T) {
	s, path := openTest(t, Options{})
	begin(t, s, "batch", t0)
	lock := filepath.Join(filepath.Dir(path), lockName)
	if data, err := os.ReadFile(lock); err != nil || strings.TrimSpace(string(data)) != strconv.Itoa(os.Getpid()) {
		t.Errorf("lock file holds %q (%v), want this process's pid", data, err)
	}

	// A copy stands for the file for the check at cleanup.
	keep := path + ".keep"
	if err := os.Link(path, keep); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	s2, err := Open(path, Options{})
	if err == nil {
		s2.Close()
		t.Fatal("a second Open succeeded on a directory whose state file was removed")
	}
	var le *LockedError
	if !errors.As(err, &le) || le.Path != path || le.HolderPID != os.Getpid() {
		t.Fatalf("second Open: %v (%T), want a *LockedError on %s naming pid %d", err, err, path, os.Getpid())
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("the refused Open made a state file: %v", err)
	}

	// The state file's own lock is kept: the lock file removed alone lets
	// no second store in either.
	if err := os.Link(keep, path); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(lock); err != nil {
		t.Fatal(err)
	}
	s2, err = Open(path, Options{})
	if err == nil {
		s2.Close()
		t.Fatal("a second Open succeeded on a directory whose lock file was removed")
	}
	if !errors.As(err, &le) || le.HolderPID != os.Getpid() {
		t.Fatalf("second Open without the lock file: %v, want a *LockedError naming pid %d", err, os.Getpid())
	}
	if err := os.Remove(keep); err != nil {
		t.Fatal(err)
	}
}

// TestLockReleased: Close releases the lock file, which stays (removing
// it could let two daemons lock two different files), and a failed Open
// releases it too.
func TestLockReleased(t *testing.T) {
	s, path := openTest(t, Options{})
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	lock := filepath.Join(filepath.Dir(path), lockName)
	if _, err := os.Stat(lock); err != nil {
		t.Errorf("the lock file is gone after Close: %v", err)
	}
	openTestAt(t, path, Options{}).Close()

	other := filepath.Join(t.TempDir(), "state.db")
	if err := os.WriteFile(other, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(other, Options{}); !errors.Is(err, ErrNotState) {
		t.Fatalf("Open of an empty file: %v", err)
	}
	if f, err := lockState(other, 0); err != nil {
		t.Errorf("the lock after a refused Open: %v", err)
	} else {
		f.Close()
	}
}

func TestPidIn(t *testing.T) {
	for content, want := range map[string]int{"1234\n": 1234, "1234": 1234, "": 0, "x\n": 0, "-1\n": 0, " 77 \n": 77} {
		f, err := os.Create(filepath.Join(t.TempDir(), lockName))
		if err != nil {
			t.Fatal(err)
		}
		f.WriteString(content)
		if got := pidIn(f); got != want {
			t.Errorf("pidIn(%q) = %d, want %d", content, got, want)
		}
		f.Close()
	}
}

// TestLockFileNotAnother: a state.lock that is a hard link to another file
// is refused, not truncated.
func TestLockFileNotAnother(t *testing.T) {
	dir := t.TempDir()
	precious := filepath.Join(dir, "precious")
	if err := os.WriteFile(precious, []byte("keep me\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(precious, filepath.Join(dir, lockName)); err != nil {
		t.Fatal(err)
	}
	if f, err := lockState(filepath.Join(dir, "state.db"), time.Second); err == nil {
		f.Close()
		t.Fatal("a hard link for a lock file was taken")
	}
	if b, _ := os.ReadFile(precious); string(b) != "keep me\n" {
		t.Errorf("the linked file now holds %q", b)
	}
}

// TestLockFileNotAFile: a state.lock that is a link or a directory is
// refused saying what it is and what to remove, not with the errno alone.
func TestLockFileNotAFile(t *testing.T) {
	for _, c := range []struct {
		name string
		make func(path string) error
		want string
	}{
		{"link", func(p string) error { return os.Symlink("/etc/passwd", p) }, "is a symbolic link, which berth does not follow: remove it, and start berth again: rm "},
		{"directory", func(p string) error { return os.Mkdir(p, 0o700) }, "is a directory, not a file: remove it, and start berth again: rmdir "},
	} {
		dir := t.TempDir()
		if err := c.make(filepath.Join(dir, lockName)); err != nil {
			t.Fatal(err)
		}
		f, err := lockState(filepath.Join(dir, "state.db"), time.Second)
		if err == nil {
			f.Close()
			t.Fatalf("a %s for a lock file was taken", c.name)
		}
		if !strings.Contains(err.Error(), c.want) {
			t.Errorf("a %s: %v", c.name, err)
		}
	}
}
