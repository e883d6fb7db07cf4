package runner

import (
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// reaper waits for the exits of every child at once: each child's pidfd is
// in one epoll set, and one goroutine waits on the set. A running job then
// costs the daemon no goroutine and no thread of its own for its exit;
// with a thousand jobs running, threads blocked in waitid were most of the
// daemon's memory.
type reaper struct {
	set *epollSet

	mu      sync.Mutex
	waiting map[int32]*Process // by pidfd
}

var (
	reaperOnce sync.Once
	theReaper  *reaper // nil where epoll cannot be had

	// noSharedReaper makes Start wait for each child on its own, as on a
	// kernel without pidfds; tests set it.
	noSharedReaper atomic.Bool
)

// sharedReaper starts the reaper on first use; nil means each child is
// waited for on its own (Process.reap).
func sharedReaper() *reaper {
	if noSharedReaper.Load() {
		return nil
	}
	reaperOnce.Do(func() {
		set, err := newEpollSet()
		if err != nil {
			return
		}
		theReaper = &reaper{set: set, waiting: make(map[int32]*Process)}
		go theReaper.run()
	})
	return theReaper
}

// watch hands p to the reaper, which calls p.exited once the leader has
// exited, and closes its pidfd. false: it cannot (no pidfds before Linux
// 5.3), and the caller waits another way. A child that exited already is
// reported at once: a pidfd is readable from the exit on.
func (r *reaper) watch(p *Process) bool {
	fd := p.pidfd
	if fd < 0 {
		var err error
		if fd, err = unix.PidfdOpen(p.pid, 0); err != nil { // close-on-exec by default
			return false
		}
		p.pidfd = fd
	}
	r.mu.Lock()
	r.waiting[int32(fd)] = p
	r.mu.Unlock()
	if err := r.set.add(fd, unix.EPOLLIN|unix.EPOLLONESHOT); err != nil {
		r.mu.Lock()
		delete(r.waiting, int32(fd))
		r.mu.Unlock()
		return false
	}
	return true
}

// run is the reaper's goroutine, for the life of the process.
func (r *reaper) run() { r.set.serve(r.reap) }

// reap reaps the leaders whose pidfds turned readable.
func (r *reaper) reap(events []unix.EpollEvent) {
	for _, ev := range events {
		r.mu.Lock()
		p := r.waiting[ev.Fd]
		delete(r.waiting, ev.Fd)
		r.mu.Unlock()
		// The leader is a zombie now unless something else reaped it
		// (SIGCHLD ignored): then its group may no longer be ours, and
		// exited must not signal it. waitid says which.
		var info unix.Siginfo
		err := ignoringEINTR(func() error {
			return unix.Waitid(unix.P_PIDFD, int(ev.Fd), &info, unix.WEXITED|unix.WNOWAIT|unix.WNOHANG, nil)
		})
		if err == nil && info.Signo == 0 {
			err = unix.ECHILD // readable, yet nothing to wait for
		}
		r.set.remove(int(ev.Fd))
		unix.Close(int(ev.Fd))
		if p != nil {
			p.exited(err)
		}
	}
}
