package runner

import (
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestEpollSetServes: a descriptor of the set reaches handle each time it
// turns readable, from Go's poller and from epoll_wait where the poller is
// not had.
func TestEpollSetServes(t *testing.T) {
	for _, poller := range []bool{true, false} {
		s, err := newEpollSet()
		if err != nil {
			t.Fatal(err)
		}
		if poller {
			// A deadline is had only on a descriptor in Go's poller.
			if s.file == nil || s.file.SetReadDeadline(time.Now().Add(time.Hour)) != nil {
				t.Fatal("the poller did not take the epoll set")
			}
			if err := s.file.SetReadDeadline(time.Time{}); err != nil {
				t.Fatal(err)
			}
		}
		if !poller {
			s.file = nil
		}
		efd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.add(efd, unix.EPOLLIN); err != nil {
			t.Fatal(err)
		}
		got := make(chan int32, 64)
		go s.serve(func(evs []unix.EpollEvent) {
			for _, ev := range evs {
				var b [8]byte
				_, _ = unix.Read(int(ev.Fd), b[:])
				got <- ev.Fd
			}
		})
		for range 3 {
			if _, err := unix.Write(efd, []byte{1, 0, 0, 0, 0, 0, 0, 0}); err != nil {
				t.Fatal(err)
			}
			select {
			case fd := <-got:
				if fd != int32(efd) {
					t.Fatalf("poller %v: handle got fd %d, want %d", poller, fd, efd)
				}
			case <-time.After(10 * time.Second):
				t.Fatalf("poller %v: no event in 10s", poller)
			}
		}
		// The goroutine serves the set for the life of the process, as
		// the reaper's and the copier's do; the set is left open.
		s.remove(efd)
		unix.Close(efd)
	}
}
