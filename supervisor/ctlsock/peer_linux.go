package ctlsock

import (
	"errors"
	"fmt"
	"net"
	"unsafe"

	"golang.org/x/sys/unix"
)

// errNotUnix is returned by ReadPeer for a connection that is not a unix
// socket's, which has no peer credentials.
var errNotUnix = errors.New("not a unix socket connection")

// Peer is who is at the other end of a connection, as the kernel recorded
// it when the connection was made: the process's pid, uid and gid
// (SO_PEERCRED) and its supplementary groups (SO_PEERGROUPS). They are the
// connection's own, read once: the process may have ended since, and its
// pid be another's, whose groups /proc would give (trial AL: a person's
// connection, its process gone, had an administrator's rights once an
// administrator's process took its pid).
type Peer struct {
	unix.Ucred
	// Groups are its supplementary groups; GroupsKnown is false where the
	// kernel cannot say (SO_PEERGROUPS came with Linux 4.13).
	Groups      []uint32
	GroupsKnown bool
}

// ReadPeer reads the peer of c, a unix socket's connection.
func ReadPeer(c net.Conn) (Peer, error) {
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return Peer{}, errNotUnix
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return Peer{}, fmt.Errorf("peer credentials: %w", err)
	}
	var p Peer
	var cred *unix.Ucred
	var credErr, groupsErr error
	if err := raw.Control(func(fd uintptr) {
		cred, credErr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
		p.Groups, groupsErr = peerGroups(int(fd))
	}); err != nil {
		return Peer{}, fmt.Errorf("peer credentials: %w", err)
	}
	if credErr != nil {
		return Peer{}, fmt.Errorf("peer credentials: %w", credErr)
	}
	p.Ucred, p.GroupsKnown = *cred, groupsErr == nil
	return p, nil
}

// maxGroups is NGROUPS_MAX, the most supplementary groups a process has.
const maxGroups = 65536

// peerGroups reads SO_PEERGROUPS, an array of gid_t as long as the peer
// has groups (x/sys/unix has no reader for it that keeps its zero bytes).
func peerGroups(fd int) ([]uint32, error) {
	n := 32
	for {
		buf := make([]uint32, n)
		size := uint32(n * 4)
		_, _, errno := unix.Syscall6(unix.SYS_GETSOCKOPT, uintptr(fd), unix.SOL_SOCKET, unix.SO_PEERGROUPS,
			uintptr(unsafe.Pointer(&buf[0])), uintptr(unsafe.Pointer(&size)), 0)
		switch {
		case errno == unix.ERANGE && int(size/4) > n && size/4 <= maxGroups:
			n = int(size / 4) // the kernel said how long it is
			continue
		case errno != 0:
			return nil, errno
		}
		return buf[:size/4], nil
	}
}
