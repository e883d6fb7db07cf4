package watch

import (
	"io/fs"
)

// strictModes is the ownership rule for job files and the jobs directory,
// the one sshd (StrictModes) and cron apply to what they are about to
// trust: whoever can write a job file can make the daemon run anything, as
// any user, so only root and the daemon's own user may.
//
//   - the owner is root or the daemon's user;
//   - others may not write (o+w);
//   - the group may write only if it is root's group, or the owner's
//     private group with nobody else in it, so that a repository cloned
//     under umask 002 still works for a person who runs berth as themselves.
//
// It caches lookups for one scan only, so an edit to /etc/group shows at the
// next scan.
type strictModes struct {
	daemonUID  int
	daemonUser string
	accounts   Accounts

	users  map[int]userAnswer
	groups map[int]groupAnswer
}

type userAnswer struct {
	name string
	err  error
}

type groupAnswer struct {
	name    string
	members []string
	err     error
}

func newStrictModes(daemonUID int, accounts Accounts) *strictModes {
	if accounts == nil {
		accounts = SystemAccounts{}
	}
	m := &strictModes{daemonUID: daemonUID, accounts: accounts}
	if name, err := accounts.UserName(daemonUID); err == nil {
		m.daemonUser = name
	}
	m.forget()
	return m
}

// forget drops the cached answers; the scanner calls it at the start of
// each scan.
func (m *strictModes) forget() {
	m.users = make(map[int]userAnswer)
	m.groups = make(map[int]groupAnswer)
}

func (m *strictModes) user(uid int) userAnswer {
	a, ok := m.users[uid]
	if !ok {
		a.name, a.err = m.accounts.UserName(uid)
		m.users[uid] = a
	}
	return a
}

func (m *strictModes) group(gid int) groupAnswer {
	a, ok := m.groups[gid]
	if !ok {
		a.name, a.members, a.err = m.accounts.Group(gid)
		m.groups[gid] = a
	}
	return a
}

// check applies the rule to a file or directory with this owner and mode.
// It returns nil when it may be read, else a refusal whose Path the caller
// fills in (so that a scan builds paths only for what it reports). The first broken condition is
// the one reported: ownership before mode, because chmod cannot fix a file
// that the wrong person owns.
func (m *strictModes) check(dir bool, uid, gid int, mode fs.FileMode) *RefusedError {
	refuse := func(r Reason) *RefusedError {
		return &RefusedError{Dir: dir, Reason: r, UID: uid, GID: gid, Mode: mode,
			DaemonUID: m.daemonUID, DaemonUser: m.daemonUser}
	}
	perm := mode.Perm()
	switch {
	case uid != 0 && uid != m.daemonUID:
		e := refuse(NotOwned)
		e.Owner = m.user(uid).name
		return e
	case perm&0o002 != 0:
		return refuse(WritableByOthers)
	case perm&0o020 == 0 || gid == 0:
		return nil
	}

	// Group-writable, and the group is not root's: accept only the owner's
	// private group, with nobody else in it.
	owner := m.user(uid)
	g := m.group(gid)
	var others []string
	for _, member := range g.members {
		if member != owner.name || owner.err != nil {
			others = append(others, member)
		}
	}
	if g.err == nil && owner.err == nil && g.name == owner.name && len(others) == 0 {
		return nil
	}
	e := refuse(WritableByGroup)
	e.Owner, e.Group = owner.name, g.name
	e.OtherMembers = others
	e.GroupUnlisted = g.err != nil
	return e
}
