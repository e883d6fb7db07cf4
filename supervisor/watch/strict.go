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
//   - the group may write only if it is root's group or the owner's
//     private group, and nobody but root and the owner is in it (listed in
//     /etc/group, or with it as primary group in /etc/passwd), so that a
//     repository cloned under umask 002 still works for a person who runs
//     berth as themselves, and a member of group root is not root.
//
// The same rule applies to every directory from / down to the jobs
// directory, and on the way to a link's target (walk.go), since whoever
// may rename what one of them holds can put another directory or file in
// place of the one checked; and every symbolic link on the way must be
// owned by root or the daemon's user. One exception, decided here: a
// sticky directory on the way (/tmp, 1777) may be writable by group and
// others, because there only an entry's owner, the directory's owner and
// root may rename the entry, and the entry's owner is checked next. The
// jobs directory itself gets no such exception: anyone could drop files in
// it, and it would be every reader's job to tell them apart.
//
// It caches lookups for one scan only, so an edit to /etc/group shows at the
// next scan.
type strictModes struct {
	daemonUID  int
	daemonUser string
	accounts   Accounts
	// ownerUID, when not 0, may own the jobs directory and its files as
	// well: a person's own job directory.
	ownerUID int

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

// ownedBy lets uid own the jobs directory and its files besides root and
// the daemon's user (0: nobody more); it returns m.
func (m *strictModes) ownedBy(uid int) *strictModes {
	m.ownerUID = uid
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

// subject is what the rule is applied to. The rule is the same for all;
// only a directory on the way may be sticky instead of unwritable.
type subject uint8

const (
	ruleFile    subject = iota // a job file, or the target of a link to one
	ruleJobsDir                // the jobs directory itself
	// ruleOnTheWay is a directory above the jobs directory, or on the way to
	// a link's target: whoever may rename an entry in it can put another
	// directory or file in its place. A sticky directory that others may
	// write (/tmp) is accepted: there only an entry's owner (who is
	// checked next) and the directory's owner may rename it.
	ruleOnTheWay
	// ruleLinkWay is a directory on the way to a link's target, past the
	// link: as ruleOnTheWay, but in a person's directory (a link of
	// theirs) it may be theirs too, who could re-point the link anyway.
	ruleLinkWay
)

// check applies the rule to a file or directory with this owner and mode.
// It returns nil when it may be read, else a refusal whose Path (and Dir,
// At, Link) the caller fills in, so that a scan builds paths only for what
// it reports. The first broken condition is the one reported: ownership
// before mode, because chmod cannot fix a file that the wrong person owns.
//
// acl is who else its ACL lets write (aclWriters); it matters only where
// the mode's group bits, the ACL's mask, let anyone write.
func (m *strictModes) check(what subject, uid, gid int, mode fs.FileMode, acl []aclWriter) *RefusedError {
	refuse := func(r Reason) *RefusedError {
		return &RefusedError{Reason: r, UID: uid, GID: gid, Mode: mode,
			DaemonUID: m.daemonUID, DaemonUser: m.daemonUser}
	}
	perm := mode.Perm()
	sticky := (what == ruleOnTheWay || what == ruleLinkWay) && mode&fs.ModeSticky != 0
	switch {
	case !m.trusted(uid) && !(what != ruleOnTheWay && m.owns(uid)):
		e := refuse(NotOwned)
		e.Owner = m.user(uid).name
		if what != ruleOnTheWay {
			m.personOf(e)
		}
		return e
	case sticky:
		return nil
	case perm&0o002 != 0:
		return refuse(WritableByOthers)
	case perm&0o020 == 0:
		return nil
	}
	if names := m.untrustedWriters(acl); len(names) > 0 {
		e := refuse(WritableByACL)
		e.ACLWriters = names
		return e
	}

	// Group-writable: accept only root's group or the owner's private
	// group, and either only while nobody but root and the owner is in it.
	// Group root is no exception: whoever is added to it (usermod -aG root)
	// could otherwise rewrite a 0664 root file and run anything as root.
	owner := m.user(uid)
	g := m.group(gid)
	others := m.othersIn(g, owner)
	private := owner.err == nil && g.name == owner.name
	if g.err == nil && (gid == 0 || private) && len(others) == 0 {
		return nil
	}
	e := refuse(WritableByGroup)
	e.Owner, e.Group = owner.name, g.name
	e.OtherMembers = others
	e.GroupUnlisted = g.err != nil
	return e
}

// untrustedWriters names the users and groups of acl that are neither root
// nor the daemon's user: any group named in an ACL may hold anyone.
func (m *strictModes) untrustedWriters(acl []aclWriter) []string {
	var names []string
	for _, w := range acl {
		switch {
		case w.group:
			names = append(names, "group "+groupName(m.group(w.id).name, w.id))
		case !m.trusted(w.id):
			names = append(names, "user "+who(m.user(w.id).name, "uid", w.id))
		}
	}
	return names
}

// othersIn lists, once each and in the order the group gives them, the
// members of g who are neither the owner nor root: those who could write
// what the group may write without being trusted already.
func (m *strictModes) othersIn(g groupAnswer, owner userAnswer) []string {
	trusted := map[string]bool{}
	if owner.err == nil {
		trusted[owner.name] = true
	}
	if root := m.user(0); root.err == nil {
		trusted[root.name] = true
	}
	var others []string
	for _, member := range g.members {
		if !trusted[member] {
			trusted[member] = true // once each
			others = append(others, member)
		}
	}
	return others
}

// trusted reports whether uid may own what the daemon reads: root, or the
// daemon's own user.
func (m *strictModes) trusted(uid int) bool { return uid == 0 || uid == m.daemonUID }

// owns reports whether uid is the person whose directory is read (the
// Owner of ScanOptions): what they own in it, links included, and the
// directories on the way to a link's target that they own, only they can
// change, as they can change their job files themselves.
func (m *strictModes) owns(uid int) bool { return m.ownerUID != 0 && uid == m.ownerUID }

// checkLink applies the rule to a symbolic link that a walk is about to
// follow. A link's own mode means nothing, and only its owner or the
// owner of its directory can replace it; the directory is checked already,
// so the owner is what is left (it matters in a sticky directory, where
// anyone may create a link and then re-point it at will).
func (m *strictModes) checkLink(uid, gid int) *RefusedError {
	if m.trusted(uid) || m.owns(uid) {
		return nil
	}
	e := &RefusedError{Reason: NotOwned, UID: uid, GID: gid, Mode: fs.ModeSymlink | 0o777,
		Owner: m.user(uid).name, DaemonUID: m.daemonUID, DaemonUser: m.daemonUser}
	m.personOf(e)
	return e
}

// personOf names, in a refusal of what the person whose directory this is
// may own, that person: theirs is what it should be.
func (m *strictModes) personOf(e *RefusedError) {
	if m.ownerUID != 0 {
		e.PersonUID, e.Person = m.ownerUID, m.user(m.ownerUID).name
	}
}
