package units

import (
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"sync"

	"golang.org/x/sys/unix"
)

// On the unified hierarchy systemd learns of an OOM kill in a unit's cgroup
// (memory.events) and says so (Result=oom-kill). Where the memory
// controller is still cgroup v1's (systemd's "hybrid" and "legacy" modes,
// a distribution's older default), systemd cannot tell an OOM kill from any
// other SIGKILL, and the unit's cgroup is removed as soon as it is empty,
// so nothing can be read afterwards. There, berth asks the kernel itself,
// as runc does for containers: an eventfd registered on the cgroup's
// memory.oom_control is signalled at each OOM in the cgroup, and once more
// when the cgroup is removed.

// oomWatch counts the OOM kills in one run's v1 memory cgroup. A signal
// is taken as an OOM kill when the cgroup is still there as it is read:
// the kernel signals an OOM before the process it kills has even ended,
// and the removal only once the cgroup is empty and gone. So the eventfd
// is read as soon as it is signalled, by a goroutine blocked in Go's
// poller (no thread), and once more when the run ends.
type oomWatch struct {
	dir  string   // the cgroup's directory in the memory hierarchy
	efd  *os.File // the eventfd, read by follow through the poller
	fd   int      // the same, for a last read past the poller
	done chan struct{}

	mu     sync.Mutex // guards oomed
	oomed  bool
	closed sync.Once
}

// watchOOM starts counting the OOM kills of cgroup (a unit's ControlGroup)
// under root's v1 memory hierarchy; nil where there is none, or where the
// kernel refuses (the count is then systemd's alone).
func watchOOM(root, cgroup string) *oomWatch {
	if cgroup == "" {
		return nil
	}
	dir := filepath.Join(root, "memory", cgroup)
	control, err := os.OpenFile(filepath.Join(dir, "cgroup.event_control"), os.O_WRONLY, 0)
	if err != nil {
		return nil // not v1, or the cgroup is gone already
	}
	defer control.Close()
	oc, err := os.Open(filepath.Join(dir, "memory.oom_control"))
	if err != nil {
		return nil
	}
	// The kernel keeps what it needs of it once registered.
	defer oc.Close()
	fd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		return nil
	}
	if _, err := control.WriteString(strconv.Itoa(fd) + " " + strconv.Itoa(int(oc.Fd()))); err != nil {
		unix.Close(fd)
		return nil
	}
	// Non-blocking, so os.File reads it through the runtime's poller.
	w := &oomWatch{dir: dir, efd: os.NewFile(uintptr(fd), "oom eventfd"), fd: fd, done: make(chan struct{})}
	go w.follow()
	return w
}

// follow takes each signal as it comes, until the cgroup is gone or the
// watch is closed.
func (w *oomWatch) follow() {
	defer close(w.done)
	var b [8]byte
	for {
		n, err := w.efd.Read(b[:])
		if err != nil {
			return
		}
		if !w.signalled(count(b[:n])) {
			return
		}
	}
}

// signalled judges a read of the eventfd, n signals: one while the cgroup
// is still there is an OOM; once it is gone, one of them is its removal,
// and any more were OOMs. It reports whether the cgroup is still there.
func (w *oomWatch) signalled(n uint64) bool {
	_, err := os.Stat(w.dir)
	gone := errors.Is(err, os.ErrNotExist)
	if n > 1 || n == 1 && !gone {
		w.mu.Lock()
		w.oomed = true
		w.mu.Unlock()
	}
	return !gone
}

// count is what a read of an eventfd says: its counter, 0 for nothing.
func count(b []byte) uint64 {
	if len(b) != 8 {
		return 0
	}
	return binary.NativeEndian.Uint64(b)
}

// killed says whether an OOM kill happened in the cgroup; asked once the
// run has ended. It stops the watch.
func (w *oomWatch) killed() bool {
	// A signal follow has not taken yet (reads of an eventfd are atomic:
	// one of the two gets it).
	var b [8]byte
	if n, err := unix.Read(w.fd, b[:]); err == nil {
		w.signalled(count(b[:n]))
	}
	w.close()
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.oomed
}

func (w *oomWatch) close() {
	w.closed.Do(func() {
		// Closing the file ends follow's read.
		w.efd.Close()
		<-w.done
	})
}
