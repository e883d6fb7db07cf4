package watch

import (
	"encoding/binary"
	"errors"
	"strconv"

	"golang.org/x/sys/unix"
)

// A POSIX ACL lets users and groups besides the owner's write a file or a
// directory, and the mode alone does not show who: with an ACL, the group
// bits of the mode are its mask. So where the mask lets anyone write (g+w),
// the rule asks the ACL itself (system.posix_acl_access) which named users
// and groups may.

// aclWriter is a named entry of an ACL that may write.
type aclWriter struct {
	group bool // a named group, else a named user
	id    int
}

// The entries of Linux's ACL extended attribute: a 4-byte version (2), then
// entries of tag (2 bytes), permissions (2) and id (4), little-endian.
const (
	aclVersion  = 2
	aclUser     = 0x02
	aclGroup    = 0x08
	aclMask     = 0x10
	aclWrite    = 0x02
	aclEntryLen = 8
	aclXattr    = "system.posix_acl_access"
)

// errBadACL is an ACL attribute that is not in the form the kernel writes.
var errBadACL = errors.New("an ACL that cannot be read")

// parseACL returns the named users and groups of an ACL attribute that the
// mask lets write.
func parseACL(b []byte) ([]aclWriter, error) {
	if len(b) < 4 || binary.LittleEndian.Uint32(b) != aclVersion || (len(b)-4)%aclEntryLen != 0 {
		return nil, errBadACL
	}
	entries := b[4:]
	mask := uint16(0xffff) // no mask entry: the named entries are as written
	for i := 0; i < len(entries); i += aclEntryLen {
		if binary.LittleEndian.Uint16(entries[i:]) == aclMask {
			mask = binary.LittleEndian.Uint16(entries[i+2:])
		}
	}
	var out []aclWriter
	for i := 0; i < len(entries); i += aclEntryLen {
		tag := binary.LittleEndian.Uint16(entries[i:])
		perm := binary.LittleEndian.Uint16(entries[i+2:])
		id := int(binary.LittleEndian.Uint32(entries[i+4:]))
		if (tag == aclUser || tag == aclGroup) && perm&mask&aclWrite != 0 {
			out = append(out, aclWriter{group: tag == aclGroup, id: id})
		}
	}
	return out, nil
}

// aclWriters reads the ACL of what fd is open on: fgetxattr, or for a
// descriptor opened O_PATH (which fgetxattr refuses) the same through
// /proc/self/fd. No ACL is none.
func aclWriters(fd int, opath bool) ([]aclWriter, error) {
	buf := make([]byte, 256)
	for {
		var n int
		err := retryEINTR(func() (err error) {
			if opath {
				n, err = unix.Getxattr("/proc/self/fd/"+strconv.Itoa(fd), aclXattr, buf)
			} else {
				n, err = unix.Fgetxattr(fd, aclXattr, buf)
			}
			return err
		})
		switch {
		case errors.Is(err, unix.ENODATA), errors.Is(err, unix.ENOTSUP):
			return nil, nil
		case errors.Is(err, unix.ERANGE) && len(buf) < 1<<16:
			buf = make([]byte, 2*len(buf))
			continue
		case err != nil:
			return nil, err
		}
		return parseACL(buf[:n])
	}
}
