package supervisor

import "time"

// eventKind is what happened to a job. Events live only in memory.
type eventKind uint8

const (
	evStart       eventKind = 1  // run it if it is not running or about to: new job, `berth start`, a re-examination
	evRestart     eventKind = 2  // run it afresh, stopping the current run: `berth restart`
	evRedefine    eventKind = 3  // what the process is changed (cmd, env, resources…)
	evStop        eventKind = 4  // a person stopped it, or its file went away
	evDisable     eventKind = 5  // enabled = false
	evInvalid     eventKind = 6  // its declaration cannot run: unknown flavor or user
	evPlaced      eventKind = 7  // the placer granted what it asked
	evUnplaceable eventKind = 8  // it fits no machine
	evSpawned     eventKind = 9  // its process exists
	evSpawnFailed eventKind = 10 // its process could not be started
	evExited      eventKind = 11 // its process was reaped
	evTimeout     eventKind = 12 // the run outlived its timeout
	evBackoffDone eventKind = 13 // the restart delay is over
	evEnable      eventKind = 14 // enabled = true again
)

const lastEvent = evEnable

var eventNames = map[eventKind]string{
	evStart: "start", evRestart: "restart", evRedefine: "redefine", evStop: "stop",
	evDisable: "disable", evInvalid: "invalid", evPlaced: "placed", evUnplaceable: "unplaceable",
	evSpawned: "spawned", evSpawnFailed: "spawn failed", evExited: "exited", evTimeout: "timeout",
	evBackoffDone: "backoff done", evEnable: "enable",
}

func (k eventKind) String() string { return eventNames[k] }

type event struct {
	kind eventKind
	// evRedefine: let the current run finish first (on_change = "finish").
	finish bool
	// evExited: a non-zero exit or death by a signal.
	failed bool
	// evExited: the stop signal was ignored and SIGKILL was needed.
	killed bool
}

// actionKind is a side effect step asks for; the job's goroutine performs
// them in order.
type actionKind uint8

const (
	actWait          actionKind = 1 // enter the placer's queue
	actCancelWait    actionKind = 2 // leave it (a grant that races this comes back as a stale evPlaced)
	actSpawn         actionKind = 3 // record the run's start, then spawn it
	actStop          actionKind = 4 // stop_signal to the group, SIGKILL after stop_timeout
	actGive          actionKind = 5 // give the grant back; only ever after the run was reaped
	actRecordEnd     actionKind = 6 // record how the run ended
	actArmBackoff    actionKind = 7 // deliver evBackoffDone after delay
	actCancelBackoff actionKind = 8
)

type action struct {
	kind   actionKind
	delay  time.Duration // actArmBackoff
	reason Reason        // actRecordEnd
}

// life is a job's state and the counters its transitions need.
type life struct {
	state State
	since time.Time // when state last changed
	// Restarts in a row, and the delay before the next one.
	restarts int
	delay    time.Duration
	started  time.Time // when the current or last run started

	// While stopping: where to rest once the run is reaped (StateWaiting to
	// run again); zero when the restart policy decides, after a timeout.
	after    State
	timedOut bool
	// While running: run again when this run ends (on_change = "finish").
	rerun bool
}

// active reports whether a run is in progress: a grant is held.
func (l life) active() bool {
	return l.state == StateStarting || l.state == StateRunning || l.state == StateStopping
}

// step is the whole of a job's life as a pure function: given where it is
// and what happened, where it goes and what must be done. Events that do
// not apply to a state change nothing, with one exception: a grant that
// arrives when the job no longer waits is given straight back.
func step(l life, p restartPolicy, e event, now time.Time) (life, []action) {
	next := l
	var acts []action
	to := func(s State, a ...action) {
		next.state = s
		acts = append(acts, a...)
	}
	do := func(k actionKind) action { return action{kind: k} }
	fresh := func() { next.restarts, next.delay = 0, 0 }

	switch e.kind {
	case evEnable:
		if l.state == StateDisabled {
			fresh()
			to(StateWaiting, do(actWait))
		}

	case evStart, evRestart, evRedefine:
		switch l.state {
		case StateWaiting:
			if e.kind == evRedefine {
				// What it asked may have changed: queue again.
				to(StateWaiting, do(actCancelWait), do(actWait))
			}
		case StateStarting, StateRunning:
			switch {
			case e.kind == evStart:
			case e.kind == evRedefine && e.finish:
				next.rerun = true
			default:
				next.after, next.timedOut, next.rerun = StateWaiting, false, false
				to(StateStopping, do(actStop))
			}
		case StateStopping:
			// Run again once reaped; but a plain start does not override a
			// timeout, whose aftermath the restart policy decides (after 0).
			if e.kind != evStart || l.after != 0 {
				next.after = StateWaiting
			}
		case StateBackoff:
			fresh()
			to(StateWaiting, do(actCancelBackoff), do(actWait))
		case StateDisabled:
			// evEnable is the way out; a start or an edit does not undo it.
		default: // done, failed, stopped, invalid, unplaceable, or new
			fresh()
			to(StateWaiting, do(actWait))
		}

	case evStop, evDisable, evInvalid:
		rest := map[eventKind]State{evStop: StateStopped, evDisable: StateDisabled, evInvalid: StateInvalid}[e.kind]
		switch l.state {
		case StateWaiting:
			to(rest, do(actCancelWait))
		case StateStarting, StateRunning:
			next.after, next.timedOut, next.rerun = rest, false, false
			to(StateStopping, do(actStop))
		case StateStopping:
			next.after = rest
		case StateBackoff:
			to(rest, do(actCancelBackoff))
		case StateDisabled:
		case StateDone, StateFailed, StateStopped, StateInvalid, StateUnplaceable, 0:
			if e.kind != evStop {
				to(rest)
			}
		}

	case evPlaced:
		if l.state == StateWaiting {
			to(StateStarting, do(actSpawn))
		} else {
			acts = append(acts, do(actGive))
		}

	case evUnplaceable:
		if l.state == StateWaiting {
			to(StateUnplaceable)
		}

	case evSpawned:
		if l.state == StateStarting {
			next.started = now
			to(StateRunning)
		}

	case evSpawnFailed:
		if l.state == StateStarting {
			acts = append(acts, do(actGive), action{kind: actRecordEnd, reason: ReasonSpawnError})
			next.started = now
			next = ended(next, p, true, now, &acts)
		}

	case evExited:
		switch l.state {
		case StateStarting, StateRunning:
			reason := ReasonExited
			if e.failed {
				reason = ReasonFailed
			}
			acts = append(acts, do(actGive), action{kind: actRecordEnd, reason: reason})
			if l.rerun {
				next.rerun = false
				fresh()
				to(StateWaiting, do(actWait))
				break
			}
			next = ended(next, p, e.failed, now, &acts)
		case StateStopping:
			reason := ReasonStopped
			switch {
			case l.timedOut:
				reason = ReasonTimedOut
			case e.killed:
				reason = ReasonKilled
			}
			acts = append(acts, do(actGive), action{kind: actRecordEnd, reason: reason})
			after := l.after
			next.after, next.timedOut = 0, false
			switch after {
			case 0: // stopped by its timeout: a failure, for the restart policy
				next = ended(next, p, true, now, &acts)
			case StateWaiting:
				fresh()
				to(StateWaiting, do(actWait))
			default:
				to(after)
			}
		}

	case evTimeout:
		if l.state == StateRunning {
			next.timedOut, next.after, next.rerun = true, 0, false
			to(StateStopping, do(actStop))
		}

	case evBackoffDone:
		if l.state == StateBackoff {
			to(StateWaiting, do(actWait))
		}
	}

	if next.state != l.state {
		next.since = now
	}
	return next, acts
}

// ended applies the restart policy to a run that ended on its own.
func ended(l life, p restartPolicy, failed bool, now time.Time, acts *[]action) life {
	d := decideRestart(p, failed, now.Sub(l.started), l.restarts, l.delay)
	l.restarts, l.delay = d.restarts, d.next
	if d.restart {
		l.state = StateBackoff
		*acts = append(*acts, action{kind: actArmBackoff, delay: d.delay})
	} else {
		l.state = d.final
	}
	return l
}
