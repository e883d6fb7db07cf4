package watch

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
)

// Accounts answers what the ownership rule needs to know about users and
// groups. Tests pass a fake; the daemon passes nil, which means
// SystemAccounts{}.
type Accounts interface {
	// UserName returns the login name of uid.
	UserName(uid int) (string, error)
	// Group returns the name of gid and every user in it: those it lists as
	// members and those whose primary group it is. ErrGroupUnlisted (with
	// the name where one is known) means the members cannot be listed.
	Group(gid int) (name string, members []string, err error)
}

// ErrGroupUnlisted is returned by Accounts.Group when the group exists
// but its members cannot be listed, as for a group that only a directory
// service (LDAP, sssd) knows. The rule then refuses a file that group may
// write: berth cannot tell that nobody else is in it.
var ErrGroupUnlisted = errors.New("group members cannot be listed")

// SystemAccounts reads etc/passwd and etc/group under Root ("" means "/").
// Go's os/user cannot list a group's members, and the primary-group users
// are only in passwd, so both files are read; names that only a directory
// service knows are still found through os/user when Root is the real root.
type SystemAccounts struct {
	Root string
}

func (a SystemAccounts) file(name string) string {
	root := a.Root
	if root == "" {
		root = "/"
	}
	return filepath.Join(root, "etc", name)
}

func (a SystemAccounts) realRoot() bool { return a.Root == "" || filepath.Clean(a.Root) == "/" }

// UserName implements Accounts.
func (a SystemAccounts) UserName(uid int) (string, error) {
	id := strconv.Itoa(uid)
	var name string
	err := eachLine(a.file("passwd"), func(f []string) bool {
		if len(f) >= 3 && f[2] == id {
			name = f[0]
			return false
		}
		return true
	})
	if name != "" {
		return name, nil
	}
	if a.realRoot() {
		if u, uerr := user.LookupId(id); uerr == nil {
			return u.Username, nil
		}
	}
	if err != nil {
		return "", err
	}
	return "", fmt.Errorf("uid %d has no name", uid)
}

// Group implements Accounts.
func (a SystemAccounts) Group(gid int) (string, []string, error) {
	id := strconv.Itoa(gid)
	name, members, listed, err := a.listed(id)
	if !listed {
		if a.realRoot() {
			if g, gerr := user.LookupGroupId(id); gerr == nil {
				name = g.Name
			}
		}
		if err != nil {
			return name, nil, fmt.Errorf("%w: %w", ErrGroupUnlisted, err)
		}
		return name, nil, ErrGroupUnlisted
	}
	// A user whose primary group this is belongs to it as much as a listed
	// member does (usermod -g), so a "private" group with such a user in it
	// is shared.
	perr := eachLine(a.file("passwd"), func(f []string) bool {
		if len(f) >= 4 && f[3] == id {
			name := f[0]
			if name == "" {
				// Still someone in the group (a broken line is no reason to
				// vouch for it): named by uid, so that it matches nobody.
				name = "uid " + f[2]
			}
			members = append(members, name)
		}
		return true
	})
	if perr != nil {
		// Without passwd the primary members are unknown: say so rather than
		// vouch for the group.
		return name, members, fmt.Errorf("%w: %w", ErrGroupUnlisted, perr)
	}
	return name, members, nil
}

// Listed is the members /etc/group lists for group gid, without the users
// whose primary group it is (Group counts those too); none where it has
// no line.
func (a SystemAccounts) Listed(gid int) ([]string, error) {
	_, members, _, err := a.listed(strconv.Itoa(gid))
	return members, err
}

// listed reads group id's line of /etc/group: its name and the members it
// lists, and whether there is one.
func (a SystemAccounts) listed(id string) (name string, members []string, listed bool, err error) {
	err = eachLine(a.file("group"), func(f []string) bool {
		if len(f) >= 4 && f[2] == id {
			name, listed = f[0], true
			for _, m := range strings.Split(f[3], ",") {
				if m = strings.TrimSpace(m); m != "" {
					members = append(members, m)
				}
			}
			return false
		}
		return true
	})
	return name, members, listed, err
}

// eachLine calls fn with the colon-separated fields of each line of an
// /etc/passwd-style file until fn returns false.
func eachLine(path string, fn func(fields []string) bool) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		if !fn(strings.Split(line, ":")) {
			return nil
		}
	}
	return sc.Err()
}
