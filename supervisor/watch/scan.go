package watch

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"time"

	"golang.org/x/sys/unix"
)

// DefaultMaxFileBytes is the largest job file read when
// ScanOptions.MaxFileBytes is 0. A declaration file is a few KiB; a file
// of megabytes is a mistake (a data file with the wrong name) that would
// otherwise be read and hashed at every change.
const DefaultMaxFileBytes = 1 << 20

// racyWindow is how recent a file's ctime may be for its stamp to be
// trusted at the next scan. A file written again within the same timestamp
// tick as the stat that saw it keeps its stamp (same size, same coarse
// mtime and ctime), so a stamp taken that close to a write proves nothing;
// such a file is read again next time (git's "racily clean" entries). Two
// seconds covers file systems with whole-second timestamps (ext4 with small
// inodes, some network file systems) as well as the kernel's coarse clock;
// the cost is reading again only the files written in the last two seconds.
const racyWindow = 2 * time.Second

// ScanOptions configure a Scanner.
type ScanOptions struct {
	// DaemonUID is the daemon's own uid (os.Getuid()): job files and the
	// jobs directory must be owned by root or by this uid.
	DaemonUID int
	// MaxFileBytes is the largest job file read; a bigger one is refused.
	// 0 means DefaultMaxFileBytes.
	MaxFileBytes int64
	// Accounts looks up user and group names and members for the ownership
	// rule; nil means SystemAccounts{} (this machine's).
	Accounts Accounts
}

// Scan is what changed in the jobs directory since the previous Scan.
// Paths are filepath.Join(dir, name) with the dir given to NewScanner.
type Scan struct {
	// Changed holds the content of each job file that is new, or whose
	// content differs from what the previous scan read. A file whose stamp
	// changed but whose bytes did not (touch, chmod) is not in it.
	Changed map[string][]byte
	// Removed lists, sorted, the job files the previous scan reported or
	// kept that are not readable job files now: deleted, renamed away, in a
	// directory that is gone, or refused. A file that became refused is in
	// both Removed (this once) and Refused.
	Removed []string
	// Refused holds, at every scan until it is fixed or removed, each job
	// file berth will not read, with a *RefusedError that says why and how
	// to fix it. Every scan rather than once, so that what the daemon shows
	// (berth status, the systemd status line) follows from the latest scan
	// alone and a fix shows as the path's absence; to log a refusal once,
	// compare with the previous scan's Refused. A refused file's content is
	// never read, so when it is fixed it comes back in Changed.
	Refused map[string]error
	// DirMissing is true when there is no jobs directory to read: it does
	// not exist, or it is refused (then DirRefused says why, as a
	// *RefusedError). Removed then lists every file seen before, and the
	// scanner starts afresh: when the directory comes back, every file in it
	// is in Changed.
	DirMissing bool
	DirRefused error
}

// Scanner keeps what it saw last time and reports what changed since. It
// is not safe for concurrent use: one goroutine (the daemon's loop) owns it.
type Scanner struct {
	dir      string
	maxBytes int64
	strict   *strictModes
	now      func() time.Time // injected so tests can step past racyWindow

	// seen is every job file accepted at the last scan, by name.
	seen map[string]seenFile
}

type seenFile struct {
	stamp stamp
	sum   [sha256.Size]byte
	// racy is set when the stamp was taken within racyWindow of the file's
	// last change, so an equal stamp next time does not prove equal content.
	racy bool
}

// NewScanner returns a Scanner for the jobs directory dir that has seen
// nothing yet: its first Scan reports every job file as Changed.
func NewScanner(dir string, opts ScanOptions) *Scanner {
	if opts.MaxFileBytes <= 0 {
		opts.MaxFileBytes = DefaultMaxFileBytes
	}
	return &Scanner{
		dir:      dir,
		maxBytes: opts.MaxFileBytes,
		strict:   newStrictModes(opts.DaemonUID, opts.Accounts),
		now:      time.Now,
		seen:     make(map[string]seenFile),
	}
}

// Scan stats every job file, reads and hashes only those whose stamp (size,
// mtime, ctime, inode, owner, mode) changed since the last Scan, and returns
// the differences.
//
// Outcomes:
//
//	(Scan{DirMissing: true, …}, nil)  no directory to read (DirRefused says why when it exists but is refused)
//	(Scan{…}, nil)                    the differences (all empty when nothing changed)
//	(Scan{}, err)                     the directory could not be listed (an I/O error); the scanner
//	                                  keeps what it knew, so the next Scan reports everything since the last good one
//
// A file that cannot be stat'ed or read is Refused (Unreadable) rather than
// failing the scan, so that one bad file does not hide changes to the rest.
//
// Everything is done relative to one open descriptor of the directory: the
// directory checked is the one listed and read even if its path is swapped
// meanwhile, and a stat need not walk the whole path again for each of a
// thousand files (two to three times faster here).
func (s *Scanner) Scan() (Scan, error) {
	s.strict.forget()
	out := Scan{Changed: map[string][]byte{}, Refused: map[string]error{}}

	var fd int
	err := retryEINTR(func() (err error) {
		fd, err = unix.Open(s.dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		return err
	})
	switch {
	case err == nil:
	case errors.Is(err, unix.ENOENT):
		return s.dirGone(out, nil), nil
	case errors.Is(err, unix.ENOTDIR):
		// Either the path names something else, or a component above it is
		// a file: the first is refused, the second is just missing.
		if fi, serr := os.Stat(s.dir); serr == nil && !fi.IsDir() {
			return s.dirGone(out, &RefusedError{Path: s.dir, Dir: true, Reason: NotDirectory, Kind: kindOf(fi.Mode())}), nil
		}
		return s.dirGone(out, nil), nil
	case errors.Is(err, unix.EACCES), errors.Is(err, unix.ELOOP):
		return s.dirGone(out, &RefusedError{Path: s.dir, Dir: true, Reason: Unreadable, Err: &fs.PathError{Op: "open", Path: s.dir, Err: err}}), nil
	default:
		return Scan{}, fmt.Errorf("open jobs directory %s: %w", s.dir, err)
	}
	d := os.NewFile(uintptr(fd), s.dir)
	defer d.Close()

	var st unix.Stat_t
	if err := retryEINTR(func() error { return unix.Fstat(fd, &st) }); err != nil {
		return Scan{}, fmt.Errorf("stat jobs directory %s: %w", s.dir, err)
	}
	if r := s.strict.check(true, int(st.Uid), int(st.Gid), fileMode(st.Mode)); r != nil {
		r.Path = s.dir
		return s.dirGone(out, r), nil
	}
	entries, err := d.ReadDir(-1)
	if err != nil {
		return Scan{}, fmt.Errorf("list jobs directory %s: %w", s.dir, err)
	}

	// Racy means "changed at or after this moment minus the window"; taking
	// the moment before any stat errs on the side of reading again.
	racySince := s.now().Add(-racyWindow).UnixNano()
	next := make(map[string]seenFile, len(s.seen))
	for _, e := range entries {
		name := e.Name()
		if !IsJobFile(name) {
			continue
		}
		old, had := s.seen[name]
		f, content, refused := s.file(fd, name, old, had, racySince)
		switch {
		case refused != nil:
			out.Refused[refused.Path] = refused
		case content != nil:
			next[name] = f
			if !had || old.sum != f.sum {
				out.Changed[filepath.Join(s.dir, name)] = content
			}
		case f != (seenFile{}):
			next[name] = f // stamp unchanged: not read
		}
	}
	for name := range s.seen {
		if _, ok := next[name]; !ok {
			out.Removed = append(out.Removed, filepath.Join(s.dir, name))
		}
	}
	sort.Strings(out.Removed)
	s.seen = next
	return out, nil
}

// dirGone reports every file seen before as removed and forgets them.
func (s *Scanner) dirGone(out Scan, why *RefusedError) Scan {
	out.DirMissing = true
	if why != nil {
		out.DirRefused = why
	}
	for name := range s.seen {
		out.Removed = append(out.Removed, filepath.Join(s.dir, name))
	}
	sort.Strings(out.Removed)
	s.seen = make(map[string]seenFile)
	return out
}

// file looks at the job file name in the directory open as dirfd. It
// returns one of:
//
//	(f, content, nil)   read (new stamp, or racy): content is its bytes
//	(old, nil, nil)     the stamp is the one seen before: not read
//	(zero, nil, nil)    gone since the directory was listed
//	(zero, nil, why)    refused
func (s *Scanner) file(dirfd int, name string, old seenFile, had bool, racySince int64) (seenFile, []byte, *RefusedError) {
	unreadable := func(op string, err error) (seenFile, []byte, *RefusedError) {
		return seenFile{}, nil, &RefusedError{Path: s.pathOf(name), Reason: Unreadable, Err: &fs.PathError{Op: op, Path: s.pathOf(name), Err: err}}
	}
	// fstatat without AT_SYMLINK_NOFOLLOW follows symlinks: a ConfigMap's
	// f.lua -> ..data/f.lua is checked and read as its target.
	var raw unix.Stat_t
	if err := retryEINTR(func() error { return unix.Fstatat(dirfd, name, &raw, 0) }); err != nil {
		if errors.Is(err, unix.ENOENT) {
			buf := make([]byte, unix.PathMax)
			if n, lerr := unix.Readlinkat(dirfd, name, buf); lerr == nil {
				return seenFile{}, nil, &RefusedError{Path: s.pathOf(name), Reason: DanglingLink, Target: string(buf[:n])}
			}
			return seenFile{}, nil, nil
		}
		return unreadable("stat", err)
	}
	st, why := s.accept(name, &raw)
	if why != nil {
		return seenFile{}, nil, why
	}
	if had && old.stamp == st && !old.racy {
		return old, nil, nil
	}

	// O_NONBLOCK: if a pipe takes the file's place between the stat and the
	// open, the open must not wait for a writer. The checks are repeated on
	// the open file, since that is what is read.
	var fd int
	err := retryEINTR(func() (err error) {
		fd, err = unix.Openat(dirfd, name, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
		return err
	})
	if err != nil {
		if errors.Is(err, unix.ENOENT) {
			return seenFile{}, nil, nil
		}
		return unreadable("open", err)
	}
	f := os.NewFile(uintptr(fd), name)
	defer f.Close()
	if err := retryEINTR(func() error { return unix.Fstat(fd, &raw) }); err != nil {
		return unreadable("stat", err)
	}
	if st, why = s.accept(name, &raw); why != nil {
		return seenFile{}, nil, why
	}
	content := make([]byte, 0, st.size+1) // +1 sees growth without a second allocation
	content, err = readAtMost(f, content, s.maxBytes+1)
	if err != nil {
		return unreadable("read", err)
	}
	if int64(len(content)) > s.maxBytes {
		// It grew past the limit after the stat.
		return seenFile{}, nil, &RefusedError{Path: s.pathOf(name), Reason: TooBig, Size: max(st.size, int64(len(content))), MaxBytes: s.maxBytes}
	}
	return seenFile{
		stamp: st,
		sum:   sha256.Sum256(content),
		racy:  st.ctime >= racySince || st.mtime >= racySince,
	}, content, nil
}

// readAtMost appends up to limit bytes of r to buf.
func readAtMost(r io.Reader, buf []byte, limit int64) ([]byte, error) {
	for int64(len(buf)) < limit {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		room := buf[len(buf):min(int64(cap(buf)), limit)]
		n, err := r.Read(room)
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return buf, err
		}
	}
	return buf, nil
}

// accept checks what a stat found against the rules: a regular file, owned
// and moded as strictModes says, not too big.
func (s *Scanner) accept(name string, raw *unix.Stat_t) (stamp, *RefusedError) {
	mode := fileMode(raw.Mode)
	if !mode.IsRegular() {
		return stamp{}, &RefusedError{Path: s.pathOf(name), Reason: NotRegular, Kind: kindOf(mode)}
	}
	if r := s.strict.check(false, int(raw.Uid), int(raw.Gid), mode); r != nil {
		r.Path = s.pathOf(name)
		return stamp{}, r
	}
	if raw.Size > s.maxBytes {
		return stamp{}, &RefusedError{Path: s.pathOf(name), Reason: TooBig, Size: raw.Size, MaxBytes: s.maxBytes}
	}
	return stampOf(raw), nil
}

// pathOf is the path a person and the daemon see for a job file. It is
// built only for what is reported: the work is relative to the directory's
// descriptor.
func (s *Scanner) pathOf(name string) string { return filepath.Join(s.dir, name) }

// retryEINTR repeats a system call that a signal interrupted, as package os
// does for its own: on a network or FUSE file system the Go runtime's
// preemption signals can interrupt a stat or an open.
func retryEINTR(call func() error) error {
	for {
		if err := call(); err != unix.EINTR {
			return err
		}
	}
}
