package watch

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// FuzzSystemAccounts feeds arbitrary passwd and group files to the lookups
// the ownership rule trusts: they must never panic, and a member is never
// an empty name (an empty name would match a user with no name).
func FuzzSystemAccounts(f *testing.F) {
	for _, root := range []string{"testdata/accounts", "testdata/rootgroup/listed", "testdata/rootgroup/primary"} {
		passwd, err := os.ReadFile(filepath.Join(root, "etc/passwd"))
		if err != nil {
			f.Fatal(err)
		}
		group, err := os.ReadFile(filepath.Join(root, "etc/group"))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(passwd, group, 0, 1000)
	}
	f.Add([]byte("::0:0\n:x:1:\n"), []byte("::0:,,\nx:x:0:a,,b\n"), 0, 1)
	f.Add([]byte(strings.Repeat("a", 70000)+":x:0:0\n"), []byte("root:x:0:"+strings.Repeat("b,", 40000)+"\n"), 0, 0)
	f.Fuzz(func(t *testing.T, passwd, group []byte, gid, uid int) {
		root := t.TempDir()
		if err := os.Mkdir(filepath.Join(root, "etc"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, "etc/passwd"), passwd, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, "etc/group"), group, 0o644); err != nil {
			t.Fatal(err)
		}
		a := SystemAccounts{Root: root}
		_, _ = a.UserName(uid)
		_, members, _ := a.Group(gid)
		if slices.Contains(members, "") {
			t.Errorf("Group(%d) has an empty member: %q", gid, members)
		}
		m := newStrictModes(uid, a)
		_ = m.check(ruleFile, uid, gid, 0o664, nil)
		_ = m.check(ruleOnTheWay, uid, gid, 0o775, []aclWriter{{id: uid}, {group: true, id: gid}})
	})
}

// FuzzLinkTarget points a job file's link anywhere: the scan must come
// back (the fuzzing engine reports one that hangs), never fail, and never
// read a file the rules refuse: here a root-owned 0640 "secret".
func FuzzLinkTarget(f *testing.F) {
	for _, target := range []string{
		"../shared/x.lua", "..data/y.lua", "/dev/zero", "../private/secret", "../fifo",
		"x.lua", "..", ".", "/", "////", "../../../../../../../etc/passwd", "a/../../shared/x.lua",
		"../shared/../private/./secret", "..data/../../private/secret", "../shared/x.lua/",
		strings.Repeat("../", 200) + "dev/null",
	} {
		f.Add(target)
	}
	f.Fuzz(func(t *testing.T, target string) {
		if target == "" || strings.ContainsRune(target, 0) || len(target) >= unix.PathMax {
			t.Skip("not a link's target")
		}
		base := t.TempDir()
		openToAll(t, base)
		dir := filepath.Join(base, "jobs.d")
		mkdir(t, filepath.Join(dir, "..data"))
		writeFile(t, filepath.Join(dir, "..data", "y.lua"), "inside")
		mkdir(t, filepath.Join(base, "shared"))
		writeFile(t, filepath.Join(base, "shared", "x.lua"), "shared")
		mkdir(t, filepath.Join(base, "private"))
		secret := filepath.Join(base, "private", "secret")
		writeFile(t, secret, "secret")
		if err := os.Chmod(secret, 0o640); err != nil {
			t.Fatal(err)
		}
		if err := syscall.Mkfifo(filepath.Join(base, "fifo"), 0o644); err != nil {
			t.Fatal(err)
		}
		link := filepath.Join(dir, "x.lua")
		if err := os.Symlink(target, link); err != nil {
			t.Skip("the kernel refuses this target")
		}
		// The daemon is a person's (uid 4321); the secret is root's.
		me := uint32(os.Getuid())
		hook := func(path string, st *unix.Stat_t) {
			switch {
			case path == secret:
				st.Uid = 0
			case st.Uid == me:
				st.Uid = 4321
			}
		}
		s := NewScanner(dir, ScanOptions{DaemonUID: 4321, MaxFileBytes: 1 << 16, statHook: hook})
		got, err := s.Scan()
		if err != nil {
			t.Fatalf("Scan: %v", err)
		}
		if string(got.Changed[link]) == "secret" {
			t.Fatalf("a link to %q read the secret", target)
		}
		if _, read := got.Changed[link]; read && got.Refused[link] != nil {
			t.Fatalf("a link to %q was both read and refused", target)
		}
	})
}
