package watch

import (
	"cmp"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

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

// WriteGrace is how long a job file may go unchanged while someone has it
// open for writing before the scanner reads it all the same. A file is
// applied whole, so one that is open for writing is a save in progress
// (an editor that writes in place, scp, a script writing line by line):
// between two of its writes it may be a valid file that declares half
// the jobs, and reading it then would stop the other half. Once the
// writer closes it, it is read. The grace bounds the wait for a writer
// that never closes it, and for a file system whose leases claim a writer
// where there is none.
const WriteGrace = 5 * time.Second

// ScanOptions configure a Scanner.
type ScanOptions struct {
	// DaemonUID is the daemon's own uid (os.Getuid()): job files and the
	// jobs directory must be owned by root or by this uid.
	DaemonUID int
	// Owner, when not 0, is the uid of the person whose directory this is
	// (a person's job directory under --user-jobs): the directory and its
	// files may be theirs too. The directories above it may not.
	Owner int
	// MaxFileBytes is the largest job file read; a bigger one is refused.
	// 0 means DefaultMaxFileBytes.
	MaxFileBytes int64
	// MaxFiles and MaxTotalBytes bound what of the directory is read, its
	// files taken in name order (a person's: the daemon holds what it
	// reads, and keeps a copy of each file in force): a file past either
	// is refused (TooMany). 0: no bound.
	MaxFiles      int
	MaxTotalBytes int64
	// Accounts looks up user and group names and members for the ownership
	// rule; nil means SystemAccounts{} (this machine's).
	Accounts Accounts

	// statHook, in tests, rewrites what a stat found at an absolute path
	// (its owner, its mode) before the rule looks at it, so that the rule
	// for directories above the jobs directory can be tried without root.
	statHook func(path string, st *unix.Stat_t)
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
	// Writing holds the job files that someone has open for writing and
	// wrote less than WriteGrace ago: saves in progress, each with a
	// *RefusedError (Writing) that says so. Each is neither Changed nor
	// Removed: what an earlier scan read of it stands, and a later scan
	// reads it once the writer is done. No event says when that is: scan
	// again soon.
	Writing map[string]error
}

// Scanner keeps what it saw last time and reports what changed since. It
// is not safe for concurrent use: one goroutine (the daemon's loop) owns it.
type Scanner struct {
	dir      string // as given, for what a person reads
	abs      string // absolute, for the walk from "/"
	absErr   error  // why dir could not be made absolute
	maxBytes int64
	strict   *strictModes
	now      func() time.Time // injected so tests can step past racyWindow
	statHook func(path string, st *unix.Stat_t)

	// seen is every job file accepted at the last scan, by name.
	seen map[string]seenFile

	// maxFiles and maxTotal are ScanOptions.MaxFiles and MaxTotalBytes;
	// filesLeft and bytesLeft what is left of them in the listing under
	// way (list).
	maxFiles  int
	maxTotal  int64
	filesLeft int
	bytesLeft int64
}

type seenFile struct {
	stamp stamp
	sum   [sha256.Size]byte
	// racy is set when the stamp was taken within racyWindow of the file's
	// last change, so an equal stamp next time does not prove equal content.
	racy bool
	// retry is set by Forget: the next scan reads the file and reports it
	// changed, whatever its stamp and content.
	retry bool
}

// Forget makes the next Scan read the file at path (as Scan named it) and
// report it changed even if it is not: for a file whose content was taken
// but not dealt with (its evaluation never happened, or failed for a cause
// not its own).
func (s *Scanner) Forget(path string) {
	name := filepath.Base(path)
	if f, ok := s.seen[name]; ok && filepath.Join(s.dir, name) == path {
		f.retry = true
		s.seen[name] = f
	}
}

// NewScanner returns a Scanner for the jobs directory dir that has seen
// nothing yet: its first Scan reports every job file as Changed.
func NewScanner(dir string, opts ScanOptions) *Scanner {
	if opts.MaxFileBytes <= 0 {
		opts.MaxFileBytes = DefaultMaxFileBytes
	}
	abs, err := filepath.Abs(dir)
	return &Scanner{
		dir:      dir,
		abs:      abs,
		absErr:   err,
		maxBytes: opts.MaxFileBytes,
		strict:   newStrictModes(opts.DaemonUID, opts.Accounts).ownedBy(opts.Owner),
		now:      time.Now,
		statHook: opts.statHook,
		seen:     make(map[string]seenFile),
		maxFiles: opts.MaxFiles,
		maxTotal: opts.MaxTotalBytes,
	}
}

// bounded reports whether the directory's files are bounded in all.
func (s *Scanner) bounded() bool { return s.maxFiles > 0 || s.maxTotal > 0 }

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
// The directory is reached by a walk from "/" that checks every directory
// on the way (walk.go), and everything after is done relative to the
// descriptor the walk ends on: the directory checked is the one listed and
// read even if its path is swapped meanwhile, and a stat need not walk the
// whole path again for each of a thousand files (two to three times faster
// here). A link in it is followed by a walk of its own, from there.
func (s *Scanner) Scan() (Scan, error) {
	s.strict.forget()
	out := emptyScan()

	w, err := s.walkToDir()
	var refused *RefusedError
	switch {
	case err == nil:
	case errors.Is(err, errMissing):
		return s.dirGone(out, nil), nil
	case errors.As(err, &refused):
		refused.Path, refused.Dir = s.dir, true
		if refused.At == s.abs {
			refused.At = "" // the jobs directory's path is a link: the refusal is of Path itself
		}
		if refused.At == "" && !refused.AtLink {
			// The jobs directory is a link, and the directory it leads
			// to is refused: the sentence names it, and what fixes it
			// changes it, not the link.
			if target, err := os.Readlink(s.abs); err == nil {
				if at, err := filepath.EvalSymlinks(s.abs); err == nil {
					refused.Target, refused.At, refused.AtTarget = target, at, true
				}
			}
		}
		return s.dirGone(out, refused), nil
	default:
		return Scan{}, fmt.Errorf("open jobs directory %s: %w", s.dir, err)
	}
	defer w.close()
	var next map[string]seenFile
	// A file renamed while the directory is read (a git mv) is gone by its
	// old name when it is looked at, and not listed by its new one: the
	// directory is listed again, so that a rename is seen whole, in one
	// scan, and not as a removal first.
	for listing := 0; ; listing++ {
		if listing > 0 {
			out = emptyScan()
		}
		var vanished bool
		if next, vanished, err = s.list(w, out); err != nil {
			return Scan{}, err
		}
		if !vanished || listing == 2 {
			break
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

// emptyScan is a Scan of no difference, its maps made.
func emptyScan() Scan {
	return Scan{Changed: map[string][]byte{}, Refused: map[string]error{}, Writing: map[string]error{}}
}

// list lists the directory w is on and looks at each job file, noting
// what changed in out; vanished says a file listed was gone when looked
// at.
func (s *Scanner) list(w *walk, out Scan) (next map[string]seenFile, vanished bool, err error) {
	entries, err := readDir(w.top().fd, s.dir)
	if err != nil {
		return nil, false, fmt.Errorf("list jobs directory %s: %w", s.dir, err)
	}

	// Racy means "changed at or after this moment minus the window"; taking
	// the moment before any stat errs on the side of reading again.
	racySince := s.now().Add(-racyWindow).UnixNano()
	next = make(map[string]seenFile, len(s.seen))
	if s.bounded() {
		// Which files are past the bound does not depend on the
		// directory's order.
		slices.SortFunc(entries, func(a, b fs.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
		s.filesLeft, s.bytesLeft = cmp.Or(s.maxFiles, math.MaxInt), cmp.Or(s.maxTotal, math.MaxInt64)
	}
	for _, e := range entries {
		name := e.Name()
		if !IsJobFile(name) {
			continue
		}
		old, had := s.seen[name]
		// A file to retry is read as if never seen.
		f, content, refused := s.file(w, name, s.pathOf(name), false, old, had && !old.retry, racySince)
		switch {
		case refused != nil && refused.Reason == Writing:
			// A save in progress: what was read of it before stands, and
			// it is read once the writer is done.
			out.Writing[refused.Path] = refused
			if had {
				next[name] = old
			}
		case refused != nil:
			out.Refused[refused.Path] = refused
		case content != nil:
			next[name] = f
			if !had || old.retry || old.sum != f.sum {
				out.Changed[filepath.Join(s.dir, name)] = content
			}
		case f != (seenFile{}):
			next[name] = f // stamp unchanged: not read
		default:
			vanished = true
		}
		if refused == nil && f != (seenFile{}) && s.bounded() {
			s.filesLeft--
			s.bytesLeft -= f.stamp.size
		}
	}
	return next, vanished, nil
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

// walkToDir walks from "/" to the jobs directory, checking every
// directory on the way, and leaves it open for reading as the walk's top.
// The error is errMissing, a *RefusedError (Path not yet filled in), or an
// I/O error.
func (s *Scanner) walkToDir() (*walk, error) {
	if s.absErr != nil {
		return nil, s.absErr
	}
	w, err := newWalk(s.strict, s.statHook)
	if err != nil {
		return nil, err
	}
	if _, _, err := w.resolve(s.abs, wantJobsDir); err != nil {
		w.close()
		return nil, err
	}
	return w, nil
}

// readDir lists the directory open as fd, through a duplicate so that the
// walk keeps its own descriptor.
func readDir(fd int, name string) ([]fs.DirEntry, error) {
	dup, err := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	d := os.NewFile(uintptr(dup), name)
	defer d.Close()
	// The copy shares the offset of fd, which a listing before left at
	// the end.
	if _, err := unix.Seek(dup, 0, io.SeekStart); err != nil {
		return nil, err
	}
	return d.ReadDir(-1)
}

// file looks at the job file name in the directory at the top of the walk
// w; path is what a person is shown for it, and named says that it was
// named outright (berth check FILE) rather than found in the jobs
// directory. It returns one of:
//
//	(f, content, nil)   read (new stamp, or racy): content is its bytes
//	(old, nil, nil)     the stamp is the one seen before: not read
//	(zero, nil, nil)    gone since the directory was listed
//	(zero, nil, why)    refused
//
// A symbolic link is followed only to a file that passes every rule
// itself, through directories that pass the rule for a directory on the
// way, and (see accept) that anyone may read. Everything is opened relative
// to a directory already checked, without following a last link, so that
// nothing swapped in after a check is read.
func (s *Scanner) file(w *walk, name, path string, named bool, old seenFile, had bool, racySince int64) (seenFile, []byte, *RefusedError) {
	if !utf8.ValidString(path) {
		// Never read: its name could not reach the evaluator, a record
		// or an answer as it is (trial AN: "answered out of turn").
		return seenFile{}, nil, &RefusedError{Path: path, Named: named, Reason: NameNotText}
	}
	// A name swapped for a link (or back) between the stat and the open is
	// looked at again; a file that keeps changing its kind is left for the
	// next scan.
	for range 3 {
		f, content, why, again := s.fileOnce(w, name, path, named, old, had, racySince)
		if !again {
			return f, content, why
		}
	}
	return seenFile{}, nil, nil
}

// entry is a job file as the rules see it: where it is, and for a link,
// where it leads.
type entry struct {
	path   string // as a person is shown it
	named  bool
	target string // the link's text; "" when path is not a link
	at     string // the link's target, absolute
	walk   *walk  // the walk to the link's target; nil when path is not a link
}

// refuse fills in where: a refusal of a link's target is about the target.
func (e *entry) refuse(r *RefusedError) *RefusedError {
	r.Path, r.Named = e.path, e.named
	if e.target != "" {
		r.Target = e.target
		if r.At == "" {
			r.At, r.AtTarget = e.at, true
		}
	}
	return r
}

func (s *Scanner) fileOnce(w *walk, name, path string, named bool, old seenFile, had bool, racySince int64) (_ seenFile, _ []byte, _ *RefusedError, again bool) {
	e := entry{path: path, named: named}
	unreadable := func(op string, err error) (seenFile, []byte, *RefusedError, bool) {
		return seenFile{}, nil, e.refuse(&RefusedError{Reason: Unreadable, Err: &fs.PathError{Op: op, Path: path, Err: err}}), false
	}
	top := w.top()
	dirfd, fname := top.fd, name
	var raw unix.Stat_t
	if err := w.stat(top.fd, name, filepath.Join(top.path, name), &raw); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return seenFile{}, nil, nil, false
		}
		return unreadable("stat", err)
	}
	if fileMode(raw.Mode)&fs.ModeSymlink != 0 {
		// A ConfigMap's f.lua -> ..data/f.lua is read as its target.
		if r := s.strict.checkLink(int(raw.Uid), int(raw.Gid)); r != nil {
			r.AtLink = true
			return seenFile{}, nil, e.refuse(r), false
		}
		target, err := readlinkat(top.fd, name)
		if err != nil {
			if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.EINVAL) {
				return seenFile{}, nil, nil, true // gone, or no longer a link
			}
			return unreadable("readlink", err)
		}
		lw := w.fork()
		defer lw.close()
		lw.links = 1
		e.target, e.walk = target, lw
		var refused *RefusedError
		fname, raw, err = lw.resolve(target, wantFile)
		switch {
		case err == nil:
		case errors.Is(err, errMissing):
			// Not said where the way to it is not open to everyone:
			// whether a file there exists is not the link's owner's to
			// learn.
			if r := s.privateWay(&e); r != nil && s.strict.daemonUID == 0 {
				return seenFile{}, nil, e.refuse(r), false
			}
			return seenFile{}, nil, &RefusedError{Path: path, Named: named, Reason: DanglingLink, Target: target}, false
		case errors.As(err, &refused):
			return seenFile{}, nil, e.refuse(refused), false
		default:
			return unreadable("open", err)
		}
		dirfd = lw.top().fd
		e.at = filepath.Join(lw.top().path, fname)
	}
	st, why := s.accept(&e, &raw, nil)
	if why != nil {
		return seenFile{}, nil, why, false
	}
	if had && old.stamp == st && !old.racy {
		return old, nil, nil, false
	}

	// O_NONBLOCK: if a pipe takes the file's place between the stat and the
	// open, the open must not wait for a writer; O_NOFOLLOW: nor may a link.
	// The checks are repeated on the open file, since that is what is read.
	var fd int
	err := retryEINTR(func() (err error) {
		fd, err = unix.Openat(dirfd, fname, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_NOCTTY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		return err
	})
	switch {
	case errors.Is(err, unix.ENOENT), errors.Is(err, unix.ELOOP):
		return seenFile{}, nil, nil, true // gone, or a link now: look again
	case err != nil:
		return unreadable("open", err)
	}
	f := os.NewFile(uintptr(fd), name)
	defer f.Close()
	if err := retryEINTR(func() error { return unix.Fstat(fd, &raw) }); err != nil {
		return unreadable("stat", err)
	}
	if s.statHook != nil {
		at := filepath.Join(top.path, name)
		if e.walk != nil {
			at = e.at
		}
		s.statHook(at, &raw)
	}
	if e.walk != nil {
		// Only a link leads out of the jobs directory's file system,
		// into the kernel's.
		if kernel, err := kernelFS(fd); err != nil {
			return unreadable("statfs", err)
		} else if kernel != "" {
			return seenFile{}, nil, e.refuse(&RefusedError{Reason: KernelFile, Kind: kernel}), false
		}
	}
	var acl []aclWriter
	if fileMode(raw.Mode).Perm()&0o020 != 0 {
		if acl, err = aclWriters(fd, false); err != nil {
			return unreadable("getxattr", err)
		}
	}
	if st, why = s.accept(&e, &raw, acl); why != nil {
		return seenFile{}, nil, why, false
	}
	if !named && s.now().UnixNano()-max(st.mtime, st.ctime) < WriteGrace.Nanoseconds() {
		// Written lately, it may be a save in progress. A read lease is
		// granted only while no one has the file open for writing, and
		// while it is held, a writer's open waits for it: what is read is
		// a file no writer held, whole. Closing the file drops it. A
		// scanner that may not take one (another's file, a file system
		// without leases) reads as before. (A file older than the grace is
		// read whoever holds it: no lease, no cost, for the thousand files
		// of a start.)
		_, err := unix.FcntlInt(uintptr(fd), unix.F_SETLEASE, unix.F_RDLCK)
		if errors.Is(err, unix.EAGAIN) {
			return seenFile{}, nil, e.refuse(&RefusedError{Reason: Writing}), false
		}
	}
	content := make([]byte, 0, st.size+1) // +1 sees growth without a second allocation
	content, err = readAtMost(f, content, s.maxBytes+1)
	if err != nil {
		return unreadable("read", err)
	}
	if int64(len(content)) > s.maxBytes {
		// It grew past the limit after the stat.
		return seenFile{}, nil, e.refuse(&RefusedError{Reason: TooBig, Size: max(st.size, int64(len(content))), MaxBytes: s.maxBytes}), false
	}
	return seenFile{
		stamp: st,
		sum:   sha256.Sum256(content),
		racy:  st.ctime >= racySince || st.mtime >= racySince,
	}, content, nil, false
}

// kernelFS names the file system of the kernel's that fd is on ("" for
// any other). Such a file's mode says nothing of who may read it: procfs
// lets only root read /proc/PID/maps, mode 0444, and a link to it would
// have the root daemon quote it to the link's owner. No job file is
// there.
func kernelFS(fd int) (string, error) {
	var st unix.Statfs_t
	if err := retryEINTR(func() error { return unix.Fstatfs(fd, &st) }); err != nil {
		return "", err
	}
	switch uint32(st.Type) {
	case unix.PROC_SUPER_MAGIC:
		return "proc", nil
	case unix.SYSFS_MAGIC:
		return "sysfs", nil
	case unix.DEBUGFS_MAGIC:
		return "debugfs", nil
	case unix.TRACEFS_MAGIC:
		return "tracefs", nil
	case unix.SECURITYFS_MAGIC:
		return "securityfs", nil
	case unix.CGROUP_SUPER_MAGIC, unix.CGROUP2_SUPER_MAGIC:
		return "cgroup", nil
	case unix.EFIVARFS_MAGIC:
		return "efivarfs", nil
	case unix.BPF_FS_MAGIC:
		return "bpf", nil
	}
	return "", nil
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

// accept checks what a stat found against the rules: a regular file,
// owned and moded as strictModes says, not too big; and for a link's
// target, one that anyone may read. acl is who else its ACL lets write,
// known once the file is open (before, nil).
func (s *Scanner) accept(e *entry, raw *unix.Stat_t, acl []aclWriter) (stamp, *RefusedError) {
	mode := fileMode(raw.Mode)
	if !mode.IsRegular() {
		return stamp{}, e.refuse(&RefusedError{Reason: NotRegular, Kind: kindOf(mode), Mode: mode})
	}
	if r := s.strict.check(ruleFile, int(raw.Uid), int(raw.Gid), mode, acl); r != nil {
		return stamp{}, e.refuse(r)
	}
	// Before its size: what berth says of a file its clients may not
	// read is that, nothing more.
	if r := s.private(e, int(raw.Uid), mode); r != nil {
		return stamp{}, e.refuse(r)
	}
	if raw.Size > s.maxBytes {
		return stamp{}, e.refuse(&RefusedError{Reason: TooBig, Size: raw.Size, MaxBytes: s.maxBytes})
	}
	if !e.named && s.bounded() && (s.filesLeft <= 0 || raw.Size > s.bytesLeft) {
		return stamp{}, e.refuse(&RefusedError{Reason: TooMany, MaxFiles: s.maxFiles, MaxBytes: s.maxTotal})
	}
	return stampOf(raw), nil
}

// private applies the rule for a link's target that its owner rules alone
// would let through: berth shows what it reads to every client (berth
// status quotes the token a syntax error stopped at), so a link in the
// jobs directory must not make it read what its clients may not, as
// /etc/shadow, which root owns and nobody else may write. So a link is
// followed only to a file that others may read, through directories that
// others may pass (o+r, o+x), with two exceptions: a target inside the
// jobs directory is a job file like any other there, and a person's own
// daemon (not root) may read that person's own files, since its clients
// are that person.
func (s *Scanner) private(e *entry, uid int, mode fs.FileMode) *RefusedError {
	switch {
	case e.walk == nil, e.walk.belowBase():
		return nil
	case s.strict.daemonUID != 0 && uid == s.strict.daemonUID:
		return nil
	}
	if r := s.privateWay(e); r != nil {
		return r
	}
	if mode&0o004 == 0 {
		return &RefusedError{Reason: Private, Mode: mode}
	}
	return nil
}

// privateWay is private's rule for the directories on the way to a link's
// target: one that others may not pass refuses it, whatever is or is not
// beyond.
func (s *Scanner) privateWay(e *entry) *RefusedError {
	if e.walk == nil || e.walk.belowBase() {
		return nil
	}
	if dir, ok := e.walk.othersReach(); !ok {
		for _, st := range e.walk.steps {
			if st.path == dir {
				return &RefusedError{Reason: Private, At: dir, Mode: st.mode}
			}
		}
	}
	return nil
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
