package testkit

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
)

// exists asks getent whether the database (passwd, group) has name.
// (Not os/user: testkit stays free of cgo.)
func exists(database, name string) bool {
	return exec.Command("getent", database, name).Run() == nil
}

// Account is a user a test needs, with the groups it is in besides its
// own.
type Account struct {
	Name   string
	Groups []string
}

// MakeAccounts makes, as root, the groups and users a test package needs,
// and returns a function that removes them (call it once the tests are
// done: TestMain). Each test package names its accounts its own way, so
// that packages tested at the same time never share one; an account of
// such a name that is there already is what an earlier run left (killed
// before its TestMain removed it), and is made again, so that a test
// never runs with a leftover's groups.
//
// The shadow tools lock /etc/passwd and /etc/group and fail, rather than
// wait, while another holds them: two packages tested at once would fail
// each other's useradd or userdel, and leave accounts half made. So every
// MakeAccounts and every remove holds one lock, for all test processes.
func MakeAccounts(groups []string, users []Account) (remove func(), err error) {
	unlock, err := lockAccounts()
	if err != nil {
		return func() {}, err
	}
	defer unlock()
	drop := func() {
		for _, u := range users {
			if exists("passwd", u.Name) {
				_ = exec.Command("userdel", u.Name).Run()
			}
			if exists("group", u.Name) { // its own group, left without it
				_ = exec.Command("groupdel", u.Name).Run()
			}
		}
		for _, g := range groups {
			if exists("group", g) {
				_ = exec.Command("groupdel", g).Run()
			}
		}
	}
	remove = func() {
		if unlock, err := lockAccounts(); err == nil {
			defer unlock()
		}
		drop()
	}
	drop() // an earlier run's leftovers
	for _, g := range groups {
		if out, err := exec.Command("groupadd", g).CombinedOutput(); err != nil {
			drop()
			return func() {}, fmt.Errorf("groupadd %s: %v: %s", g, err, out)
		}
	}
	for _, u := range users {
		// --badname: a login as some directories have them (Ana.Lopez).
		args := []string{"--badname", "--no-create-home", "--user-group", "--shell", "/bin/sh"}
		if len(u.Groups) > 0 {
			args = append(args, "--groups", strings.Join(u.Groups, ","))
		}
		if out, err := exec.Command("useradd", append(args, u.Name)...).CombinedOutput(); err != nil {
			drop()
			return func() {}, fmt.Errorf("useradd %s: %v: %s", u.Name, err, out)
		}
	}
	return remove, nil
}

// lockAccounts takes the lock of every test process's account changes.
func lockAccounts() (unlock func(), err error) {
	f, err := os.OpenFile(filepath.Join(os.TempDir(), "berth-test-accounts.lock"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, err
	}
	return func() { f.Close() }, nil
}
