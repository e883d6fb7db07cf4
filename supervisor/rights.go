package supervisor

import (
	"net/http"
	"os"
	"os/user"
	"slices"
	"strconv"
	"strings"

	"github.com/berthd/berth/supervisor/ctlsock"
	"github.com/berthd/berth/supervisor/watch"
)

// Everyone the daemon lets in (authorize) sees the machine and the queue:
// names, owners, states, grants, why a job waits. A job's own business —
// starting, stopping or restarting it, its environment, its output — is
// its owner's, root's, the daemon's own user's, and the admin group's
// (Config.AdminGroup). An administrator's job has no owner: only those
// with every right touch it.

// caller is who makes a control request, as far as rights go.
type caller struct {
	uid  uint32
	name string // their login name; "" when it cannot be found
	// admin: root, the daemon's own user, or a member of the admin group.
	admin bool
}

// callerOf is the caller of r; authorize has let it in, so its
// credentials were read.
func (d *Daemon) callerOf(r *http.Request) caller {
	cred, ok := r.Context().Value(peerKey{}).(ctlsock.Peer)
	if !ok {
		return caller{uid: ^uint32(0)}
	}
	c := caller{uid: cred.Uid, name: nameOf(cred.Uid)}
	c.admin = rootOrDaemon(cred.Uid) || d.inAdminGroup(cred, c.name)
	return c
}

// nameOf is the login name of uid; "" when it cannot be found.
func nameOf(uid uint32) string {
	if u, err := user.LookupId(strconv.Itoa(int(uid))); err == nil {
		return u.Username
	}
	return ""
}

// inAdminGroup reports whether the caller is in the admin group: by the
// groups its process had as it connected (as the kernel checks them), or
// by the group's members as listed (someone added since they logged in).
func (d *Daemon) inAdminGroup(cred ctlsock.Peer, name string) bool {
	g, err := user.LookupGroup(d.adminGroup())
	if err != nil {
		return false
	}
	gid, err := strconv.Atoi(g.Gid)
	if err != nil {
		return false
	}
	if groupsOf(cred)[uint32(gid)] {
		return true
	}
	_, members, err := watch.SystemAccounts{}.Group(gid)
	return err == nil && name != "" && slices.Contains(members, name)
}

// rootOrDaemon says whether uid is root's or the daemon's own user's: the
// administrators' side, which no person's bound or right applies to.
func rootOrDaemon(uid uint32) bool { return uid == 0 || int(uid) == os.Getuid() }

// groupsOf is the peer's groups as the kernel checks them: those its
// process had as it connected, never read from a pid since reused (trial
// AL); where the kernel cannot say (before Linux 4.13), those its account
// lists, which may hold a group the process had dropped.
func groupsOf(p ctlsock.Peer) map[uint32]bool {
	gids := map[uint32]bool{p.Gid: true}
	groups := p.Groups
	if !p.GroupsKnown {
		groups = accountGroups(p.Uid)
	}
	for _, g := range groups {
		gids[g] = true
	}
	return gids
}

// accountGroups are the groups the account database lists for uid.
func accountGroups(uid uint32) []uint32 {
	u, err := user.LookupId(strconv.Itoa(int(uid)))
	if err != nil {
		return nil
	}
	ids, err := u.GroupIds()
	if err != nil {
		return nil
	}
	var out []uint32
	for _, id := range ids {
		if g, err := strconv.ParseUint(id, 10, 32); err == nil {
			out = append(out, uint32(g))
		}
	}
	return out
}

// mayControl reports whether the caller may start, stop or restart the
// job of owner ("" for an administrator's), see its environment and read
// its output.
func (c caller) mayControl(owner string) bool {
	return c.admin || owner != "" && c.name == owner
}

// resolve finds the job a caller names: a person may call their own job
// by its short name (train for alice/train), which then comes first;
// otherwise the name is the job's whole name. A name that means an array
// (their own first) is no job.
func (d *Daemon) resolve(c caller, name string) (*job, bool) {
	j, _ := d.lookup(c, name)
	return j, j != nil
}

// resolveArray is resolve for an array.
func (d *Daemon) resolveArray(c caller, name string) (*array, bool) {
	_, a := d.lookup(c, name)
	return a, a != nil
}

// lookup finds the job or the array (at most one of them) a caller names:
// a bare name is their own of that name first, job or array, then the
// whole name.
func (d *Daemon) lookup(c caller, name string) (*job, *array) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, n := range c.meant(name) {
		if j, ok := d.jobs[n]; ok {
			return j, nil
		}
		if a, ok := d.arrays[n]; ok {
			return nil, a
		}
	}
	return nil, nil
}

// meant is the names a caller's name may mean, in the order looked up: a
// person's bare name is their own first.
func (c caller) meant(name string) []string {
	if c.name != "" && !strings.Contains(name, "/") {
		return []string{c.name + "/" + name, name}
	}
	return []string{name}
}

// lookupRemoved finds the job a caller names among those no job file
// declares any more whose run is still being stopped: status shows them
// until that run has ended, so show, stop and start know them too.
func (d *Daemon) lookupRemoved(c caller, name string) *job {
	d.mu.Lock()
	var found *job
	for _, n := range c.meant(name) {
		if found = d.removedLocked(n); found != nil {
			break
		}
	}
	d.mu.Unlock()
	if found == nil || !Holds(found.view().State) {
		return nil
	}
	return found
}

// removedLocked is the job of that name no job file declares any more,
// neither as a job nor as an array, whose goroutine may still be stopping
// its run, or nil. (An array's index is its array's, gone with it.) d.mu
// is held.
func (d *Daemon) removedLocked(name string) *job {
	j := d.draining[name]
	if j == nil || j.arr != nil || d.jobs[name] != nil || d.arrays[name] != nil {
		return nil
	}
	return j
}

// resolveName is resolve for a job or an array that may be gone: the
// name the caller means, for its history. A bare name is the caller's own
// first, declared or with runs on record, then the whole name.
func (d *Daemon) resolveName(c caller, name string) string {
	if c.name != "" && name != "" && !strings.Contains(name, "/") {
		own := c.name + "/" + name
		if j, a := d.lookup(caller{}, own); j != nil || a != nil || d.hasRuns(own) {
			return own
		}
	}
	if j, a := d.lookup(c, name); j != nil {
		return j.name
	} else if a != nil {
		return a.name
	}
	return name
}

// hasRuns reports whether the record holds a run of the job name, or of an
// index of an array of that name.
func (d *Daemon) hasRuns(name string) bool {
	if runs, err := d.store.Runs(name, 1); err == nil && len(runs) > 0 {
		return true
	}
	runs, err := d.store.RunsOfPrefix(name+"[", 1)
	return err == nil && len(runs) > 0
}
