package supervisor

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/user"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/berthd/berth/supervisor/watch"
)

// Who a job runs as. DESIGN: `user = "ml"` runs it as ml; `group` is
// optional. The rules, as this file applies them:
//
//   - Neither: the job runs as the daemon itself, IDs and groups unchanged.
//   - user: the user's uid, primary gid and supplementary groups, as login
//     would set them; group, when given too, replaces the primary gid. The
//     job's environment gets the user's HOME, USER, LOGNAME and SHELL.
//   - group alone: the daemon's own uid — never uid 0 by omission — with
//     that group as its only group. A root daemon's supplementary groups are
//     dropped, not passed on: a job given a group gets that group, not root's.
//   - Only a daemon running as root can change IDs. A daemon running as a
//     person can run a job as that same person (user = its own name, group
//     = its own primary group), which changes nothing; any other user or
//     group is refused with a *NeedsRootError when the file is loaded,
//     rather than failing at every start with "operation not permitted".

// Credentials are the IDs a job's process runs as.
type Credentials struct {
	UID, GID uint32
	// Groups are the supplementary groups of the user, as login would set them.
	Groups []uint32
	// Login holds HOME, USER, LOGNAME and SHELL of the user, from its passwd
	// entry; nil without a user.
	Login map[string]string
}

// UnknownUserError is returned when a job names a user or group that does
// not exist on this machine.
type UnknownUserError struct {
	Kind string // "user" or "group"
	Name string
}

func (e *UnknownUserError) Error() string {
	lister := "getent passwd"
	if e.Kind == "group" {
		lister = "getent group"
	}
	if e.Name != "" && strings.Trim(e.Name, "0123456789") == "" {
		// systemd's User= takes a number too; berth's names the account.
		var err error
		if e.Kind == "group" {
			_, err = user.LookupGroupId(e.Name)
		} else {
			_, err = user.LookupId(e.Name)
		}
		if err != nil {
			return fmt.Sprintf("%s %q: %s takes a name, not a number, and no %s has that id either (%s lists them)", e.Kind, e.Name, e.Kind, e.Kind, lister)
		}
		return fmt.Sprintf("%s %q: %s takes a name, not a number (%s %s shows the name of that id)", e.Kind, e.Name, e.Kind, lister, e.Name)
	}
	return fmt.Sprintf("%s %q does not exist on this machine (%s lists them)", e.Kind, e.Name, lister)
}

// NeedsRootError is returned when a job names a user or group other than
// the daemon's own and the daemon, not running as root, cannot switch to it.
type NeedsRootError struct {
	Kind     string // "user" or "group"
	Name     string
	UID, GID uint32 // the daemon's
}

func (e *NeedsRootError) Error() string {
	if e.Kind == "group" {
		return fmt.Sprintf("group %q: this berth daemon runs as uid %d, group %d, and only a daemon running as root may run a job in another group (leave group out, or run berth as root: sudo systemctl start berth)",
			e.Name, e.UID, e.GID)
	}
	return fmt.Sprintf("user %q: this berth daemon runs as uid %d, and only a daemon running as root may run a job as another user (leave user out to run it as uid %d, or run berth as root: sudo systemctl start berth)",
		e.Name, e.UID, e.UID)
}

// LookupCredentials resolves a job's user and group to IDs: with a user and
// no group, the user's primary group; with a group and no user, the calling
// process's own uid in that group alone. It says whether the names exist,
// not whether this process may switch to them (jobCredentials does).
func LookupCredentials(userName, groupName string) (Credentials, error) {
	c := Credentials{UID: uint32(os.Getuid()), GID: uint32(os.Getgid()), Groups: []uint32{}}
	if userName != "" {
		u, err := user.Lookup(userName)
		if err != nil {
			return Credentials{}, lookupError("user", userName, err)
		}
		uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
		gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
		if err := errors.Join(err1, err2); err != nil {
			return Credentials{}, fmt.Errorf("user %q has IDs that are not numbers: %w", userName, err)
		}
		c.UID, c.GID = uint32(uid), uint32(gid)
		if ids, err := u.GroupIds(); err == nil {
			for _, id := range ids {
				if n, err := strconv.ParseUint(id, 10, 32); err == nil {
					c.Groups = append(c.Groups, uint32(n))
				}
			}
		}
		c.Login = loginEnv(u)
	}
	if groupName != "" {
		g, err := user.LookupGroup(groupName)
		if err != nil {
			return Credentials{}, lookupError("group", groupName, err)
		}
		gid, err := strconv.ParseUint(g.Gid, 10, 32)
		if err != nil {
			return Credentials{}, fmt.Errorf("group %q has an ID that is not a number: %w", groupName, err)
		}
		if userName != "" {
			c.Groups = withPrimary(c.Groups, userName, c.GID, uint32(gid))
		}
		c.GID = uint32(gid)
	}
	return c, nil
}

// withPrimary is the supplementary groups of userName, groups with its own
// primary group own among them, where group replaces that primary group:
// what login and systemd's User= with Group= give (getgrouplist of the
// user and group): own is left out unless /etc/group lists the user in it,
// and group is in.
func withPrimary(groups []uint32, userName string, own, group uint32) []uint32 {
	if own != group {
		if members, err := (watch.SystemAccounts{}).Listed(int(own)); err != nil || !slices.Contains(members, userName) {
			groups = slices.DeleteFunc(groups, func(g uint32) bool { return g == own })
		}
	}
	if !slices.Contains(groups, group) {
		groups = append([]uint32{group}, groups...)
	}
	return groups
}

// identity is who a process runs as.
type identity struct{ uid, gid uint32 }

func processIdentity() identity {
	return identity{uid: uint32(os.Geteuid()), gid: uint32(os.Getegid())}
}

// jobCredentials is who a run of a job with these user and group fields
// runs as, when this daemon starts it: the credential to start it with
// (nil: as the daemon, unchanged) and the login variables of its
// environment. A job this daemon cannot run as asked is an error.
func jobCredentials(userName, groupName string) (*syscall.Credential, map[string]string, error) {
	return credentialsAs(processIdentity(), userName, groupName)
}

// CredentialsErrorAs is why a daemon running as uid and gid cannot run a
// job with these user and group fields (nil where it can): berth check
// holds files to the daemon that answers.
func CredentialsErrorAs(uid, gid uint32, userName, groupName string) error {
	_, _, err := credentialsAs(identity{uid: uid, gid: gid}, userName, groupName)
	return err
}

func credentialsAs(self identity, userName, groupName string) (*syscall.Credential, map[string]string, error) {
	if userName == "" && groupName == "" {
		return nil, nil, nil
	}
	c, err := LookupCredentials(userName, groupName)
	if err != nil {
		return nil, nil, err
	}
	if userName == "" {
		c.UID = self.uid
	}
	if self.uid == 0 {
		return &syscall.Credential{Uid: c.UID, Gid: c.GID, Groups: c.Groups}, c.Login, nil
	}
	switch {
	case c.UID != self.uid:
		return nil, nil, &NeedsRootError{Kind: "user", Name: userName, UID: self.uid, GID: self.gid}
	case c.GID != self.gid && groupName != "":
		return nil, nil, &NeedsRootError{Kind: "group", Name: groupName, UID: self.uid, GID: self.gid}
	case c.GID != self.gid:
		// The user is the daemon's, but its primary group is not the
		// daemon's (started by sg or newgrp): changing it needs root too.
		return nil, nil, &NeedsRootError{Kind: "user", Name: userName, UID: self.uid, GID: self.gid}
	}
	// The daemon already runs as asked; switching would need a privilege
	// (setgroups) it does not have, and would change nothing.
	return nil, c.Login, nil
}

// loginEnv is what login sets for u: a job run as someone has their home
// and shell, not the daemon's.
func loginEnv(u *user.User) map[string]string {
	shell := "/bin/sh" // passwd(5): an empty shell field means /bin/sh
	if f, err := os.Open(passwdFile); err == nil {
		if s, ok := passwdShell(f, u.Username); ok && s != "" {
			shell = s
		}
		f.Close()
	}
	return map[string]string{"HOME": u.HomeDir, "USER": u.Username, "LOGNAME": u.Username, "SHELL": shell}
}

// passwdFile is where login shells are read. os/user has no shell; with the
// static build (CGO_ENABLED=0) it reads this file too, so the two agree. A
// user known only through NSS (LDAP) gets /bin/sh.
var passwdFile = "/etc/passwd"

// passwdShell reads a passwd file, lines of name:password:uid:gid:gecos:
// home:shell, for name's login shell. found is false where name has no
// entry. Lines that are not seven fields (NIS "+" lines, garbage) are
// skipped; a line too long to be an entry ends the search.
func passwdShell(r io.Reader, name string) (shell string, found bool) {
	if name == "" || strings.ContainsAny(name, ":\n") {
		return "", false
	}
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		fields := strings.Split(sc.Text(), ":")
		if len(fields) == 7 && fields[0] == name {
			return strings.TrimSpace(fields[6]), true
		}
	}
	return "", false
}

func lookupError(kind, name string, err error) error {
	var uu user.UnknownUserError
	var ug user.UnknownGroupError
	if errors.As(err, &uu) || errors.As(err, &ug) {
		return &UnknownUserError{Kind: kind, Name: name}
	}
	return fmt.Errorf("look up %s %q: %w", kind, name, err)
}
