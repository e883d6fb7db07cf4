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

func statID(path string) (fileID, error) {
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return fileID{}, &fs.PathError{Op: "stat", Path: path, Err: err}
	}
	return fileID{dev: st.Dev, ino: st.Ino}, nil
}

func fstatID(f *os.File) (fileID, error) {
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return fileID{}, &fs.PathError{Op: "fstat", Path: f.Name(), Err: err}
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
