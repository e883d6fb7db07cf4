package watch

import (
	"errors"
	"io/fs"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// maxLinks is how many symbolic links one walk follows before it gives up
// with ELOOP, the kernel's own limit for one path.
const maxLinks = 40

// errMissing is what a walk returns when a name on the way does not exist,
// or is neither a directory nor a link where a directory must be.
var errMissing = errors.New("no such file or directory")

// A step is one directory of a resolved path: checked, and held open, so
// that what was checked is what is used whatever is renamed meanwhile.
type step struct {
	path     string // absolute, through no symbolic link
	fd       int    // O_PATH, or O_RDONLY for the jobs directory
	dev, ino uint64
	mode     fs.FileMode
	owned    bool // this walk opened fd and must close it
}

// A walk resolves a path one name at a time from "/", as the kernel does,
// and checks each directory it enters (the rule for a directory on the
// way) and each link it follows (its owner) before going further: sshd's
// StrictModes for a home directory, done on open descriptors so that no
// rename between a check and the next step can change what is checked.
//
// A walk is not safe for concurrent use, and must be closed.
type walk struct {
	m     *strictModes
	hook  func(path string, st *unix.Stat_t) // tests: rewrites what a stat found; nil otherwise
	steps []step                             // from "/" to where the walk is
	links int                                // links followed, and names looked at again after a swap

	// base is the directory a fork started from (the jobs directory), to
	// tell whether a link's target lies below it.
	base step
}

// newWalk starts a walk at "/", checked like every directory on the way.
func newWalk(m *strictModes, hook func(string, *unix.Stat_t)) (*walk, error) {
	w := &walk{m: m, hook: hook}
	var fd int
	err := retryEINTR(func() (err error) {
		fd, err = unix.Open("/", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		return err
	})
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: "/", Err: err}
	}
	if err := w.enter("/", fd, ruleOnTheWay); err != nil {
		return nil, err
	}
	return w, nil
}

// fork returns a walk that goes on from where w is. It shares w's
// directories, and closes only those it opens itself.
func (w *walk) fork() *walk {
	f := &walk{m: w.m, hook: w.hook, steps: make([]step, len(w.steps)), base: w.top()}
	for i, s := range w.steps {
		s.owned = false
		f.steps[i] = s
	}
	return f
}

func (w *walk) close() {
	for _, s := range w.steps {
		if s.owned {
			unix.Close(s.fd)
		}
	}
	w.steps = nil
}

func (w *walk) top() step { return w.steps[len(w.steps)-1] }

// drop closes the steps above the first n.
func (w *walk) drop(n int) {
	for _, s := range w.steps[n:] {
		if s.owned {
			unix.Close(s.fd)
		}
	}
	w.steps = w.steps[:n]
}

// stat is fstatat without following a last link, then the test hook.
func (w *walk) stat(dirfd int, name, path string, st *unix.Stat_t) error {
	err := retryEINTR(func() error { return unix.Fstatat(dirfd, name, st, unix.AT_SYMLINK_NOFOLLOW) })
	if err == nil && w.hook != nil {
		w.hook(path, st)
	}
	return err
}

// enter checks the directory open as fd and, if it passes, makes it the
// top of the walk; it closes fd if it does not.
func (w *walk) enter(path string, fd int, what subject) error {
	var st unix.Stat_t
	if err := retryEINTR(func() error { return unix.Fstat(fd, &st) }); err != nil {
		unix.Close(fd)
		return &fs.PathError{Op: "stat", Path: path, Err: err}
	}
	if w.hook != nil {
		w.hook(path, &st)
	}
	mode := fileMode(st.Mode)
	var acl []aclWriter
	if mode.Perm()&0o020 != 0 {
		var err error
		if acl, err = aclWriters(fd, true); err != nil {
			unix.Close(fd)
			return &fs.PathError{Op: "getxattr", Path: path, Err: err}
		}
	}
	if r := w.m.check(what, int(st.Uid), int(st.Gid), mode, acl); r != nil {
		unix.Close(fd)
		if what == ruleOnTheWay || what == ruleLinkWay {
			r.At = path
		}
		return r
	}
	w.steps = append(w.steps, step{path: path, fd: fd, dev: st.Dev, ino: st.Ino, mode: mode, owned: true})
	return nil
}

// want says what the last name of a path must be.
type want uint8

const (
	// wantJobsDir: a directory, checked as the jobs directory and opened
	// for reading; it becomes the top of the walk.
	wantJobsDir want = iota
	// wantDir: a directory on the way (a file's directory named
	// outright); it becomes the top of the walk.
	wantDir
	// wantFile: anything but a link; resolve returns its name in the top
	// directory and what lstat says of it, unchecked.
	wantFile
)

// resolve walks path from the top of the walk (from "/" when path is
// absolute). It returns:
//
//	(name, st, nil)   wantFile: the last name, not a link, in the top directory
//	("", _, nil)      wantDir, wantJobsDir: the directory is the top
//	(_, _, errMissing) a name on the way does not exist or is not a directory
//	(_, _, *RefusedError) a directory or link on the way is refused, or cannot be
//	                  searched, or there are more than maxLinks links (At says which);
//	                  or the jobs directory itself is refused (At is empty)
//	(_, _, err)       an I/O error
func (w *walk) resolve(path string, last want) (string, unix.Stat_t, error) {
	var st unix.Stat_t
	queue := w.names(path)
	for len(queue) > 0 {
		name := queue[0]
		queue = queue[1:]
		final := len(queue) == 0
		if name == ".." {
			if len(w.steps) > 1 {
				w.drop(len(w.steps) - 1)
			}
			continue
		}
		top := w.top()
		here := filepath.Join(top.path, name)
		err := w.stat(top.fd, name, here, &st)
		switch {
		case errors.Is(err, unix.ENOENT), errors.Is(err, unix.ENOTDIR):
			return "", st, errMissing
		case errors.Is(err, unix.EACCES):
			// top cannot be searched.
			return "", st, &RefusedError{Reason: Unreadable, At: top.path, Err: &fs.PathError{Op: "stat", Path: here, Err: err}}
		case err != nil:
			return "", st, &fs.PathError{Op: "stat", Path: here, Err: err}
		}
		mode := fileMode(st.Mode)
		switch {
		case mode&fs.ModeSymlink != 0:
			if r := w.m.checkLink(int(st.Uid), int(st.Gid)); r != nil {
				r.At, r.AtLink = here, true
				return "", st, r
			}
			if w.links++; w.links > maxLinks {
				return "", st, &RefusedError{Reason: Unreadable, At: here, AtLink: true, Err: &fs.PathError{Op: "open", Path: here, Err: unix.ELOOP}}
			}
			target, err := readlinkat(top.fd, name)
			if err != nil {
				return "", st, &fs.PathError{Op: "readlink", Path: here, Err: err}
			}
			queue = append(w.names(target), queue...)
			if len(queue) == 0 {
				queue = []string{"."} // a link to "/": still something to look at
			}

		case name == ".":
			// The top itself: only a path that ends in "/." or a link to
			// "." or "/" gets here, and then only as its last name.
			if final && last == wantFile {
				return "", st, &RefusedError{Reason: NotRegular, Kind: kindOf(mode)}
			}

		case mode.IsDir() && (!final || last != wantFile):
			var fd int
			err := retryEINTR(func() (err error) {
				fd, err = unix.Openat(top.fd, name, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
				return err
			})
			switch {
			case errors.Is(err, unix.ELOOP), errors.Is(err, unix.ENOTDIR):
				// Replaced since the stat: look at the name again.
				if w.links++; w.links > maxLinks {
					return "", st, &RefusedError{Reason: Unreadable, At: here, Err: &fs.PathError{Op: "open", Path: here, Err: unix.ELOOP}}
				}
				queue = append([]string{name}, queue...)
				continue
			case errors.Is(err, unix.ENOENT):
				return "", st, errMissing
			case err != nil:
				return "", st, &fs.PathError{Op: "open", Path: here, Err: err}
			}
			what := ruleOnTheWay
			if w.links > 0 {
				what = ruleLinkWay // past a link: on the way to its target
			}
			if final && last == wantJobsDir {
				what = ruleJobsDir
			}
			if err := w.enter(here, fd, what); err != nil {
				return "", st, err
			}

		case final && last == wantFile:
			return name, st, nil

		case final && last == wantJobsDir:
			return "", st, &RefusedError{Reason: NotDirectory, Kind: kindOf(mode)}

		default:
			// A file where the path needs a directory.
			return "", st, errMissing
		}
	}
	switch last {
	case wantJobsDir:
		return "", st, w.openJobsDir()
	case wantFile:
		// The path ended in ".." (or a link to it): a directory.
		return "", st, &RefusedError{Reason: NotRegular, Kind: kindOf(fs.ModeDir)}
	}
	return "", st, nil
}

// openJobsDir reopens the top of the walk for reading, and checks it as
// the jobs directory; a path that ends in ".." or a link to "/" gets here
// with a top that was checked as a directory on the way only.
func (w *walk) openJobsDir() error {
	top := w.top()
	var fd int
	err := retryEINTR(func() (err error) {
		fd, err = unix.Openat(top.fd, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		return err
	})
	if err != nil {
		return &RefusedError{Reason: Unreadable, Err: &fs.PathError{Op: "open", Path: top.path, Err: err}}
	}
	w.drop(len(w.steps) - 1)
	return w.enter(top.path, fd, ruleJobsDir)
}

// names splits path into the names a walk goes through. An absolute path
// first takes the walk back to "/".
func (w *walk) names(path string) []string {
	if strings.HasPrefix(path, "/") {
		w.drop(1)
	}
	var out []string
	for _, n := range strings.Split(path, "/") {
		if n != "" && n != "." {
			out = append(out, n)
		}
	}
	if len(out) == 0 && strings.HasSuffix(path, ".") {
		out = append(out, ".")
	}
	return out
}

// othersReach reports whether every directory of the walk lets others
// through (o+x), and if not, the first that does not.
func (w *walk) othersReach() (string, bool) {
	for _, s := range w.steps {
		if s.mode&0o001 == 0 {
			return s.path, false
		}
	}
	return "", true
}

// belowBase reports whether the walk has gone through the directory it was
// forked from: a link's target is then inside the jobs directory.
func (w *walk) belowBase() bool {
	for _, s := range w.steps {
		if s.dev == w.base.dev && s.ino == w.base.ino {
			return true
		}
	}
	return false
}

// readlinkat returns where the link name in dirfd points.
func readlinkat(dirfd int, name string) (string, error) {
	for size := 256; ; size *= 2 {
		buf := make([]byte, size)
		var n int
		err := retryEINTR(func() (err error) {
			n, err = unix.Readlinkat(dirfd, name, buf)
			return err
		})
		if err != nil {
			return "", err
		}
		if n < size {
			return string(buf[:n]), nil
		}
		if size >= unix.PathMax {
			return "", unix.ENAMETOOLONG
		}
	}
}
