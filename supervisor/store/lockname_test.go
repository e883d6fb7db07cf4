package store

import (
	"bufio"
	"errors"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// A squatter: the test binary run with BERTH_STORE_TEST_SQUAT=NAME binds
// and listens on the abstract socket NAME, says "bound", and holds it until
// its stdin closes.
func init() {
	name := os.Getenv("BERTH_STORE_TEST_SQUAT")
	if name == "" {
		return
	}
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: name, Net: "unix"})
	if err != nil {
		os.Exit(2)
	}
	os.Stdout.WriteString("bound\n")
	io.Copy(io.Discard, os.Stdin)
	l.Close()
	os.Exit(0)
}

// TestLockNameNotADaemons: the abstract name of a state directory, which
// anyone may bind first, held by a process that is not listening, or by
// another user's, is no daemon's lock: the state opens on its file lock
// (review: any local user could keep berth from starting).
func TestLockNameNotADaemons(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	name, err := dirLockName(filepath.Dir(path))
	if err != nil {
		t.Fatal(err)
	}
	// Bound, not listening.
	fd, err := syscall.Socket(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Bind(fd, &syscall.SockaddrUnix{Name: name}); err != nil {
		t.Fatal(err)
	}
	s, err := Open(path, Options{lockTimeout: 50 * time.Millisecond})
	if err != nil {
		t.Fatalf("with the name bound by a socket that does not listen: %v", err)
	}
	if taken := s.NameTaken(); taken == nil {
		t.Error("the store does not say its name is taken")
	}
	s.Close()
	syscall.Close(fd)

	if os.Geteuid() != 0 {
		t.Skip("running a squatter as another user needs root")
	}
	// Another user's, listening: a copy of this binary that user may run.
	dir := t.TempDir()
	for _, d := range []string{filepath.Dir(dir), dir} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	exe := filepath.Join(dir, "squat")
	data, err := os.ReadFile(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(exe, data, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe)
	cmd.Env = []string{"BERTH_STORE_TEST_SQUAT=" + name}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Skipf("cannot run a copy of this binary as uid 65534 (%v): its directory mounted noexec?", err)
	}
	defer func() {
		stdin.Close()
		cmd.Wait()
	}()
	if line, err := bufio.NewReader(stdout).ReadString('\n'); line != "bound\n" {
		t.Skipf("the squatter as uid 65534 did not bind (%q, %v): its binary not executable by it?", line, err)
	}
	s, err = Open(path, Options{lockTimeout: 50 * time.Millisecond})
	if err != nil {
		t.Fatalf("with the name held by another user's process: %v", err)
	}
	s.Close()
}

// TestLockHolderSaidEachTime: every daemon refused is told the holder's
// pid, not the first few alone (the name's backlog filled).
func TestLockHolderSaidEachTime(t *testing.T) {
	_, path := openTest(t, Options{})
	name, err := dirLockName(filepath.Dir(path))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		if pid, _, ours := dirLockHolder(name); pid != os.Getpid() || !ours {
			t.Fatalf("ask %d: pid %d, ours %v", i, pid, ours)
		}
	}
}

// TestLockedWithBacklogFull: a daemon's name whose backlog was filled (by
// refused daemons asking who holds it, or by someone, to get past) still
// refuses a second daemon after the directory was removed (review).
func TestLockedWithBacklogFull(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state", "state.db")
	if err := os.Mkdir(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	s, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	name, err := dirLockName(filepath.Dir(path))
	if err != nil {
		t.Fatal(err)
	}
	// Fill it: connect until the kernel says it is full.
	var fds []int
	defer func() {
		for _, fd := range fds {
			syscall.Close(fd)
		}
	}()
	for range dirLockBacklog + 64 {
		fd, err := syscall.Socket(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_NONBLOCK|syscall.SOCK_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		fds = append(fds, fd)
		if err := syscall.Connect(fd, &syscall.SockaddrUnix{Name: name}); err != nil {
			break
		}
	}
	dir := filepath.Dir(path)
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	_, err = Open(path, Options{lockTimeout: 50 * time.Millisecond})
	var le *LockedError
	if !errors.As(err, &le) {
		t.Fatalf("a second Open with the name's backlog full: %v", err)
	}
}
