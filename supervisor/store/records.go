package store

import (
	"fmt"
	"time"
)

// RunRecord is one spawn of a job.
type RunRecord struct {
	ID          uint64 // unique across the store, increasing; from NextRunID's blocks, reserved on disk
	Job         string
	Fingerprint string // the job definition's process fingerprint when it ran
	CPUIDs      []int
	GPUs        []string // card names as the job saw them
	RAMBytes    int64
	// GPUMemBytes is the share of its card the run was given (gpu_mem), 0
	// for whole cards or none. GPUMemPeakBytes is the most card memory
	// its processes were seen to hold (the driver asked every few
	// seconds), 0 where never seen: how a share is sized, and how one
	// that went over it is told.
	GPUMemBytes     int64
	GPUMemPeakBytes int64
	PID             int
	StartTicks      uint64 // /proc/PID/stat field 22: recognises the process after a daemon restart despite PID reuse
	Start, End      time.Time
	// ExitCode is what the run's process exited with, where Signal is ""
	// and it ended (not lost, not a spawn error, not ended without exit).
	ExitCode int
	Signal   string // "SIGKILL" when it died by a signal, else ""
	Reason   Reason // 0 while running
	// Cause is why a run could not be started (ReasonSpawnError), as the
	// spawn said it: "program /opt/x does not exist"; why berth stopped
	// one (stopped, timed out, killed): "its definition changed"; or how
	// one ended that no one saw end. "" for a run that ended by itself.
	Cause string
	// Stopping is why berth began to stop the run (ReasonStopped or
	// ReasonTimedOut), Cause saying what asked for it; 0 for a run berth
	// did not stop. A run still open with Stopping set was being stopped
	// when its daemon went away: the next one ends it so, not lost.
	Stopping Reason
	// StopBegan is when that stop began (its signal sent), while the run
	// is open: the next daemon sees a stop its last one handed off through
	// to its stop_timeout counted from then. Zero once the end is
	// recorded, and in records written before it was kept.
	StopBegan time.Time
	// Mark is what the run was run after: the job's done record for it
	// (its process fingerprint and its batch parents' done records), kept
	// so that a run taken back by the next daemon, or a failed one, can be
	// compared with its parents as they are then. "" for a job with no
	// such parents, whose record is its Fingerprint.
	Mark string
}

// JobRecord is what survives a daemon restart about a job.
type JobRecord struct {
	Name            string
	State           State
	Fingerprint     string // process fingerprint of the definition last seen
	DoneFingerprint string // the definition whose last run ended done (once per definition), "" if none
	Restarts        int    // consecutive restarts so far (max_restarts counts these)
	Changed         time.Time
	// File is the job file that declared the job when it was recorded:
	// when two files declare one name, the one that won it before wins it
	// again after a restart. "" in records written before it was kept.
	File string
	// StoppedAll: the job rests stopped by a stop of every job (berth
	// stop --all), which a start of every job stopped so (berth start
	// --all) undoes; a job a person stopped on its own is not.
	StoppedAll bool
	// WaitedFor, for a job that rests invalid or unplaceable, is how long
	// it had waited when an edit left it unable to run: once it can, it
	// waits on as having waited so long, keeping its place in line.
	WaitedFor time.Duration
}

// State is where a job is in its life. States are stored, so each has an
// explicit number that never changes meaning; new states get new numbers.
type State uint8

// The states of DESIGN.md, "A job's life".
const (
	StateWaiting     State = 1  // in the placer's queue
	StateStarting    State = 2  // granted; the process is being spawned
	StateRunning     State = 3  // the process is running
	StateStopping    State = 4  // asked to stop; waiting for it to be reaped
	StateBackoff     State = 5  // waiting out the delay before a restart
	StateDone        State = 6  // exited 0 with nothing more to do
	StateFailed      State = 7  // ended badly, and no more restarts
	StateStopped     State = 8  // stopped by a person, or its file went away
	StateInvalid     State = 9  // the declaration cannot run (unknown flavor or user)
	StateUnplaceable State = 10 // fits no machine
	StateDisabled    State = 11 // enabled = false
)

var stateNames = map[State]string{
	StateWaiting:     "waiting",
	StateStarting:    "starting",
	StateRunning:     "running",
	StateStopping:    "stopping",
	StateBackoff:     "backoff",
	StateDone:        "done",
	StateFailed:      "failed",
	StateStopped:     "stopped",
	StateInvalid:     "invalid",
	StateUnplaceable: "unplaceable",
	StateDisabled:    "disabled",
}

func (s State) String() string {
	if s == 0 {
		return "new" // declared, not yet started; never stored
	}
	if name, ok := stateNames[s]; ok {
		return name
	}
	return fmt.Sprintf("state(%d)", uint8(s))
}

// Reason is why a run ended. Stored, so explicit numbers; zero means the run
// has not ended.
type Reason uint8

// The reasons of DESIGN.md.
const (
	ReasonExited     Reason = 1 // exited 0
	ReasonFailed     Reason = 2 // exited non-zero or by a signal it was not sent
	ReasonTimedOut   Reason = 3 // ran past its timeout and was stopped
	ReasonStopped    Reason = 4 // stopped on request (a person, an edit, a removal, shutdown)
	ReasonKilled     Reason = 5 // ignored its stop signal and was killed after stop_timeout
	ReasonLost       Reason = 6 // the daemon went away while it ran
	ReasonSpawnError Reason = 7 // could not be started at all
	ReasonOOM        Reason = 8 // killed by the kernel for going over its memory limit
)

var reasonNames = map[Reason]string{
	ReasonExited:     "exited",
	ReasonFailed:     "failed",
	ReasonTimedOut:   "timed out",
	ReasonStopped:    "stopped",
	ReasonKilled:     "killed after stop_timeout",
	ReasonLost:       "lost",
	ReasonSpawnError: "spawn error",
	ReasonOOM:        "out of memory",
}

func (r Reason) String() string {
	if r == 0 {
		return ""
	}
	if name, ok := reasonNames[r]; ok {
		return name
	}
	return fmt.Sprintf("reason(%d)", uint8(r))
}
