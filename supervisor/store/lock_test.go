package store

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestLocked(t *testing.T) {
	s, path := openTest(t, Options{})
	begin(t, s, "held", t0)

	// Without the timeout the second open would wait for the lock forever
	// and the test would time out.
	const timeout = 100 * time.Millisecond
	s2, err := Open(path, Options{lockTimeout: timeout})
	if err == nil {
		s2.Close()
		t.Fatal("a second Open on a held file succeeded")
	}
	var le *LockedError
	if !errors.As(err, &le) {
		t.Fatalf("error %v (%T) is not a *LockedError", err, err)
	}
	if !errors.Is(err, ErrLocked) {
		t.Error("errors.Is(err, ErrLocked) is false")
	}
	if le.Path != path {
		t.Errorf("Path = %q, want %q", le.Path, path)
	}
	// flock locks belong to the open file description, so our own second
	// open conflicts, and /proc/locks names this process as the holder.
	if le.HolderPID != os.Getpid() {
		t.Errorf("HolderPID = %d, want this process, %d", le.HolderPID, os.Getpid())
	}
	if want := fmt.Sprintf("(pid %d)", os.Getpid()); !strings.Contains(err.Error(), want) {
		t.Errorf("message %q does not name the holder", err)
	}

	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openTestAt(t, path, Options{lockTimeout: timeout})
	if runs, err := s.Runs("held", 0); err != nil || len(runs) != 1 {
		t.Errorf("after reopening: %d runs, %v", len(runs), err)
	}
}

func TestLockedErrorMessage(t *testing.T) {
	tests := []struct {
		err  LockedError
		want string
	}{
		{LockedError{Path: "/var/lib/berth/state.db", HolderPID: 1234}, "state /var/lib/berth/state.db is held by another berth daemon (pid 1234): one daemon at a time runs on a state directory; stop that one, or give this one --state DIR (ps -p 1234 -f shows it)"},
		{LockedError{Path: "/var/lib/berth/state.db"}, "state /var/lib/berth/state.db is held by another berth daemon: one daemon at a time runs on a state directory; stop that one, or give this one --state DIR (systemctl status berth, or ps -C berth -f)"},
		{LockedError{Path: "/var/lib/berth/state.db", HolderPID: 1234, Removed: true}, "state /var/lib/berth/state.db is held by another berth daemon (pid 1234), though its lock file (or the directory) was removed: one daemon at a time runs on a state directory; stop that one first (ps -p 1234 -f shows it)"},
	}
	for _, tt := range tests {
		if got := tt.err.Error(); got != tt.want {
			t.Errorf("Error() = %q, want %q", got, tt.want)
		}
		if err := error(&tt.err); !errors.Is(fmt.Errorf("open: %w", err), ErrLocked) {
			t.Errorf("wrapped %v is not ErrLocked", err)
		}
	}
}

func TestParseLocks(t *testing.T) {
	const major, minor, ino = 0xfd, 0x01, 5678
	tests := []struct {
		name  string
		locks string
		want  int
	}{
		{"exact", "1: FLOCK  ADVISORY  WRITE 1234 fd:01:5678 0 EOF\n", 1234},
		{"among others", "1: POSIX  ADVISORY  WRITE 99 fd:01:5678 0 EOF\n" +
			"2: FLOCK  ADVISORY  WRITE 77 fd:01:9999 0 EOF\n" +
			"3: FLOCK  ADVISORY  WRITE 1234 fd:01:5678 0 EOF\n" +
			"3: -> FLOCK  ADVISORY  WRITE 555 fd:01:5678 0 EOF\n", 1234},
		{"waiter only", "1: -> FLOCK  ADVISORY  WRITE 555 fd:01:5678 0 EOF\n", 0},
		{"posix only", "1: POSIX  ADVISORY  WRITE 99 fd:01:5678 0 EOF\n", 0},
		{"shared holder", "1: FLOCK  ADVISORY  READ 4321 fd:01:5678 0 EOF\n", 4321},
		{"exact beats inode only", "1: FLOCK  ADVISORY  WRITE 11 00:2a:5678 0 EOF\n" +
			"2: FLOCK  ADVISORY  WRITE 1234 fd:01:5678 0 EOF\n", 1234},
		{"other device, same inode", "1: FLOCK  ADVISORY  WRITE 11 00:2a:5678 0 EOF\n", 11},
		{"inode only, ambiguous", "1: FLOCK  ADVISORY  WRITE 11 00:2a:5678 0 EOF\n" +
			"2: FLOCK  ADVISORY  WRITE 12 00:2b:5678 0 EOF\n", 0},
		{"other pid namespace", "1: FLOCK  ADVISORY  WRITE 0 fd:01:5678 0 EOF\n", 0},
		{"ofd style -1", "1: FLOCK  ADVISORY  WRITE -1 fd:01:5678 0 EOF\n", 0},
		{"garbage", "x\n\n1: FLOCK ADVISORY WRITE abc fd:01:5678 0 EOF\n1: FLOCK ADVISORY WRITE 5 fd01 0 EOF\n", 0},
		{"empty", "", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := parseLocks(strings.NewReader(tt.locks), major, minor, ino); got != tt.want {
				t.Errorf("parseLocks = %d, want %d", got, tt.want)
			}
		})
	}
}

// TestLockedAfterRemoval: a state directory removed whole under its
// daemon (a "reset" by rm -rf) and made again is still that daemon's: a
// second Open there is refused, naming the holder, and its pid is not
// left in the new lock file. Once the first closes, the directory is
// free.
func TestLockedAfterRemoval(t *testing.T) {
	s, path := openTest(t, Options{})
	begin(t, s, "held", t0)
	dir := filepath.Dir(path)
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	_, err := Open(path, Options{lockTimeout: 50 * time.Millisecond})
	var le *LockedError
	if !errors.As(err, &le) || !le.Removed || le.HolderPID != os.Getpid() {
		t.Fatalf("a second Open in the directory made again: %v", err)
	}
	if pid, err := os.ReadFile(filepath.Join(dir, lockName)); err != nil || len(pid) != 0 {
		t.Errorf("the new lock file holds %q (%v), want nothing", pid, err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s2, err := Open(path, Options{lockTimeout: 50 * time.Millisecond})
	if err != nil {
		t.Fatalf("once the first is closed: %v", err)
	}
	s2.Close()
}
