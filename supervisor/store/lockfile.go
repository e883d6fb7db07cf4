package store

import (
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
func lockState(path string, timeout time.Duration) (*os.File, error) {
	lp := filepath.Join(filepath.Dir(path), lockName)
	// Not through a symbolic link: the daemon writes into this file as root.
	// Readable by all: the pid in it is for people (cat state.lock).
	f, err := os.OpenFile(lp, os.O_RDWR|os.O_CREATE|unix.O_NOFOLLOW|unix.O_NONBLOCK, 0o644)
	if err != nil {
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
	for {
		err = unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			break
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
	pid := []byte(strconv.Itoa(os.Getpid()) + "\n")
	if err := f.Truncate(0); err == nil {
		_, err = f.WriteAt(pid, 0)
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("write state lock %s: %w", lp, err)
	}
	return f, nil
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
