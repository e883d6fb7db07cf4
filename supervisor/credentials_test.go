package supervisor

import (
	"errors"
	"maps"
	"os/user"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

func TestLookupCredentials(t *testing.T) {
	t.Parallel()
	c, err := LookupCredentials("root", "")
	if err != nil {
		t.Fatal(err)
	}
	if c.UID != 0 || c.GID != 0 || c.Login["HOME"] != "/root" || c.Login["USER"] != "root" {
		t.Errorf("root resolved to %+v", c)
	}
	c, err = LookupCredentials("", "root")
	if err != nil || c.GID != 0 || c.Login != nil {
		t.Fatalf("group root: %+v, %v", c, err)
	}
	for _, tt := range []struct{ user, group, kind string }{
		{"no-such-user-berth", "", "user"},
		{"", "no-such-group-berth", "group"},
	} {
		_, err := LookupCredentials(tt.user, tt.group)
		var ue *UnknownUserError
		if !errors.As(err, &ue) || ue.Kind != tt.kind {
			t.Errorf("LookupCredentials(%q, %q) = %v, want an unknown %s", tt.user, tt.group, err, tt.kind)
		}
	}
}

// TestCredentialsAs pins who a job runs as, for a daemon running as root
// and for one running as a person (uid 65534 here: nobody, whose primary
// group is nogroup, 65534, on Debian).
func TestCredentialsAs(t *testing.T) {
	t.Parallel()
	if c, err := LookupCredentials("nobody", "nogroup"); err != nil || c.UID != 65534 || c.GID != 65534 {
		t.Skip("needs the user nobody and the group nogroup, both 65534")
	}
	root, person := identity{0, 0}, identity{65534, 65534}
	nobodyLogin := map[string]string{"HOME": "/nonexistent", "USER": "nobody", "LOGNAME": "nobody", "SHELL": "/usr/sbin/nologin"}
	for _, tt := range []struct {
		name        string
		self        identity
		user, group string
		want        *syscall.Credential
		login       map[string]string
		refused     string // the Kind of a *NeedsRootError
	}{
		{name: "neither: as the daemon", self: root},
		{name: "user, root daemon", self: root, user: "nobody",
			want: &syscall.Credential{Uid: 65534, Gid: 65534, Groups: []uint32{65534}}, login: nobodyLogin},
		// The group replaces nobody's own in the supplementary groups too
		// (getgrouplist("nobody", 0), as systemd's Group= has it).
		{name: "user and group, root daemon", self: root, user: "nobody", group: "root",
			want: &syscall.Credential{Uid: 65534, Gid: 0, Groups: []uint32{0}}, login: nobodyLogin},
		// The daemon's own uid with that group alone: root's supplementary
		// groups are not passed on.
		{name: "group alone, root daemon", self: root, group: "nogroup",
			want: &syscall.Credential{Uid: 0, Gid: 65534, Groups: []uint32{}}},
		// Never uid 0 by omission: the daemon already is uid 65534 in
		// nogroup, so nothing changes.
		{name: "group alone, its own group, person's daemon", self: person, group: "nogroup"},
		{name: "group alone, another group, person's daemon", self: person, group: "root", refused: "group"},
		{name: "user, itself, person's daemon", self: person, user: "nobody", login: nobodyLogin},
		{name: "user, another, person's daemon", self: person, user: "root", refused: "user"},
		{name: "user itself, another group, person's daemon", self: person, user: "nobody", group: "root", refused: "group"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cred, login, err := credentialsAs(tt.self, tt.user, tt.group)
			if tt.refused != "" {
				var nr *NeedsRootError
				if !errors.As(err, &nr) || nr.Kind != tt.refused || nr.UID != tt.self.uid {
					t.Fatalf("credentialsAs = %+v, %v, %v; want a *NeedsRootError about the %s", cred, login, err, tt.refused)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if (cred == nil) != (tt.want == nil) || cred != nil && (cred.Uid != tt.want.Uid || cred.Gid != tt.want.Gid ||
				!slices.Equal(cred.Groups, tt.want.Groups) || cred.Groups == nil || cred.NoSetGroups) {
				t.Errorf("credential = %+v, want %+v", cred, tt.want)
			}
			if !maps.Equal(login, tt.login) {
				t.Errorf("login = %v, want %v", login, tt.login)
			}
		})
	}
}

func TestPasswdShell(t *testing.T) {
	t.Parallel()
	const passwd = `root:x:0:0:root:/root:/bin/bash
+nisuser
broken:line
ml:x:1001:1001:Machine Learning,,,:/home/ml:/usr/bin/zsh
noshell:x:1002:1002::/home/noshell:
`
	for _, tt := range []struct {
		name, shell string
		found       bool
	}{
		{"root", "/bin/bash", true},
		{"ml", "/usr/bin/zsh", true},
		{"noshell", "", true},
		{"nisuser", "", false},
		{"broken", "", false},
		{"nobody", "", false},
		{"", "", false},
		{"root:x", "", false},
	} {
		shell, found := passwdShell(strings.NewReader(passwd), tt.name)
		if shell != tt.shell || found != tt.found {
			t.Errorf("passwdShell(%q) = %q, %v; want %q, %v", tt.name, shell, found, tt.shell, tt.found)
		}
	}
}

// FuzzPasswdShell: /etc/passwd is outside input (an admin's editor, NIS
// lines, garbage). Reading it never panics, and a shell found is one field.
func FuzzPasswdShell(f *testing.F) {
	f.Add("root:x:0:0:root:/root:/bin/bash\nml:x:1001:1001::/home/ml:/bin/zsh\n", "ml")
	f.Add("+\n::::::\n", "")
	f.Add("a:b:c:d:e:f:g:h\n", "a")
	f.Fuzz(func(t *testing.T, passwd, name string) {
		shell, found := passwdShell(strings.NewReader(passwd), name)
		if !found && shell != "" {
			t.Errorf("passwdShell(%q) = %q, not found", name, shell)
		}
		if strings.ContainsAny(shell, ":\n") {
			t.Errorf("passwdShell(%q) = %q: more than one field", name, shell)
		}
		if found && (name == "" || !strings.Contains(passwd, name+":")) {
			t.Errorf("passwdShell(%q) found an entry that is not in %q", name, passwd)
		}
	})
}

// TestGroupReplacesPrimary: group beside user replaces the user's primary
// group, in the supplementary groups too, as login and systemd's Group=
// have it: the user keeps the groups it is listed in, not its own.
func TestGroupReplacesPrimary(t *testing.T) {
	t.Parallel()
	needAccounts(t)
	alice, group, admin := lookupGID(t, testAlice), lookupGID(t, testGroup), lookupGID(t, testAdminGroup)
	own, err := LookupCredentials(testAlice, "")
	if err != nil || own.GID != alice || !slices.Contains(own.Groups, alice) || !slices.Contains(own.Groups, group) {
		t.Fatalf("alice: %+v, %v; want her own group %d and %d", own, err, alice, group)
	}
	c, err := LookupCredentials(testAlice, testAdminGroup)
	if err != nil || c.GID != admin || !slices.Contains(c.Groups, admin) || !slices.Contains(c.Groups, group) || slices.Contains(c.Groups, alice) {
		t.Errorf("alice in %s: %+v, %v; want %d and %d, not her own %d", testAdminGroup, c, err, admin, group, alice)
	}
}

func lookupGID(t *testing.T, group string) uint32 {
	t.Helper()
	g, err := user.LookupGroup(group)
	if err != nil {
		t.Fatal(err)
	}
	gid, err := strconv.ParseUint(g.Gid, 10, 32)
	if err != nil {
		t.Fatal(err)
	}
	return uint32(gid)
}
