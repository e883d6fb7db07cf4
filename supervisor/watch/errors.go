package watch

// This file is the catalog: every sentence this package says to a person is
// written here, and nowhere else. testdata/messages.golden pins the text
// (go test ./supervisor/watch -update rewrites it).

import (
	"errors"
	"fmt"
	"io/fs"
	"math"
	"path/filepath"
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
	NotOwned         Reason = 1  // owned by someone other than root and the daemon's user
	WritableByOthers Reason = 2  // o+w: anyone on the machine could make the daemon run anything
	WritableByGroup  Reason = 3  // g+w, and the group is neither root's nor the owner's private group, or has someone else in it
	NotRegular       Reason = 4  // a directory, pipe, socket or device with a job file's name
	TooBig           Reason = 5  // larger than ScanOptions.MaxFileBytes
	Unreadable       Reason = 6  // stat, open or read failed
	DanglingLink     Reason = 7  // a symbolic link to nothing
	NotDirectory     Reason = 8  // the jobs directory is something other than a directory
	Private          Reason = 9  // a link's target is not for everyone to read, and berth shows what it reads
	WritableByACL    Reason = 10 // an ACL lets a user or group besides the owner's write it
	Writing          Reason = 11 // open for writing, and written less than WriteGrace ago: a save in progress
	KernelFile       Reason = 12 // on a file system of the kernel's (proc, sysfs…), whose modes do not say who may read
	TooMany          Reason = 13 // past what the directory may hold in all (ScanOptions.MaxFiles, MaxTotalBytes)
	NameNotText      Reason = 14 // its name is not valid UTF-8, which every message, record and answer carries as text
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
	Private:          "private",
	WritableByACL:    "writable by ACL",
	Writing:          "being written",
	KernelFile:       "a kernel file",
	TooMany:          "too many",
	NameNotText:      "name not text",
}

func (r Reason) String() string {
	if s, ok := reasonNames[r]; ok {
		return s
	}
	return "reason(" + strconv.Itoa(int(r)) + ")"
}

// RefusedError is why berth will not read a job file, or the jobs directory.
// It carries the facts; Error turns them into a sentence that says what is
// wrong and the command that fixes it.
//
// What failed is Path itself, or, when At is set, something on the way to
// it: a directory above the jobs directory or above a file named outright,
// a directory or link on the way to a link's target, or (AtTarget) the
// link's target itself. The owner, mode and kind are those of what failed.
type RefusedError struct {
	Path   string // the path as the scanner was given it (filepath.Join(dir, name)), or as berth check was
	Dir    bool   // Path is the jobs directory itself
	Named  bool   // Path was named outright (berth check FILE), not found in the jobs directory
	Reason Reason

	// Target is where Path, a symbolic link, points, as the link says it.
	Target string
	// At is the absolute path of what failed when it is not Path; AtTarget
	// says it is the file Path links to, rather than a directory or link on
	// the way. AtLink says that what failed is a symbolic link (its owner).
	At       string
	AtTarget bool
	AtLink   bool

	// The owner and mode of what was checked. Owner and Group are names,
	// "" where this machine has none for the ID.
	UID, GID     int
	Owner, Group string
	Mode         fs.FileMode

	// WritableByGroup only: the members of the group other than the owner
	// and root; GroupUnlisted when the group's members cannot be listed (it
	// is not in /etc/group), so berth cannot tell that it has no others.
	OtherMembers  []string
	GroupUnlisted bool

	// WritableByACL only: the users and groups its ACL lets write, by
	// name where this machine has one ("uid 1001" otherwise).
	ACLWriters []string

	// NotOwned only: whom the daemon accepts besides root: its user, and
	// in a person's directory that person (PersonUID 0: not one).
	DaemonUID  int
	DaemonUser string // "" where the uid has no name
	PersonUID  int
	Person     string // "" where the uid has no name

	Kind     string // NotRegular and NotDirectory: "directory", "named pipe", "socket", "device", "regular file"…
	Size     int64  // TooBig: the file's size in bytes
	MaxBytes int64  // TooBig: the limit; TooMany: the directory's in all (0: none)
	MaxFiles int    // TooMany: how many files the directory may hold (0: no bound)
	Err      error  // Unreadable: the cause
}

// Unwrap exposes the cause of an Unreadable refusal (fs.ErrPermission, …).
func (e *RefusedError) Unwrap() error { return e.Err }

// Error says what is wrong and what fixes it. It never quotes a file's
// content: a refused file is not read.
func (e *RefusedError) Error() string {
	p, s, fix := e.Path, e.subject(), e.fixes()
	switch e.Reason {
	case NotOwned:
		owned := "is owned by"
		if e.AtLink && e.At == "" {
			owned = "is a symbolic link owned by"
		}
		chown := "chown "
		if e.AtLink {
			chown = "chown -h " // chown follows a link: -h changes the link itself
		}
		copyInstead := ""
		if e.Target != "" && !e.AtLink && !e.Dir {
			// On the way to a link's target: the owner of that
			// directory may be no one whom chown should dispossess.
			target := e.Target
			switch {
			case e.AtTarget:
				target = e.At // resolved
			case !filepath.IsAbs(target):
				target = filepath.Join(filepath.Dir(p), target) // as the link reads it
			}
			copyInstead = fmt.Sprintf(", or put a copy in place of the link: cp --remove-destination %s %s", target, p)
		}
		accepted := "root or the daemon's user" + e.daemonUserNote()
		if e.PersonUID != 0 {
			accepted = who(e.Person, "uid", e.PersonUID) + ", whose directory it is"
			if e.UID != 0 && e.UID != e.DaemonUID {
				// Someone else's, in a person's directory: chown would
				// hand the person what another put there, or took them
				// through another's directory.
				switch {
				case e.Target != "" && e.Dir:
					// Theirs is made by berth, not linked to by it: rm
					// gives the link up, and the next reload makes it.
					return fmt.Sprintf("%s %s %s, not %s; berth refuses it (a person's directory may lead only to what is theirs or root's: rm %s removes the link, and berth reload makes the directory again, owned by %s)",
						s, owned, who(e.Owner, "uid", e.UID), accepted, p, e.chownTo())
				case e.Target != "":
					return fmt.Sprintf("%s %s %s, not %s; berth refuses it (a link in a job directory may lead only to what is its owner's or root's: rm %s)",
						s, owned, who(e.Owner, "uid", e.UID), accepted, p)
				}
				// A person cannot chown; a copy of their own, moved in
				// its place, is theirs.
				return fmt.Sprintf("%s %s %s, not %s; berth refuses it (if you did not put it there, remove it: rm %s; if it is yours, make it yours: cp %s %s.new && mv %s.new %s)",
					s, owned, who(e.Owner, "uid", e.UID), accepted, p, fix, fix, fix, fix)
			}
		}
		return fmt.Sprintf("%s %s %s, not %s; %s (%s%s %s%s)",
			s, owned, who(e.Owner, "uid", e.UID), accepted, e.refuses(), chown, e.chownTo(), fix, copyInstead)
	case WritableByOthers:
		return fmt.Sprintf("%s is writable by others; %s (chmod o-w %s)", s, e.refuses(), fix)
	case WritableByGroup:
		var why string
		switch {
		case e.GroupUnlisted:
			why = "whose members berth cannot list (it is not in /etc/group)"
		case len(e.OtherMembers) > 0:
			why = "which has members besides the owner and root (" + strings.Join(e.OtherMembers, ", ") + ")"
		default:
			why = "which is neither root's group nor the owner's private group"
		}
		return fmt.Sprintf("%s is writable by group %s, %s; %s (chmod g-w %s)",
			s, groupName(e.Group, e.GID), why, e.refuses(), fix)
	case WritableByACL:
		return fmt.Sprintf("%s has an ACL that lets %s write it; %s (setfacl -b %s removes the ACL; getfacl %s shows it)",
			s, strings.Join(e.ACLWriters, " and "), e.refuses(), fix, fix)
	case NotRegular:
		switch {
		case e.Target != "":
			return fmt.Sprintf("%s is a %s, not a regular file; berth refuses it (point the link at a job file, or remove it: rm %s)", s, e.Kind, p)
		case e.Named:
			return fmt.Sprintf("%s is a %s, not a regular file; berth reads only regular files (name a job file: berth check FILE)", s, e.Kind)
		}
		return fmt.Sprintf("%s is a %s, not a regular file; berth refuses it (rename it so that its name does not end in .lua)",
			s, e.Kind)
	case TooBig:
		return fmt.Sprintf("%s is %s, more than the %s a job file may be; berth refuses it (split it into several files)",
			s, formatSize(e.Size, e.MaxBytes), formatBytes(e.MaxBytes))
	case NameNotText:
		// The path said with its bytes escaped (trial AN: a name of
		// byte 0xFF made the daemon's log a binary file).
		return fmt.Sprintf("%s: its name is not valid UTF-8, and berth carries a file's name as text; berth refuses it (ls -b shows the name's bytes; rename it to a name of text ending in .lua)",
			strconv.Quote(p))
	case TooMany:
		var bounds []string
		if e.MaxFiles > 0 {
			bounds = append(bounds, fmt.Sprintf("%d files", e.MaxFiles))
		}
		if e.MaxBytes > 0 {
			bounds = append(bounds, formatBytes(e.MaxBytes)+" of them")
		}
		return fmt.Sprintf("%s is past what one job directory may hold, %s in all, taken in name order; berth refuses it (remove files, or declare more jobs in fewer files)",
			s, strings.Join(bounds, " and "))
	case Unreadable:
		if e.Named && e.At == "" && errors.Is(e.Err, fs.ErrPermission) {
			// berth check, by someone the file is not open to: the
			// file is fine for the daemon, which reads it as root.
			return fmt.Sprintf("%s cannot be read by you (permission denied); berth check reads files as the one who runs it (sudo berth check %s)", s, p)
		}
		var how string
		switch {
		case e.At != "" && e.Target != "":
			how = "ls -ld " + fix + " shows who may read it; or remove the link: rm " + p
		case e.At != "":
			how = "ls -ld " + fix
		case e.Target != "":
			// The way to the link's target: no mode of the link's helps.
			how = "ls -l " + p + " shows where it leads; or remove the link: rm " + p
		case errors.Is(e.Err, fs.ErrPermission) && e.Dir:
			how = "chmod u+rx " + p
		case errors.Is(e.Err, fs.ErrPermission):
			how = "chmod u+r " + p
		default:
			how = "ls -lL " + p // shows the error again, and what is there
		}
		return fmt.Sprintf("%s cannot be read (%s); berth refuses it (%s)", s, cause(e.Err), how)
	case Writing:
		open := p
		if e.AtTarget {
			open = e.At
		}
		return fmt.Sprintf("%s is open for writing (a save in progress?); berth reads it once it is closed, or once it has not changed for %s, "+
			"and what was in force of it stays in force meanwhile (fuser -v %s shows who has it open)", s, WriteGrace, open)
	case DanglingLink:
		return fmt.Sprintf("%s is a symbolic link to %s, which does not exist; berth refuses it (fix or remove the link: ls -l %s)",
			p, e.Target, p)
	case NotDirectory:
		if IsJobFile(filepath.Base(p)) {
			// The likely mistake: a job file named where its directory was.
			return fmt.Sprintf("jobs directory %s is a %s, not a directory; berth refuses it (give --jobs the directory it is in, %s)",
				p, e.Kind, filepath.Dir(p))
		}
		return fmt.Sprintf("jobs directory %s is a %s, not a directory; berth refuses it (move it away and mkdir %s)",
			p, e.Kind, p)
	case KernelFile:
		return fmt.Sprintf("%s is a file of the kernel's (on %s), whose mode does not say who may read it (the daemon may read what its clients may not); "+
			"berth reads job files only from ordinary file systems and refuses it (rm %s)", s, e.Kind, p)
	case Private:
		what := "is not readable by everyone"
		if !e.AtTarget {
			what = "is not open to everyone"
		}
		return fmt.Sprintf("%s %s (mode %s); berth shows what it reads to every client (an error quotes the file), "+
			"so it follows a link only to a file anyone may read; berth refuses it "+
			"(if %s is a job file of yours, put a copy in place of the link: cp --remove-destination %s %s; otherwise rm %s)",
			s, what, permString(e.Mode), e.resolved(), e.resolved(), p, p)
	}
	return fmt.Sprintf("%s is refused (%s)", p, e.Reason)
}

// subject is what the sentence is about: Path, or what failed on the way
// to it, placed so that the sentence goes on with "is …".
func (e *RefusedError) subject() string {
	p, a := e.Path, e.At
	kind := "directory"
	if e.AtLink {
		kind = "symbolic link"
	}
	switch {
	case a == "":
		return p
	case e.AtTarget && e.Target != "" && e.Target != a && filepath.IsAbs(e.Target):
		// As the link says it, and as the daemon found it (trial AL:
		// /proc/self/environ named by the daemon's own pid).
		return fmt.Sprintf("%s is a symbolic link to %s (%s, as the daemon follows it), which", p, e.Target, a)
	case e.AtTarget:
		return fmt.Sprintf("%s is a symbolic link to %s, which", p, a)
	case e.Target != "":
		return fmt.Sprintf("%s is a symbolic link to %s, and the %s %s on the way to it", p, e.Target, kind, a)
	case e.Dir:
		return fmt.Sprintf("%s, a %s above the jobs directory %s,", a, kind, p)
	}
	return fmt.Sprintf("%s, a %s above %s,", a, kind, p)
}

// fixes is the path the fixing command changes: what failed.
func (e *RefusedError) fixes() string {
	if e.At != "" {
		return e.At
	}
	return e.Path
}

// resolved names the link's target for Private: At when it is the target,
// else the link's own text.
func (e *RefusedError) resolved() string {
	if e.AtTarget {
		return e.At
	}
	return e.Target
}

// refuses says that berth refuses Path, and why a directory above it
// matters when that is what failed: its owner, or whoever may write to it,
// can rename what it holds and so put something else in Path's place.
func (e *RefusedError) refuses() string {
	switch {
	case e.At == "" || e.Target != "":
		return "berth refuses it"
	case e.Dir:
		return "whoever can rename what it holds could swap in another jobs directory, so berth refuses it"
	}
	return "whoever can rename what it holds could swap in another file, so berth refuses it"
}

// permString renders a mode's permission bits as chmod takes them: "0640".
func permString(m fs.FileMode) string {
	return fmt.Sprintf("%04o", uint32(m.Perm()))
}

// chownTo names the owner that would make a NotOwned file acceptable: root
// when the daemon runs as root, else the daemon's own user (who can then
// also edit it).
func (e *RefusedError) chownTo() string {
	switch {
	case e.PersonUID != 0 && e.Person != "":
		return e.Person
	case e.PersonUID != 0:
		return strconv.Itoa(e.PersonUID)
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

// formatSize renders a file's size next to the limit it passes: in bytes
// while that is short enough to read and the difference from the limit
// could hide in a rounded figure; else in the largest binary unit, with
// one decimal ("2.0 GiB").
func formatSize(n, limit int64) string {
	if n < 10<<20 || n < 2*limit {
		return strconv.FormatInt(n, 10) + " bytes"
	}
	units := []string{"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"}
	u, v := -1, float64(n)
	for v >= 1024 && u < len(units)-1 {
		v /= 1024
		u++
	}
	// Truncated, not rounded: never shown as more than it is.
	return strconv.FormatFloat(math.Floor(v*10)/10, 'f', 1, 64) + " " + units[u]
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
