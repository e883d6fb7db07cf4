package supervisor

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"

	"golang.org/x/sys/unix"

	"github.com/berthd/berth/supervisor/watch"
)

// The people who share the machine declare jobs of their own: each member
// of the daemon's group (Config.Group) has a job directory under
// Config.UserJobs, DIR/USER, which the daemon makes (theirs, mode 0700,
// under a parent that must stay root's). A file there declares that
// person's jobs: named OWNER/NAME, run as them, evaluated as them
// (luaapi.Options.Owner has the rules). The administrators' directory,
// Config.JobsDir, keeps every power.

// person is one member of the group, with their job directory.
type person struct {
	name     string
	uid, gid int
	dir      string
	scanner  *watch.Scanner
}

// DefaultGroup is the group whose members may use the daemon, and declare
// jobs of their own; DefaultAdminGroup's members have root's rights over
// every job.
const (
	DefaultGroup      = "berth"
	DefaultAdminGroup = "berth-admin"
)

func (d *Daemon) group() string {
	if d.cfg.Group != "" {
		return d.cfg.Group
	}
	return DefaultGroup
}

// ownerNotRead is why a job of owner's is declared no more where it is
// that their files are not read: they left the group, or the daemon reads
// no one's; "" for an administrators' job, or where their files are read.
func (d *Daemon) ownerNotRead(owner string) string {
	switch {
	case owner == "" || d.people[owner] != nil:
		return ""
	case d.cfg.UserJobs == "":
		return `the daemon reads no person's job files (--user-jobs "")`
	}
	return "its owner left the group " + d.group()
}

// account is the name of the user the daemon runs as, "" where it has
// none.
func (d *Daemon) account() string {
	if u, err := user.LookupId(strconv.Itoa(os.Getuid())); err == nil {
		return u.Username
	}
	return ""
}

func (d *Daemon) adminGroup() string {
	if d.cfg.AdminGroup != "" {
		return d.cfg.AdminGroup
	}
	return DefaultAdminGroup
}

// members lists the people of the group: its listed members and those
// whose primary group it is, less root and the daemon's own user (their
// jobs are the administrators'). No group, no people.
func (d *Daemon) members() ([]string, error) {
	g, err := user.LookupGroup(d.group())
	if err != nil {
		var unknown user.UnknownGroupError
		if errors.As(err, &unknown) {
			return nil, nil
		}
		return nil, err
	}
	gid, _ := strconv.Atoi(g.Gid)
	_, names, err := watch.SystemAccounts{}.Group(gid)
	if err != nil {
		return nil, err
	}
	slices.Sort(names)
	return slices.Compact(names), nil
}

// refreshPeople brings the set of people up to date with the group, makes
// each newcomer's job directory, and has the watcher watch them all. Runs
// on the loop, before each scan. Someone who left the group has no
// directory watched any more: gone are their directories, whose files the
// scan then reports removed. An error (the group or a member that cannot
// be looked up now) keeps everyone as they were: the reload then counts as
// one that could not scan, which stops nothing.
func (d *Daemon) refreshPeople() (gone []string, err error) {
	if d.cfg.UserJobs == "" {
		return nil, nil
	}
	names, err := d.members()
	if err != nil {
		return nil, fmt.Errorf("list the members of the group %s: %w", d.group(), err)
	}
	if len(names) > 0 {
		if err := d.spoolReady(); err != nil {
			return nil, err
		}
	}
	now := make(map[string]*person, len(names))
	remade := false
	for _, name := range names {
		if p, ok := d.people[name]; ok {
			now[name] = p
			// Removed, their directory is made again, as at first: it is
			// theirs to write into, and berth submit writes there.
			if _, err := os.Lstat(p.dir); errors.Is(err, fs.ErrNotExist) {
				if err := makePersonDir(p.dir, p.uid, p.gid); err != nil && !errors.Is(err, fs.ErrExist) {
					return nil, fmt.Errorf("give %s a job directory again: %w", name, err)
				}
				d.log.Warn("made a person's job directory again: it was removed; the jobs of their files not back in it once it has settled are removed",
					"user", name, "dir", p.dir, "settle_ms", dirSettle.Milliseconds())
				remade = true
				// As a directory back (a restore, a remount of the
				// spool), it settles before its files are taken to be gone.
				d.dirsBack[p.dir] = d.now()
			}
			continue
		}
		if !validUserName(name) {
			d.log.Warn("a member of the group has a name berth cannot make a job directory of: skipped", "user", name, "group", d.group())
			continue
		}
		p, err := d.newPerson(name)
		if err != nil {
			return nil, fmt.Errorf("give %s a job directory: %w", name, err)
		}
		if p != nil {
			d.log.Info("watching a person's job directory", "user", name, "dir", p.dir)
			now[name] = p
		}
	}
	changed := remade || len(now) != len(d.people)
	for name, p := range d.people {
		if _, still := now[name]; !still {
			d.log.Info("no longer a member of the group: their jobs are removed", "user", name, "group", d.group())
			gone = append(gone, p.dir)
			changed = true
		}
	}
	d.people = now
	if changed && d.watcher != nil {
		dirs := make([]string, 0, len(now))
		for _, p := range now {
			dirs = append(dirs, p.dir)
		}
		slices.Sort(dirs)
		d.watcher.SetDirs(dirs)
	}
	return gone, nil
}

// validUserName is a login name that is also a path element and the
// first part of a job name: what useradd's default NAME_REGEX allows.
func validUserName(name string) bool {
	if name == "" || len(name) > 32 {
		return false
	}
	for i, r := range name {
		switch {
		case r >= 'a' && r <= 'z', r == '_':
		case i > 0 && (r >= '0' && r <= '9' || r == '-' || r == '.'):
		default:
			return false
		}
	}
	return true
}

// spoolReady makes the people's directory if it is not there, and refuses
// one that is not fit to hold theirs: it must be a directory (not a link)
// that only root or the daemon's user may write. (The scanner then checks
// every directory above each person's, as it checks the administrators'.)
func (d *Daemon) spoolReady() error {
	if err := os.MkdirAll(d.cfg.UserJobs, 0o755); err != nil {
		return fmt.Errorf("create the people's job directories: %w", err)
	}
	var st unix.Stat_t
	if err := unix.Lstat(d.cfg.UserJobs, &st); err != nil {
		return fmt.Errorf("the people's job directories: %w", err)
	}
	switch {
	case st.Mode&unix.S_IFMT != unix.S_IFDIR:
		return fmt.Errorf("%s is not a directory: the people's job directories must be in one, root's, mode 0755", d.cfg.UserJobs)
	case !rootOrDaemon(st.Uid), st.Mode&0o022 != 0:
		return fmt.Errorf("%s must be root's and writable by root alone, so that nobody can swap a person's directory (sudo chown root: %s; sudo chmod 755 %s)",
			d.cfg.UserJobs, d.cfg.UserJobs, d.cfg.UserJobs)
	}
	return nil
}

// newPerson looks name up and makes their job directory if there is none;
// nil for root and the daemon's own user.
func (d *Daemon) newPerson(name string) (*person, error) {
	u, err := user.Lookup(name)
	if err != nil {
		return nil, err
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	if uid == 0 || uid == os.Getuid() {
		return nil, nil
	}
	dir := filepath.Join(d.cfg.UserJobs, name)
	// Made once, then theirs: a directory that is there already is left as
	// it is, and the scanner refuses it if it is not fit (not theirs, open
	// to others), saying how to fix it.
	if err := makePersonDir(dir, uid, gid); err != nil && !errors.Is(err, fs.ErrExist) {
		return nil, err
	}
	return &person{name: name, uid: uid, gid: gid, dir: dir,
		scanner: watch.NewScanner(dir, watch.ScanOptions{DaemonUID: os.Getuid(), Owner: uid,
			MaxFiles: personMaxFiles, MaxTotalBytes: personMaxFileBytes})}, nil
}

// personMaxFiles and personMaxFileBytes bound what the daemon reads of
// one person's job directory, its files in name order: it holds what it
// reads while it evaluates it, and keeps a copy of each file in force in
// the state directory. A person's 2 500 files of 1 MiB of comments,
// declaring nothing, took a daemon to 3.8 GB.
var (
	personMaxFiles           = 1000
	personMaxFileBytes int64 = 16 << 20
)

// makePersonDir makes dir, theirs and mode 0700, in one step: it is made
// under a temporary name beside it, given away through a descriptor of it
// (never by path: no link put in its place meanwhile gets anything else
// chowned), then renamed into place unless something is there by then. A
// daemon killed on the way leaves the temporary directory, which the next
// try removes, never a person's directory that is root's: the scanner
// would refuse that one until an administrator chowned it. fs.ErrExist
// where dir is there already.
//
// The temporary name starts with a dot, which no login name does
// (validUserName), in a parent that only root may write (spoolReady).
func makePersonDir(dir string, uid, gid int) error {
	if _, err := os.Lstat(dir); err == nil {
		return &os.PathError{Op: "mkdir", Path: dir, Err: fs.ErrExist}
	}
	temp := filepath.Join(filepath.Dir(dir), ".new-"+filepath.Base(dir))
	if err := os.RemoveAll(temp); err != nil {
		return err
	}
	if err := os.Mkdir(temp, 0o700); err != nil {
		return err
	}
	given := func() error {
		fd, err := unix.Open(temp, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			return &os.PathError{Op: "open", Path: temp, Err: err}
		}
		defer unix.Close(fd)
		if err := unix.Fchown(fd, uid, gid); err != nil {
			return &os.PathError{Op: "chown", Path: temp, Err: err}
		}
		if err := unix.Fchmod(fd, 0o700); err != nil {
			return &os.PathError{Op: "chmod", Path: temp, Err: err}
		}
		return nil
	}()
	if given == nil {
		given = renameNoReplace(temp, dir)
	}
	if given != nil {
		os.RemoveAll(temp)
	}
	return given
}

// renameNoReplace renames from to to unless to is there (fs.ErrExist). On
// a file system without RENAME_NOREPLACE it renames as rename(2) does,
// which for a directory replaces only an empty one.
func renameNoReplace(from, to string) error {
	err := unix.Renameat2(unix.AT_FDCWD, from, unix.AT_FDCWD, to, unix.RENAME_NOREPLACE)
	if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOSYS) {
		return os.Rename(from, to)
	}
	if err != nil {
		return &os.LinkError{Op: "rename", Old: from, New: to, Err: err}
	}
	return nil
}

// peopleScan is what one scan found in the people's directories, besides
// the administrators' scan.
type peopleScan struct {
	// dirs are the people's directories scanned.
	dirs map[string]bool
	// refused holds each person's directory the scanner refused, with why.
	refused map[string]error
}

// holds reports whether path is in a person's directory.
func (ps peopleScan) holds(path string) bool { return ps.dirs[filepath.Dir(path)] }

// scan scans the administrators' directory and every person's, as one
// Scan: each path is under its own directory, so they do not meet. A
// person's refused directory is in people.refused, not in DirRefused
// (which is the administrators'). gone are the directories of those who
// left the group: every file the daemon holds from them is removed.
func (d *Daemon) scan(gone []string) (watch.Scan, peopleScan, error) {
	scan, err := d.scanner.Scan()
	ps := peopleScan{dirs: map[string]bool{}, refused: map[string]error{}}
	if len(d.people) == 0 && len(gone) == 0 {
		return scan, ps, err
	}
	if scan.Changed == nil {
		scan.Changed = map[string][]byte{}
	}
	if scan.Refused == nil {
		scan.Refused = map[string]error{}
	}
	if scan.Writing == nil {
		scan.Writing = map[string]error{}
	}
	for _, name := range slices.Sorted(maps.Keys(d.people)) {
		p := d.people[name]
		ps.dirs[p.dir] = true
		s, perr := p.scanner.Scan()
		if perr != nil {
			if err == nil {
				err = fmt.Errorf("%s's job directory: %w", name, perr)
			}
			continue
		}
		maps.Copy(scan.Changed, s.Changed)
		maps.Copy(scan.Refused, s.Refused)
		maps.Copy(scan.Writing, s.Writing)
		scan.Removed = append(scan.Removed, s.Removed...)
		if s.DirRefused != nil {
			ps.refused[p.dir] = s.DirRefused
		}
	}
	for _, dir := range gone {
		for path := range d.latest {
			if filepath.Dir(path) == dir {
				scan.Removed = append(scan.Removed, path)
			}
		}
		for path := range d.refused {
			if filepath.Dir(path) == dir {
				scan.Removed = append(scan.Removed, path)
			}
		}
	}
	slices.Sort(scan.Removed)
	scan.Removed = slices.Compact(scan.Removed)
	return scan, ps, err
}

// personOf is the person whose directory holds path, nil for the
// administrators' files.
func (d *Daemon) personOf(path string) *person {
	dir := filepath.Dir(path)
	for _, p := range d.people {
		if p.dir == dir {
			return p
		}
	}
	return nil
}

// forgetScanned makes the next scan read path again (watch.Scanner.Forget),
// in whichever directory it is.
func (d *Daemon) forgetScanned(path string) {
	if p := d.personOf(path); p != nil {
		p.scanner.Forget(path)
		return
	}
	d.scanner.Forget(path)
}
