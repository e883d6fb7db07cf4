package watch

// This file is the catalog: every sentence this package says to a person is
// written here, and nowhere else. testdata/messages.golden pins the text
// (go test ./supervisor/watch -update rewrites it).

import (
	"errors"
	"fmt"
	"io/fs"
	"strconv"
	"strings"
)

// Reason says why a file or the jobs directory is refused, so that callers
// can branch on it without reading the sentence. The numbers are part of the
// contract (they may be stored and shown by other tools): never renumber,
// only add.
type Reason uint8

// The reasons berth refuses a job file or the jobs directory.
const (
	NotOwned         Reason = 1 // owned by someone other than root and the daemon's user
	WritableByOthers Reason = 2 // o+w: anyone on the machine could make the daemon run anything
	WritableByGroup  Reason = 3 // g+w, and the group is neither root's nor the owner's private group
	NotRegular       Reason = 4 // a directory, pipe, socket or device with a job file's name
	TooBig           Reason = 5 // larger than ScanOptions.MaxFileBytes
	Unreadable       Reason = 6 // stat, open or read failed
	DanglingLink     Reason = 7 // a symbolic link to nothing
	NotDirectory     Reason = 8 // the jobs directory is something other than a directory
)

var reasonNames = map[Reason]string{
	NotOwned:         "not owned",
	WritableByOthers: "writable by others",
	WritableByGroup:  "writable by group",
	NotRegular:       "not regular",
	TooBig:           "too big",
	Unreadable:       "unreadable",
	DanglingLink:     "dangling link",
	NotDirectory:     "not a directory",
}

func (r Reason) String() string {
	if s, ok := reasonNames[r]; ok {
		return s
	}
	return "reason(" + strconv.Itoa(int(r)) + ")"
}

// RefusedError is why berth will not read a job file, or the jobs directory.
// It carries the facts; Error turns them into a sentence that says what is
// wrong and the command that fixes it. For a symbolic link the facts are the
// target's: that is what would be read.
type RefusedError struct {
	Path   string // the path as the scanner was given it (filepath.Join(dir, name))
	Dir    bool   // Path is the jobs directory itself
	Reason Reason

	// The owner and mode of what was checked. Owner and Group are names,
	// "" where this machine has none for the ID.
	UID, GID     int
	Owner, Group string
	Mode         fs.FileMode

	// WritableByGroup only: the members of the group other than the owner;
	// GroupUnlisted when the group's members cannot be listed (it is not in
	// /etc/group), so berth cannot tell that it has no others.
	OtherMembers  []string
	GroupUnlisted bool

	// NotOwned only: whom the daemon accepts besides root.
	DaemonUID  int
	DaemonUser string // "" where the uid has no name

	Kind     string // NotRegular and NotDirectory: "directory", "named pipe", "socket", "device", "regular file"…
	Size     int64  // TooBig: the file's size in bytes
	MaxBytes int64  // TooBig: the limit
	Target   string // DanglingLink: where the link points
	Err      error  // Unreadable: the cause
}

// Unwrap exposes the cause of an Unreadable refusal (fs.ErrPermission, …).
func (e *RefusedError) Unwrap() error { return e.Err }

func (e *RefusedError) Error() string {
	p := e.Path
	switch e.Reason {
	case NotOwned:
		return fmt.Sprintf("%s is owned by %s, not root or the daemon's user%s; berth refuses it (chown %s %s)",
			p, who(e.Owner, "uid", e.UID), e.daemonUserNote(), e.chownTo(), p)
	case WritableByOthers:
		return fmt.Sprintf("%s is writable by others; berth refuses it (chmod o-w %s)", p, p)
	case WritableByGroup:
		var why string
		switch {
		case e.GroupUnlisted:
			why = "whose members berth cannot list (it is not in /etc/group)"
		case len(e.OtherMembers) > 0:
			why = "which has other members"
		default:
			why = "which is neither root's group nor the owner's private group"
		}
		return fmt.Sprintf("%s is writable by group %s, %s; berth refuses it (chmod g-w %s)",
			p, groupName(e.Group, e.GID), why, p)
	case NotRegular:
		return fmt.Sprintf("%s is a %s, not a regular file; berth refuses it (rename it so that its name does not end in .lua)",
			p, e.Kind)
	case TooBig:
		return fmt.Sprintf("%s is %d bytes, more than the %s a job file may be; berth refuses it (split it into several files)",
			p, e.Size, formatBytes(e.MaxBytes))
	case Unreadable:
		fix := "ls -lL " + p // shows the error again, and what is there
		if errors.Is(e.Err, fs.ErrPermission) {
			fix = "chmod a+r " + p
			if e.Dir {
				fix = "chmod a+rx " + p
			}
		}
		return fmt.Sprintf("%s cannot be read (%s); berth refuses it (%s)", p, cause(e.Err), fix)
	case DanglingLink:
		return fmt.Sprintf("%s is a symbolic link to %s, which does not exist; berth refuses it (fix or remove the link: ls -l %s)",
			p, e.Target, p)
	case NotDirectory:
		return fmt.Sprintf("jobs directory %s is a %s, not a directory; berth refuses it (move it away and mkdir %s)",
			p, e.Kind, p)
	}
	return fmt.Sprintf("%s is refused (%s)", p, e.Reason)
}

// chownTo names the owner that would make a NotOwned file acceptable: root
// when the daemon runs as root, else the daemon's own user (who can then
// also edit it).
func (e *RefusedError) chownTo() string {
	switch {
	case e.DaemonUID == 0:
		return "root"
	case e.DaemonUser != "":
		return e.DaemonUser
	}
	return strconv.Itoa(e.DaemonUID)
}

// daemonUserNote names the daemon's user where it is not root, because
// "the daemon's user" alone leaves a person guessing which one.
func (e *RefusedError) daemonUserNote() string {
	if e.DaemonUID == 0 {
		return ""
	}
	return " " + who(e.DaemonUser, "uid", e.DaemonUID)
}

// who renders `alice (uid 1001)`, or `uid 1001` where the ID has no name.
func who(name, kind string, id int) string {
	if name == "" {
		return kind + " " + strconv.Itoa(id)
	}
	return name + " (" + kind + " " + strconv.Itoa(id) + ")"
}

// groupName renders `"devs"`, or `1234` where the gid has no name.
func groupName(name string, gid int) string {
	if name == "" {
		return strconv.Itoa(gid)
	}
	return strconv.Quote(name)
}

// formatBytes renders a limit the way a person wrote it: "1 MiB", "512 KiB",
// or a byte count when it is not a whole number of either.
func formatBytes(n int64) string {
	switch {
	case n > 0 && n%(1<<20) == 0:
		return strconv.FormatInt(n>>20, 10) + " MiB"
	case n > 0 && n%(1<<10) == 0:
		return strconv.FormatInt(n>>10, 10) + " KiB"
	}
	return strconv.FormatInt(n, 10) + " bytes"
}

// cause is the innermost message of an I/O error: "permission denied"
// rather than "open /etc/berth/jobs.d/x.lua: permission denied", because the
// sentence around it names the path already.
func cause(err error) string {
	if err == nil {
		return "unknown error"
	}
	var pe *fs.PathError
	if errors.As(err, &pe) {
		err = pe.Err
	}
	return strings.TrimSpace(err.Error())
}

// kindOf names a file type for NotRegular and NotDirectory.
func kindOf(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "directory"
	case m.IsRegular():
		return "regular file"
	case m&fs.ModeSymlink != 0:
		return "symbolic link"
	case m&fs.ModeNamedPipe != 0:
		return "named pipe"
	case m&fs.ModeSocket != 0:
		return "socket"
	case m&fs.ModeCharDevice != 0:
		return "character device"
	case m&fs.ModeDevice != 0:
		return "block device"
	}
	return "special file"
}
