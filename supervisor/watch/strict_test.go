package watch

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// ids picks the owners the table uses. As root the test can chown files to
// made-up IDs; otherwise it uses its own uid and gid, and the fake accounts
// say what that gid is (private, shared, unlisted) case by case.
type ids struct {
	root          bool
	daemon, group int // the daemon's uid and a gid the file can be given
}

func testIDs() ids {
	if os.Getuid() == 0 {
		return ids{root: true, daemon: 4321, group: 4321}
	}
	return ids{daemon: os.Getuid(), group: os.Getgid()}
}

// canOwn reports whether this process can give a file these owners.
func (x ids) canOwn(uid, gid int) bool {
	if x.root {
		return true
	}
	if uid != os.Getuid() {
		return false
	}
	groups, _ := os.Getgroups()
	return gid == os.Getgid() || slices.Contains(groups, gid)
}

func TestStrictModes(t *testing.T) {
	x := testIDs()
	alice := map[int]string{x.daemon: "alice", 0: "root", 65534: "nobody"}
	rootGroup := fakeGroup{name: "root", members: []string{"root"}}
	private := fakeAccounts{users: alice, groups: map[int]fakeGroup{0: rootGroup, x.group: {name: "alice"}}}

	cases := []struct {
		name      string
		uid, gid  int
		mode      os.FileMode
		daemonUID int
		accounts  fakeAccounts
		want      Reason // 0: accepted
		needRoot  bool   // chowns to another user
	}{
		{name: "0644 owned by root", uid: 0, gid: 0, mode: 0o644, daemonUID: x.daemon, accounts: private},
		{name: "0644 owned by the daemon's user", uid: x.daemon, gid: x.group, mode: 0o644, daemonUID: x.daemon, accounts: private},
		{name: "0600 owned by the daemon's user", uid: x.daemon, gid: x.group, mode: 0o600, daemonUID: x.daemon, accounts: private},
		{name: "0666 writable by others", uid: x.daemon, gid: x.group, mode: 0o666, daemonUID: x.daemon, accounts: private, want: WritableByOthers},
		{name: "0646 writable by others only", uid: x.daemon, gid: x.group, mode: 0o646, daemonUID: x.daemon, accounts: private, want: WritableByOthers},
		{name: "0664 group root", uid: x.daemon, gid: 0, mode: 0o664, daemonUID: x.daemon, accounts: private},
		{name: "0664 group root, the owner in it", uid: x.daemon, gid: 0, mode: 0o664, daemonUID: x.daemon,
			accounts: fakeAccounts{users: alice, groups: map[int]fakeGroup{0: {name: "root", members: []string{"root", "alice"}}}}},
		{name: "0664 group root, another member", uid: x.daemon, gid: 0, mode: 0o664, daemonUID: x.daemon,
			accounts: fakeAccounts{users: alice, groups: map[int]fakeGroup{0: {name: "root", members: []string{"root", "eve"}}}},
			want:     WritableByGroup},
		{name: "0664 group root, members cannot be listed", uid: x.daemon, gid: 0, mode: 0o664, daemonUID: x.daemon,
			accounts: fakeAccounts{users: alice, groups: map[int]fakeGroup{0: {name: "root", unlisted: true}}},
			want:     WritableByGroup},
		{name: "0664 the owner's private group, no members", uid: x.daemon, gid: x.group, mode: 0o664, daemonUID: x.daemon, accounts: private},
		{name: "0664 the owner's private group, the owner listed", uid: x.daemon, gid: x.group, mode: 0o664, daemonUID: x.daemon,
			accounts: fakeAccounts{users: alice, groups: map[int]fakeGroup{x.group: {name: "alice", members: []string{"alice"}}}}},
		{name: "0664 the owner's private group, another member", uid: x.daemon, gid: x.group, mode: 0o664, daemonUID: x.daemon,
			accounts: fakeAccounts{users: alice, groups: map[int]fakeGroup{x.group: {name: "alice", members: []string{"alice", "bob"}}}},
			want:     WritableByGroup},
		{name: "0664 a shared group", uid: x.daemon, gid: x.group, mode: 0o664, daemonUID: x.daemon,
			accounts: fakeAccounts{users: alice, groups: map[int]fakeGroup{x.group: {name: "devs", members: []string{"alice", "bob"}}}},
			want:     WritableByGroup},
		{name: "0664 another's group, no members", uid: x.daemon, gid: x.group, mode: 0o664, daemonUID: x.daemon,
			accounts: fakeAccounts{users: alice, groups: map[int]fakeGroup{x.group: {name: "devs"}}},
			want:     WritableByGroup},
		{name: "0664 a group whose members cannot be listed", uid: x.daemon, gid: x.group, mode: 0o664, daemonUID: x.daemon,
			accounts: fakeAccounts{users: alice, groups: map[int]fakeGroup{x.group: {name: "alice", unlisted: true}}},
			want:     WritableByGroup},
		{name: "0664 an owner with no name", uid: x.daemon, gid: x.group, mode: 0o664, daemonUID: x.daemon,
			accounts: fakeAccounts{groups: map[int]fakeGroup{x.group: {name: ""}}},
			want:     WritableByGroup},
		{name: "0644 owned by nobody", uid: 65534, gid: 65534, mode: 0o644, daemonUID: x.daemon, accounts: private, want: NotOwned, needRoot: true},
		// Without root the test cannot chown, but it can be a daemon of
		// another uid looking at its own file.
		{name: "0644 owned by someone not the daemon", uid: x.daemon, gid: x.group, mode: 0o644, daemonUID: x.daemon + 1, accounts: private, want: NotOwned},
		{name: "0666 owned by someone not the daemon", uid: x.daemon, gid: x.group, mode: 0o666, daemonUID: x.daemon + 1, accounts: private, want: NotOwned},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if !x.canOwn(tc.uid, tc.gid) || (tc.needRoot && !x.root) {
				t.Skipf("needs root to chown a file to %d:%d", tc.uid, tc.gid)
			}
			dir := jobsDir(t)
			if x.root {
				// The directory passes whatever the daemon's uid.
				if err := os.Chown(dir, 0, 0); err != nil {
					t.Fatal(err)
				}
			} else if tc.daemonUID != os.Getuid() {
				t.Skip("the directory would be refused first; needs root to chown it")
			}
			path := filepath.Join(dir, "x.lua")
			writeFile(t, path, "job")
			if err := os.Chown(path, tc.uid, tc.gid); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(path, tc.mode); err != nil {
				t.Fatal(err)
			}
			s := NewScanner(dir, ScanOptions{DaemonUID: tc.daemonUID, Accounts: tc.accounts})
			got := scan(t, s)
			err := got.Refused[path]
			if tc.want == 0 {
				if err != nil || string(got.Changed[path]) != "job" {
					t.Fatalf("refused: %v (scan says %q)", err, summary(dir, got))
				}
				return
			}
			var re *RefusedError
			if !errors.As(err, &re) || re.Reason != tc.want {
				t.Fatalf("got %v (scan says %q), want a %s refusal", err, summary(dir, got), tc.want)
			}
			if _, read := got.Changed[path]; read {
				t.Fatal("a refused file was read")
			}
			t.Log(err)
		})
	}
}

func TestStrictModesDirectory(t *testing.T) {
	x := testIDs()
	cases := []struct {
		name string
		uid  int
		mode os.FileMode
		want Reason
	}{
		{"0755", os.Getuid(), 0o755, 0},
		{"0777", os.Getuid(), 0o777, WritableByOthers},
		{"1777 sticky like /tmp", os.Getuid(), 0o1777, WritableByOthers},
		{"0755 owned by nobody", 65534, 0o755, NotOwned},
	}
	if !x.root {
		cases = cases[:len(cases)-1] // cannot chown; and may be nobody itself
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if !x.canOwn(tc.uid, os.Getgid()) {
				t.Skipf("needs root to chown a directory to %d", tc.uid)
			}
			dir := jobsDir(t)
			writeFile(t, filepath.Join(dir, "x.lua"), "job")
			if err := os.Chown(dir, tc.uid, os.Getgid()); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(dir, tc.mode); err != nil {
				t.Fatal(err)
			}
			s := newTestScanner(dir)
			got := scan(t, s)
			if tc.want == 0 {
				if got.DirMissing || got.DirRefused != nil || len(got.Changed) != 1 {
					t.Fatalf("scan says %q, DirRefused %v; want x.lua read", summary(dir, got), got.DirRefused)
				}
				return
			}
			var re *RefusedError
			if !got.DirMissing || !errors.As(got.DirRefused, &re) || re.Reason != tc.want || !re.Dir {
				t.Fatalf("scan says %q, DirRefused %v; want a %s refusal of the directory", summary(dir, got), got.DirRefused, tc.want)
			}
			if len(got.Changed) != 0 {
				t.Fatal("a file in a refused directory was read")
			}
			t.Log(got.DirRefused)
		})
	}
}

// TestStrictModesBecomesRefused: a file accepted before and refused now is
// removed once and refused at every scan, and comes back when fixed.
func TestStrictModesBecomesRefused(t *testing.T) {
	dir := jobsDir(t)
	path := filepath.Join(dir, "x.lua")
	writeFile(t, path, "job")
	s := newTestScanner(dir)
	scan(t, s)
	if err := os.Chmod(path, 0o666); err != nil {
		t.Fatal(err)
	}
	for i, want := range []string{"removed x.lua; refused x.lua(writable by others)", "refused x.lua(writable by others)"} {
		if got := summary(dir, scan(t, s)); got != want {
			t.Fatalf("scan %d says %q, want %q", i, got, want)
		}
	}
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	if got, want := summary(dir, scan(t, s)), "changed x.lua=job"; got != want {
		t.Fatalf("after the fix: scan says %q, want %q", got, want)
	}
}

func TestSystemAccounts(t *testing.T) {
	a := SystemAccounts{Root: "testdata/accounts"}
	for uid, want := range map[int]string{0: "root", 1000: "alice", 1001: "bob"} {
		if got, err := a.UserName(uid); err != nil || got != want {
			t.Errorf("UserName(%d) = %q, %v; want %q", uid, got, err, want)
		}
	}
	if _, err := a.UserName(4242); err == nil {
		t.Error("UserName(4242) found a user that is not in the fixture")
	}
	cases := []struct {
		gid     int
		name    string
		members []string
		err     error
	}{
		{0, "root", []string{"root"}, nil},
		{1000, "alice", []string{"alice"}, nil},         // private: alice by primary group only
		{1001, "bob", []string{"carol", "bob"}, nil},    // carol listed in bob's group
		{1002, "carol", []string{"carol", "dave"}, nil}, // dave has carol's group as primary
		{100, "users", []string{"alice", "bob", "carol"}, nil},
		{4242, "", nil, ErrGroupUnlisted},
	}
	for _, tc := range cases {
		name, members, err := a.Group(tc.gid)
		if name != tc.name || !slices.Equal(members, tc.members) || !errors.Is(err, tc.err) {
			t.Errorf("Group(%d) = %q, %q, %v; want %q, %q, %v", tc.gid, name, members, err, tc.name, tc.members, tc.err)
		}
	}
}

// TestStrictModesSystemAccounts runs the rule over the fixture's accounts:
// alice's private group passes, bob's (carol is listed in it) and carol's
// (dave's primary group) do not.
func TestStrictModesSystemAccounts(t *testing.T) {
	m := newStrictModes(1000, SystemAccounts{Root: "testdata/accounts"})
	if m.daemonUser != "alice" {
		t.Fatalf("daemon user %q, want alice", m.daemonUser)
	}
	if r := m.check(ruleFile, 1000, 1000, 0o664, nil); r != nil {
		t.Errorf("alice's file in alice's private group: %v", r)
	}
	m = newStrictModes(1001, SystemAccounts{Root: "testdata/accounts"})
	if r := m.check(ruleFile, 1001, 1001, 0o664, nil); r == nil || !slices.Equal(r.OtherMembers, []string{"carol"}) {
		t.Errorf("bob's file in bob's group with carol in it: %v", r)
	}
	m = newStrictModes(1002, SystemAccounts{Root: "testdata/accounts"})
	if r := m.check(ruleFile, 1002, 1002, 0o664, nil); r == nil || !slices.Equal(r.OtherMembers, []string{"dave"}) {
		t.Errorf("carol's file in carol's group, dave's primary: %v", r)
	}
	// Group root, without needing root to chown (TestStrictModesRootGroup
	// does it on real files).
	for accounts, others := range map[string][]string{
		"testdata/accounts":          nil,
		"testdata/rootgroup/listed":  {"eve"},
		"testdata/rootgroup/primary": {"operator"},
	} {
		m = newStrictModes(0, SystemAccounts{Root: accounts})
		r := m.check(ruleFile, 0, 0, 0o664, nil)
		if others == nil && r != nil || others != nil && (r == nil || !slices.Equal(r.OtherMembers, others)) {
			t.Errorf("%s: root's 0664 file in group root: %v, want others %q", accounts, r, others)
		}
	}
}

// TestStrictModesRootGroup: group root vouches for a group-writable file or
// jobs directory only while nobody but root is in it. A user added to group
// root (usermod -aG root eve), or one whose primary group it is (RHEL's
// operator), could otherwise rewrite a 0664 root file and have the daemon
// run anything as root.
func TestStrictModesRootGroup(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root to give a file group 0")
	}
	cases := []struct {
		name     string
		accounts string // the fixture root whose etc/passwd and etc/group are read
		others   []string
	}{
		{"nobody but root in group root", "testdata/accounts", nil},
		{"eve listed in group root", "testdata/rootgroup/listed", []string{"eve"}},
		{"operator's primary group is root", "testdata/rootgroup/primary", []string{"operator"}},
	}
	for _, tc := range cases {
		for _, what := range []string{"file", "directory"} {
			t.Run(tc.name+"/"+what, func(t *testing.T) {
				dir := jobsDir(t)
				path := filepath.Join(dir, "x.lua")
				writeFile(t, path, "job")
				target, mode := path, os.FileMode(0o664)
				if what == "directory" {
					target, mode = dir, 0o775
				}
				if err := os.Chown(target, 0, 0); err != nil {
					t.Fatal(err)
				}
				if err := os.Chmod(target, mode); err != nil {
					t.Fatal(err)
				}
				s := NewScanner(dir, ScanOptions{DaemonUID: 0, Accounts: SystemAccounts{Root: tc.accounts}})
				got := scan(t, s)
				err := got.Refused[path]
				if what == "directory" {
					err = got.DirRefused
				}
				if tc.others == nil {
					if err != nil || string(got.Changed[path]) != "job" {
						t.Fatalf("refused: %v (scan says %q)", err, summary(dir, got))
					}
					return
				}
				var re *RefusedError
				if !errors.As(err, &re) || re.Reason != WritableByGroup || !slices.Equal(re.OtherMembers, tc.others) {
					t.Fatalf("got %v (scan says %q), want a writable-by-group refusal naming %q", err, summary(dir, got), tc.others)
				}
				if len(got.Changed) != 0 {
					t.Fatal("a refused file was read")
				}
				t.Log(err)
			})
		}
	}
}

// TestStrictModesParents: every directory from / down to the jobs directory
// is checked as sshd's StrictModes checks a home directory, because whoever
// may rename an entry in one of them can put another directory in the jobs
// directory's place. A sticky directory (like /tmp) is the exception to
// "writable by group or others": there only an entry's owner may rename it.
func TestStrictModesParents(t *testing.T) {
	x := testIDs()
	devs := fakeAccounts{
		users:  map[int]string{0: "root", x.daemon: "alice"},
		groups: map[int]fakeGroup{0: {name: "root", members: []string{"root"}}, x.group: {name: "devs", members: []string{"alice", "bob"}}},
	}
	private := fakeAccounts{
		users:  map[int]string{0: "root", x.daemon: "alice"},
		groups: map[int]fakeGroup{0: {name: "root", members: []string{"root"}}, x.group: {name: "alice"}},
	}
	cases := []struct {
		name     string
		at       string // "parent" or "grandparent": which directory above the jobs directory gets uid and mode
		uid      int
		mode     os.FileMode
		accounts fakeAccounts
		want     Reason
		needRoot bool
	}{
		{name: "0755 parent", at: "parent", uid: x.daemon, mode: 0o755, accounts: private},
		{name: "0775 parent in the owner's private group (git clone under umask 002)", at: "parent", uid: x.daemon, mode: 0o775, accounts: private},
		{name: "0775 parent in a shared group", at: "parent", uid: x.daemon, mode: 0o775, accounts: devs, want: WritableByGroup},
		{name: "0775 grandparent in a shared group", at: "grandparent", uid: x.daemon, mode: 0o775, accounts: devs, want: WritableByGroup},
		{name: "0777 parent", at: "parent", uid: x.daemon, mode: 0o777, accounts: private, want: WritableByOthers},
		{name: "0757 grandparent", at: "grandparent", uid: x.daemon, mode: 0o757, accounts: private, want: WritableByOthers},
		{name: "1777 parent, sticky like /tmp", at: "parent", uid: x.daemon, mode: 0o777 | os.ModeSticky, accounts: private},
		{name: "1777 parent owned by root", at: "parent", uid: 0, mode: 0o777 | os.ModeSticky, accounts: private, needRoot: true},
		{name: "1775 parent in a shared group, sticky", at: "parent", uid: x.daemon, mode: 0o775 | os.ModeSticky, accounts: devs},
		{name: "0755 parent owned by nobody", at: "parent", uid: 65534, mode: 0o755, accounts: private, want: NotOwned, needRoot: true},
		{name: "0755 grandparent owned by nobody", at: "grandparent", uid: 65534, mode: 0o755, accounts: private, want: NotOwned, needRoot: true},
		{name: "1777 parent owned by nobody", at: "parent", uid: 65534, mode: 0o777 | os.ModeSticky, accounts: private, want: NotOwned, needRoot: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.needRoot && !x.root {
				t.Skip("needs root to chown a directory")
			}
			grandparent := filepath.Join(t.TempDir(), "grandparent")
			parent := filepath.Join(grandparent, "parent")
			dir := filepath.Join(parent, "jobs.d")
			mkdir(t, dir)
			for _, d := range []string{grandparent, parent, dir} {
				if err := os.Chown(d, x.daemon, x.group); err != nil {
					t.Fatal(err)
				}
			}
			at := map[string]string{"parent": parent, "grandparent": grandparent}[tc.at]
			if err := os.Chown(at, tc.uid, x.group); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(at, tc.mode); err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(dir, "x.lua")
			writeFile(t, path, "job")
			if err := os.Chown(path, x.daemon, x.group); err != nil {
				t.Fatal(err)
			}
			got := scan(t, NewScanner(dir, ScanOptions{DaemonUID: x.daemon, Accounts: tc.accounts}))
			if tc.want == 0 {
				if got.DirRefused != nil || string(got.Changed[path]) != "job" {
					t.Fatalf("scan says %q, DirRefused %v; want x.lua read", summary(dir, got), got.DirRefused)
				}
				return
			}
			var re *RefusedError
			if !got.DirMissing || !errors.As(got.DirRefused, &re) || re.Reason != tc.want {
				t.Fatalf("scan says %q, DirRefused %v; want a %s refusal of %s", summary(dir, got), got.DirRefused, tc.want, tc.at)
			}
			if msg := re.Error(); !strings.Contains(msg, at+",") || !strings.Contains(msg, " "+at+")") {
				t.Errorf("the refusal %q does not name %s, and the command that fixes it", msg, at)
			}
			if len(got.Changed) != 0 {
				t.Fatal("a file in a refused directory was read")
			}
			t.Log(re)
		})
	}
}

// TestStrictModesParentsFaked is TestStrictModesParents' ownership cases
// for a test that cannot chown: the stat hook says who owns what.
func TestStrictModesParentsFaked(t *testing.T) {
	for _, tc := range []struct {
		name string
		at   string
		uid  uint32
		mode uint32 // 0: as it is
		want Reason
	}{
		{"parent owned by root", "parent", 0, 0, 0},
		{"parent owned by nobody", "parent", 65534, 0, NotOwned},
		{"/ owned by nobody", "/", 65534, 0, NotOwned},
		{"sticky parent owned by nobody", "parent", 65534, unix.S_IFDIR | unix.S_ISVTX | 0o777, NotOwned},
		{"/ writable by others", "/", 0, unix.S_IFDIR | 0o777, WritableByOthers},
		{"/ sticky and writable by others", "/", 0, unix.S_IFDIR | unix.S_ISVTX | 0o777, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			parent := filepath.Join(t.TempDir(), "parent")
			dir := filepath.Join(parent, "jobs.d")
			mkdir(t, dir)
			writeFile(t, filepath.Join(dir, "x.lua"), "job")
			at := map[string]string{"parent": parent, "/": "/"}[tc.at]
			hook := func(path string, st *unix.Stat_t) {
				if path == at {
					st.Uid = tc.uid
					if tc.mode != 0 {
						st.Mode = tc.mode
					}
				}
			}
			got := scan(t, NewScanner(dir, ScanOptions{DaemonUID: os.Getuid(), statHook: hook}))
			if tc.want == 0 {
				if got.DirRefused != nil || len(got.Changed) != 1 {
					t.Fatalf("scan says %q, DirRefused %v; want x.lua read", summary(dir, got), got.DirRefused)
				}
				return
			}
			var re *RefusedError
			if !errors.As(got.DirRefused, &re) || re.Reason != tc.want || re.At != at || !re.Dir || re.Path != dir {
				t.Fatalf("scan says %q, DirRefused %#v; want a %s refusal of %s", summary(dir, got), got.DirRefused, tc.want, at)
			}
		})
	}
}

// TestStrictModesLinkOnTheWay: a symbolic link on the way to the jobs
// directory is followed only if root or the daemon's user owns it. In a
// sticky directory (/tmp) anyone may create a link and keep re-pointing
// it; its owner is the one thing there that says who may.
func TestStrictModesLinkOnTheWay(t *testing.T) {
	base := t.TempDir()
	sticky := filepath.Join(base, "tmp")
	mkdir(t, sticky)
	if err := os.Chmod(sticky, 0o777|os.ModeSticky); err != nil {
		t.Fatal(err)
	}
	real := filepath.Join(base, "real")
	mkdir(t, real)
	writeFile(t, filepath.Join(real, "x.lua"), "job")
	dir := filepath.Join(sticky, "jobs.d")
	if err := os.Symlink(real, dir); err != nil {
		t.Fatal(err)
	}
	if got := scan(t, newTestScanner(dir)); got.DirRefused != nil || len(got.Changed) != 1 {
		t.Fatalf("a link the daemon's user owns: scan says %q, DirRefused %v; want x.lua read", summary(dir, got), got.DirRefused)
	}
	hook := func(path string, st *unix.Stat_t) {
		if path == dir {
			st.Uid = 65534 // mallory made the link
		}
	}
	got := scan(t, NewScanner(dir, ScanOptions{DaemonUID: os.Getuid(), statHook: hook}))
	var re *RefusedError
	if !errors.As(got.DirRefused, &re) || re.Reason != NotOwned || re.At != "" || !re.AtLink || len(got.Changed) != 0 {
		t.Fatalf("a link someone else owns: scan says %q, DirRefused %#v; want a not-owned refusal of the link", summary(dir, got), got.DirRefused)
	}
	if msg := re.Error(); !strings.Contains(msg, "chown -h ") {
		t.Errorf("%q does not say chown -h: chown alone would change the link's target", msg)
	}
}

// The uids of two people, alice and bob, in the tests of their job
// directories.
const alice, bob = 4242, 4243

// personsAccounts are root, the daemon's user, alice and bob, each with
// a private group; the test is skipped where files cannot be given to
// them.
func personsAccounts(t *testing.T) (ids, fakeAccounts) {
	t.Helper()
	x := testIDs()
	if !x.root {
		t.Skip("needs root to give files to other uids")
	}
	return x, fakeAccounts{
		users:  map[int]string{0: "root", x.daemon: "berth", alice: "alice", bob: "bob"},
		groups: map[int]fakeGroup{0: {name: "root", members: []string{"root"}}, alice: {name: "alice"}, bob: {name: "bob"}},
	}
}

// TestStrictModesPersonsDir: a person's job directory and the files in it
// may be the person's own (ScanOptions.Owner), but not someone else's, and
// the directories above it must still be root's or the daemon's.
func TestStrictModesPersonsDir(t *testing.T) {
	x, accounts := personsAccounts(t)
	cases := []struct {
		name              string
		owner             int // ScanOptions.Owner
		spool, dir, file  int // the uids of the parent, the person's directory and the file
		wantDir, wantFile Reason
		// wantPerson: whom the refusal says should own it instead of
		// root or the daemon's user.
		wantPerson string
	}{
		{name: "alice's file in alice's directory", owner: alice, dir: alice, file: alice},
		{name: "root's file in alice's directory", owner: alice, dir: alice, file: 0},
		{name: "alice's directory scanned as nobody's", dir: alice, file: alice, wantDir: NotOwned},
		{name: "bob's file in alice's directory", owner: alice, dir: alice, file: bob, wantFile: NotOwned, wantPerson: "alice"},
		{name: "alice's directory owned by bob", owner: alice, dir: bob, file: alice, wantDir: NotOwned, wantPerson: "alice"},
		{name: "the parent owned by alice", owner: alice, spool: alice, dir: alice, file: alice, wantDir: NotOwned},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			spool := filepath.Join(t.TempDir(), "spool")
			dir := filepath.Join(spool, "alice")
			mkdir(t, dir)
			path := filepath.Join(dir, "x.lua")
			writeFile(t, path, "job")
			for p, uid := range map[string]int{spool: tc.spool, dir: tc.dir, path: tc.file} {
				if err := os.Chown(p, uid, uid); err != nil {
					t.Fatal(err)
				}
			}
			if err := os.Chmod(dir, 0o700); err != nil {
				t.Fatal(err)
			}
			got := scan(t, NewScanner(dir, ScanOptions{DaemonUID: x.daemon, Owner: tc.owner, Accounts: accounts}))
			var re *RefusedError
			switch {
			case tc.wantDir != 0:
				if !got.DirMissing || !errors.As(got.DirRefused, &re) || re.Reason != tc.wantDir {
					t.Fatalf("scan says %q, DirRefused %v; want a %s refusal of the directory", summary(dir, got), got.DirRefused, tc.wantDir)
				}
				if re.Person != tc.wantPerson {
					t.Errorf("the refusal names %q as whom it should be, want %q: %v", re.Person, tc.wantPerson, re)
				}
			case tc.wantFile != 0:
				if !errors.As(got.Refused[path], &re) || re.Reason != tc.wantFile || len(got.Changed) != 0 {
					t.Fatalf("scan says %q, refused %v; want x.lua refused, %s", summary(dir, got), got.Refused, tc.wantFile)
				}
				if re.Person != tc.wantPerson {
					t.Errorf("the refusal names %q as whom it should be, want %q: %v", re.Person, tc.wantPerson, re)
				}
			default:
				if got.DirRefused != nil || string(got.Changed[path]) != "job" {
					t.Fatalf("scan says %q, DirRefused %v, refused %v; want x.lua read", summary(dir, got), got.DirRefused, got.Refused)
				}
			}
		})
	}
}

// TestStrictModesPersonsDirLink: a person's directory that is a link to
// someone else's is refused as the link it is: the fix named removes the
// link, where a chown of the path would give the other's directory away.
func TestStrictModesPersonsDirLink(t *testing.T) {
	x, accounts := personsAccounts(t)
	top := t.TempDir()
	spool, home := filepath.Join(top, "spool"), filepath.Join(top, "home")
	mkdir(t, spool)
	mkdir(t, home)
	if err := os.Chown(home, bob, bob); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(spool, "alice")
	if err := os.Symlink(home, dir); err != nil {
		t.Fatal(err)
	}
	got := scan(t, NewScanner(dir, ScanOptions{DaemonUID: x.daemon, Owner: alice, Accounts: accounts}))
	var re *RefusedError
	if !errors.As(got.DirRefused, &re) || re.Reason != NotOwned {
		t.Fatalf("scan says %q, DirRefused %v; want the directory refused, not owned", summary(dir, got), got.DirRefused)
	}
	msg := re.Error()
	if !strings.HasPrefix(msg, dir+" is a symbolic link to "+home+", which is owned by ") || strings.Contains(msg, "chown") ||
		!strings.Contains(msg, "rm "+dir+" removes the link") {
		t.Errorf("the refusal: %s", msg)
	}
}

// TestStrictModesPersonsLink: in a person's directory, a link of theirs to
// a file of theirs is read, through directories of theirs (they could
// re-point the link anyway); through a directory of someone else's, or as
// someone else's link, it is refused.
func TestStrictModesPersonsLink(t *testing.T) {
	x, accounts := personsAccounts(t)
	for _, tc := range []struct {
		name             string
		link, home, file int // the uids of the link, the directory it leads into, its target
		want             Reason
	}{
		{name: "alice's link to her own file", link: alice, home: alice, file: alice},
		{name: "alice's link into bob's directory", link: alice, home: bob, file: alice, want: NotOwned},
		{name: "bob's link in alice's directory", link: bob, home: alice, file: alice, want: NotOwned},
	} {
		t.Run(tc.name, func(t *testing.T) {
			top := t.TempDir()
			// A link is followed only to what anyone may read.
			for _, p := range []string{top, filepath.Dir(top)} {
				if err := os.Chmod(p, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			dir, home := filepath.Join(top, "spool", "alice"), filepath.Join(top, "home")
			mkdir(t, dir)
			mkdir(t, home)
			target := filepath.Join(home, "x.lua")
			writeFile(t, target, "job")
			link := filepath.Join(dir, "x.lua")
			if err := os.Symlink(target, link); err != nil {
				t.Fatal(err)
			}
			for p, uid := range map[string]int{dir: alice, home: tc.home, target: tc.file} {
				if err := os.Chown(p, uid, uid); err != nil {
					t.Fatal(err)
				}
			}
			if err := os.Lchown(link, tc.link, tc.link); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(dir, 0o700); err != nil {
				t.Fatal(err)
			}
			got := scan(t, NewScanner(dir, ScanOptions{DaemonUID: x.daemon, Owner: alice, Accounts: accounts}))
			var re *RefusedError
			switch {
			case tc.want != 0:
				if !errors.As(got.Refused[link], &re) || re.Reason != tc.want {
					t.Fatalf("scan says %q, refused %v; want x.lua refused, %s", summary(dir, got), got.Refused, tc.want)
				}
			case got.DirRefused != nil || string(got.Changed[link]) != "job":
				t.Fatalf("scan says %q, DirRefused %v, refused %v; want x.lua read", summary(dir, got), got.DirRefused, got.Refused)
			}
		})
	}
}
