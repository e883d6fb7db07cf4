package store

import (
	"errors"
	"io/fs"
	"os"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// defaultPathCheckEvery is how often the writer compares the state file's
// path with the file it has open when nothing is being committed (it also
// compares after every commit). A stat costs microseconds; a commit costs
// milliseconds.
//
// It is timed on the system's clock, not on Options.Clock: it decides
// nothing about jobs, only how late a removal is noticed, and on a test's
// fake clock it would be one more timer that every test moving the clock
// would have to step over.
const defaultPathCheckEvery = 10 * time.Second

// fileID is a file's identity: its device and inode.
type fileID struct{ dev, ino uint64 }

// statID and fstatID ask the kernel for the inode number alone (statx with
// STATX_INO; the device comes with every answer). A full stat of the state
// file just after a commit took about 50 µs here, against under 1 µs for
// this, and the writer looks after every commit: asking for everything
// cost 1 000 short jobs 4 % of their throughput. Where statx is missing
// (kernels before 4.11, a seccomp filter) they fall back to stat.
func statID(path string) (fileID, error) {
	return idOf(unix.AT_FDCWD, path, 0, "stat", path)
}

func fstatID(f *os.File) (fileID, error) {
	return idOf(int(f.Fd()), "", unix.AT_EMPTY_PATH, "fstat", f.Name())
}

func idOf(dirfd int, path string, flags int, op, name string) (fileID, error) {
	var stx unix.Statx_t
	err := unix.Statx(dirfd, path, flags|unix.AT_STATX_SYNC_AS_STAT, unix.STATX_INO, &stx)
	switch {
	case err == nil && stx.Mask&unix.STATX_INO != 0:
		return fileID{dev: unix.Mkdev(stx.Dev_major, stx.Dev_minor), ino: stx.Ino}, nil
	case err != nil && !errors.Is(err, unix.ENOSYS) && !errors.Is(err, unix.EPERM):
		return fileID{}, &fs.PathError{Op: op, Path: name, Err: err}
	}
	var st unix.Stat_t
	if path == "" {
		err = unix.Fstat(dirfd, &st)
	} else {
		err = unix.Stat(path, &st)
	}
	if err != nil {
		return fileID{}, &fs.PathError{Op: op, Path: name, Err: err}
	}
	return fileID{dev: st.Dev, ino: st.Ino}, nil
}

// pathWatch is whether the state file is still at its path: one verdict,
// reached by the writer goroutine alone, that Gone and the OnGone callback
// both follow.
type pathWatch struct {
	path   string
	opened fileID // the file as opened
	every  time.Duration
	onGone func(*GoneError) // nil: nobody to tell

	// verdict is nil while the path names the file opened. Written by the
	// writer only; read by anyone (Store.Gone).
	verdict atomic.Pointer[GoneError]
}

// check compares the path with the file opened, and tells onGone when the
// verdict changes: removed, replaced, or back (a person put the very file
// back, by a hard link kept elsewhere). A stat that fails for another
// reason than a missing file (permissions, I/O) tells nothing and changes
// nothing. Writer only.
func (w *pathWatch) check() {
	var now *GoneError
	id, err := statID(w.path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		now = &GoneError{Path: w.path}
	case err != nil:
		return
	case id != w.opened:
		now = &GoneError{Path: w.path, Replaced: true}
	}
	was := w.verdict.Load()
	if (was == nil) == (now == nil) && (was == nil || was.Replaced == now.Replaced) {
		return
	}
	w.verdict.Store(now)
	if w.onGone != nil {
		w.onGone(now)
	}
}

// Gone says, while the state file this store has open is no longer at its
// path, whether it was removed or replaced; nil while it is there. It is
// noticed after the next commit, or within 10 s when nothing is committed.
func (s *Store) Gone() *GoneError { return s.watch.verdict.Load() }
