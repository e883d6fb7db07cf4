package runner

import "errors"

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

// ErrBadName is returned by OpenLog for a job name that cannot be a file
// name in the log directory, and by JournalStream for an identifier that
// would break the stream's header.
var ErrBadName = errors.New("name not allowed")
