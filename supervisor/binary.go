package supervisor

import (
	"os"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// binary is the daemon's own executable, watched so that an upgrade that
// replaced it (a package, go install, a copy renamed into place) is seen:
// the daemon runs on from the old file, and until it is restarted nothing
// of the new one is in force.
type binary struct {
	path     string // where the daemon was started from
	dev, ino uint64 // the file it runs, which the path named at start
	// replaced is set once the path names another file, or none; it is
	// never cleared (the running image cannot come back).
	replaced atomic.Bool
}

// runningBinary finds the daemon's executable; nil where it cannot be
// told, and then no replacement is ever reported.
func runningBinary() *binary {
	path, err := os.Executable()
	if err != nil {
		return nil
	}
	// /proc/self/exe is the file mapped, whatever its path names now.
	var st unix.Stat_t
	if err := unix.Stat("/proc/self/exe", &st); err != nil {
		return nil
	}
	return &binary{path: path, dev: st.Dev, ino: st.Ino}
}

// check reports whether the binary's path names another file than the one
// running; first is true for the call that found it so.
func (b *binary) check() (replaced, first bool) {
	if b == nil {
		return false, false
	}
	if b.replaced.Load() {
		return true, false
	}
	var st unix.Statx_t
	err := unix.Statx(unix.AT_FDCWD, b.path, 0, unix.STATX_INO, &st)
	if err == nil && unix.Mkdev(st.Dev_major, st.Dev_minor) == b.dev && st.Ino == b.ino {
		return false, false
	}
	if err != nil && !os.IsNotExist(err) {
		return false, false // cannot tell: say nothing rather than cry wolf
	}
	return true, b.replaced.CompareAndSwap(false, true)
}

// binaryReplaced reports whether the daemon's binary was replaced since it
// started. The first time it finds it so, it says so in the log and has
// the status line redone.
func (d *Daemon) binaryReplaced() bool {
	replaced, first := d.bin.check()
	if first {
		d.log.Warn("the daemon's binary was replaced since it started: it runs the old one until it is restarted",
			"path", d.bin.path, "version", d.cfg.Version)
		d.changed.raise()
	}
	return replaced
}
