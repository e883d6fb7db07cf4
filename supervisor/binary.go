package supervisor

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// binary is the daemon's own executable, watched so that an upgrade that
// replaced it (a package, go install, a copy renamed into place, a link
// pointed elsewhere) is seen: the daemon runs on from the old file, and
// until it is restarted nothing of the new one is in force.
type binary struct {
	// path is the daemon's path as it was started, links unresolved: an
	// upgrade may point a link (alternatives, /usr/local/bin/berth ->
	// /opt/berth-1.2/berth) rather than replace a file.
	path     string
	dev, ino uint64 // the file it runs, which path led to at start
	// replaced is set once path leads to another file, or to none; it is
	// never cleared (the running image cannot come back).
	replaced atomic.Bool
}

// runningBinary finds the daemon's executable; nil where it cannot be
// told, and then no replacement is ever reported.
func runningBinary() *binary {
	path := os.Args[0]
	if !filepath.IsAbs(path) {
		found, err := exec.LookPath(path)
		if err != nil {
			return nil
		}
		if path, err = filepath.Abs(found); err != nil {
			return nil
		}
	}
	// /proc/self/exe is the file mapped, whatever its path leads to now.
	var st unix.Stat_t
	if err := unix.Stat("/proc/self/exe", &st); err != nil {
		return nil
	}
	return &binary{path: path, dev: st.Dev, ino: st.Ino}
}

// check reports whether the binary's path leads to another file than the
// one running; first is true for the call that found it so. It stats the
// path, so it is never called on the daemon's loop: a path on a mount that
// hangs must not stop the watchdog's pings.
func (b *binary) check() (replaced, first bool) {
	if b == nil {
		return false, false
	}
	if b.replaced.Load() {
		return true, false
	}
	var st unix.Stat_t
	err := unix.Stat(b.path, &st)
	if err == nil && st.Dev == b.dev && st.Ino == b.ino {
		return false, false
	}
	if err != nil && !os.IsNotExist(err) {
		return false, false // cannot tell: say nothing rather than cry wolf
	}
	return true, b.replaced.CompareAndSwap(false, true)
}

// binaryCheckEvery is how often the daemon looks whether its binary was
// replaced, so that the unit's status text says so within this long of an
// upgrade though nothing else changes; berth status also looks when it
// is asked.
const binaryCheckEvery = 10 * time.Second

// lookForUpgrades checks the binary every binaryCheckEvery until it is
// found replaced or ctx ends.
func (d *Daemon) lookForUpgrades(ctx context.Context) {
	every(ctx, binaryCheckEvery, d.checkBinary)
}

// every calls f every period until ctx ends, or f says it is done.
func every(ctx context.Context, period time.Duration, f func() (done bool)) {
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if f() {
				return
			}
		}
	}
}

// checkBinary looks whether the daemon's binary was replaced since it
// started. The first time it finds it so, it says so in the log and has
// the status line redone (Status reads the finding, never the disk).
func (d *Daemon) checkBinary() bool {
	replaced, first := d.bin.check()
	if first {
		d.log.Warn("the daemon's binary was replaced since it started: it runs the old one until it is restarted",
			"path", d.bin.path, "version", d.cfg.Version)
		d.changed.raise()
	}
	return replaced
}
