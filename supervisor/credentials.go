package supervisor

import (
	"errors"
	"fmt"
	"os/user"
	"strconv"
)

// Credentials are the IDs a job's process runs as.
type Credentials struct {
	UID, GID uint32
	// Groups are the supplementary groups of the user, as login would set them.
	Groups []uint32
}

// UnknownUserError is returned when a job names a user or group that does
// not exist on this machine.
type UnknownUserError struct {
	Kind string // "user" or "group"
	Name string
}

func (e *UnknownUserError) Error() string {
	lister := "getent passwd"
	if e.Kind == "group" {
		lister = "getent group"
	}
	return fmt.Sprintf("%s %q does not exist on this machine (%s lists them)", e.Kind, e.Name, lister)
}

// LookupCredentials resolves a job's user and group. With a user and no
// group, the process runs with the user's primary group; with a group and no
// user, as the daemon's own user in that group.
func LookupCredentials(userName, groupName string) (Credentials, error) {
	var c Credentials
	if userName != "" {
		u, err := user.Lookup(userName)
		if err != nil {
			return Credentials{}, lookupError("user", userName, err)
		}
		uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
		gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
		if err := errors.Join(err1, err2); err != nil {
			return Credentials{}, fmt.Errorf("user %q has IDs that are not numbers: %w", userName, err)
		}
		c.UID, c.GID = uint32(uid), uint32(gid)
		if ids, err := u.GroupIds(); err == nil {
			for _, id := range ids {
				if n, err := strconv.ParseUint(id, 10, 32); err == nil {
					c.Groups = append(c.Groups, uint32(n))
				}
			}
		}
	}
	if groupName != "" {
		g, err := user.LookupGroup(groupName)
		if err != nil {
			return Credentials{}, lookupError("group", groupName, err)
		}
		gid, err := strconv.ParseUint(g.Gid, 10, 32)
		if err != nil {
			return Credentials{}, fmt.Errorf("group %q has an ID that is not a number: %w", groupName, err)
		}
		c.GID = uint32(gid)
	}
	return c, nil
}

func lookupError(kind, name string, err error) error {
	var uu user.UnknownUserError
	var ug user.UnknownGroupError
	if errors.As(err, &uu) || errors.As(err, &ug) {
		return &UnknownUserError{Kind: kind, Name: name}
	}
	return fmt.Errorf("look up %s %q: %w", kind, name, err)
}
