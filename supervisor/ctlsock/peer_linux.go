package ctlsock

import (
	"errors"
	"fmt"
	"net"

	"golang.org/x/sys/unix"
)

// errNotUnix is returned by peerCred for a connection that is not a unix
// socket's, which has no peer credentials.
var errNotUnix = errors.New("not a unix socket connection")

// peerCred is the credentials of the process at the other end of c, as
// the kernel recorded them when it connected (SO_PEERCRED).
func peerCred(c net.Conn) (unix.Ucred, error) {
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return unix.Ucred{}, errNotUnix
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return unix.Ucred{}, fmt.Errorf("peer credentials: %w", err)
	}
	var cred *unix.Ucred
	var credErr error
	if err := raw.Control(func(fd uintptr) {
		cred, credErr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return unix.Ucred{}, fmt.Errorf("peer credentials: %w", err)
	}
	if credErr != nil {
		return unix.Ucred{}, fmt.Errorf("peer credentials: %w", credErr)
	}
	return *cred, nil
}
