package store

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// lockName is the lock file of a state directory, beside the state file.
// It, not the state file, says which daemon owns the directory: a lock on
// state.db goes with that file, so when the file was removed under a
// running daemon a second daemon made a new state.db, locked it, and ran
// every job again beside the first. The lock file holds nothing worth
// removing, and is never removed by berth either: a daemon that unlinked
// it on its way out could do so just after a second daemon had opened it,
// and a third would then lock a new file while the second held the old.
//
// bbolt's own flock on state.db is kept as well (bbolt takes it anyway):
// with both, removing either file alone still lets no second daemon in.
const lockName = "state.lock"

// lockPoll is how often a lock held by another process is tried again
// until the lock timeout; a holder that exits releases it at once.
const lockPoll = 10 * time.Millisecond

// lockState takes the lock file of the state at path, waiting up to
// timeout, and writes this process's pid in it for the message another
// daemon gives when it is refused. The lock is held as long as the
// returned file is open.
//
// Outcomes:
//   - (f, nil): locked; closing f releases it.
//   - (nil, *LockedError): another process holds it.
//   - (nil, err): the lock file cannot be opened or locked (permissions, I/O).
func lockState(path string, timeout time.Duration) (*stateLock, error) {
	lp := filepath.Join(filepath.Dir(path), lockName)
	// Not through a symbolic link: the daemon writes into this file as root.
	// Readable by all: the pid in it is for people (cat state.lock).
	f, err := os.OpenFile(lp, os.O_RDWR|os.O_CREATE|unix.O_NOFOLLOW|unix.O_NONBLOCK, 0o644)
	switch {
	case errors.Is(err, unix.ELOOP):
		return nil, fmt.Errorf("state lock %s is a symbolic link, which berth does not follow: remove it, and start berth again: rm %s", lp, lp)
	case errors.Is(err, unix.EISDIR):
		return nil, fmt.Errorf("state lock %s is a directory, not a file: remove it, and start berth again: rmdir %s", lp, lp)
	case err != nil:
		return nil, fmt.Errorf("open state lock %s: %w", lp, err)
	}
	// Nor a hard link to another file, which the truncation below would
	// empty, nor a pipe or device put in its place.
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		f.Close()
		return nil, fmt.Errorf("stat state lock %s: %w", lp, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG || st.Nlink != 1 || int(st.Uid) != os.Geteuid() {
		f.Close()
		return nil, fmt.Errorf("state lock %s is not a file of this user's own (a link, or another's?): remove it, and start berth again: rm %s", lp, lp)
	}
	deadline := time.Now().Add(timeout)
	name, err := dirLockName(filepath.Dir(path))
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("lock state %s: %w", lp, err)
	}
	dir := -1
	var squatter *NameTaken
	for {
		err = unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			if dir, err = bindDirLock(name); err == nil {
				break
			}
			if !errors.Is(err, unix.EADDRINUSE) {
				f.Close()
				return nil, fmt.Errorf("lock state directory %s: %w", filepath.Dir(path), err)
			}
			pid, uid, ours := dirLockHolder(name)
			if !ours {
				// Anyone may bind a name: one held by a process that is
				// not this user's listening is no daemon's lock, and
				// the file's lock alone is had (Store.NameTaken says so).
				dir, err = -1, nil
				squatter = &NameTaken{PID: pid, UID: uid}
				break
			}
			// The directory's lock file is new, its holder's removed
			// (with the directory, perhaps): the holder still runs.
			if time.Now().After(deadline) {
				f.Close()
				return nil, &LockedError{Path: path, HolderPID: pid, Removed: true}
			}
			time.Sleep(lockPoll)
			continue
		}
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if !errors.Is(err, unix.EWOULDBLOCK) {
			f.Close()
			return nil, fmt.Errorf("lock state %s: %w", lp, err)
		}
		if time.Now().After(deadline) {
			holder := lockHolder(lp)
			if holder == 0 {
				// In another pid namespace, /proc/locks names no one; the
				// holder wrote its own pid.
				holder = pidIn(f)
			}
			f.Close()
			return nil, &LockedError{Path: path, HolderPID: holder}
		}
		time.Sleep(lockPoll)
	}
	l := &stateLock{f: f, dir: dir, squatter: squatter}
	pid := []byte(strconv.Itoa(os.Getpid()) + "\n")
	if err := f.Truncate(0); err == nil {
		_, err = f.WriteAt(pid, 0)
	}
	if err != nil {
		l.Close()
		return nil, fmt.Errorf("write state lock %s: %w", lp, err)
	}
	return l, nil
}

// stateLock is a state directory's lock, held until Close: its lock
// file, and a name no file removal takes away. The file's lock goes with
// its file: once the directory was removed whole (rm -rf of a state
// "reset"), a second daemon made a new one, locked a new lock file, and
// ran every job beside the first. The name is an abstract unix socket
// named after the directory's path, which the kernel gives to one socket
// at a time and takes back when its holder exits, however it exits.
type stateLock struct {
	f   *os.File
	dir int // the socket bound to the name; -1 where another user's process holds it
	// squatter, where dir is -1, is what holds the name.
	squatter *NameTaken
}

// NameTaken is a process not a daemon's, by its user, that holds the
// name a state directory is locked by as well as its lock file: the
// directory is locked by its file alone, which a removal of the directory
// takes away. UID -1 where it does not listen (the kernel does not say).
type NameTaken struct{ PID, UID int }

// Close releases the lock. A lock whose file was emptied of the pid (a
// daemon refused after it took it: the state file's own lock is another's)
// leaves no pid of a process that holds nothing.
func (l *stateLock) Close() error {
	if l.dir >= 0 {
		_ = unix.Close(l.dir) // the name is free
	}
	return l.f.Close()
}

// forget empties the lock file of this process's pid, before Close, when
// it turns out not to own the state (Open's bbolt lock is another's).
func (l *stateLock) forget() { _ = l.f.Truncate(0) }

// dirLockName is the abstract socket's name for the state directory dir:
// the device and inode of the directory it is in, and its own name,
// hashed. A removal of the directory leaves its parent, and so its name;
// a link, a relative path or another mount namespace (a unit's
// ProtectSystem=) lead to the same. Abstract names are the network
// namespace's: the lock holds among daemons that share it, as their file
// locks do among those that share the directory.
func dirLockName(dir string) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	if real, err := filepath.EvalSymlinks(abs); err == nil {
		abs = real
	}
	var st unix.Stat_t
	if err := unix.Stat(filepath.Dir(abs), &st); err != nil {
		return "", err
	}
	sum := sha256.Sum256(fmt.Appendf(nil, "%d:%d/%s", st.Dev, st.Ino, filepath.Base(abs)))
	return "@berth-state-" + hex.EncodeToString(sum[:16]), nil
}

// bindDirLock binds the abstract socket name and listens on it, so that a
// daemon refused can ask who holds it (dirLockHolder). Connections are
// never accepted: each waits in the backlog, which is as deep as the
// kernel allows, until the name is closed (the store talks to nothing).
// EADDRINUSE when another socket has the name.
func bindDirLock(name string) (int, error) {
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, err
	}
	if err := unix.Bind(fd, &unix.SockaddrUnix{Name: name}); err != nil {
		unix.Close(fd)
		return -1, err
	}
	if err := unix.Listen(fd, dirLockBacklog); err != nil {
		unix.Close(fd)
		return -1, err
	}
	return fd, nil
}

// dirLockBacklog is how many refused daemons are told the holder's pid,
// as the kernel caps it (net.core.somaxconn); past it a daemon is refused
// all the same, without it (dirLockHolder).
const dirLockBacklog = 4096

// dirLockHolder is the pid and uid of the process listening on the
// abstract socket name, as the kernel says of them (0 and -1 where it
// cannot say), and whether the name is a daemon's lock: a listener of
// this user's, or one whose backlog is full. An abstract name has no
// owner, and anyone may bind it first: a process of another user's, or
// one that does not listen, holds no daemon's lock.
func dirLockHolder(name string) (pid, uid int, ours bool) {
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK, 0)
	if err != nil {
		return 0, -1, true // cannot ask: held, as it seems
	}
	defer unix.Close(fd)
	switch err := unix.Connect(fd, &unix.SockaddrUnix{Name: name}); {
	case errors.Is(err, unix.EAGAIN):
		// Its backlog is full (of refused daemons' asks, or of someone's
		// filling it to get past): a listener, held, its pid unknown.
		return 0, -1, true
	case err != nil:
		return 0, -1, false // bound, not listening: no daemon
	}
	cred, err := unix.GetsockoptUcred(fd, unix.SOL_SOCKET, unix.SO_PEERCRED)
	if err != nil {
		return 0, -1, true
	}
	return int(cred.Pid), int(cred.Uid), int(cred.Uid) == os.Geteuid()
}

// pidIn reads the pid a holder wrote in the lock file; 0 when there is none.
func pidIn(f *os.File) int {
	var buf [32]byte
	n, _ := f.ReadAt(buf[:], 0)
	pid, err := strconv.Atoi(strings.TrimSpace(string(buf[:n])))
	if err != nil || pid <= 0 {
		return 0
	}
	return pid
}
