package runner

import (
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// fakeJournal listens where journald would, and hands over everything one
// connection sent once the sender has closed it.
func fakeJournal(t *testing.T) (path string, got <-chan []byte, peer <-chan *net.UnixConn) {
	t.Helper()
	path = filepath.Join(t.TempDir(), "stdout")
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	gotc := make(chan []byte, 1)
	peerc := make(chan *net.UnixConn, 1)
	go func() {
		c, err := l.AcceptUnix()
		if err != nil {
			close(gotc)
			return
		}
		defer c.Close()
		peerc <- c
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		b, _ := io.ReadAll(c)
		gotc <- b
	}()
	return path, gotc, peerc
}

func TestJournalStream(t *testing.T) {
	t.Parallel()
	path, got, peer := fakeJournal(t)
	f, err := JournalStream(path, "train-resnet", 6)
	if err != nil {
		t.Fatal(err)
	}
	// Blocking as it comes, as a child expects its output to be, and so
	// never in Go's poller (os.NewFile decides by the flag). Read through
	// Control: Fd would make it blocking itself.
	rc, err := f.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var fl int
	var flErr error
	if err := rc.Control(func(fd uintptr) { fl, flErr = unix.FcntlInt(fd, unix.F_GETFL, 0) }); err != nil || flErr != nil || fl&unix.O_NONBLOCK != 0 {
		t.Errorf("stream flags %#x (%v, %v): want blocking", fl, err, flErr)
	}
	// Checked while the stream is still open, before the job ends it.
	// The read side is shut down: journald writing back would fail.
	c := <-peer
	if _, err := c.Write([]byte("x")); !errors.Is(err, syscall.EPIPE) {
		t.Errorf("write towards the job = %v, want EPIPE (read side not shut down?)", err)
	}

	spec := helperSpec(t, "print", "<3>epoch 3 diverged", "plain line")
	spec.Stdout = f
	p, err := Start(spec)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	if e := wait(t, p); !e.Success() {
		t.Fatalf("exit = %v", e)
	}

	const want = "train-resnet\n" + // SYSLOG_IDENTIFIER
		"\n" + // unit id
		"6\n" + // priority
		"1\n" + // level prefix: "<3>" sets a line's priority
		"0\n0\n0\n" + // forward to syslog, kmsg, console
		"<3>epoch 3 diverged\nplain line\n"
	select {
	case b := <-got:
		if string(b) != want {
			t.Errorf("journal received\n%q\nwant\n%q", b, want)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("stream not closed 10s after the job ended")
	}
}

func TestJournalStreamRefuses(t *testing.T) {
	t.Parallel()
	path, _, _ := fakeJournal(t)
	if _, err := JournalStream(path, "two\nlines", 6); !errors.Is(err, ErrBadName) {
		t.Errorf("identifier with a newline: %v, want ErrBadName", err)
	}
	for _, prio := range []int{-1, 8} {
		if _, err := JournalStream(path, "job", prio); err == nil {
			t.Errorf("priority %d accepted", prio)
		}
	}
	if _, err := JournalStream(filepath.Join(t.TempDir(), "none"), "job", 6); err == nil {
		t.Error("a missing socket accepted")
	}
}

func TestJournalAvailable(t *testing.T) {
	t.Parallel()
	path, _, _ := fakeJournal(t)
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for p, want := range map[string]bool{
		path:                  true,
		file:                  false,
		file + ".nonexistent": false,
	} {
		if got := JournalAvailable(p); got != want {
			t.Errorf("JournalAvailable(%s) = %v, want %v", p, got, want)
		}
	}
}

// BenchmarkJournalStream is the daemon's side of a run's journal stream:
// connecting, the header, and the file a child is given, closed again as
// the daemon closes its copy once the child has it. The listener stands
// in for journald and reads each connection to its end.
func BenchmarkJournalStream(b *testing.B) {
	path := filepath.Join(b.TempDir(), "stdout")
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.AcceptUnix()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				_, _ = io.Copy(io.Discard, c)
			}()
		}
	}()
	b.ReportAllocs()
	for b.Loop() {
		f, err := JournalStream(path, "train", 6)
		if err != nil {
			b.Fatal(err)
		}
		_ = f.Fd() // as Start does: the child's end must block
		f.Close()
	}
}
