package supervisor

import "fmt"

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

// resting reports whether a job stays in s until something happens to it:
// where a restarted daemon must find it again (a done job is not run twice,
// a person's stop holds). The other states a restarted daemon recomputes.
func (s State) resting() bool {
	switch s {
	case StateDone, StateFailed, StateStopped, StateInvalid, StateUnplaceable, StateDisabled:
		return true
	}
	return false
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
)

var reasonNames = map[Reason]string{
	ReasonExited:     "exited",
	ReasonFailed:     "failed",
	ReasonTimedOut:   "timed out",
	ReasonStopped:    "stopped",
	ReasonKilled:     "killed after stop_timeout",
	ReasonLost:       "lost",
	ReasonSpawnError: "spawn error",
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
