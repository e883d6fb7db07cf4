package supervisor

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
	"golang.org/x/sys/unix"

	"github.com/berthd/berth/accounting"
	"github.com/berthd/berth/luaapi"
	"github.com/berthd/berth/supervisor/runner"
)

// job is one declared job and the goroutine that owns its life. The
// daemon's loop talks to it only through its mailbox, and reads it only
// through view; everything else belongs to the goroutine.
type job struct {
	name string
	d    *Daemon
	log  hclog.Logger
	in   *mailbox[jobMessage]
	// done is closed when the goroutine returns, so that helpers still
	// holding a result for it give it back instead of blocking.
	done chan struct{}

	mu sync.Mutex // guards v
	v  jobView

	// Owned by the daemon's loop: the definition it last sent, to diff
	// the next reload against.
	seenDef     *luaapi.Job
	seenInvalid string

	// Owned by the goroutine.
	def     *luaapi.Job
	defFP   string // def.ProcessFingerprint(), kept: a hash of the definition
	invalid string // why the definition cannot run, "" when it can
	// doneFP is the definition whose last run ended done, as stored.
	doneFP  string
	life    life
	removed bool
	waitGen uint64
	ticket  *accounting.Ticket
	book    *accounting.Book
	grant   accounting.Grant
	run     runState
	// exitC is the running process's Done, nil when there is none or its
	// exit has been taken.
	exitC     <-chan struct{}
	stopped   chan bool
	timeout   *time.Timer
	backoff   *time.Timer
	waitingAt time.Time
}

// runState is the run in progress, if any.
type runState struct {
	id    uint64
	proc  *runner.Process
	gpus  []string
	start time.Time
	exit  runner.Exit
	// after is called once the run was reaped (closes the output sink).
	after func()
}

// jobMessage is what the daemon's loop posts to a job.
type jobMessage struct {
	// def, when set, is the job's new definition, and invalid why it
	// cannot run. processChanged says it is a different process;
	// otherwise only policy or the resolved resources changed.
	def            *luaapi.Job
	invalid        string
	processChanged bool
	// requeue: what the job asks of the placer changed (resources,
	// priority, or the limits that bound its grant); a waiting job queues
	// again. Any other edit leaves its place in the queue alone.
	requeue bool
	// ev is an event for step (start, restart, stop…), applied after def.
	ev *event
	// placed is the placer's answer to a wait.
	placed *placement
	// remove: the job is gone from the files; stop it and end.
	remove bool
}

// placement is the placer's grant for one wait.
type placement struct {
	gen   uint64
	book  *accounting.Book
	grant accounting.Grant
}

// jobView is what the daemon shows about a job; a copy is taken under mu.
type jobView struct {
	Def      *luaapi.Job
	State    State
	Since    time.Time
	Restarts int
	// Why: why it waits, failed, or cannot run, in words.
	Why   string
	Run   uint64
	PID   int
	Grant accounting.Grant
	GPUs  []string
	// Waiting since, for ordering and status.
	WaitingSince time.Time
}

func (d *Daemon) newJob(def *luaapi.Job, invalid string, initial life, doneFP string) *job {
	j := &job{
		name:        def.Name,
		d:           d,
		log:         d.log.Named("job").With("job", def.Name),
		in:          newMailbox[jobMessage](),
		done:        make(chan struct{}),
		def:         def,
		defFP:       def.ProcessFingerprint(),
		invalid:     invalid,
		seenDef:     def,
		seenInvalid: invalid,
		life:        initial,
		stopped:     make(chan bool, 1),
	}
	j.publish()
	return j
}

func (j *job) view() jobView {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.v
}

func (j *job) policy() restartPolicy {
	return restartPolicy{mode: j.def.Restart, maxRestarts: j.def.MaxRestarts}
}

// loop is the job's goroutine. It returns when ctx ends (after stopping any
// run) or when the job was removed and is at rest.
func (j *job) loop(ctx context.Context) {
	defer close(j.done)
	for {
		var timeoutC, backoffC <-chan time.Time
		if j.timeout != nil {
			timeoutC = j.timeout.C
		}
		if j.backoff != nil {
			backoffC = j.backoff.C
		}
		select {
		case <-j.in.wake:
			if ctx.Err() != nil {
				// Shutting down: a grant handed over now is given back
				// rather than started and killed.
				j.shutdown()
				return
			}
			for _, m := range j.in.drain() {
				j.receive(m)
			}
		case <-j.exitC:
			j.exitC = nil
			j.reaped(j.run.proc.Wait())
		case <-timeoutC:
			j.timeout = nil
			j.apply(event{kind: evTimeout})
		case <-backoffC:
			j.backoff = nil
			j.apply(event{kind: evBackoffDone})
		case <-ctx.Done():
			j.shutdown()
			return
		}
		if j.removed && !j.life.active() {
			j.cancelWait()
			j.giveBackPlacements()
			return
		}
	}
}

func (j *job) receive(m jobMessage) {
	if m.placed != nil {
		j.placed(*m.placed)
	}
	if m.def != nil {
		old := j.def
		j.def, j.defFP, j.invalid = m.def, m.def.ProcessFingerprint(), m.invalid
		if j.life.state == StateRunning && m.def.Timeout != old.Timeout &&
			m.def.Timeout > 0 && (old.Timeout == 0 || m.def.Timeout < old.Timeout) {
			// Only a shorter limit applies to the run in progress: its grant
			// was placed as ending by the old one, and the placer plans the
			// head's start on that.
			j.rearmTimeout()
		}
		switch {
		case m.invalid != "":
			j.apply(event{kind: evInvalid})
		case !m.def.Enabled:
			j.apply(event{kind: evDisable})
		case j.life.state == StateDisabled:
			j.apply(event{kind: evEnable})
		case j.life.state == StateStopping && (j.life.after == StateDisabled || j.life.after == StateInvalid):
			// Disabled or invalid a moment ago, fine again before its run
			// was reaped: run it again once it is.
			j.apply(event{kind: evStart})
		case m.processChanged:
			j.apply(event{kind: evRedefine, finish: m.def.OnChange == luaapi.OnChangeFinish})
		case j.life.state == StateWaiting && m.requeue:
			// A flavor was edited, or the priority changed: queue again
			// with what the job now asks.
			j.apply(event{kind: evRedefine})
		case j.life.state == 0, j.life.state == StateInvalid, j.life.state == StateUnplaceable:
			// New, or refused before: the definition may be fine now.
			j.apply(event{kind: evStart})
		}
	}
	if m.ev != nil && !j.removed {
		if j.invalid != "" && (m.ev.kind == evStart || m.ev.kind == evRestart) {
			j.apply(event{kind: evInvalid})
		} else {
			j.apply(*m.ev)
		}
	}
	if m.remove {
		j.removed = true
		j.apply(event{kind: evStop})
	}
	j.publish()
}

// apply runs an event, and the events its actions produce, through step.
func (j *job) apply(e event) {
	queue := []event{e}
	for len(queue) > 0 {
		e := queue[0]
		queue = queue[1:]
		before := j.life.state
		var acts []action
		j.life, acts = step(j.life, j.policy(), e, j.d.now())
		for _, a := range acts {
			if next, ok := j.do(a); ok {
				queue = append(queue, next)
			}
		}
		if j.life.state != before {
			j.log.Debug("state changed", "from", before.String(), "to", j.life.state.String(), "event", e.kind.String())
			j.persist()
		}
	}
	j.publish()
}

// do performs one action; it may produce the next event.
func (j *job) do(a action) (event, bool) {
	switch a.kind {
	case actWait:
		return j.wait()
	case actCancelWait:
		j.cancelWait()
	case actSpawn:
		return j.spawn()
	case actStop:
		j.stop()
	case actGive:
		j.give()
	case actRecordEnd:
		j.recordEnd(a.reason)
	case actArmBackoff:
		j.log.Info("restarting after a delay", "delay_ms", a.delay.Milliseconds(), "restarts", j.life.restarts)
		j.backoff = time.NewTimer(a.delay)
	case actCancelBackoff:
		if j.backoff != nil {
			j.backoff.Stop()
			j.backoff = nil
		}
	}
	return event{}, false
}

func (j *job) request() accounting.Request {
	req := accounting.Request{Holder: j.name, Resources: j.def.Resources, Priority: j.def.Priority}
	if j.def.Timeout > 0 {
		// The longest the grant can be held: the run's limit and the time
		// it is then given to stop.
		req.Limit = j.def.Timeout + j.def.StopTimeout
	}
	return req
}

func (j *job) wait() (event, bool) {
	j.cancelWait()
	j.waitGen++
	j.waitingAt = j.d.now()
	if j.def.Resources.Unaccounted() {
		// Unaccounted jobs never wait and hold nothing.
		return event{kind: evPlaced}, true
	}
	gen := j.waitGen
	t, err := j.d.placer.Submit(j.request(), func(b *accounting.Book, g accounting.Grant) {
		// Under the placer's lock: hand it over, nothing more.
		j.in.post(jobMessage{placed: &placement{gen: gen, book: b, grant: g}})
	})
	var unplaceable *accounting.UnplaceableError
	if errors.As(err, &unplaceable) {
		j.setWhy(fmt.Sprintf("%sjob %q %v (berth machine shows what it has)", posPrefix(j.def.Pos), j.name, unplaceable))
		j.log.Warn("job fits no machine", "cpus", j.def.Resources.CPUs, "gpus", j.def.Resources.GPUs, "ram_bytes", j.def.Resources.RAMBytes)
		return event{kind: evUnplaceable}, true
	}
	j.ticket = t
	return event{}, false
}

// cancelWait withdraws the job from the placer's queue. A grant that raced
// the withdrawal is already in the mailbox, and is given back when it is
// read: its generation is no longer current.
func (j *job) cancelWait() {
	if j.ticket != nil {
		j.ticket.Cancel()
		j.ticket = nil
	}
	j.waitGen++
}

// giveBackPlacements empties the mailbox of grants before the goroutine
// ends, so that none is left held by a job nobody runs.
func (j *job) giveBackPlacements() {
	for _, m := range j.in.drain() {
		if m.placed != nil && m.placed.book != nil {
			_ = m.placed.book.Give(m.placed.grant)
		}
	}
}

func (j *job) placed(p placement) {
	if p.gen != j.waitGen || j.life.state != StateWaiting {
		// An answer to a wait that was withdrawn: never ours to keep.
		if p.book != nil {
			_ = p.book.Give(p.grant)
		}
		return
	}
	j.ticket = nil
	j.book, j.grant = p.book, p.grant
	j.log.Info("placed", "cpus", len(p.grant.CPUIDs), "gpus", j.d.cardNames(p.grant.GPUs), "ram_bytes", p.grant.RAMBytes,
		"waited_ms", j.d.now().Sub(j.waitingAt).Milliseconds())
	j.apply(event{kind: evPlaced})
}

func (j *job) give() {
	if j.book != nil {
		if err := j.book.Give(j.grant); err != nil {
			j.log.Error("grant given back twice", "error", err)
		}
	}
	j.book, j.grant = nil, accounting.Grant{}
}

// spawn records the run, then starts it: a run is on record before its
// process can have exited.
func (j *job) spawn() (event, bool) {
	now := j.d.now()
	gpus := j.d.cardNames(j.grant.GPUs)
	rec, err := j.d.store.BeginRun(RunRecord{
		Job: j.name, Fingerprint: j.defFP,
		CPUIDs: j.grant.CPUIDs, GPUs: gpus, RAMBytes: j.grant.RAMBytes, Start: now,
	})
	if err != nil {
		rec.ID = j.d.localRunID()
		j.d.notRecorded(j.log, "cannot record the run; running it anyway", "run", rec.ID, "error", err)
	}
	j.run = runState{id: rec.ID, gpus: gpus, start: now}

	proc, after, err := j.d.start(j, rec.ID)
	if err != nil {
		j.setWhy(fmt.Sprintf("cannot start: %v (berth show %s shows its command, directory and user)", err, j.name))
		j.log.Error("cannot start", "run", rec.ID, "error", err)
		return event{kind: evSpawnFailed}, true
	}
	j.run.proc, j.run.after = proc, after
	if ticks, err := proc.StartTicks(); err == nil {
		if !isLocalRunID(rec.ID) {
			j.d.later.SetRunPID(rec.ID, proc.PID(), ticks)
		}
	}
	j.log.Info("started", "run", rec.ID, "pid", proc.PID(), "gpus", gpus, "cpus", len(j.grant.CPUIDs))
	if j.def.Timeout > 0 {
		j.timeout = time.NewTimer(j.def.Timeout)
	}
	j.exitC = proc.Done()
	j.setWhy("")
	return event{kind: evSpawned}, true
}

// rearmTimeout applies an edited timeout to the run in progress, counted
// from the run's start: policy edits apply in place.
func (j *job) rearmTimeout() {
	if j.timeout != nil {
		j.timeout.Stop()
		j.timeout = nil
	}
	if j.def.Timeout > 0 {
		j.timeout = time.NewTimer(max(0, j.run.start.Add(j.def.Timeout).Sub(j.d.now())))
	}
}

func (j *job) stop() {
	proc := j.run.proc
	if proc == nil {
		return
	}
	sig, timeout := j.def.StopSignal, j.def.StopTimeout
	j.log.Info("stopping", "run", j.run.id, "pid", proc.PID(), "signal", signalName(sig), "stop_timeout_ms", timeout.Milliseconds())
	go func() { j.stopped <- proc.Stop(sig, timeout) }()
}

func (j *job) reaped(exit runner.Exit) {
	if j.timeout != nil {
		j.timeout.Stop()
		j.timeout = nil
	}
	killed := false
	if j.life.state == StateStopping {
		// Stop returns right after the reaping we were just told of.
		killed = <-j.stopped
		j.d.sweepLater(j.run.id)
	}
	j.run.exit = exit
	if j.run.after != nil {
		j.run.after()
	}
	failed := exit.Code != 0 || exit.Signal != 0 || exit.Err != nil
	j.apply(event{kind: evExited, failed: failed, killed: killed})
}

func (j *job) recordEnd(reason Reason) {
	now := j.d.now()
	exit := j.run.exit
	sig := ""
	if exit.Signal != 0 {
		sig = signalName(exit.Signal)
	}
	if j.run.id != 0 && !isLocalRunID(j.run.id) {
		j.d.later.EndRun(j.run.id, now, exit.Code, sig, reason)
	}
	kv := []any{"run", j.run.id, "reason", reason.String(), "duration_ms", now.Sub(j.run.start).Milliseconds()}
	if sig != "" {
		kv = append(kv, "signal", sig)
	} else if reason != ReasonSpawnError {
		kv = append(kv, "exit_code", exit.Code)
	}
	if reason != ReasonSpawnError {
		// A spawn error keeps the error itself as its why.
		j.setWhy(whyEnded(reason, exit.Code, sig, j.def.Timeout))
	}
	if reason == ReasonExited || reason == ReasonStopped {
		j.log.Info("exited", kv...)
	} else {
		j.log.Warn("exited", kv...)
	}
	// The run is over. Cleared here, inside the step that ended it, because
	// the same step may start the next run (an unaccounted job is placed at
	// once).
	j.run = runState{}
}

// whyEnded says how a run ended, for status: "exit 3", "killed by
// SIGSEGV", "timed out after 12h".
func whyEnded(reason Reason, code int, sig string, timeout time.Duration) string {
	switch reason {
	case ReasonExited:
		return "exit 0"
	case ReasonFailed:
		if sig != "" {
			return "killed by " + sig
		}
		return fmt.Sprintf("exit %d", code)
	case ReasonTimedOut:
		return "timed out after " + accounting.FormatDuration(timeout)
	}
	return reason.String()
}

// shutdown stops the run in progress with the job's own signal and timeout,
// and gives everything back. The job's stored state is left as it was, so
// the next daemon runs it again.
func (j *job) shutdown() {
	j.cancelWait()
	j.giveBackPlacements()
	if j.backoff != nil {
		j.backoff.Stop()
	}
	if j.run.proc != nil {
		var killed bool
		if j.life.state == StateStopping {
			// A stop is under way: let it finish rather than signal again
			// (a second SIGINT interrupts a job's own cleanup).
			j.run.exit = j.run.proc.Wait()
			killed = <-j.stopped
		} else {
			killed = j.run.proc.Stop(j.def.StopSignal, j.def.StopTimeout)
			j.run.exit = j.run.proc.Wait()
		}
		j.exitC = nil
		// Escapees first: one that holds the output pipe would keep
		// after's wait for the output going to its bound.
		j.d.sweepLater(j.run.id)
		if j.run.after != nil {
			j.run.after()
		}
		reason := ReasonStopped
		switch {
		case j.life.timedOut:
			reason = ReasonTimedOut
		case killed:
			reason = ReasonKilled
		}
		j.recordEnd(reason)
		// A person's stop (or a disable) that was under way is where the
		// job rests; anything else runs again with the next daemon.
		switch j.life.after {
		case StateStopped, StateDisabled, StateInvalid:
			j.life.state, j.life.since = j.life.after, j.d.now()
			j.persist()
		}
	}
	j.give()
}

// persist writes what must survive a daemon restart. A removed job writes
// nothing more: its record is left as it was before the removal, so a job of
// that name declared again later starts as a job would (and the goroutine
// still stopping cannot overwrite the newcomer's record).
func (j *job) persist() {
	if j.removed {
		return
	}
	fp := j.defFP
	if j.life.state == StateDone {
		j.doneFP = fp
	}
	rec := JobRecord{Name: j.name, State: j.life.state, Fingerprint: fp, DoneFingerprint: j.doneFP,
		Restarts: j.life.restarts, Changed: j.life.since}
	if !j.life.state.resting() {
		j.d.later.PutJob(rec)
		return
	}
	// Where the job rests is on disk before anyone is shown it: a batch
	// job seen done is not run again by the next daemon, however this one
	// ends. The run's end, queued before, goes into the same commit.
	if err := j.d.store.PutJob(rec); err != nil {
		j.d.notRecorded(j.log, "cannot record the job's state", "state", rec.State.String(), "error", err)
	}
}

func (j *job) setWhy(why string) {
	j.mu.Lock()
	j.v.Why = why
	j.mu.Unlock()
}

// publish refreshes the view and tells the daemon something changed.
func (j *job) publish() {
	j.mu.Lock()
	j.v.Def = j.def
	j.v.State = j.life.state
	j.v.Since = j.life.since
	j.v.Restarts = j.life.restarts
	j.v.Run = j.run.id
	j.v.PID = 0
	if j.run.proc != nil {
		j.v.PID = j.run.proc.PID()
	}
	j.v.Grant = j.grant
	j.v.GPUs = slices.Clone(j.run.gpus)
	j.v.WaitingSince = j.waitingAt
	if j.invalid != "" && j.life.state == StateInvalid {
		j.v.Why = j.invalid
	}
	j.mu.Unlock()
	j.d.changed.raise()
}

func signalName(sig syscall.Signal) string { return unix.SignalName(sig) }
