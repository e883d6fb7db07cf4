package runner

import (
	"errors"
	"fmt"
	"io/fs"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

// A process begins with its parent's oom_score_adj, and with the floor
// below which it may not lower it without CAP_SYS_RESOURCE: the kernel
// copies both when it forks, and exec keeps them. os.StartProcess has no
// hook between the fork and the exec, and a helper that set the value and
// then executed the job would cost an exec per start. So the daemon itself
// takes the job's value for the moment of the fork and its own back once
// the job has executed: the child is never at the daemon's value, not even
// for the instructions between fork and exec, and neither is anything it
// forks.
//
// The child's value is its own from the fork on, so putting the daemon's
// back cannot reach it. The kernel does apply a write to every process that
// shares the writer's memory, but not to a vfork child, which is how Go
// forks (CLONE_VM|CLONE_VFORK), and os.StartProcess returns only once the
// child has executed, or failed to, by when it shares nothing.

// ownScore is the daemon's own /proc/self/oom_score_adj.
var ownScore scoreFile

const ownScorePath = "/proc/self/oom_score_adj"

type scoreFile struct {
	// mu guards the rest, and is held from reading the daemon's value
	// until it is back, across the fork: shared by the Starts that find
	// the value they want (the daemon's own, in the usual case), which
	// fork at once and side by side; exclusive for a flip. A Start that
	// found the value it wanted must not fork while another has the
	// daemon at a different one; and of two flips that interleaved, the
	// second would take the first's value for the daemon's own, and leave
	// the daemon at it. os.StartProcess takes syscall.ForkLock while mu is
	// held; nothing takes them the other way round.
	//
	// Exclusive for every Start, mu cost each start its place beside the
	// other's: os.StartProcess's work around the fork (the argv and
	// environment copied, the pidfd) went one start at a time, and 1 000
	// short jobs on two cores took about 10 % longer.
	mu sync.RWMutex
	// fd stays open once opened, so that a Start reads the value with one
	// pread instead of an open, a read and a close. The value itself is
	// read every time: something outside the daemon (an administrator
	// with choom) may change it at any moment, and a stale copy would make
	// Start skip a flip it needs, starting the job at the daemon's value,
	// or put back a value the daemon no longer had.
	fd     int
	opened bool
	// readOnly is why fd could only be opened for reading: a daemon that
	// is not root and not dumpable does not own its /proc files. It can
	// still start jobs at the value it has.
	readOnly error
}

// startAtScore calls fork with the daemon's oom_score_adj at want, and puts
// the daemon's own value back once fork returns; fork must start a process
// and return only once it has executed (or failed to), as os.StartProcess
// does. Where the daemon is at want already, nothing is written.
//
//	err                   fork was not called: the daemon's value could not
//	                      be read, or it could not take want (*OOMScoreAdjError)
//	restoreErr            fork was called, and the daemon could not take its
//	                      own value back: it is left at want (*OOMScoreAdjError)
//	both nil              fork was called, and the daemon is at its own value
//
// When want cannot be taken, nothing is started rather than a job at the
// daemon's value: a job must never have the daemon's protection. When the
// daemon's own value cannot be put back, the job is started all the same,
// and the daemon runs on at the job's value. That loses the daemon its
// protection, which the caller should report, but costs no job its start,
// and does not make the daemon the OOM killer's first choice: its score
// is still its size (tens of megabytes) against the jobs' (gigabytes).
//
// Restoring can fail only where something changed the floor during the
// fork, or where the daemon's value is below its floor, which only the
// deprecated /proc/PID/oom_adj can do. Otherwise the write of want either
// came from a daemon with CAP_SYS_RESOURCE, which may set any value, or left
// the floor where it was, at or below the daemon's own value.
func startAtScore(want int, fork func()) (restoreErr, err error) {
	if forkAtScore(&ownScore, want, fork) {
		return nil, nil
	}
	ownScore.mu.Lock()
	defer ownScore.mu.Unlock()
	return flipScore(&ownScore, want, fork)
}

// forkAtScore calls fork, holding s shared, where the daemon is at want
// already, and says whether it did. Otherwise (a flip is needed, the file
// is not open yet, or it could not be read) the caller takes s exclusive
// and sees to it.
func forkAtScore(s *scoreFile, want int, fork func()) bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if !s.opened {
		return false // opening writes s: done exclusive
	}
	if own, err := s.read(); err != nil || own != want {
		return false
	}
	fork()
	return true
}

// score is a process's oom_score_adj: the daemon's own, or a test's stand-in.
type score interface {
	read() (int, error)
	write(v int) error
}

// flipScore is startAtScore on s, with s held.
func flipScore(s score, want int, fork func()) (restoreErr, err error) {
	own, err := s.read()
	if err != nil {
		return nil, err
	}
	if own == want {
		fork()
		return nil, nil
	}
	if err := s.write(want); err != nil {
		return nil, &OOMScoreAdjError{Daemon: own, Job: want, Err: err}
	}
	fork()
	if err := s.write(own); err != nil {
		return &OOMScoreAdjError{Restore: true, Daemon: own, Job: want, Err: err}, nil
	}
	return nil, nil
}

// read returns the daemon's value, opening the file on first use (with s
// held exclusive; once open, a read writes nothing of s). A failed
// open is not remembered: the next Start tries again, as a descriptor may
// have been short for a moment (EMFILE).
func (s *scoreFile) read() (int, error) {
	if !s.opened {
		fd, err := unix.Open(ownScorePath, unix.O_RDWR|unix.O_CLOEXEC, 0)
		var readOnly error
		if errors.Is(err, unix.EACCES) {
			readOnly = &fs.PathError{Op: "open", Path: ownScorePath, Err: err}
			fd, err = unix.Open(ownScorePath, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		}
		if err != nil {
			return 0, &fs.PathError{Op: "open", Path: ownScorePath, Err: err}
		}
		s.fd, s.opened, s.readOnly = fd, true, readOnly
	}
	var buf [16]byte
	n, err := unix.Pread(s.fd, buf[:], 0)
	if err != nil {
		return 0, fmt.Errorf("read %s: %w", ownScorePath, err)
	}
	v, err := strconv.Atoi(strings.TrimSpace(string(buf[:n])))
	if err != nil {
		return 0, fmt.Errorf("read %s: %w", ownScorePath, err)
	}
	return v, nil
}

func (s *scoreFile) write(v int) error {
	if s.readOnly != nil {
		return s.readOnly
	}
	_, err := unix.Pwrite(s.fd, []byte(strconv.Itoa(v)), 0)
	return err
}
