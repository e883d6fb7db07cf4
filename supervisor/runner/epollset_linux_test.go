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
		if !poller {
			// A set of its own, never in a File: one taken out of its
			// File would be closed when the File is collected.
			s.close()
			fd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
			if err != nil {
				t.Fatal(err)
			}
			s = &epollSet{fd: fd}
		}
		if poller && !s.polled {
			t.Fatal("the poller did not take the epoll set")
		}
		efd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.add(efd, unix.EPOLLIN); err != nil {
			t.Fatal(err)
		}
		got := make(chan int32, 64)
		served := make(chan struct{})
		go func() {
			defer close(served)
			s.serve(func(evs []unix.EpollEvent) {
				for _, ev := range evs {
					var b [8]byte
					_, _ = unix.Read(int(ev.Fd), b[:])
					got <- ev.Fd
				}
			})
		}()
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
		if poller {
			// Closed, the set is served no more.
			s.close()
			select {
			case <-served:
			case <-time.After(10 * time.Second):
				t.Fatal("serve did not return in 10s after its set was closed")
			}
		}
		// The set of epoll_wait is left open, its goroutine blocked for
		// the life of the process as the reaper's and the copier's are:
		// closed under a blocked epoll_wait, its number could be another
		// set's by the time the goroutine waits again.
		unix.Close(efd)
	}
}
