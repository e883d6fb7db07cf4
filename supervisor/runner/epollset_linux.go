package runner

import (
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// epollSet is an epoll set that one goroutine serves: the reaper's pidfds,
// the copier's pipes. The set is itself a descriptor that turns readable
// when one of its own does, and the goroutine waits for that in Go's own
// poller, as a socket's reader does: parked, on no thread. Blocked in
// epoll_wait instead, it held its thread in a system call, and whatever it
// woke (the job of a run that ended) waited behind that call for the
// scheduler to take its processor back: 0.17 ms (p50) from an exit seen
// to its job running, in 1 000 short runs whose cycle is about 1.5 ms.
type epollSet struct {
	fd int
	// file is fd as a File, kept: one that is collected closes its
	// descriptor. polled: Go's poller has it; where it has not, serve
	// waits in epoll_wait.
	file   *os.File
	polled bool
}

func newEpollSet() (*epollSet, error) {
	fd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return nil, err
	}
	s := &epollSet{fd: fd}
	if unix.SetNonblock(fd, true) == nil {
		s.file = os.NewFile(uintptr(fd), "epoll")
		// A deadline is had only on a descriptor in Go's poller.
		s.polled = s.file.SetReadDeadline(time.Time{}) == nil
	}
	return s, nil
}

// add watches fd for events.
func (s *epollSet) add(fd int, events uint32) error {
	ev := unix.EpollEvent{Events: events, Fd: int32(fd)}
	return unix.EpollCtl(s.fd, unix.EPOLL_CTL_ADD, fd, &ev)
}

// close closes the set, through its File where it has one: a File closes
// its descriptor once more when it is collected, by when the number may
// be another's.
func (s *epollSet) close() {
	if s.file != nil {
		s.file.Close()
		return
	}
	unix.Close(s.fd)
}

// remove stops watching fd.
func (s *epollSet) remove(fd int) { _ = unix.EpollCtl(s.fd, unix.EPOLL_CTL_DEL, fd, nil) }

// serve hands each batch of ready events to handle, on the calling
// goroutine, until the set is closed: for the life of the process, for the
// reaper's and the copier's.
func (s *epollSet) serve(handle func([]unix.EpollEvent)) {
	events := make([]unix.EpollEvent, 64)
	// take reports how many events it handed over. An error is the set
	// closed (EBADF): nothing else can happen to a valid epoll descriptor
	// and a valid buffer.
	take := func(timeout int) (int, error) {
		n, err := unix.EpollWait(s.fd, events, timeout)
		switch {
		case err == unix.EINTR:
			return 0, nil
		case err != nil:
			return 0, err
		}
		handle(events[:n])
		return n, nil
	}
	if !s.polled {
		for {
			if _, err := take(-1); err != nil {
				return
			}
		}
	}
	conn, err := s.file.SyscallConn()
	if err != nil {
		return // closed
	}
	// Read calls back until the callback says it is done, and between
	// calls waits for the set to turn readable; it returns once the set is
	// closed. false is "nothing more for now", once the set has nothing
	// ready. The poller hears of the set only when one of its descriptors
	// signals anew (it waits for edges), so what is still ready after a
	// batch (a pipe with more to read than a chunk) is taken now, not left
	// for a signal that may not come.
	_ = conn.Read(func(uintptr) bool {
		for {
			n, err := take(0)
			if err != nil {
				return true
			}
			if n == 0 {
				return false
			}
		}
	})
}
