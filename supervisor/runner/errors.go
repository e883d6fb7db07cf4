package runner

import (
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"syscall"
)

// ErrNoCommand is returned by Start when a Spec has an empty Argv.
var ErrNoCommand = errors.New("no command")

// ErrNotFound is returned by Start when Argv[0] has no slash and no
// directory of the job's PATH holds an executable file of that name.
var ErrNotFound = errors.New("executable file not found in the job's PATH")

// ErrRelativePath is returned by Start when Argv[0] would be found through a
// relative entry of the job's PATH ("." or an empty entry). It is refused
// for the reason Go's os/exec refuses it (exec.ErrDot): whatever happens to
// be in the working directory would run instead of the program meant. Write
// "./name" to mean it.
var ErrRelativePath = errors.New("executable found through a relative PATH entry")

// ErrBadOOMScoreAdj is returned by Start when a Spec's OOMScoreAdj is
// outside the kernel's range, -1000 to 1000.
var ErrBadOOMScoreAdj = errors.New("oom_score_adj outside -1000..1000")

// ErrBadName is returned by OpenLog for a job name that cannot be a file
// name in the log directory, and by JournalStream for an identifier that
// would break the stream's header.
var ErrBadName = errors.New("name not allowed")

// The errors below are what Start returns when the process could not be
// started, each naming the cause rather than repeating the kernel's errno
// for the program (a missing working directory otherwise reads "fork/exec
// /bin/sh: no such file or directory"). Their sentences are the catalog of
// this package; testdata/start_errors*.golden pins them.

// PathProblem says what stopped a walk from / to a path.
type PathProblem uint8

// What can stop a process from reaching its directory or its program.
const (
	PathMissing       PathProblem = 1 // a component does not exist
	PathNotDir        PathProblem = 2 // a component above the end, or a working directory, is not a directory
	PathDenied        PathProblem = 3 // who may not enter a directory on the way
	PathNotRegular    PathProblem = 4 // the program is not a regular file
	PathNotExecutable PathProblem = 5 // who may not execute the program
)

// Identity is who a process runs as, for explaining what it may not reach.
type Identity struct {
	UID, GID uint32
	Groups   []uint32 // supplementary
}

// Blocked is where, and why, a walk from / stopped.
type Blocked struct {
	Problem PathProblem
	// At is the path where the walk stopped: the end itself, or a
	// directory above it.
	At string
	// Mode, UID and GID are At's, when it exists.
	Mode     fs.FileMode
	UID, GID uint32
}

func (b Blocked) owner() string {
	return fmt.Sprintf("mode %04o, owner %d:%d", uint32(b.Mode.Perm()), b.UID, b.GID)
}

// DirError is returned by Start when the process cannot enter its working
// directory. It unwraps to what the kernel said (syscall.ENOENT…).
type DirError struct {
	Dir string
	Blocked
	Who Identity // who the process runs as
	Err error
}

func (e *DirError) Error() string {
	switch {
	case e.Problem == PathMissing:
		return fmt.Sprintf("dir %s does not exist", e.Dir)
	case e.Problem == PathNotDir && e.At == e.Dir:
		return fmt.Sprintf("dir %s is not a directory", e.Dir)
	case e.Problem == PathNotDir:
		return fmt.Sprintf("dir %s: %s is not a directory", e.Dir, e.At)
	case e.Problem == PathDenied && e.At == e.Dir:
		return fmt.Sprintf("dir %s is not accessible to uid %d (%s)", e.Dir, e.Who.UID, e.owner())
	case e.Problem == PathDenied:
		return fmt.Sprintf("dir %s is not accessible to uid %d: it may not enter %s (%s)", e.Dir, e.Who.UID, e.At, e.owner())
	}
	return fmt.Sprintf("cannot enter dir %s: %v", e.Dir, e.Err)
}

func (e *DirError) Unwrap() error { return e.Err }

// ProgramError is returned by Start when the program cannot be run: it is
// not in the job's PATH, does not exist, may not be executed by the user
// the process runs as, or names a missing interpreter on its #! line. It
// unwraps to ErrNotFound, ErrRelativePath or what the kernel said.
type ProgramError struct {
	// Program is Argv[0] as given; Path is where it was looked for, when
	// that differs (a name relative to the working directory).
	Program, Path string
	// SearchPath is the job's PATH, when Program was looked for in it;
	// Closed, where it was not found there, the entries of it that the
	// job's user may not enter.
	SearchPath string
	Closed     []string
	Blocked
	// Interpreter is the program its #! line names, when that is missing.
	Interpreter string
	Who         Identity
	Err         error
}

func (e *ProgramError) Error() string {
	name := e.Program
	if e.Path != "" && e.Path != e.Program {
		name = fmt.Sprintf("%s (%s)", e.Program, e.Path)
	}
	switch {
	case errors.Is(e.Err, ErrNotFound) && e.SearchPath == "":
		return fmt.Sprintf("program %q was not found: the job's PATH is empty; give its full path in cmd, or set PATH in env", e.Program)
	case errors.Is(e.Err, ErrNotFound) && len(e.Closed) > 0:
		return fmt.Sprintf("program %q was not found in the job's PATH, %s, of which uid %d may not enter %s; give its full path in cmd, or set PATH in env",
			e.Program, e.SearchPath, e.Who.UID, strings.Join(e.Closed, " nor "))
	case errors.Is(e.Err, ErrNotFound):
		return fmt.Sprintf("program %q was not found in the job's PATH, %s; give its full path in cmd, or set PATH in env", e.Program, e.SearchPath)
	case errors.Is(e.Err, ErrRelativePath):
		return fmt.Sprintf("program %q is found only through a relative entry of the job's PATH, %s, which berth does not follow; write ./%s to run the one in dir", e.Program, e.SearchPath, e.Program)
	case e.Interpreter != "":
		return fmt.Sprintf("program %s names %s on its #! line, which does not exist", name, e.Interpreter)
	case e.Problem == PathMissing:
		return fmt.Sprintf("program %s does not exist", name)
	case e.Problem == PathNotDir:
		return fmt.Sprintf("program %s: %s is not a directory", name, e.At)
	case e.Problem == PathDenied:
		return fmt.Sprintf("program %s is not accessible to uid %d: it may not enter %s (%s)", name, e.Who.UID, e.At, e.owner())
	case e.Problem == PathNotRegular:
		return fmt.Sprintf("program %s is not a regular file", name)
	case e.Problem == PathNotExecutable && e.Mode&0o111 == 0:
		return fmt.Sprintf("program %s is not executable (mode %04o); chmod +x %s", name, uint32(e.Mode.Perm()), e.At)
	case e.Problem == PathNotExecutable:
		return fmt.Sprintf("program %s may not be executed by uid %d (%s)", name, e.Who.UID, e.owner())
	case errors.Is(e.Err, syscall.E2BIG):
		// The kernel's "argument list too long" counts the environment too.
		return fmt.Sprintf("cannot run %s: its arguments and environment together are more than the kernel takes (E2BIG; each string at most 128 KiB, all of them a quarter of the stack limit); make cmd or env smaller, or pass what is large in a file", name)
	case errors.Is(e.Err, syscall.ENAMETOOLONG):
		return fmt.Sprintf("cannot run %s: a path (its dir, or the program's) is longer than the kernel takes (ENAMETOOLONG; 4096 bytes, 255 for each name in it)", name)
	}
	return fmt.Sprintf("cannot run %s: %v", name, e.Err)
}

func (e *ProgramError) Unwrap() error { return e.Err }

// OOMScoreAdjError is about the daemon's own oom_score_adj, which Start sets
// to the job's for the moment of the fork (see the package doc). It unwraps
// to what the kernel said.
//
// Start returns it, with Restore false, when the daemon could not take the
// job's value; nothing was started, as the job would have begun at the
// daemon's. Process.DaemonOOMScoreAdjErr returns it, with Restore true,
// when the job started with its value but the daemon could not take its
// own back, and runs on at the job's.
type OOMScoreAdjError struct {
	Restore bool // the daemon's own value could not be put back
	Daemon  int  // the daemon's own value, before the start
	Job     int  // the Spec's OOMScoreAdj
	Err     error
}

func (e *OOMScoreAdjError) Error() string {
	switch {
	case e.Restore:
		return fmt.Sprintf("the daemon could not take back its oom_score_adj %d after starting a job, and is left at the job's %d: %v", e.Daemon, e.Job, e.Err)
	case errors.Is(e.Err, syscall.EACCES) && e.Job < e.Daemon && !errors.As(e.Err, new(*fs.PathError)):
		// The kernel refused the value, not the file (which a daemon that
		// is not root and not dumpable may not open for writing).
		return fmt.Sprintf("cannot start the job at oom_score_adj %d: the daemon's own is %d, and lowering it that far for the start needs CAP_SYS_RESOURCE", e.Job, e.Daemon)
	}
	return fmt.Sprintf("cannot start the job at oom_score_adj %d: the daemon's own is %d, and could not be set to it for the start: %v", e.Job, e.Daemon, e.Err)
}

func (e *OOMScoreAdjError) Unwrap() error { return e.Err }
