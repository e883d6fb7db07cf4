package testkit

import (
	"fmt"
	"os/exec"
	"strings"
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

// MakeAccounts makes, as root, the groups and users that do not exist
// yet, and returns a function that removes those it made (call it once
// the tests are done: TestMain). Each test package names its accounts its
// own way, so that packages tested at the same time never share one.
func MakeAccounts(groups []string, users []Account) (remove func(), err error) {
	var madeUsers, madeGroups []string
	remove = func() {
		for _, u := range madeUsers {
			_ = exec.Command("userdel", u).Run()
		}
		for _, g := range madeGroups {
			_ = exec.Command("groupdel", g).Run()
		}
	}
	for _, g := range groups {
		if exists("group", g) {
			continue
		}
		if out, err := exec.Command("groupadd", g).CombinedOutput(); err != nil {
			return remove, fmt.Errorf("groupadd %s: %v: %s", g, err, out)
		}
		madeGroups = append(madeGroups, g)
	}
	for _, u := range users {
		if exists("passwd", u.Name) {
			continue
		}
		args := []string{"--no-create-home", "--user-group", "--shell", "/bin/sh"}
		if len(u.Groups) > 0 {
			args = append(args, "--groups", strings.Join(u.Groups, ","))
		}
		if out, err := exec.Command("useradd", append(args, u.Name)...).CombinedOutput(); err != nil {
			return remove, fmt.Errorf("useradd %s: %v: %s", u.Name, err, out)
		}
		madeUsers = append(madeUsers, u.Name)
	}
	return remove, nil
}
