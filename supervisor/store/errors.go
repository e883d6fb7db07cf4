package store

import (
	"errors"
	"fmt"
)

// The store's sentinel errors, together so that callers (cmd/ turning them
// into sentences) see every outcome in one place.
var (
	// ErrLocked is returned by Open, inside a *LockedError, when another
	// process holds the state file past the lock timeout.
	ErrLocked = errors.New("state is held by another berth daemon")

	// ErrClosed is returned by every Store method called after Close, and
	// handed to the failed callback of every Later write made after it.
	ErrClosed = errors.New("state store is closed")

	// ErrRunNotFound is returned by MarkLost, and handed to the failed
	// callback of Later's SetRunPID and EndRun, when no run has the id: it
	// was never begun, or it has been trimmed.
	ErrRunNotFound = errors.New("run not found")

	// ErrCorrupt is returned when the state file, or a record in it,
	// cannot be read. The file must be repaired or moved aside.
	ErrCorrupt = errors.New("state is corrupt")

	// ErrNewer is returned when the state file or a record in it was
	// written by a newer berth, in a format this one does not know.
	ErrNewer = errors.New("state was written by a newer berth")

	// ErrNotState is returned by Open, inside a *NotStateError, when a
	// file is at the state's path but holds no state berth wrote: it is
	// empty, not a bbolt database, or one without berth's metadata.
	ErrNotState = errors.New("not a berth state file")
)

// LockedError says that another process holds the state file. A second
// daemon on the same state directory must fail at once and name the holder,
// so that the operator knows which process to look at.
type LockedError struct {
	Path      string
	HolderPID int // 0 when unknown: the holder is in another pid namespace, or exited meanwhile
	// Removed: the holder's lock file, or its whole state directory, was
	// removed (the holder still runs, on files no longer there).
	Removed bool
}

func (e *LockedError) Error() string {
	who, look := "another berth daemon", "systemctl status berth, or ps -C berth -f"
	if e.HolderPID > 0 {
		who = fmt.Sprintf("another berth daemon (pid %d)", e.HolderPID)
		look = fmt.Sprintf("ps -p %d -f shows it", e.HolderPID)
	}
	if e.Removed {
		return fmt.Sprintf("state %s is held by %s, though its lock file (or the directory) was removed: one daemon at a time runs on a state directory; stop that one first (%s)", e.Path, who, look)
	}
	return fmt.Sprintf("state %s is held by %s: one daemon at a time runs on a state directory; stop that one, or give this one --state DIR (%s)", e.Path, who, look)
}

// Is makes errors.Is(err, ErrLocked) true for a *LockedError.
func (e *LockedError) Is(target error) bool { return target == ErrLocked }

// NotStateError says that the file at the state's path is not a state
// berth wrote. Only a missing file starts a new state: a history is never
// replaced silently, since a daemon that started afresh would run again
// every batch job the history says is done. A person decides, by moving
// the file aside.
type NotStateError struct {
	Path    string
	Problem NotState
	Size    int64 // the file's size in bytes
}

// NotState is what is wrong with a file that is not a state.
type NotState uint8

// What NotStateError finds.
const (
	NotStateEmpty   NotState = 1 // 0 bytes
	NotStateNotBolt NotState = 2 // not a bbolt database
	NotStateForeign NotState = 3 // a bbolt database without berth's meta bucket and format
)

func (p NotState) String() string {
	switch p {
	case NotStateEmpty:
		return "empty"
	case NotStateNotBolt:
		return "not a bbolt database"
	case NotStateForeign:
		return "a bbolt database without berth's metadata"
	}
	return fmt.Sprintf("notstate(%d)", uint8(p))
}

func (e *NotStateError) Error() string {
	return fmt.Sprintf("state %s is not a berth state file: %v (%d bytes)", e.Path, e.Problem, e.Size)
}

// Is makes errors.Is(err, ErrNotState) true for a *NotStateError.
func (e *NotStateError) Is(target error) bool { return target == ErrNotState }

// GoneError says that the state file this store has open is no longer at
// its path: removed, or replaced by another file. The store goes on
// writing into the file it opened, which nothing can open again once the
// daemon closes it; and without the lock file (lockName), a second daemon
// would start on a new file at the path.
type GoneError struct {
	Path     string
	Replaced bool // another file is at the path now; false: nothing is
}

func (e *GoneError) Error() string {
	if e.Replaced {
		return fmt.Sprintf("state %s was replaced by another file after it was opened", e.Path)
	}
	return fmt.Sprintf("state %s was removed after it was opened", e.Path)
}

// UnrecordedError is Close's error when writes a failed commit kept (a
// full disk) were still not in when the store closed: they are lost with
// the process. The next daemon finds the state as it was before them.
type UnrecordedError struct {
	Path string
	// Jobs are the jobs whose latest record (a state come to rest, such
	// as done) is among them, sorted; Runs counts the writes of runs (a
	// run's record, its pid, its end).
	Jobs []string
	Runs int
	// Err is why the last commit failed; nil where none was tried.
	Err error
}

func (e *UnrecordedError) Error() string {
	return fmt.Sprintf("state %s: closed with %d jobs' records and %d writes of runs not recorded: %v", e.Path, len(e.Jobs), e.Runs, e.Err)
}

func (e *UnrecordedError) Unwrap() error { return e.Err }
