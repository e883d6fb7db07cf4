package watch

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"syscall"
	"testing"

	"github.com/berthd/berth/supervisor/testkit"
)

// TestMessagesGolden pins every sentence a person reads from this package:
// one refusal of each reason and variant.
func TestMessagesGolden(t *testing.T) {
	const f = "jobs.d/x.lua"
	perm := &fs.PathError{Op: "open", Path: f, Err: syscall.EACCES}
	cases := []*RefusedError{
		{Path: f, Reason: NotOwned, UID: 1001, GID: 1001},
		{Path: f, Reason: NotOwned, UID: 1001, GID: 1001, Owner: "bob"},
		{Path: f, Reason: NotOwned, UID: 1001, GID: 1001, Owner: "bob", DaemonUID: 1000, DaemonUser: "alice"},
		{Path: f, Reason: NotOwned, UID: 1001, GID: 1001, DaemonUID: 1000},
		{Path: "/var/spool/berth/carol/x.lua", Reason: NotOwned, UID: 1001, GID: 1001, Owner: "bob", PersonUID: 1003, Person: "carol"},
		{Path: "/var/spool/berth/carol/x.lua", Reason: NotOwned, UID: 1001, GID: 1001, PersonUID: 1003},
		{Path: "/var/spool/berth/carol/steal.lua", Reason: NotOwned, UID: 1001, GID: 1001, Owner: "bob", PersonUID: 1003, Person: "carol",
			Target: "/var/spool/berth/bob/long.lua", At: "/var/spool/berth/bob"},
		{Path: "jobs.d", Dir: true, Reason: NotOwned, UID: 65534, Owner: "nobody"},
		{Path: f, Reason: WritableByOthers, Mode: 0o666},
		{Path: "jobs.d", Dir: true, Reason: WritableByOthers, Mode: fs.ModeDir | 0o777},
		{Path: f, Reason: WritableByGroup, GID: 100, Group: "devs", Owner: "alice", OtherMembers: []string{"bob"}},
		{Path: f, Reason: WritableByGroup, GID: 100, Group: "users", Owner: "alice"},
		{Path: f, Reason: WritableByGroup, GID: 0, Group: "root", Owner: "root", OtherMembers: []string{"eve", "operator"}},
		{Path: f, Reason: WritableByGroup, GID: 4242, Owner: "alice", GroupUnlisted: true},
		{Path: f, Reason: WritableByGroup, GID: 5000, Group: "ml", Owner: "alice", GroupUnlisted: true},
		{Path: f, Reason: WritableByACL, ACLWriters: []string{"user deploy (uid 1002)", `group "ops"`}},
		{Path: "jobs.d", Dir: true, Reason: WritableByACL, ACLWriters: []string{"user uid 1003"}},
		{Path: f, Reason: NotRegular, Kind: "directory"},
		{Path: f, Reason: NotRegular, Kind: "named pipe"},
		{Path: f, Reason: TooBig, Size: 1048577, MaxBytes: 1 << 20},
		{Path: f, Reason: TooBig, Size: 3000, MaxBytes: 2500},
		{Path: f, Reason: TooBig, Size: 2<<30 + 123, MaxBytes: 1 << 20},
		{Path: f, Reason: Unreadable, Err: perm},
		{Path: f, Named: true, Reason: Unreadable, Err: perm},
		{Path: "jobs.d", Dir: true, Reason: Unreadable, Err: perm},
		{Path: f, Reason: Unreadable, Err: &fs.PathError{Op: "read", Path: f, Err: syscall.EIO}},
		{Path: f, Reason: DanglingLink, Target: "..data/x.lua"},
		{Path: f, Reason: Writing},
		{Path: f, Reason: Writing, Target: "..data/x.lua", At: "/etc/berth/jobs.d/..2026/x.lua", AtTarget: true},
		{Path: "jobs.d", Dir: true, Reason: NotDirectory, Kind: "regular file"},
		{Path: "/etc/berth/jobs.d/train.lua", Dir: true, Reason: NotDirectory, Kind: "regular file"},
		// Something on the way to Path.
		{Path: "/srv/jobs.d", Dir: true, At: "/srv", Reason: NotOwned, UID: 1001, Owner: "bob"},
		{Path: "/srv/jobs.d", Dir: true, At: "/srv", Reason: WritableByOthers, Mode: fs.ModeDir | 0o777},
		{Path: "/srv/jobs.d", Dir: true, At: "/srv", Reason: WritableByGroup, GID: 100, Group: "devs", Owner: "alice", OtherMembers: []string{"bob"}},
		{Path: "/srv/jobs.d", Dir: true, At: "/srv", Reason: Unreadable, Err: perm},
		{Path: "/tmp/jobs.d", Dir: true, At: "/tmp/jobs.d-link", AtLink: true, Reason: NotOwned, UID: 65534, Owner: "nobody"},
		{Path: "/tmp/jobs.d", Dir: true, AtLink: true, Reason: NotOwned, UID: 65534, Owner: "nobody"},
		{Path: "/tmp/jobs.d", Dir: true, Target: "/srv/jobs", At: "/srv/jobs", AtTarget: true, Reason: NotOwned, UID: 65534, Owner: "nobody"},
		{Path: "/tmp/jobs.d", Dir: true, Target: "/srv/jobs", At: "/srv/jobs", AtTarget: true, Reason: WritableByOthers, Mode: fs.ModeDir | 0o777},
		{Path: "/var/spool/berth/carol", Dir: true, Target: "/home/bob/jobs", At: "/home/bob/jobs", AtTarget: true, Reason: NotOwned, UID: 1001, Owner: "bob", PersonUID: 1003, Person: "carol"},
		{Path: "shared/x.lua", Named: true, At: "/srv/shared", Reason: WritableByOthers, Mode: fs.ModeDir | 0o777},
		{Path: "/dev/zero", Named: true, Reason: NotRegular, Kind: "character device"},
		// A link and its target.
		{Path: f, AtLink: true, Reason: NotOwned, UID: 65534, Owner: "nobody"},
		{Path: f, Target: "../shared/x.lua", At: "/srv/shared/x.lua", AtTarget: true, Reason: NotOwned, UID: 1001, Owner: "bob"},
		{Path: f, Target: "../shared/x.lua", At: "/srv/shared/x.lua", AtTarget: true, Reason: WritableByOthers, Mode: 0o666},
		{Path: f, Target: "../shared/x.lua", At: "/srv/shared", Reason: WritableByGroup, GID: 100, Group: "devs", Owner: "alice", OtherMembers: []string{"bob"}},
		{Path: f, Target: "../shared/x.lua", At: "/srv/shared", AtLink: true, Reason: NotOwned, UID: 65534, Owner: "nobody"},
		{Path: f, Target: "/dev/zero", At: "/dev/zero", AtTarget: true, Reason: NotRegular, Kind: "character device"},
		{Path: f, Target: "../big.lua", At: "/srv/big.lua", AtTarget: true, Reason: TooBig, Size: 1048577, MaxBytes: 1 << 20},
		{Path: f, Target: "/home/bob/x.lua", At: "/home/bob/x.lua", AtTarget: true, Reason: Unreadable, Err: perm},
		{Path: f, Target: "/etc/shadow", At: "/etc/shadow", AtTarget: true, Reason: Private, Mode: 0o640},
		{Path: f, Target: "/root/jobs/x.lua", At: "/root", Reason: Private, Mode: fs.ModeDir | 0o700},
		{Path: f, Target: "/proc/1/maps", At: "/proc/1/maps", AtTarget: true, Reason: KernelFile, Kind: "proc"},
		// As the link says it, and as the daemon follows it.
		{Path: f, Target: "/proc/self/environ", At: "/proc/4242/environ", AtTarget: true, Reason: KernelFile, Kind: "proc"},
		{Path: f, Target: "/proc/1/root/etc/hostname", Reason: Unreadable, Err: &fs.PathError{Op: "readlink", Path: "/proc/1/root", Err: fs.ErrPermission}},
		{Path: "/var/spool/berth/alice/z.lua", Named: false, Reason: TooMany, MaxFiles: 1000, MaxBytes: 16 << 20},
		{Path: "jobs.d/\xffx.lua", Reason: NameNotText},
		{Path: f, Reason: 99},
	}
	var b bytes.Buffer
	for _, e := range cases {
		fmt.Fprintf(&b, "%s\t%s\n", e.Reason, e.Error())
	}
	testkit.Golden(t, "testdata/messages.golden", b.Bytes())
}

func TestRefusedErrorUnwrap(t *testing.T) {
	e := &RefusedError{Path: "x.lua", Reason: Unreadable, Err: &fs.PathError{Op: "open", Path: "x.lua", Err: syscall.EACCES}}
	if !errors.Is(e, fs.ErrPermission) {
		t.Error("an Unreadable refusal does not unwrap to its cause")
	}
}
