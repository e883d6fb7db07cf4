package supervisor

import (
	"time"

	"github.com/berthd/berth/supervisor/store"
)

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
	evShutdown    eventKind = 15 // the daemon is going away
	evPolicy      eventKind = 16 // its restart policy was edited
)

const lastEvent = evPolicy

var eventNames = map[eventKind]string{
	evStart: "start", evRestart: "restart", evRedefine: "redefine", evStop: "stop",
	evDisable: "disable", evInvalid: "invalid", evPlaced: "placed", evUnplaceable: "unplaceable",
	evSpawned: "spawned", evSpawnFailed: "spawn failed", evExited: "exited", evTimeout: "timeout",
	evBackoffDone: "backoff done", evEnable: "enable", evShutdown: "shutdown", evPolicy: "policy",
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
	// evExited: the kernel killed it for going over its memory limit, or
	// its unit's RuntimeMaxSec ended it (while the daemon was away).
	oom, timedOut bool
	// evExited: systemd stopped its unit (a person stopped the unit or
	// berth's slice): a stop, where the job then rests.
	stoppedOutside bool
	// evExited: stoppedOutside by the machine's shutdown: lost, as a run
	// the machine took down with it, and run again once it is back.
	// evSpawnFailed: refused by the shutdown, and queued again.
	machineStopping bool
	// evStart, evRedefine, evEnable: the definition that can run again
	// (or is enabled again) already ran to done, so a job that was done
	// beneath rests done again (life.beneath).
	stillDone bool
	// evStop: the job rests done, and runs again after a parent that runs
	// or is to run a new definition (Daemon.outdated): the stop holds it,
	// stopped, as it holds a job that waits.
	outdated bool
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
	actGiveUp        actionKind = 9 // say that the policy restarts it no more (why: reason)
)

type action struct {
	kind   actionKind
	delay  time.Duration // actArmBackoff
	reason store.Reason  // actRecordEnd
	again  bool          // actWait: queued again, its wait goes on (waited since it began)
	// actGiveUp: why the policy restarts it no more.
	why giveUp
}

// giveUp is why a job that failed, and would be restarted, is not.
type giveUp uint8

const (
	giveUpMaxRestarts giveUp = 1 // max_restarts in a row were made
	giveUpPolicy      giveUp = 2 // an edit of restart or max_restarts called off the restart armed
)

// then is what the end of the run in progress leads to. In memory only.
type then uint8

const (
	// thenPolicy: the restart policy judges the end (the zero value: a run
	// that ends on its own, or by its timeout).
	thenPolicy then = 0
	// thenRerun: queue again for a fresh run (a restart, an edit).
	thenRerun then = 1
	// thenRest: rest in pendingStop.rest (a person's stop, a disable, a
	// definition that cannot run).
	thenRest then = 2
	// thenLeave: the daemon is going away. The end is recorded and nothing
	// is decided: where the job stood is left for the next daemon, which
	// runs it again.
	thenLeave then = 3
)

// pendingStop is what is pending for the run in progress: why it is being
// stopped, if it is, and what follows once it has been reaped. It replaces
// separate flags that could disagree; the zero value is a run that goes on.
type pendingStop struct {
	// why is store.ReasonStopped or store.ReasonTimedOut while the run is being
	// stopped, zero while it is left to end by itself (on_change =
	// "finish" sets then alone).
	why  store.Reason
	then then
	rest store.State // thenRest: where the job rests
	// held: a person's stop, which a disable or a definition that cannot
	// run came over while the run stopped; it holds beneath where the job
	// rests (rest), as it does of a job stopped, then disabled.
	held bool
	// settled, for a timeout, is where it leaves the job once the run is
	// reaped: failed where the restart policy will not restart after it,
	// else backoff, its restarts then settledRestarts. It is recorded
	// meanwhile, so that a daemon gone before that leaves the job there
	// (failed, or waiting out the restart's delay) rather than running it
	// again at once, and ends the run timed out (Daemon.reconcile).
	settled         store.State
	settledRestarts int
}

// life is a job's state and the counters its transitions need.
type life struct {
	state store.State
	since time.Time // when state last changed
	// Restarts in a row, and the delay before the next one.
	restarts int
	delay    time.Duration
	// failed: the last run failed (what the restart policy judged). A
	// job in backoff restored by a new daemon is taken to have failed.
	failed  bool
	started time.Time // when the current or last run started
	// pending is what the end of the current run leads to; only ever set
	// while a run is in progress.
	pending pendingStop
	// beneath is where a job invalid or disabled rests beneath: done or
	// stopped, or 0 (it runs once its definition can). Done: it was
	// done when its definition became one that cannot run, or its run
	// ended done while it could not; it is done again once the
	// definition can run, if that definition already ran to done (a job
	// runs to completion once per definition, whatever came between).
	// Stopped: a person stopped it, before or since; it stays stopped
	// until they start it. Only ever set while invalid or disabled.
	beneath store.State
}

// backBeneath reports whether e, which lets an invalid or disabled job
// run again, puts it back where it rests beneath instead: stopped, or done
// where its definition already ran to done.
func (l life) backBeneath(e event) bool {
	return l.beneath == store.StateStopped || l.beneath == store.StateDone && e.stillDone
}

// active reports whether a run is in progress: a grant is held.
func (l life) active() bool {
	return l.state == store.StateStarting || l.state == store.StateRunning || l.state == store.StateStopping
}

// finishingInvalid reports whether the run in progress goes on while its
// job's definition cannot run, the job to rest invalid once it ends.
func (l life) finishingInvalid() bool {
	return l.state == store.StateRunning && l.pending.why == 0 && l.pending.then == thenRest && l.pending.rest == store.StateInvalid
}

// recorded is the state kept for the next daemon: the state, but for a
// person's stop or a timeout under way, where the job rests once its run
// is reaped, so that a daemon gone meanwhile leaves it stopped or failed
// (the next one sees the stop through, Daemon.reconcile).
func (l life) recorded() store.State {
	if l.state == store.StateStopping && l.pending.then == thenRest && (l.pending.rest == store.StateStopped || l.pending.held) {
		return store.StateStopped
	}
	if l.settling() {
		return l.pending.settled
	}
	if l.beneath != 0 {
		// Invalid or disabled are said by the definition, which the next
		// daemon reads again; where the job rests beneath is not, and is
		// kept.
		return l.beneath
	}
	return l.state
}

// recordedRestarts is the restarts in a row kept for the next daemon with
// recorded: those the timeout under way leads to, where it settles.
func (l life) recordedRestarts() int {
	if l.settling() {
		return l.pending.settledRestarts
	}
	return l.restarts
}

// settling reports whether the run is being stopped for its timeout, the
// job to go where pending.settled says once it is reaped.
func (l life) settling() bool {
	return l.state == store.StateStopping && l.pending.then == thenPolicy && l.pending.settled != 0
}

// restAfter maps the events that put a job to rest to where it rests.
var restAfter = map[eventKind]store.State{evStop: store.StateStopped, evDisable: store.StateDisabled, evInvalid: store.StateInvalid}

// step is the whole of a job's life as a pure function: given where it is
// and what happened, where it goes and what must be done. Events that do
// not apply to a state change nothing, with one exception: a grant that
// arrives when the job no longer waits is given straight back.
func step(l life, p restartPolicy, e event, now time.Time) (life, []action) {
	next := l
	var acts []action
	to := func(s store.State, a ...action) {
		next.state = s
		acts = append(acts, a...)
	}
	do := func(k actionKind) action { return action{kind: k} }
	fresh := func() { next.restarts, next.delay = 0, 0 }
	stopping := func(why store.Reason, th then) {
		next.pending = pendingStop{why: why, then: th}
		to(store.StateStopping, do(actStop))
	}

	switch e.kind {
	case evEnable:
		switch {
		case l.state != store.StateDisabled:
		case l.backBeneath(e):
			to(l.beneath)
		default:
			fresh()
			to(store.StateWaiting, do(actWait))
		}

	case evStart, evRestart, evRedefine:
		switch l.state {
		case store.StateWaiting:
			if e.kind == evRedefine {
				// What it asked may have changed: queue again.
				to(store.StateWaiting, do(actCancelWait), action{kind: actWait, again: true})
			}
		case store.StateStarting, store.StateRunning:
			switch {
			case e.kind == evStart:
				if l.finishingInvalid() {
					// Its definition can run again: the policy judges the
					// end of its run, as before.
					next.pending = pendingStop{}
				}
			case e.kind == evRedefine && e.finish:
				next.pending.then = thenRerun
			default:
				stopping(store.ReasonStopped, thenRerun)
			}
		case store.StateStopping:
			// Run again once reaped (a run that timed out is recorded so,
			// and a person's start runs it again whatever the restart
			// policy would have made of it); nothing overrides the daemon
			// going away.
			if l.pending.then != thenLeave {
				next.pending.then = thenRerun
			}
		case store.StateBackoff:
			fresh()
			to(store.StateWaiting, do(actCancelBackoff), do(actWait))
		case store.StateDisabled:
			// evEnable is the way out; a start or an edit does not undo it.
		default: // done, failed, stopped, invalid, unplaceable, or new
			if e.kind != evRestart && l.backBeneath(e) {
				to(l.beneath) // invalid a while, and fine again
				break
			}
			if l.state != 0 {
				// New, it keeps the restarts in a row that a previous
				// daemon counted (Daemon.remembered).
				fresh()
			}
			to(store.StateWaiting, do(actWait))
		}

	case evStop, evDisable, evInvalid:
		rest := restAfter[e.kind]
		switch l.state {
		case store.StateWaiting:
			to(rest, do(actCancelWait))
		case store.StateStarting, store.StateRunning:
			if e.kind == evInvalid && l.state == store.StateRunning {
				// What made it invalid (a flavor or a parent removed, a
				// user gone) is no reason to kill a run placed and
				// started while it was fine: as an edited flavor keeps
				// running grants, it runs on, and rests once it ends.
				next.pending.then, next.pending.rest = thenRest, rest
				break
			}
			stopping(store.ReasonStopped, thenRest)
			next.pending.rest = rest
		case store.StateStopping:
			// Where it rests changes; why it was stopped does not (a run
			// that timed out is recorded so, whoever stops it next).
			if l.pending.then != thenLeave {
				held := l.pending.held || l.pending.then == thenRest && l.pending.rest == store.StateStopped
				next.pending.then, next.pending.rest = thenRest, rest
				next.pending.held = held && rest != store.StateStopped
			}
		case store.StateBackoff:
			// The restart armed is not made, nor counted (trial AX: a
			// job stopped in its backoff showed a restart it never had).
			next.restarts = max(0, l.restarts-1)
			to(rest, do(actCancelBackoff))
		case store.StateDisabled, store.StateInvalid:
			switch {
			case e.kind == evStop:
				// It stays as it is, and stopped beneath: a person's
				// stop holds once it may run again.
				next.beneath = store.StateStopped
			case l.state == store.StateInvalid:
				to(rest) // and the same beneath
			}
		case store.StateUnplaceable:
			// Stopped, it stays so once it fits (a flavor made smaller,
			// a larger machine): it runs when it is started.
			to(rest)
		case store.StateDone, store.StateFailed, store.StateStopped, 0:
			switch {
			case e.kind != evStop:
				if l.state == store.StateDone || l.state == store.StateStopped {
					next.beneath = l.state
				}
				to(rest)
			case e.outdated && l.state == store.StateDone:
				to(rest) // as a job that waits is
			}
		}

	case evShutdown:
		switch l.state {
		case store.StateWaiting:
			acts = append(acts, do(actCancelWait))
		case store.StateBackoff:
			acts = append(acts, do(actCancelBackoff))
		case store.StateStarting, store.StateRunning:
			stopping(store.ReasonStopped, thenLeave)
		case store.StateStopping:
			// A stop under way finishes as it was meant to: a person's stop
			// is where the job rests, a timeout is judged by the policy.
			// Only a rerun is dropped.
			if l.pending.then == thenRerun {
				next.pending.then = thenLeave
			}
		}

	case evPlaced:
		if l.state == store.StateWaiting {
			to(store.StateStarting, do(actSpawn))
		} else {
			acts = append(acts, do(actGive))
		}

	case evUnplaceable:
		if l.state == store.StateWaiting {
			to(store.StateUnplaceable)
		}

	case evSpawned:
		if l.state == store.StateStarting {
			next.started = now
			to(store.StateRunning)
		}

	case evSpawnFailed:
		if l.state == store.StateStarting {
			acts = append(acts, do(actGive), action{kind: actRecordEnd, reason: store.ReasonSpawnError})
			next.started = now
			next.pending = pendingStop{}
			if e.machineStopping {
				// Refused by the machine's shutdown: no failure of its
				// own, and it runs once the machine is back.
				to(store.StateWaiting, do(actWait))
				break
			}
			next = ended(next, p, true, now, &acts)
		}

	case evExited:
		if !l.active() {
			break
		}
		pending := l.pending
		next.pending = pendingStop{}
		reason, failed := store.ReasonExited, e.failed
		switch {
		case pending.why == store.ReasonTimedOut:
			reason, failed = store.ReasonTimedOut, true
		case pending.why != 0 && e.killed:
			reason = store.ReasonKilled
		case pending.why != 0:
			reason = pending.why
		case e.stoppedOutside && e.machineStopping:
			// Where it was going stands (a definition that cannot run
			// rests invalid); where the policy would judge the end, it
			// runs again.
			reason = store.ReasonLost
			if pending.then == thenPolicy {
				pending.then = thenRerun
			}
		case e.stoppedOutside:
			reason, pending.then, pending.rest = store.ReasonStopped, thenRest, store.StateStopped
		case e.oom:
			// A process of the run went over its memory, the main one or
			// another: the run failed even where the main one exited 0,
			// as its unit did.
			reason, failed = store.ReasonOOM, true
		case e.timedOut:
			reason, failed = store.ReasonTimedOut, true
		case e.failed:
			reason = store.ReasonFailed
		}
		acts = append(acts, do(actGive), action{kind: actRecordEnd, reason: reason})
		switch pending.then {
		case thenRerun:
			fresh()
			to(store.StateWaiting, do(actWait))
		case thenRest:
			if pending.rest == store.StateInvalid && pending.why == 0 {
				// Ran on while its definition could not run, and ended by
				// itself: done if the policy would call it so.
				if d := decideRestart(p, failed, now.Sub(l.started), l.restarts, l.delay); !d.restart && d.final == store.StateDone {
					next.beneath = store.StateDone
				}
			}
			if pending.held {
				next.beneath = store.StateStopped
			}
			to(pending.rest)
		case thenLeave:
			// Left where it stood: the next daemon runs it again.
		default:
			next = ended(next, p, failed, now, &acts)
		}

	case evTimeout:
		if l.state == store.StateRunning {
			if l.finishingInvalid() {
				stopping(store.ReasonTimedOut, thenRest) // and no restart
				next.pending.rest = store.StateInvalid
				break
			}
			stopping(store.ReasonTimedOut, thenPolicy)
			if d := decideRestart(p, true, now.Sub(l.started), l.restarts, l.delay); d.restart {
				next.pending.settled, next.pending.settledRestarts = store.StateBackoff, d.restarts
			} else {
				next.pending.settled, next.pending.settledRestarts = d.final, d.restarts
			}
		}

	case evBackoffDone:
		if l.state == store.StateBackoff {
			to(store.StateWaiting, do(actWait))
		}

	case evPolicy:
		// An edit applies in place, to the restart armed too: one the
		// new policy would not have made is called off.
		if l.state == store.StateBackoff && !p.wants(l.failed, l.restarts-1) {
			final := store.StateDone
			if l.failed {
				final = store.StateFailed
			}
			next.restarts = max(0, l.restarts-1) // the one armed is not made
			to(final, do(actCancelBackoff), action{kind: actGiveUp, why: giveUpPolicy})
		}
	}

	if next.state != store.StateInvalid && next.state != store.StateDisabled {
		next.beneath = 0
	}
	if next.state != l.state {
		next.since = now
	}
	return next, acts
}

// ended applies the restart policy to a run that ended on its own.
func ended(l life, p restartPolicy, failed bool, now time.Time, acts *[]action) life {
	d := decideRestart(p, failed, now.Sub(l.started), l.restarts, l.delay)
	l.restarts, l.delay, l.failed = d.restarts, d.next, failed
	switch {
	case d.restart:
		l.state = store.StateBackoff
		*acts = append(*acts, action{kind: actArmBackoff, delay: d.delay})
	case p.wants(failed, -1):
		// It would restart, but for max_restarts: said, or the log's
		// last word on it is its exit.
		l.state = d.final
		*acts = append(*acts, action{kind: actGiveUp, why: giveUpMaxRestarts})
	default:
		l.state = d.final
	}
	return l
}

// redefinition is what a reload changed about a job.
type redefinition struct {
	invalid  bool // the new definition cannot run
	disabled bool // enabled = false
	process  bool // what the process is changed (cmd, dir, env, user, resources…)
	finish   bool // on_change = "finish"
	requeue  bool // what it asks of the placer changed (resources, priority, limits)
}

// redefined picks the event that a new definition means for a job in l;
// ok is false when it means nothing (a policy edit applies in place).
func redefined(l life, r redefinition) (e event, ok bool) {
	restingAs := func(s store.State) bool {
		return l.state == store.StateStopping && l.pending.then == thenRest && l.pending.rest == s
	}
	switch {
	case r.invalid:
		return event{kind: evInvalid}, true
	case r.disabled:
		return event{kind: evDisable}, true
	case l.state == store.StateDisabled:
		return event{kind: evEnable}, true
	case l.state == store.StateStopped, restingAs(store.StateStopped):
		// A person stopped it: an edit applies from its next start, which
		// is theirs to ask for (berth start), as with a stopped unit.
		return event{}, false
	case (restingAs(store.StateDisabled) || restingAs(store.StateInvalid)) && l.pending.held:
		// Fine again before its run was reaped: the person's stop it was
		// under holds.
		return event{kind: evStop}, true
	case restingAs(store.StateDisabled), restingAs(store.StateInvalid):
		// Disabled or invalid a moment ago, fine again before its run was
		// reaped: run it again once it is.
		return event{kind: evStart}, true
	case r.process:
		return event{kind: evRedefine, finish: r.finish}, true
	case l.finishingInvalid():
		return event{kind: evStart}, true // fine again while its run went on
	case l.state == store.StateBackoff:
		// Its restart policy may be what changed: the restart armed is
		// judged again.
		return event{kind: evPolicy}, true
	case l.state == store.StateWaiting && r.requeue:
		// A flavor was edited, or the priority changed: queue again with
		// what the job now asks.
		return event{kind: evRedefine}, true
	case l.state == 0, l.state == store.StateInvalid, l.state == store.StateUnplaceable:
		// New, or refused before: the definition may be fine now.
		return event{kind: evStart}, true
	}
	return event{}, false
}

// refusal is why a person's request about a job is refused.
type refusal uint8

const (
	refuseNone     refusal = 0
	refuseDisabled refusal = 1 // enabled = false in its file
	refuseInvalid  refusal = 2 // its declaration cannot run
	// refuseUnplaceable: it fits no machine; started again, it would be
	// found so again at once.
	refuseUnplaceable refusal = 3
)

// admit decides whether a person's start, stop or restart (k) of a job in
// state s is taken, given whether its definition cannot run (invalid) or
// is disabled: the definition decides too, since a job being stopped
// because it was just disabled is not yet in state disabled. The control
// socket answers with the refusal; the job's goroutine asks again when the
// request reaches it, since the job may have moved in between. A stop is
// always taken. One whose definition fits no machine or its owner's quota
// now (unfit) is refused a restart, which would stop a run going on and
// start nothing (trial AR), and, at rest, a start (trial AS).
func admit(k eventKind, s store.State, invalid, disabled, unfit bool) refusal {
	switch {
	case k == evStop:
		return refuseNone
	case invalid || s == store.StateInvalid:
		return refuseInvalid
	case disabled || s == store.StateDisabled:
		return refuseDisabled
	case s == store.StateUnplaceable, unfit && (k == evRestart || resting(s) || s == store.StateStopping):
		return refuseUnplaceable
	}
	return refuseNone
}
