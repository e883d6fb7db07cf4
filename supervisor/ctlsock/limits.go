package ctlsock

import (
	"fmt"
	"time"

	"golang.org/x/sys/unix"
)

// Limits are the caps of one control socket. LimitsFor chooses them.
type Limits struct {
	// NoFile is the limit on open descriptors the caps were chosen from,
	// and Reserve how many of those connections can never take: the
	// daemon's own, whatever its clients do.
	NoFile, Reserve int
	// PerUID is how many connections one uid may hold open.
	PerUID int
	// Total is how many all uids together may hold open.
	Total int
	// Privileged is how many more root and the daemon's own uid may hold
	// once PerUID or Total stops them, so that an administrator can always
	// run berth status, whatever everyone else holds.
	Privileged int
	// Refusing is how many connections over the caps may be being
	// answered at once; past that, one is closed unanswered.
	Refusing int
	// IdleAtLimit is how long a connection may have been idle for it to
	// be closed when its uid, at its PerUID cap, asks for one more. The
	// server's own idle timeout would close it later anyway; this frees
	// the slot when it is wanted.
	IdleAtLimit time.Duration
}

const (
	// minReserve is the fewest descriptors kept from connections: a reload
	// holds the jobs directory and one job file at a time, the state holds
	// state.db and the watcher its inotify descriptor, and each job being
	// started needs its log file or journal stream, its output pipe and a
	// pidfd. 256 lets a reload run while a few dozen jobs start.
	minReserve = 256
	// reserveDivisor: past the floor a quarter of the limit is kept,
	// because every running job holds descriptors in the daemon for as
	// long as it runs (its pidfd and its output pipe's read end), and the
	// number of jobs grows with the machine, as the limit does.
	reserveDivisor = 4
	// maxTotal caps connections whatever the limit: no use of berth holds
	// a thousand at once, and each costs a goroutine and its buffers.
	maxTotal = 1024
	// minTotal is what connections keep when the limit is so low (under
	// about 300) that the reserve would leave none: a daemon nobody can ask
	// anything is worse than a smaller reserve.
	minTotal = 8
	// maxPerUID: each berth command uses one connection, and berth logs -f
	// holds one while it follows; 64 is a person's many terminals and
	// scripts, and far below what a client that leaks connections reaches.
	maxPerUID = 64
	// perUIDDivisor: one uid takes at most a quarter of Total, so that
	// four users can be at their cap before anyone is refused for the
	// total's sake.
	perUIDDivisor = 4
	// privileged is root's and the daemon user's allowance past the caps:
	// a few commands at once (a status, a reload, a monitoring probe).
	privileged = 8
	// refusing: a refusal holds its descriptor until its request is read
	// and answered, which takes microseconds, or refuseWithin for a client
	// that sends nothing; 16 keep up with a client that opens connections
	// in a loop.
	refusing = 16
	// idleAtLimit is long enough that a client which reuses its
	// connections does not lose one between two calls, and short beside
	// the server's 30 s idle timeout.
	idleAtLimit = 5 * time.Second
	// maxNoFile bounds the limit read from the kernel, which may say
	// "unlimited" (RLIM_INFINITY); the kernel itself allows no more open
	// descriptors than fs.nr_open, at most 2^30.
	maxNoFile = 1 << 30
)

// LimitsFor chooses the caps for a process that may have nofile
// descriptors open: a reserve of max(256, nofile/4) is kept for the
// daemon's own work, the privileged allowance and the refusals come out of
// the rest, and what is left is Total, at most 1024. One uid may hold a
// quarter of Total, at most 64.
//
// With berth.service's LimitNOFILE=65536 that is 1024 connections, 64 per
// uid, 8 more for root, and 64 488 descriptors the daemon keeps; with a
// soft limit of 1024, 744 connections, 64 per uid, and 256 kept.
func LimitsFor(nofile uint64) Limits {
	n := int(min(nofile, maxNoFile))
	reserve := max(minReserve, n/reserveDivisor)
	total := min(maxTotal, max(minTotal, n-reserve-privileged-refusing))
	return Limits{
		NoFile:      n,
		Reserve:     n - total - privileged - refusing,
		PerUID:      min(maxPerUID, max(1, total/perUIDDivisor)),
		Total:       total,
		Privileged:  privileged,
		Refusing:    refusing,
		IdleAtLimit: idleAtLimit,
	}
}

// Current chooses the caps from this process's soft RLIMIT_NOFILE.
//
// berth does not raise the limit itself: the Go runtime raises the soft
// limit to the hard one (less one) as the process starts (Go 1.19 and
// later, syscall/rlimit.go), and gives the processes it starts the soft
// limit the daemon was started with, so jobs see the limit their unit or
// shell set, not the daemon's. A call to setrlimit(RLIMIT_NOFILE) from the
// daemon would switch that restoring off (syscall.Setrlimit tells the
// runtime so), and jobs would inherit the raised limit: where more
// descriptors are wanted, LimitNOFILE= in berth.service is the place.
func Current() (Limits, error) {
	var r unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &r); err != nil {
		return Limits{}, fmt.Errorf("read RLIMIT_NOFILE: %w", err)
	}
	return LimitsFor(r.Cur), nil
}
