package supervisor

import (
	"errors"
	"io/fs"
	"net"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/berthd/berth/supervisor/ctlsock"
)

// socketCheckEvery is how often the daemon looks whether its control
// socket's path was removed; a reload (SIGHUP) looks too.
const socketCheckEvery = 10 * time.Second

// socketKeeper binds the control socket again once its path is removed
// (rm -r /run/berth, a cleaner of /tmp): the daemon would otherwise go on
// with no client able to reach it, and nothing said.
type socketKeeper struct {
	ctl      *ctlsock.Listener
	relisten func() (net.Listener, error)
	path     string

	mu       sync.Mutex // guards dev, ino and said; held while binding
	dev, ino uint64     // the socket file the daemon bound last
	said     string     // the trouble logged last, logged once
}

// keptSocket keeps ctl's path bound; nil where there is no way to bind
// it again, or no path (an abstract socket).
func keptSocket(ctl *ctlsock.Listener, relisten func() (net.Listener, error)) *socketKeeper {
	addr := ctl.Addr()
	if relisten == nil || addr.Network() != "unix" || addr.String() == "" || addr.String()[0] == '@' {
		return nil
	}
	k := &socketKeeper{ctl: ctl, relisten: relisten, path: addr.String()}
	k.dev, k.ino, _ = fileID(k.path)
	return k
}

// keepSocket looks at the control socket's path: removed, it is bound
// again; another file there, that is said, once, and left alone.
func (d *Daemon) keepSocket() {
	k := d.sock
	if k == nil {
		return
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	dev, ino, err := fileID(k.path)
	switch {
	case err == nil && dev == k.dev && ino == k.ino:
		k.said = ""
		return
	case err == nil:
		k.say(d, msgSocketTaken(k.path))
		return
	case !errors.Is(err, fs.ErrNotExist):
		return // cannot tell: leave it
	}
	l, err := k.relisten()
	if err != nil {
		k.say(d, msgSocketNotBound(k.path, err))
		return
	}
	if err := k.ctl.Replace(l); errors.Is(err, net.ErrClosed) {
		return // the daemon is stopping
	}
	k.dev, k.ino, _ = fileID(k.path)
	k.said = ""
	d.log.Warn("the control socket was removed; bound it again", "socket", k.path)
}

// say logs a trouble with the socket, once until it changes or is over.
func (k *socketKeeper) say(d *Daemon, msg string) {
	if msg != k.said {
		d.log.Error(msg, "socket", k.path)
		k.said = msg
	}
}

// fileID is the device and inode of the file at path.
func fileID(path string) (dev, ino uint64, err error) {
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return 0, 0, &fs.PathError{Op: "stat", Path: path, Err: err}
	}
	return st.Dev, st.Ino, nil
}
