package store

import (
	"errors"
	"fmt"
	"os"
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
		{LockedError{"/var/lib/berth/state.db", 1234}, "state /var/lib/berth/state.db is held by another berth daemon (pid 1234) (systemctl status berth)"},
		{LockedError{"/var/lib/berth/state.db", 0}, "state /var/lib/berth/state.db is held by another berth daemon (systemctl status berth)"},
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
