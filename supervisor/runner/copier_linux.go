package runner

import (
	"encoding/binary"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// copier copies the output of every LogSink into its file, on one
// goroutine: the pipes' read ends are in one epoll set, and the goroutine
// copies a chunk from each that is readable in turn. A running job then
// costs the daemon no goroutine, and no stack, for its output; with a
// thousand jobs running, a copier each was a goroutine for every job.
//
// The sinks' files, sizes and errors belong to this goroutine. A sink
// leaves the set at the end of its pipe, or when CloseContext gives up on
// it (abandon): the goroutine then closes the read end, under whoever
// still writes.
type copier struct {
	set *epollSet
	// wake is an eventfd in the epoll set: abandon rings it.
	wake int
	buf  copyBuffer // the goroutine's
	// notify is an inotify descriptor in the epoll set (-1 where none
	// could be had), watching each sink's open file for its removal;
	// watches are the sinks by watch (the goroutine's).
	notify  int
	watches map[int32]*LogSink

	mu sync.Mutex // guards sinks and abandoned
	// sinks are the sinks in the epoll set, by read end.
	sinks map[int32]*LogSink
	// abandoned are the sinks CloseContext gave up on, for the goroutine
	// to take out of the set.
	abandoned []*LogSink
}

var (
	copierOnce sync.Once
	theCopier  *copier // nil where epoll or eventfd cannot be had

	// noCopier makes each sink copy on a goroutine of its own, as where
	// the shared copier cannot be had; tests set it.
	noCopier atomic.Bool

	// copierWakeN is what abandon adds to the eventfd: any count but
	// zero wakes the goroutine.
	copierWakeN = [8]byte{1}
)

// sharedCopier starts the copier on first use; nil means each sink
// copies on a goroutine of its own.
func sharedCopier() *copier {
	if noCopier.Load() {
		return nil
	}
	copierOnce.Do(func() {
		set, err := newEpollSet()
		if err != nil {
			return
		}
		wake, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
		if err != nil {
			set.close()
			return
		}
		if err := set.add(wake, unix.EPOLLIN); err != nil {
			unix.Close(wake)
			set.close()
			return
		}
		theCopier = &copier{set: set, wake: wake, sinks: map[int32]*LogSink{}, notify: -1, watches: map[int32]*LogSink{}}
		// Without inotify, a removed file is let go of at the run's
		// next write (stillThere), as a sink of its own does.
		if fd, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC); err == nil {
			if set.add(fd, unix.EPOLLIN) == nil {
				theCopier.notify = fd
			} else {
				unix.Close(fd)
			}
		}
		go theCopier.run()
	})
	return theCopier
}

// add puts s, whose read end is s.rfd, in the set; false: it could not.
func (c *copier) add(s *LogSink) bool {
	c.mu.Lock()
	c.sinks[int32(s.rfd)] = s
	c.mu.Unlock()
	if err := c.set.add(s.rfd, unix.EPOLLIN); err != nil {
		c.mu.Lock()
		delete(c.sinks, int32(s.rfd))
		c.mu.Unlock()
		return false
	}
	return true
}

// abandon asks the goroutine to take s out of the set and close its read
// end, whatever is still written to it; s.done is closed once it has.
func (c *copier) abandon(s *LogSink) {
	c.mu.Lock()
	c.abandoned = append(c.abandoned, s)
	c.mu.Unlock()
	_, _ = unix.Write(c.wake, copierWakeN[:])
}

// run is the copier's goroutine, for the life of the process.
func (c *copier) run() { c.set.serve(c.copy) }

// copy serves the sinks whose read ends turned readable, and the wake-up.
func (c *copier) copy(events []unix.EpollEvent) {
	for _, ev := range events {
		if int(ev.Fd) == c.notify {
			c.notified()
			continue
		}
		if int(ev.Fd) == c.wake {
			var b [8]byte
			_, _ = unix.Read(c.wake, b[:])
			c.mu.Lock()
			gone := c.abandoned
			c.abandoned = nil
			c.mu.Unlock()
			for _, s := range gone {
				c.finish(s, errAbandoned)
			}
			continue
		}
		c.mu.Lock()
		s := c.sinks[ev.Fd]
		c.mu.Unlock()
		if s != nil {
			c.copyChunk(s)
		}
	}
}

// errAbandoned ends a sink that CloseContext gave up on.
var errAbandoned = fmt.Errorf("output abandoned")

// copyChunk copies one chunk of s's output, at most a buffer: the others
// get their turn before s gets another, however much it writes.
func (c *copier) copyChunk(s *LogSink) {
	for {
		n, err := unix.Read(s.rfd, c.buf[:])
		switch {
		case err == unix.EINTR:
			continue
		case err == unix.EAGAIN:
			return // another turn will come
		case err != nil:
			s.fail(fmt.Errorf("read job output for %s: %w", s.path, err))
			c.finish(s, nil)
		case n == 0:
			c.finish(s, nil)
		default:
			s.write(c.buf[:n])
			c.track(s)
		}
		return
	}
}

// track watches the file s writes to now for its removal, and no other:
// a file removed to free space while its run is quiet is let go of at
// once (notified), not at the run's next write, which may never come.
func (c *copier) track(s *LogSink) {
	if c.notify < 0 || s.f == s.watched {
		return
	}
	c.untrack(s)
	if s.f == nil {
		return
	}
	// IN_ATTRIB: its count of links changed, as an rm makes it.
	wd, err := unix.InotifyAddWatch(c.notify, s.path, unix.IN_ATTRIB|unix.IN_MOVE_SELF|unix.IN_DONT_FOLLOW)
	if err != nil {
		return // looked at on its next write, as without inotify
	}
	s.wd, s.watched = int32(wd), s.f
	c.watches[s.wd] = s
}

// untrack ends the watch of s's file, if any.
func (c *copier) untrack(s *LogSink) {
	if s.watched == nil {
		return
	}
	if c.watches[s.wd] == s {
		delete(c.watches, s.wd)
		_, _ = unix.InotifyRmWatch(c.notify, uint32(s.wd))
	}
	s.wd, s.watched = 0, nil
}

// notified reads what inotify says of the watched files: one no longer
// at its path is closed, and its space comes back.
func (c *copier) notified() {
	var buf [4096]byte
	for {
		n, err := unix.Read(c.notify, buf[:])
		if err == unix.EINTR {
			continue
		}
		if err != nil || n <= 0 {
			return // EAGAIN: all read
		}
		for off := 0; off+unix.SizeofInotifyEvent <= n; {
			wd := int32(binary.NativeEndian.Uint32(buf[off:]))
			mask := binary.NativeEndian.Uint32(buf[off+4:])
			off += unix.SizeofInotifyEvent + int(binary.NativeEndian.Uint32(buf[off+12:]))
			s := c.watches[wd]
			switch {
			case s == nil:
			case mask&unix.IN_IGNORED != 0:
				delete(c.watches, wd)
				s.wd, s.watched = 0, nil
			case s.f != nil && s.f == s.watched:
				s.looked = time.Time{}
				if !s.stillThere() {
					c.untrack(s)
					s.letGoFile()
				}
			}
		}
	}
}

// finish takes s out of the set, if it is still there, closes its read
// end and its file, and tells its Close (s.done). why is errAbandoned
// when CloseContext gave up on it, else nil.
func (c *copier) finish(s *LogSink, why error) {
	c.mu.Lock()
	_, in := c.sinks[int32(s.rfd)]
	delete(c.sinks, int32(s.rfd))
	c.mu.Unlock()
	if !in {
		return // ended already
	}
	c.set.remove(s.rfd)
	unix.Close(s.rfd)
	c.untrack(s)
	s.closeFile()
	s.abandoned = why != nil
	close(s.done)
}
