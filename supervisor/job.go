package supervisor

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
	"golang.org/x/sys/unix"

	"github.com/berthd/berth/accounting"
	"github.com/berthd/berth/luaapi"
	"github.com/berthd/berth/supervisor/clock"
	"github.com/berthd/berth/supervisor/runner"
	"github.com/berthd/berth/supervisor/store"
	"github.com/berthd/berth/supervisor/units"
)

// job is one declared job and the goroutine that owns its life: one at a
// time, for it ends while the job sleeps and another starts when it wakes
// (canSleep). The daemon's loop talks to it only through its
// mailbox, and reads it only through view; everything else belongs to the
// goroutine.
type job struct {
	name string
	d    *Daemon
	log  hclog.Logger
	in   *mailbox[jobMessage]
	// done is closed when the goroutine returns, so that helpers still
	// holding a result for it give it back instead of blocking.
	done chan struct{}
	// after, when set, is the done of the job of the same name that was
	// removed before this one was declared: this one waits for it.
	after <-chan struct{}
	// ctx is the daemon's jobsCtx, which ends the job's goroutine at
	// shutdown; unwatch stops its waking a sleeping job (start).
	ctx     context.Context
	unwatch func() bool

	mu sync.Mutex // guards v and redefs
	v  jobView
	// redefs are the new definitions of another process the loop has
	// handed the job (declare) and its goroutine has not taken yet
	// (receive). Meanwhile its state is the old definition's, and a
	// dependant takes it as no parent's (jobView.Redefining): a job
	// declared in the same reload as its parent's edit would otherwise
	// find the parent done, and run on the old definition's output.
	redefs int

	// Owned by the daemon's loop: the definition it last sent, to diff
	// the next reload against.
	seenDef     *luaapi.Job
	seenInvalid string

	// Owned by the goroutine.
	// redefsTaken, for an index of an array, are the redefs taken since
	// the last publish: the array's count (array.redefs) goes down with
	// the state they bring. settled counts the times redefs came back to
	// 0, which its dependants are told of (toldKey).
	redefsTaken int
	settled     uint64
	def         *luaapi.Job
	defFP       string // def.ProcessFingerprint(), kept: a hash of the definition
	invalid     string // why the definition cannot run, "" when it can
	// unfit is why a running job's definition, edited since its run was
	// placed, could never be placed again (MsgUnplaceable); "" otherwise.
	// Its run goes on, on the grant it has.
	unfit string
	// cause is the event being applied, whose actions are being done:
	// the log line of a stop says what asked for it.
	cause eventKind
	// doneFP is the definition whose last run ended done, as stored.
	doneFP string
	// wrote is the record persist last wrote, or queued.
	wrote   store.JobRecord
	life    life
	removed bool
	// removedWhy is why it was removed, where not for want of a file
	// that declares it: an index its array's range no longer includes,
	// a person's job whose owner left the group.
	removedWhy string
	waitGen    uint64
	// parked: an unaccounted wait, which the placer does not hold,
	// parked while the machine shuts down (Daemon.park).
	parked bool
	ticket *accounting.Ticket
	book   *accounting.Book
	grant  accounting.Grant
	run    runState
	// exitC is the running process's Done, nil when there is none or its
	// exit has been taken.
	exitC   <-chan struct{}
	stopped chan bool
	// timeout and backoff are the run's limit and the restart delay, on
	// the daemon's clock; nil when not armed.
	timeout   clock.Timer
	backoff   clock.Timer
	retryAt   time.Time // when backoff fires
	waitingAt time.Time
	// looked, when set, is called once the job has acted on its first
	// messages: it was born with others, which hold the placer till then.
	looked func()
	// waitedBefore is when the job's first wait here is taken to begin
	// (zero: when it does): when it began the wait it was in when the
	// last daemon stopped, or, for a job new to the line born with others,
	// the instant they all arrive at.
	waitedBefore time.Time
	// stoppedAll: the job rests stopped by a stop of every job (berth stop
	// --all), which berth start --all undoes; false for one a person
	// stopped on its own, which it leaves stopped (trial AG).
	stoppedAll bool
	// upstreamNew is, for a job done, what depGraph.renewing found upstream
	// of it when it last looked at its parents ("" for none): a dependant
	// held for it looks again when it changes, which no change of this
	// job's own state would tell it.
	upstreamNew string
	// waitedFor is how long the job had waited when an edit broke its
	// wait off, the job invalid or unplaceable since (a typo, a flavors
	// file moved away a moment): it waits again as having waited that
	// long, its place in line kept, the time it could not run not
	// counted. Zero otherwise.
	waitedFor time.Duration
	// waitMeasured, when after waitingAt, is where the next placement's
	// wait is measured from (the metrics, the log's waited_ms): a job
	// whose run the last daemon took down with it keeps its place in line
	// from its earlier wait, but did not wait all that time.
	waitMeasured time.Time
	// order is the job's place among the jobs born in this daemon, in the
	// order they are declared, those born later after: the placer's
	// tie-break for those that began to wait at one instant.
	order int
	// placedAt is when the current grant was made, for how long a start
	// takes.
	placedAt time.Time

	// held, while the job waits at the dependency gate (outside the
	// placer), is what it knows of its parents; nil otherwise.
	held []Dependency
	// pass lets the wait being entered past the gate once (berth start
	// --ignore-deps); passed says the wait in the placer's queue was let
	// past it, so that a parent's change does not take it out again.
	pass   bool
	passed bool
	// runMark is the done record of the run in progress or last run
	// (doneMark): what the job was run after.
	runMark string
	// end is how the last run ended, for the dependants' reasons.
	end lastEnd
	// told is what the dependants were last told of: they look again when
	// the state or the done record changes.
	told toldKey

	// arr, for an index of an array, is the array, and index its index;
	// inLine says the wait waits for the array's gate (outside the
	// placer, as held is for the parents).
	arr    *array
	index  int
	inLine bool
}

type toldKey struct {
	state      store.State
	doneFP     string
	redefining bool
	settled    uint64
}

// process is a run's process as the job drives it: a child of the daemon
// (runner.Process) or a systemd unit (units.Run).
type process interface {
	PID() int
	Done() <-chan struct{}
	Wait() runner.Exit
	// Stop sends sig (none where 0: it was sent before), then SIGKILL
	// once timeout has passed.
	Stop(sig syscall.Signal, timeout time.Duration) (killed bool)
	// MoveKill puts the SIGKILL of the stop under way left from now.
	MoveKill(left time.Duration)
}

// runState is the run in progress, if any.
type runState struct {
	id    uint64
	fp    string // the process fingerprint of the definition it started from
	proc  process
	gpus  []string
	cpus  int   // the cores granted
	ram   int64 // the memory granted, which a unit may not go over
	start time.Time
	exit  runner.Exit
	// spawnErr is why the process could not be started, nil once it was.
	spawnErr error
	// stopAsked: the stop is a person's (berth stop), after which the job
	// rests stopped.
	stopAsked bool
	// stopCause is why berth stopped it, for its record; "" while none
	// did.
	stopCause string
	// resumed is the stop the last daemon began on this run, taken back
	// with it (resumeStop); nil otherwise.
	resumed *resumedStop
	// stopBegan, once it is being stopped, is when the stop began (by
	// the last daemon, for a stop seen through); killAt is when its
	// SIGKILL comes.
	stopBegan, killAt time.Time
	// timedOutAfter, for a run being stopped for its timeout, is that
	// timeout as it was then: its end is said so, whatever an edit since
	// made of the job's (trial AP: "timed out after 1h", and "after 0s").
	timedOutAfter time.Duration
	// killerGone, for a unit's stop seen through, is closed once the
	// unit the last daemon left to SIGKILL it (HandOffKill) is gone: this
	// daemon's timer sends that SIGKILL now, where an edited stop_timeout
	// puts it, and a new killer is left should this daemon go too.
	killerGone <-chan struct{}
	// after is called once the run was reaped (closes the output sink).
	after func()
	// record is the run's record on its way to disk, for a run that is
	// the daemon's child: its process starts while the record commits.
	// nil where the record was written before the start (a unit), or
	// could not be begun.
	record *runRecord
	// shown: the run has been shown (its started line, the metrics, the
	// status), which it is only once its record is on disk, so that a run
	// anyone saw started is in the history after a crash.
	shown bool
	// toRunning is how long the start took, from the grant to the
	// process running, for the started line.
	toRunning time.Duration
}

// runRecord is a run's record being committed: done is closed, err set
// first, by the store's writer once the commit is over.
type runRecord struct {
	done chan struct{}
	err  error
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
	// redefined: the loop counted def in the job's redefs (redefining).
	redefined bool
	// ev is an event for step (start, restart, stop…), applied after def.
	ev *event
	// placed is the placer's answer to a wait.
	placed *placement
	// remove: the job is gone from the files; stop it and end.
	// removedWhy: why, where no file declaring it is not (job.removedWhy).
	remove     bool
	removedWhy string
	// ignoreDeps lets ev (a start) past the dependency gate once.
	ignoreDeps bool
	// all: ev is a stop or start of every job (berth stop --all, start
	// --all): a stop so marks the job it stops (stoppedAll), and a start so
	// starts only a job so marked.
	all bool
	// deps: a parent changed, or the graph did; look at the parents again.
	deps bool
	// admit: the array's gate lets this index's wait into the placer.
	admit bool
	// unpark: the machine's shutdown, which parked the job's wait
	// (Daemon.park), was called off.
	unpark bool
	// refit: its owner's quota changed; a run in progress asks whether
	// the job could run again (job.refit).
	refit bool
	// done, when set, is closed once the message has been acted on (or
	// the job ended first), and the job's view says what it did.
	done chan struct{}
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
	State    store.State
	Since    time.Time
	Restarts int
	// GaveUp: failed as its restart policy would have restarted it, but
	// for max_restarts.
	GaveUp bool
	// Why: why it waits, failed, or cannot run, in words.
	Why string
	// Invalid: why its definition cannot run; "" when it can. Unfit: why
	// a running job's edited definition could never be placed again.
	Invalid string
	Unfit   string
	Run     uint64
	PID     int
	Grant   accounting.Grant
	GPUs    []string
	// Waiting since, for ordering and status.
	WaitingSince time.Time
	// RetryAt, in backoff, is when it runs again.
	RetryAt time.Time
	// KillAt, while stopping, is when the stop's SIGKILL comes.
	KillAt time.Time
	// unit is the run's systemd unit, whose cgroup says what it uses; nil
	// for a run that is the daemon's child, or none.
	unit *units.Run
	// After, while it waits for its parents, is what it knows of them.
	After []Dependency
	// AfterRemoved: declared again, it waits for the run of its name's
	// removed job to end.
	AfterRemoved bool
	// InLine, for an index of an array, says it waits for the array's
	// gate (max_parallel, or another index in the queue).
	InLine bool
	// DoneFP is its done record (doneMark), which its dependants' records
	// name; LastEnd is how its last run ended.
	DoneFP  string
	LastEnd lastEnd
	// Outdated: its run in progress started from an earlier definition
	// than its own (on_change = "finish").
	Outdated bool
	// StoppedAll: it rests stopped by a stop of every job (job.stoppedAll).
	StoppedAll bool
	// RestsStopped: stopping, it rests stopped once its run has ended (a
	// stop under way already, which another changes nothing of).
	RestsStopped bool
	// Redefining: it was handed a definition of another process, which
	// it has not taken yet (job.redefs): its state is about to change.
	// settled, for an array, is array.settled (a job's are told apart
	// by job.settled).
	Redefining bool
	settled    uint64
}

// jobLogger is the logger of job name's lines: each names the job, and a
// person's job its owner too, which the journal keeps as BERTH_OWNER, as
// it keeps it of the job's own output (trial AW: journalctl
// _SYSTEMD_UNIT=berth.service BERTH_OWNER=alice found none).
func jobLogger(log hclog.Logger, name, owner string) hclog.Logger {
	if owner == "" {
		return log.Named("job").With("job", name)
	}
	return log.Named("job").With("job", name, "owner", owner)
}

// jobLog is the logger of the daemon's lines about job name, which may be
// one no job in force has (a run taken back, a removed job's output): each
// line names the job, and a person's its owner, as jobLogger's do.
func (d *Daemon) jobLog(name string) hclog.Logger {
	return jobLogger(d.log, name, ownerOf(name))
}

// newJob makes job name of definition def: def.Name, or an index of the
// array def declares.
func (d *Daemon) newJob(name string, def *luaapi.Job, invalid string, initial life, doneFP string) *job {
	j := &job{
		name:        name,
		d:           d,
		log:         jobLogger(d.log, name, def.Owner),
		in:          newMailbox[jobMessage](),
		done:        make(chan struct{}),
		def:         def,
		defFP:       def.ProcessFingerprint(),
		invalid:     invalid,
		seenDef:     def,
		seenInvalid: invalid,
		life:        initial,
		doneFP:      doneFP,
		stopped:     make(chan bool, 1),
	}
	j.in.resume = func() { d.workers.run(j.loop) }
	if initial.state == store.StateDone {
		j.runMark = doneFP
	}
	j.publish()
	return j
}

// readLastRun reads the last run of a job that starts failed: how it
// ended, for its dependants' reasons (named: some job names it), and what
// it was run after, to run it again once a parent runs a new definition
// (it has dependencies). Called by the loop before the job's goroutine
// starts, and only for such jobs: the others never pay the read.
func (j *job) readLastRun(named bool) {
	runs, err := j.d.store.Runs(j.name, 1)
	if err != nil || len(runs) != 1 || runs[0].End.IsZero() {
		return
	}
	r := runs[0]
	if j.def.HasDeps() {
		j.runMark = cmp.Or(r.Mark, r.Fingerprint)
	}
	if named {
		j.end = lastEnd{known: true, code: r.ExitCode, signal: r.Signal, reason: r.Reason}
		j.mu.Lock()
		j.v.LastEnd = j.end
		j.mu.Unlock()
	}
}

// restoreWhy says again why a job that a previous daemon left failed,
// stopped or waiting out a restart's delay is so, from its last run: the
// reason is not kept with the job. Before its goroutine starts.
func (j *job) restoreWhy() {
	why := store.ReasonStopped.String()
	runs, err := j.d.store.Runs(j.name, 1)
	if err == nil && len(runs) == 1 && !runs[0].End.IsZero() {
		r := runs[0]
		switch {
		case j.life.state == store.StateStopped && r.Reason != store.ReasonStopped && r.Reason != store.ReasonKilled:
			// Stopped after that run had ended (waiting, or between
			// restarts): that run's end is not why.
		case r.Reason == store.ReasonSpawnError && r.Cause != "":
			why = msgCannotStart(j.name, r.Cause)
		case r.Reason == store.ReasonSpawnError:
			why = msgSpawnErrorGone(j.name)
		default:
			why = MsgEnded(r.Reason, r.ExitCode, r.Signal, j.def.Timeout, r.RAMBytes)
		}
	} else if j.life.state != store.StateStopped {
		return
	}
	j.setWhy(why)
}

func (j *job) view() jobView {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.v
}

func (j *job) policy() restartPolicy {
	return restartPolicy{mode: j.def.Restart, maxRestarts: j.def.MaxRestarts}
}

// start starts the job's goroutine (loop) for the life of the job, which
// ends when ctx does or when the job was removed and is at rest. The
// goroutine may sleep meanwhile (canSleep), ending until something happens
// to the job: jobsWG counts jobs, not goroutines.
func (j *job) start(ctx context.Context) {
	j.ctx = ctx
	j.d.jobsWG.Add(1)
	j.unwatch = context.AfterFunc(ctx, j.in.wakeUp)
	j.d.workers.run(j.loop)
}

// finish ends the job, on its goroutine's way out for good.
func (j *job) finish() {
	// Whatever comes now (a stop racing the job's removal) is answered
	// at once: a grant given back, a request waited for told it is done.
	// Not in the poster's goroutine: the placer posts a grant under its
	// lock, which giving it back takes again.
	for _, m := range j.in.end(func(m jobMessage) { go bounced(m) }) {
		bounced(m)
	}
	j.unwatch()
	close(j.done)
	j.d.jobsWG.Done()
}

// loop is the job's goroutine, started by start, and again by its mailbox
// after it slept. It returns when ctx ends (after stopping any run), when
// the job was removed and is at rest, or to sleep.
func (j *job) loop() {
	ctx := j.ctx
	if j.after != nil {
		select {
		case <-j.after:
			j.after = nil
		case <-ctx.Done():
			j.drainAtEnd()
			j.finish()
			return
		}
	}
	for {
		var timeoutC, backoffC <-chan time.Time
		var recordC <-chan struct{}
		if j.timeout != nil {
			timeoutC = j.timeout.C()
		}
		if !j.run.shown && j.run.record != nil {
			recordC = j.run.record.done
		}
		if j.backoff != nil {
			backoffC = j.backoff.C()
		}
		select {
		case <-j.in.wake:
			if ctx.Err() != nil {
				// Shutting down: a grant handed over now is given back
				// rather than started and killed.
				j.shutdown()
				j.finish()
				return
			}
			for _, m := range j.in.drain() {
				j.receive(m)
			}
			if looked := j.looked; looked != nil {
				j.looked = nil
				looked()
			}
		case <-recordC:
			j.reveal()
			j.publish()
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
			j.finish()
			return
		}
		if j.removed && !j.life.active() {
			j.cancelWait()
			j.drainAtEnd()
			j.finish()
			return
		}
		if j.in.sleep(j.canSleep) {
			return
		}
	}
}

// refit asks, of a job whose run goes on, whether its definition (edited
// since the run was placed), or its owner's quota, lets it run again: a
// run is not stopped for either, but the job says that it will not run
// again (unfit), and a restart of it is refused.
func (j *job) refit() {
	was := j.unfit
	j.unfit = ""
	if j.life.state != store.StateRunning && j.life.state != store.StateStarting || j.invalid != "" {
		return
	}
	if j.unfit = j.d.unfit(j.name, j.def); j.unfit != "" && j.unfit != was {
		j.log.Warn("its run goes on, but it will not run again: it fits no machine now, or its owner's quota", "file", j.def.Pos.File, "line", j.def.Pos.Line, "why", j.unfit)
	}
}

// unfit says why a job of definition def would be found unplaceable were
// it placed now: it fits no machine, or its owner's quota; "" where it
// fits.
func (d *Daemon) unfit(name string, def *luaapi.Job) string {
	var ue *accounting.UnplaceableError
	if errors.As(d.placer.Placeable(requestOf(name, def)), &ue) {
		return MsgUnplaceable(def.Pos, def.Name, def.Flavor, ue)
	}
	return ""
}

// canSleep says whether the job's goroutine may end until something
// starts it again: a message, the end of its run or of ctx. That is so
// where it waits for nothing else: no timer is armed (a run's timeout, a
// restart's delay), no run's record is still to commit, and a run in
// progress is the daemon's own child, which calls back when it ends. A run
// as a unit, or with a timeout, keeps its goroutine.
func (j *job) canSleep() bool {
	if j.timeout != nil || j.backoff != nil || j.removed || j.ctx.Err() != nil {
		return false
	}
	if !j.run.shown && j.run.record != nil {
		return false // its record's commit is waited for
	}
	if j.exitC != nil {
		if _, wakes := j.run.proc.(*runner.Process); !wakes {
			return false // only the daemon's own child calls back (spawn)
		}
		select {
		case <-j.exitC:
			return false // ended meanwhile: its end is to be taken now
		default:
		}
	}
	return true
}

func (j *job) receive(m jobMessage) {
	if m.placed != nil {
		j.placed(*m.placed)
	}
	if m.def != nil {
		if m.redefined {
			// Taken: what it shows from now on is the new definition's.
			// Its dependants look again once none is on its way, even
			// where it shows what it did (an edit of a job stopped):
			// one that looked meanwhile was held.
			j.mu.Lock()
			j.redefs--
			settled := j.redefs == 0
			j.mu.Unlock()
			if settled {
				j.settled++
			}
			if j.arr != nil {
				j.redefsTaken++
			}
		}
		old := j.def
		if m.def != old {
			// A definition is not changed once evaluated: the same one
			// (a new job's first message) has the same fingerprint.
			j.defFP = m.def.ProcessFingerprint()
		}
		j.def, j.invalid = m.def, m.invalid
		j.refit()
		if j.life.state == store.StateRunning && (m.def.Timeout != old.Timeout || m.def.StopTimeout != old.StopTimeout) {
			j.retime()
		}
		if j.life.state == store.StateStopping && j.run.proc != nil && m.def.StopTimeout != old.StopTimeout {
			j.moveKill()
		}
		// A run in progress is judged by the definition it started from,
		// which may be earlier than the last one seen: one it let finish
		// (on_change = "finish"), or one edited while the job could not
		// run (a user or a flavor not there yet), and edited back since.
		process := m.processChanged
		if m.invalid == "" && j.run.fp != "" {
			process = j.run.fp != j.defFP
		}
		if e, ok := redefined(j.life, redefinition{
			invalid:  m.invalid != "",
			disabled: !m.def.Enabled,
			process:  process,
			// A definition that fits no machine lets the run finish
			// whatever its on_change: restarted, it would stop the run
			// and start nothing (trial AR: a typo, gpus = 3 for 2, lost
			// a run that the log said went on).
			finish:  m.def.OnChange == luaapi.OnChangeFinish || j.unfit != "",
			requeue: m.requeue,
		}); ok {
			if j.life.beneath == store.StateDone && e.kind != evInvalid && e.kind != evDisable {
				if parents, known := j.parentRecords(); known {
					e.stillDone, _ = stillDone(j.doneFP, j.defFP, parents)
				}
			}
			j.apply(e)
		}
		if j.held != nil && !j.removed {
			// Held at the gate: the edit may have changed what it waits
			// for (after is policy: no event of its own), or removed it.
			j.depsChanged()
		}
		if m.def.Pos.File != old.Pos.File && !j.removed {
			// Moved to another file, and recorded nowhere else: the file
			// on record is the one that wins the name after a restart.
			j.persist()
		}
	}
	if m.ev != nil && !j.removed && admit(m.ev.kind, j.life.state, j.invalid != "", !j.def.Enabled, j.unfit != "") == refuseNone {
		j.pass = m.ignoreDeps
		if m.ignoreDeps && j.life.state == store.StateWaiting && j.held != nil {
			j.log.Info("started past its dependencies")
			j.held = nil
			j.passed = true
			if e, ok := j.pastGates(time.Time{}); ok {
				j.apply(e)
			}
		} else {
			e := *m.ev
			if e.kind == evStop && j.life.state == store.StateDone {
				e.outdated = j.d.outdated(j.name, j.view())
			}
			unmarked := false
			if e.kind == evStop {
				switch wasStopped := j.life.recorded() == store.StateStopped; {
				case m.all && !wasStopped:
					// Stopped by this stop of every job: a start of every
					// job stopped so starts it again (apply records it,
					// and forgets it where the job does not rest stopped).
					j.stoppedAll = true
				case !m.all && j.stoppedAll:
					// Stopped on its own now too: a start of every job
					// leaves it (the review).
					j.stoppedAll, unmarked = false, true
				}
			}
			j.apply(e)
			if unmarked {
				j.persist()
			}
		}
		j.pass = false
	}
	if m.deps && !j.removed {
		j.depsChanged()
	}
	if m.refit {
		j.refit()
	}
	if m.unpark && j.parked && j.life.state == store.StateWaiting && !j.removed {
		j.parked = false
		if e, ok := j.enter(j.waitingAt); ok {
			j.apply(e)
		}
	}
	if m.admit && j.inLine && j.life.state == store.StateWaiting && !j.removed {
		j.inLine = false
		if e, ok := j.pastGates(time.Time{}); ok {
			j.apply(e)
		}
	}
	if m.remove {
		j.forgetWait()
		j.removed, j.removedWhy = true, m.removedWhy
		j.apply(event{kind: evStop})
	}
	j.publish()
	if m.done != nil {
		close(m.done)
	}
}

// apply runs an event, and the events its actions produce, through step.
func (j *job) apply(e event) {
	queue := []event{e}
	was := j.life.state
	for len(queue) > 0 {
		e := queue[0]
		queue = queue[1:]
		before, beforeRecorded := j.life.state, j.life.recorded()
		var acts []action
		now := j.d.now()
		if e.kind == evExited {
			// A run that ended while no daemon watched ended when its
			// unit says, and the job rests since then (trial AE: its age
			// counted from when the next daemon saw it).
			now = j.run.exit.EndedAt(j.run.start, now)
		}
		j.life, acts = step(j.life, j.policy(), e, now)
		j.cause = e.kind
		release := func() {}
		has := func(kind actionKind) bool {
			return slices.ContainsFunc(acts, func(a action) bool { return a.kind == kind })
		}
		if slices.ContainsFunc(acts, func(a action) bool { return a.kind == actWait && a.again }) || has(actGive) && has(actWait) {
			// Out of the queue and back in with what it now asks, or its
			// grant given back and in the queue again at once (a restart,
			// an edit): no one is placed in between, or a job behind the
			// head would take what the head's reservation held back the
			// moment it left, and a job of lower priority what this one
			// gave back.
			release = j.d.placer.Hold()
		}
		for _, a := range acts {
			if next, ok := j.do(a); ok {
				queue = append(queue, next)
			}
		}
		release()
		if j.stoppedAll && j.life.recorded() != store.StateStopped {
			j.stoppedAll = false // started again, however
		}
		switch now := j.life.state; {
		case before == store.StateWaiting && (now == store.StateInvalid || now == store.StateUnplaceable) && (e.kind == evInvalid || e.kind == evUnplaceable):
			// An edit it cannot run with: its wait goes on, as long as it
			// was, once it can (trial AF: a typo fixed a second later
			// sent a job that had waited hours to the back of the line).
			// One unplaceable from its birth had waited for nothing.
			if !j.waitingAt.IsZero() {
				j.waitedFor = max(0, j.d.now().Sub(j.waitingAt))
			}
		case now != store.StateWaiting && now != store.StateInvalid && now != store.StateUnplaceable:
			j.waitedFor = 0 // run, stopped, disabled: a wait is new
		}
		if j.life.state == store.StateStopped && (before == store.StateWaiting || before == store.StateBackoff || before == store.StateUnplaceable || before == store.StateDone) {
			// Stopped with no run (one done, held from running again):
			// the last run's end is not why.
			j.setWhy(store.ReasonStopped.String())
		}
		if j.life.state == store.StateInvalid && before != store.StateInvalid {
			j.log.Warn("cannot run", "why", j.invalid)
		}
		if (before == store.StateInvalid || before == store.StateDisabled) && j.life.state != before && resting(j.life.state) {
			// Fine again, or enabled, back where it rested: its why is
			// that state's, not what made it invalid (trial AN: a job
			// stopped while disabled, then enabled, said nothing).
			j.setWhy(j.restingWhy())
		}
		if before == store.StateStopping && j.life.state == store.StateStopping && (e.kind == evStop || e.kind == evStart || e.kind == evRestart) {
			// Asked while the run stops already: what follows its end
			// has changed, and the stop under way says so (trial AP: a
			// restart said nothing).
			runs := map[eventKind]string{evStart: msgStartRequested, evRestart: msgRestartRequested}[e.kind]
			j.mu.Lock()
			j.v.Why = msgThenAfterStop(j.v.Why, runs, j.run.stopAsked)
			j.mu.Unlock()
		}
		if e.kind == evInvalid && j.life.finishingInvalid() {
			j.log.Warn("cannot run again; its run goes on, and it rests once that ends", "why", j.invalid)
		}
		if j.life.state != before {
			if j.log.IsDebug() { // its arguments cost allocations even when not logged
				j.log.Debug("state changed", "from", before.String(), "to", j.life.state.String(), "event", e.kind.String())
			}
			j.persist()
		} else if j.life.recorded() != beforeRecorded {
			j.persist() // a stop under way now ends otherwise (a start)
		}
	}
	if j.life.state == store.StateDone && was != store.StateDone && j.def.HasDeps() {
		// Its run followed its parents as they were when it started; one
		// may have run a new definition to done since: look again.
		j.in.post(jobMessage{deps: true})
	}
	j.publish()
}

// do performs one action; it may produce the next event.
func (j *job) do(a action) (event, bool) {
	// The last daemon's wait goes on only as the job's first action here.
	waited := j.waitedBefore
	j.waitedBefore = time.Time{}
	switch a.kind {
	case actWait:
		var since time.Time
		switch {
		case a.again:
			// The same wait, queued again with what the job now asks: it
			// keeps its place in line, and how long it waited counts from
			// its start.
			since = j.waitingAt
		case !waited.IsZero():
			since = waited // the last daemon's, going on
		case j.waitedFor > 0:
			since = j.d.now().Add(-j.waitedFor) // the one an edit broke off, going on
		}
		j.waitedFor = 0
		return j.wait(since)
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
		j.d.meters.restarts.Inc()
		j.log.Info("restarting after a delay", "delay_ms", a.delay.Milliseconds(), "restarts", j.life.restarts)
		j.backoff = j.d.clock.NewTimer(a.delay)
		j.retryAt = j.d.now().Add(a.delay)
	case actCancelBackoff:
		if j.backoff != nil {
			j.backoff.Stop()
			j.backoff = nil
		}
	case actGiveUp:
		switch a.why {
		case giveUpMaxRestarts:
			j.log.Warn("not restarting: max_restarts restarts in a row were made", "max_restarts", j.policy().maxRestarts, "restarts", j.life.restarts, "state", j.life.state.String())
		case giveUpPolicy:
			j.log.Info("restart called off: its edited restart policy does not restart it", "restarts", j.life.restarts, "state", j.life.state.String())
		}
	}
	return event{}, false
}

// resumeBackoff goes on with the restart delay the last daemon began: the
// job restarts at at, which is to come. Before the job's goroutine starts.
func (j *job) resumeBackoff(at time.Time) {
	left := at.Sub(j.d.now())
	j.log.Info("restarting after what is left of the delay the last daemon began", "delay_ms", left.Milliseconds(), "restarts", j.life.restarts)
	j.backoff = j.d.clock.NewTimer(left)
	j.retryAt = at
	j.publish()
}

func (j *job) request() accounting.Request { return requestOf(j.name, j.def) }

// requestOf is what the job name of definition def asks of the placer.
func requestOf(name string, def *luaapi.Job) accounting.Request {
	req := accounting.Request{Holder: name, Owner: def.Owner, Resources: def.Resources, Priority: def.Priority}
	if def.Timeout > 0 {
		// The longest the grant can be held: the run's limit and the time
		// it is then given to stop.
		req.Limit = def.Timeout + def.StopTimeout
	}
	return req
}

// wait makes the job wait: for its parents, its array's line, then the
// machine. since is when it began to wait, where it waits again; zero:
// now.
func (j *job) wait(since time.Time) (event, bool) {
	j.cancelWait()
	if since.IsZero() {
		since = j.d.now()
	}
	j.waitingAt = since
	if j.def.HasDeps() && !j.pass {
		if facts := parentsOf(j.d.deps.Load(), j.def); !gate(facts) {
			// Waits for its parents, outside the placer; depsChanged
			// takes it on when they change.
			j.held = facts
			return event{}, false
		}
	}
	j.passed = j.pass && j.def.HasDeps()
	j.pass = false
	return j.pastGates(since)
}

// pastGates is a wait past the dependency gate: an index of an array
// meets the array's gate next, and waits in line there until it is let in
// (inLine); any other job enters the placer's queue, as having waited
// since then (zero: now).
func (j *job) pastGates(since time.Time) (event, bool) {
	if j.arr != nil {
		// An index no machine fits (its flavor grew past it, say) is
		// unplaceable now, not in line for a place it could not use.
		if e, ok := j.unplaceable(j.d.placer.Placeable(j.request())); ok {
			return e, true
		}
		if !j.arr.request(j.index) {
			j.inLine = true
			return event{}, false
		}
	}
	return j.enter(since)
}

// enter puts the job in the placer's queue, past the dependency gate, as
// having waited since then (zero: now).
func (j *job) enter(since time.Time) (event, bool) {
	j.waitGen++
	if since.IsZero() {
		since = j.d.now()
	}
	j.waitingAt = since
	req := j.request()
	req.Arrived, req.Order = j.waitingAt, j.order
	if j.def.Resources.Unaccounted() {
		// Unaccounted jobs never wait and hold nothing; a person's quota
		// may refuse them (they would escape it).
		if req.Owner != "" {
			if e, ok := j.unplaceable(j.d.placer.Placeable(req)); ok {
				return e, true
			}
		}
		if j.d.park(j) {
			j.parked = true
			return event{}, false
		}
		j.placedAt = j.d.now() // not waitingAt: a wait that goes on from an earlier daemon began long ago
		if j.arr != nil {
			j.arr.placed(j.index)
		}
		return event{kind: evPlaced}, true
	}
	gen := j.waitGen
	t, err := j.d.placer.Submit(req, func(b *accounting.Book, g accounting.Grant) {
		// Under the placer's lock: hand it over, nothing more.
		j.in.post(jobMessage{placed: &placement{gen: gen, book: b, grant: g}})
	})
	if e, ok := j.unplaceable(err); ok {
		return e, true
	}
	j.ticket = t
	return event{}, false
}

// unplaceable is the event of a job the placer refused (err, an
// *accounting.UnplaceableError); false where it did not.
func (j *job) unplaceable(err error) (event, bool) {
	var unplaceable *accounting.UnplaceableError
	if !errors.As(err, &unplaceable) {
		return event{}, false
	}
	j.setWhy(MsgUnplaceable(j.def.Pos, j.def.Name, j.def.Flavor, unplaceable))
	msg := "job fits no machine"
	if unplaceable.Quota != nil {
		msg = "job fits no quota of its owner's" // it fits the machine (trial AY)
	}
	j.log.Warn(msg, "file", j.def.Pos.File, "line", j.def.Pos.Line, "cpus", j.def.Resources.CPUs, "gpus", j.def.Resources.GPUs,
		"ram_bytes", j.def.Resources.RAMBytes, "gpu_mem_bytes", j.def.Resources.GPUMemBytes)
	return event{kind: evUnplaceable}, true
}

// cancelWait withdraws the job from the placer's queue. A grant that raced
// the withdrawal is already in the mailbox, and is given back when it is
// read: its generation is no longer current.
func (j *job) cancelWait() {
	j.held, j.passed, j.inLine, j.parked = nil, false, false, false
	if j.ticket != nil {
		j.ticket.Cancel()
		j.ticket = nil
	}
	j.waitGen++
}

// drainAtEnd empties the mailbox before the goroutine ends: a grant is
// given back, so that none is left held by a job nobody runs, and a
// removal that came as the daemon went away forgets the job's wait in its
// record, as it would have (the next daemon went on with the wait of a
// job removed, when its file came back).
func (j *job) drainAtEnd() {
	for _, m := range j.in.drain() {
		if m.remove && !j.removed {
			j.forgetWait()
			j.removed = true
		}
		bounced(m)
	}
}

// bounced takes a message to a job whose goroutine has ended for good.
func bounced(m jobMessage) {
	if m.placed != nil && m.placed.book != nil {
		_ = m.placed.book.Give(m.placed.grant)
	}
	if m.done != nil {
		close(m.done)
	}
}

func (j *job) placed(p placement) {
	if p.gen != j.waitGen || j.life.state != store.StateWaiting {
		// An answer to a wait that was withdrawn: never ours to keep.
		if p.book != nil {
			_ = p.book.Give(p.grant)
		}
		return
	}
	j.ticket = nil
	if j.arr != nil {
		// Out of the queue: the array's next index may take its place
		// there while this one starts.
		j.arr.placed(j.index)
	}
	j.book, j.grant = p.book, p.grant
	j.placedAt = j.d.now()
	from := j.waitingAt
	if j.waitMeasured.After(from) {
		from = j.waitMeasured
	}
	j.waitMeasured = time.Time{}
	j.d.meters.placementWait.Observe(j.placedAt.Sub(from).Seconds())
	j.log.Info("placed", "cpus", len(p.grant.CPUIDs), "gpus", j.d.cardNames(p.grant.GPUs), "ram_bytes", p.grant.RAMBytes,
		"gpu_mem_bytes", p.grant.GPUMemBytes,
		"waited_ms", j.placedAt.Sub(from).Milliseconds())
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

// spawn starts a run, and records it: a unit once its record is on disk,
// so that the next daemon knows every unit it finds; the daemon's own
// child while its record commits, the run shown only once it has (reveal).
// A crash in between leaves a process that carries a run id no record
// has; the next daemon stops it and records it (reconcile).
func (j *job) spawn() (event, bool) {
	now := j.d.now()
	gpus := j.d.cardNames(j.grant.GPUs)
	j.runMark = j.mark()
	mark := ""
	if j.runMark != j.defFP {
		// Run after batch parents: kept with the run, for a next daemon
		// that takes it back or finds it failed.
		mark = j.runMark
	}
	rec := store.RunRecord{
		Job: j.name, Fingerprint: j.defFP, Mark: mark,
		// A copy: the record may be encoded after the grant went back.
		CPUIDs: slices.Clone(j.grant.CPUIDs), GPUs: gpus, RAMBytes: j.grant.RAMBytes, GPUMemBytes: j.grant.GPUMemBytes, Start: now,
	}
	child := j.d.cfg.Units == nil
	var err error
	if child {
		// From a block reserved on disk: no other run has had it, or
		// will, whatever happens to this one's record.
		rec.ID, err = j.d.store.NextRunID()
	} else {
		rec, err = j.d.store.BeginRun(rec)
	}
	if err != nil {
		rec.ID = j.d.localRunID()
		j.d.notRecorded(j.log, "cannot record the run; running it anyway", "run", rec.ID, "error", err)
	}
	j.run = runState{id: rec.ID, fp: j.defFP, gpus: gpus, cpus: len(j.grant.CPUIDs), ram: j.grant.RAMBytes, start: now}
	if child && !isLocalRunID(rec.ID) {
		// Noted before the process starts: if the daemon is killed before
		// the record commits, the next one learns of the run, and of its
		// end if it came (store.Intend).
		j.d.store.Intend(rec)
	}

	proc, after, err := j.d.start(j, rec.ID, now)
	if child && !isLocalRunID(rec.ID) {
		if err == nil {
			// Its start ticks, which tell it from a later process of the
			// same pid, follow if it is still there once shown (reveal):
			// a short run never pays for reading them.
			rec.PID = proc.PID()
		}
		rc := &runRecord{done: make(chan struct{})}
		j.run.record = rc
		j.d.later.BeginRun(rec, func(err error) {
			rc.err = err
			close(rc.done)
		})
	}
	if err != nil {
		j.run.spawnErr = err
		j.reveal()
		j.setWhy(msgCannotStart(j.name, err.Error()))
		if errors.Is(err, units.ErrShuttingDown) {
			// Not the job's failure: it waits for the machine's return,
			// and nothing else starts meanwhile.
			j.log.Warn("cannot start: the machine is shutting down", "run", rec.ID, "error", err)
			j.d.holdWhileShuttingDown()
			return event{kind: evSpawnFailed, machineStopping: true}, true
		}
		j.log.Error("cannot start", "run", rec.ID, "error", err)
		return event{kind: evSpawnFailed}, true
	}
	j.run.proc, j.run.after = proc, after
	j.run.toRunning = j.d.now().Sub(j.placedAt)
	if !child && !isLocalRunID(rec.ID) {
		// A unit is found again by its name.
		j.d.later.SetRunPID(rec.ID, proc.PID(), 0)
	}
	if j.run.record == nil {
		// On record already (a unit), or never to be: shown now.
		j.reveal()
	}
	if j.def.Timeout > 0 {
		j.timeout = j.d.clock.NewTimer(j.def.Timeout)
	}
	j.exitC = proc.Done()
	if child, ok := proc.(*runner.Process); ok {
		child.OnExit(j.in.wakeUp) // the job may sleep meanwhile (canSleep)
	}
	j.setWhy("")
	return event{kind: evSpawned}, true
}

// reveal shows the run in progress, once its record is on disk: its
// started line and the metrics here, the status at the next publish. It
// waits for the commit where it is not over: whatever is about to show
// the run (its end, its stop) calls it first. A record that could not be
// written is shown all the same, as a run the state could not record.
func (j *job) reveal() {
	if j.run.shown {
		return
	}
	j.run.shown = true
	if rc := j.run.record; rc != nil {
		<-rc.done
		if rc.err != nil {
			j.d.notRecorded(j.log, "cannot record the run; running it anyway", "run", j.run.id, "error", rc.err)
		}
	}
	j.d.meters.runsStarted.Inc()
	j.d.worked()
	if child, ok := j.run.proc.(*runner.Process); ok && j.run.record != nil && j.run.record.err == nil {
		if ticks, err := child.StartTicks(); err == nil {
			j.d.later.SetRunPID(j.run.id, child.PID(), ticks)
		}
	}
	if j.run.proc != nil {
		j.log.Info("started", "run", j.run.id, "pid", j.run.proc.PID(), "gpus", j.run.gpus, "cpus", j.run.cpus,
			"grant_to_running_us", j.run.toRunning.Microseconds())
	}
}

// retime applies an edited timeout to the run in progress, shorter or
// longer: its timer, its grant's end (on which the placer plans the head's
// start) and its unit's own bound.
func (j *job) retime() {
	j.rearmTimeout()
	if j.book != nil {
		var until time.Time
		if j.def.Timeout > 0 {
			until = j.run.start.Add(j.def.Timeout + j.def.StopTimeout)
		}
		_ = j.book.Reschedule(j.grant, until)
	}
	if unit, ok := j.run.proc.(*units.Run); ok {
		limit, log := unitRuntimeMax(j.def), j.log
		go func() {
			if err := unit.SetRuntimeMax(limit); err != nil {
				log.Warn("cannot move its unit's runtime bound to its new timeout", "unit", unit.Unit(), "error", err)
			}
		}()
	}
}

// rearmTimeout sets the run's timer to its timeout, counted from the
// run's start.
func (j *job) rearmTimeout() {
	if j.timeout != nil {
		j.timeout.Stop()
		j.timeout = nil
	}
	if j.def.Timeout > 0 {
		j.timeout = j.d.clock.NewTimer(max(0, j.run.start.Add(j.def.Timeout).Sub(j.d.now())))
	}
}

func (j *job) stop() {
	proc := j.run.proc
	if proc == nil {
		return
	}
	j.reveal()
	sig := j.def.StopSignal
	why := j.stopWhy()
	now := j.d.now()
	j.run.stopBegan = now
	if r := j.run.resumed; r != nil {
		// Seen through as the last daemon began it: its signal not sent
		// twice (a handler would begin again), its SIGKILL when the
		// stop_timeout counted from its start is over.
		if r.signalled {
			sig = 0
		}
		j.run.stopBegan = r.began
		why = cmp.Or(stopAskedWhy(r.cause), why)
	}
	timeout := j.killLeft(now)
	j.log.Info("stopping", "run", j.run.id, "pid", proc.PID(), "signal", signalName(j.def.StopSignal), "sent_before", sig == 0,
		"stop_timeout_ms", timeout.Milliseconds(), "why", why)
	// Until its end says how it ended; the status counts down to the
	// SIGKILL (KillAt).
	j.run.killAt = now.Add(timeout)
	if sig == 0 {
		j.setWhy(msgStoppingSent(why, signalName(j.def.StopSignal)))
	} else {
		j.setWhy(msgStopping(why, signalName(sig)))
	}
	j.run.stopCause = why
	j.run.stopAsked = j.cause == evStop && !j.removed
	if j.cause == evTimeout {
		j.run.timedOutAfter = j.def.Timeout
	}
	if j.run.resumed != nil {
		j.run.stopCause = withStopCause(why, seenThroughCause)
	}
	if j.cause == evInvalid {
		// The problem may quote the file, which the history does not
		// show to everyone; berth check and status say it.
		j.run.stopCause = "its declaration cannot run"
	}
	if j.run.id != 0 && !isLocalRunID(j.run.id) {
		// Should the daemon go away before the run ends, the next one
		// ends it so rather than lost.
		j.d.later.StopRun(j.run.id, cmp.Or(j.life.pending.why, store.ReasonStopped), j.run.stopCause, j.run.stopBegan)
	}
	if unit, ok := proc.(*units.Run); ok && j.run.resumed != nil {
		gone := make(chan struct{})
		j.run.killerGone = gone
		go func() {
			unit.CancelKill()
			close(gone)
		}()
	}
	go func() { j.stopped <- proc.Stop(sig, timeout) }()
}

// killLeft is how long the stop under way has, at now, before its SIGKILL:
// its stop_timeout, counted from when it began.
func (j *job) killLeft(now time.Time) time.Duration {
	return max(0, j.run.stopBegan.Add(j.def.StopTimeout).Sub(now))
}

// moveKill puts the SIGKILL of the stop under way where its stop_timeout,
// just edited, says: as an edited timeout reaches a running run
// (retime), an edited stop_timeout reaches a stop begun under the old
// one; one that is over already is SIGKILLed now.
func (j *job) moveKill() {
	now := j.d.now()
	left := j.killLeft(now)
	j.run.killAt = now.Add(left)
	j.log.Info("its stop_timeout was edited: the stop's SIGKILL moved", "run", j.run.id,
		"stop_timeout_ms", j.def.StopTimeout.Milliseconds(), "kill_in_ms", left.Milliseconds())
	j.run.proc.MoveKill(left)
}

// stopWhy says what asked for the stop of the run: the event being
// applied.
func (j *job) stopWhy() string {
	switch j.cause {
	case evStop:
		if j.removed {
			return cmp.Or(j.removedWhy, "no job file declares it any more")
		}
		return msgStopRequested
	case evRestart:
		return msgRestartRequested
	case evRedefine:
		return "its definition changed"
	case evDisable:
		return "its file disables it"
	case evInvalid:
		return "its declaration cannot run: " + j.invalid
	case evTimeout:
		return "it ran past its timeout of " + accounting.FormatDuration(j.def.Timeout)
	case evShutdown:
		return "the daemon is stopping"
	}
	return j.cause.String()
}

func (j *job) reaped(exit runner.Exit) {
	if j.timeout != nil {
		j.timeout.Stop()
		j.timeout = nil
	}
	killed := false
	if j.life.state == store.StateStopping {
		// Stop returns right after the reaping we were just told of.
		killed = <-j.stopped
		if r := j.run.resumed; r != nil && exit.Signal == syscall.SIGKILL &&
			!exit.EndedAt(j.run.start, j.d.now()).Before(r.began.Add(j.def.StopTimeout)) {
			// SIGKILLed at the deadline while no daemon watched: by the
			// unit its last daemon left that to (HandOffKill).
			killed = true
		}
	}
	if exit.At.IsZero() {
		// Reaped now: the output's end, which a process the run left
		// behind may hold open for a while (run.after), is not the run's
		// (trial AX: its end and duration were recorded 2 s late).
		exit.At = j.d.now()
	}
	j.run.exit = exit
	if j.run.after != nil {
		j.run.after()
	}
	if exit.MachineStopping {
		// Before the grant goes back: no one is placed meanwhile.
		j.d.holdWhileShuttingDown()
	}
	failed := exit.Code != 0 || exit.Signal != 0 || exit.Err != nil
	j.apply(event{kind: evExited, failed: failed, killed: killed, oom: exit.OutOfMemory, timedOut: exit.TimedOut,
		stoppedOutside: exit.StoppedOutside, machineStopping: exit.MachineStopping})
}

func (j *job) recordEnd(reason store.Reason) {
	exit := j.run.exit
	// A run that ended while no daemon watched ended when its unit says.
	now := exit.EndedAt(j.run.start, j.d.now())
	sig := ""
	if exit.Signal != 0 {
		sig = signalName(exit.Signal)
	}
	cause := ""
	if reason == store.ReasonStopped || reason == store.ReasonKilled || reason == store.ReasonTimedOut {
		cause = j.run.stopCause
	}
	switch {
	case cause != "" || !exit.StoppedOutside:
	case reason == store.ReasonStopped && exit.Unknown:
		cause = msgGoneWhileAway(units.Name(j.name, j.run.id))
	case reason == store.ReasonStopped:
		cause = msgStoppedOutside
	case reason == store.ReasonLost:
		cause = msgLostShuttingDown
	}
	unit, isUnit := j.run.proc.(*units.Run)
	intended := !isUnit && j.run.id != 0 && !isLocalRunID(j.run.id) && reason != store.ReasonSpawnError
	if intended {
		// Noted before the run's record is waited for: a daemon killed
		// before the end commits leaves it to the next (store.Intend).
		j.d.store.IntendEnd(j.run.id, now, exit.Code, sig, reason, cause)
	}
	j.reveal()
	j.d.meters.ended(reason)
	if isUnit {
		// The unit keeps the result until it is on record: let go of it
		// only then, or the next daemon could not learn how the run ended.
		var err error
		if !isLocalRunID(j.run.id) {
			err = j.d.store.EndRun(j.run.id, now, exit.Code, sig, reason, cause)
		}
		if err != nil {
			j.d.notRecorded(j.log, "cannot record the run's end; its unit keeps it for the next daemon", "run", j.run.id, "unit", unit.Unit(), "error", err)
		} else {
			resumed := j.run.resumed != nil
			go func() {
				j.d.cfg.Units.Release(unit)
				if resumed {
					// Its last daemon may have left its SIGKILL to a
					// unit of its own, not needed any more.
					unit.CancelKill()
				}
			}()
		}
	} else if j.run.id != 0 && !isLocalRunID(j.run.id) {
		switch {
		case reason == store.ReasonSpawnError && j.run.spawnErr != nil:
			j.d.later.EndSpawnError(j.run.id, now, j.run.spawnErr.Error())
		case intended:
			j.d.later.EndIntended(j.run.id, now, exit.Code, sig, reason, cause)
		default:
			j.d.later.EndRun(j.run.id, now, exit.Code, sig, reason, cause)
		}
	}
	j.end = lastEnd{known: true, code: exit.Code, signal: sig, reason: reason, timeout: j.run.timedOutAfter}
	kv := []any{"run", j.run.id, "reason", reason.String(), "duration_ms", now.Sub(j.run.start).Milliseconds()}
	switch {
	case sig != "":
		kv = append(kv, "signal", sig)
	case reason != store.ReasonSpawnError && exit.Code >= 0:
		// -1: how it ended is not known (a unit stopped outside berth,
		// gone with its result), as its history says.
		kv = append(kv, "exit_code", exit.Code)
	}
	if cause != "" {
		kv = append(kv, "why", cause)
	}
	if exit.Err != nil && reason != store.ReasonSpawnError {
		kv = append(kv, "error", exit.Err) // how it ended is not known: why not
	}
	switch why := MsgEnded(reason, exit.Code, sig, cmp.Or(j.end.timeout, j.def.Timeout), j.run.ram); reason {
	case store.ReasonSpawnError: // it keeps the error itself as its why
	case store.ReasonOOM:
		j.setWhy(msgOOMWhy(why))
	default:
		j.setWhy(why)
	}
	if reason == store.ReasonExited || reason == store.ReasonStopped {
		j.log.Info("exited", kv...)
	} else {
		j.log.Warn("exited", kv...)
	}
	// The run is over. Cleared here, inside the step that ended it, because
	// the same step may start the next run (an unaccounted job is placed at
	// once). So is what was said of it going on (trial AS: a refusal said
	// so once it had ended).
	j.run = runState{}
	j.unfit = ""
}

// shutdown stops the run in progress with the job's own signal and timeout,
// waits for it to be reaped, and gives everything back; step decides what
// is recorded (evShutdown). The job's stored state is left as it was, so
// the next daemon runs it again, unless a person's stop was under way. A
// unit outlives the daemon, and so does a stop of one under way: its
// SIGKILL is handed off, and the next daemon sees it through.
func (j *job) shutdown() {
	if unit, ok := j.run.proc.(*units.Run); ok {
		if j.life.state != store.StateStopping {
			// A unit outlives the daemon: the next one adopts it, and
			// finds its result if it ended meanwhile.
			j.drainAtEnd()
			return
		}
		if !j.removed && j.mayHandOff() {
			// The stop under way (a person's, a restart, an edit, a
			// disable, a timeout) is on the run's record: the next daemon
			// sees it through as it was begun (resumeStop), and systemd
			// sends its SIGKILL at the stop_timeout should no daemon be
			// there by then, so the daemon need not wait for it (trial AK:
			// systemctl restart berth waited out a 30 s stop_timeout; one
			// past TimeoutStopSec had the daemon killed).
			if gone := j.run.killerGone; gone != nil {
				<-gone // the last daemon's killer, whose deadline may not be this one's
			}
			err := unit.HandOffKill(j.run.killAt.Sub(j.d.now()))
			if err == nil {
				j.log.Info("left to the next daemon: the stop of its run, its SIGKILL to systemd", "run", j.run.id, "unit", unit.Unit(),
					"kill_at", j.run.killAt.Format(time.RFC3339))
				j.drainAtEnd()
				return
			}
			j.log.Warn("cannot hand the SIGKILL of a run being stopped to systemd: waiting for its end", "run", j.run.id, "unit", unit.Unit(), "error", err)
		}
		// The stop of a removed job is seen through: the next daemon,
		// which finds no job for the unit, would stop it afresh. So is
		// one that cannot be handed off, but for a restart (evShutdown):
		// the next daemon runs the job again.
		j.apply(event{kind: evShutdown})
		j.drainAtEnd()
		select {
		case <-j.exitC:
			j.exitC = nil
			j.reaped(unit.Wait())
		case <-j.d.cfg.Units.Lost():
		}
		return
	}
	j.apply(event{kind: evShutdown})
	j.drainAtEnd()
	if j.exitC != nil {
		j.exitC = nil
		j.reaped(j.run.proc.Wait())
	}
}

// mayHandOff says whether a stop under way may be left to systemd as the
// daemon goes: not while the machine shuts down (systemd refuses a new
// unit then, and stops the run's with every other), nor once the
// connection to systemd is lost.
func (j *job) mayHandOff() bool {
	if j.d.leavingWithMachine.Load() {
		return false
	}
	select {
	case <-j.d.cfg.Units.Lost():
		return false
	default:
		return true
	}
}

// forgetWait ends, in the record, the wait of a job whose file went away:
// one of that name declared again later is a new arrival, at the back of
// the line, and not one that waits on from when this one began (persist
// keeps a wait's start for the next daemon in every passing state, and
// how long one an edit broke off had lasted in invalid and unplaceable,
// and writes nothing once the job is removed). A job declared again while
// this one is still on its way out starts its goroutine once this one has
// ended, so its record is written after this.
func (j *job) forgetWait() {
	rec := j.wrote
	switch {
	case rec.WaitedFor != 0:
		rec.WaitedFor = 0 // the review: it came back a day later, first in line
	case rec.State == 0 || resting(rec.State) || rec.Changed.IsZero():
		return
	default:
		rec.Changed = time.Time{}
	}
	j.wrote = rec
	j.d.later.PutJob(rec)
}

// persist writes what must survive a daemon restart. A removed job writes
// nothing more: its record is left as it was before the removal, so a job of
// that name declared again later starts as a job would (and the goroutine
// still stopping cannot overwrite the newcomer's record).
func (j *job) persist() {
	if j.removed {
		return
	}
	rec := j.record()
	last := j.wrote
	j.wrote = rec
	if !resting(rec.State) {
		// Every passing state means the same to the next daemon (the job
		// runs again), which reads no more of the record than its
		// fingerprints, its file and, at rest, its restarts and since: a
		// run's way from waiting to running writes the record once. But
		// backoff: the next daemon waits out what is left of its delay.
		backoff := rec.State == store.StateBackoff && last.State != store.StateBackoff
		// And a wait, from another passing state (a start while its run
		// stopped, a restart delay over): the next daemon keeps its
		// place from when it began (trial AK: a start during a stop lost
		// it at a restart of the daemon).
		wait := rec.State == store.StateWaiting && last.State != store.StateWaiting
		if last.State != 0 && !resting(last.State) && !backoff && !wait && last.Fingerprint == rec.Fingerprint &&
			last.DoneFingerprint == rec.DoneFingerprint && last.File == rec.File && last.Restarts == rec.Restarts {
			return
		}
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

// persistSettled records where a job new to this daemon came to rest
// across its start (Daemon.endedUnrested: its run ended as the last
// daemon went, before that daemon recorded the rest). Its dependants
// read the record at every start: unrecorded, a parent's done was
// missing from it, and they ran again at each (trial AU). Queued with
// the other records, not synced on the loop: a daemon killed before
// they commit finds the rest again, as this one did.
func (j *job) persistSettled() {
	rec := j.record()
	j.wrote = rec
	j.d.later.PutJob(rec)
}

// record is the job's record as it stands.
func (j *job) record() store.JobRecord {
	fp := j.defFP
	if j.life.state == store.StateDone || j.life.beneath == store.StateDone {
		j.doneFP = cmp.Or(j.runMark, j.mark())
	}
	state := j.life.recorded()
	changed := j.life.since
	onItsWay := state == store.StateWaiting || state == store.StateStarting || state == store.StateRunning
	if onItsWay && !j.waitingAt.IsZero() && j.waitingAt.Before(changed) {
		// A wait that began in the last daemon goes on: the next one
		// takes it up from its start too, and the job keeps its place in
		// line however often the daemon starts. So does the wait of a
		// run the daemon's going away cuts short: a record first written
		// as it runs (its definition edited while it waited, trial AZ)
		// says when the wait for it began, as the wait's own record did.
		// (Not a run being stopped to run again: it waits anew then.)
		changed = j.waitingAt
	}
	rec := store.JobRecord{Name: j.name, State: state, Fingerprint: fp, DoneFingerprint: j.doneFP,
		Restarts: j.life.recordedRestarts(), Changed: changed, File: j.def.Pos.File}
	rec.StoppedAll = j.stoppedAll && rec.State == store.StateStopped
	if rec.State == store.StateInvalid || rec.State == store.StateUnplaceable {
		rec.WaitedFor = j.waitedFor // the next daemon keeps its place too (trial AH)
	}
	return rec
}

// restingWhy is the why of a job at rest, as its last run's end left it.
func (j *job) restingWhy() string {
	switch {
	case j.life.state == store.StateStopped:
		return store.ReasonStopped.String()
	case j.end.known && (j.life.state == store.StateFailed || j.life.state == store.StateDone):
		return MsgEnded(j.end.reason, j.end.code, j.end.signal, cmp.Or(j.end.timeout, j.def.Timeout), j.run.ram)
	}
	return ""
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
	if j.life.state == store.StateWaiting && !j.waitingAt.IsZero() && j.waitingAt.Before(j.v.Since) {
		j.v.Since = j.waitingAt // a wait that began in the last daemon
	}
	j.v.Restarts = j.life.restarts
	j.v.GaveUp = j.life.state == store.StateFailed && j.policy().wants(j.life.failed, -1)
	j.v.Run = j.run.id
	j.v.PID, j.v.unit = 0, nil
	if j.run.proc != nil {
		j.v.PID = j.run.proc.PID()
		j.v.unit, _ = j.run.proc.(*units.Run)
	}
	if j.run.id != 0 && !j.run.shown {
		// Its record is not on disk yet: the run is not shown, and the
		// job shows as starting until it is.
		j.v.State, j.v.Run, j.v.PID = store.StateStarting, 0, 0
	}
	j.v.Grant = j.grant
	j.v.GPUs = slices.Clone(j.run.gpus)
	j.v.WaitingSince = j.waitingAt
	j.v.RetryAt = time.Time{}
	if j.life.state == store.StateBackoff {
		j.v.RetryAt = j.retryAt
	}
	j.v.KillAt = time.Time{}
	if j.life.state == store.StateStopping {
		j.v.KillAt = j.run.killAt
	}
	j.v.Invalid, j.v.Unfit = j.invalid, j.unfit
	if j.invalid != "" && j.life.state == store.StateInvalid {
		j.v.Why = j.invalid
	}
	j.v.After = j.held
	j.v.AfterRemoved = j.after != nil && j.life.state == 0
	if j.v.AfterRemoved {
		// Declared again while its name's removed job still stops.
		j.v.State, j.v.Why = store.StateWaiting, msgAfterRemoved
	}
	j.v.InLine = j.inLine
	j.v.DoneFP = j.doneFP
	j.v.LastEnd = j.end
	j.v.Redefining = j.redefs > 0
	redefining := j.v.Redefining
	// Its run follows an earlier definition (on_change = "finish"); a
	// service's never ends by itself.
	j.v.Outdated = j.run.proc != nil && j.run.fp != "" && j.run.fp != j.defFP
	j.v.StoppedAll = j.stoppedAll
	j.v.RestsStopped = j.life.state == store.StateStopping && j.life.recorded() == store.StateStopped
	// The array and the dependants go by the state shown, as everyone
	// else does: a run not yet on record runs for nobody.
	shown := j.v.State
	j.mu.Unlock()
	if j.arr != nil {
		j.arr.sync(j, shown, j.life.since, j.end, j.arrayRecord(), j.inLine, j.ticket != nil, j.redefsTaken)
		j.redefsTaken = 0
	}
	j.tellDependants(shown, redefining)
	j.d.changed.raise()
}

// redefining counts a definition of another process handed to the job
// (declare, on the loop) until its goroutine takes it (receive).
func (j *job) redefining() {
	j.mu.Lock()
	j.redefs++
	j.v.Redefining = true
	j.mu.Unlock()
	if j.arr != nil {
		j.arr.redefining()
	}
}

// tellDependants asks the jobs that wait for this one to look again, when
// what they look at changed: its state as shown, its done record, or
// whether a new definition is on its way to it. A job nobody names pays a
// map lookup.
func (j *job) tellDependants(shown store.State, redefining bool) {
	g, _, kids := j.dependants()
	if len(kids) == 0 {
		return
	}
	if j.arr != nil {
		if !j.arr.tell() {
			return
		}
	} else {
		now := toldKey{state: shown, doneFP: j.doneFP, redefining: redefining, settled: j.settled}
		if now == j.told {
			return
		}
		j.told = now
	}
	// Those it lets run together enter the placer's queue together: no
	// one is placed until each has looked (or a second has gone by), so
	// that they are placed in their order, not in the order their
	// goroutines happened to look (trial AI: the first to look took the
	// core that the first declared was to have). Only where it may let
	// several run, those it holds: the hold stops every placement.
	held := map[string]bool{}
	if shown == store.StateDone || shown == store.StateFailed || shown == store.StateStopped || shown == store.StateRunning {
		for _, k := range kids {
			if v, ok := g.view(k); ok && g.isJob(k) && v.State == store.StateWaiting && v.After != nil {
				held[k] = true
			}
		}
	}
	if len(held) < 2 {
		for _, k := range kids {
			g.post(k, jobMessage{deps: true})
		}
		return
	}
	release := j.d.placer.Hold()
	looked := make([]chan struct{}, 0, len(held))
	for _, k := range kids {
		if !held[k] {
			g.post(k, jobMessage{deps: true})
			continue
		}
		done := make(chan struct{})
		looked = append(looked, done)
		g.post(k, jobMessage{deps: true, done: done})
	}
	go func() {
		defer release()
		bound := time.NewTimer(bornHoldBound)
		defer bound.Stop()
		for _, done := range looked {
			select {
			case <-done:
			case <-bound.C:
				return
			}
		}
	}()
}

// depsChanged looks at the parents again: a job waiting for them enters
// the placer once they are satisfied, and one in the placer's queue that
// they no longer let run leaves it; a done or failed job whose parents ran
// a new definition since its run runs again after them (a person's stop
// stays).
func (j *job) depsChanged() {
	if !j.def.HasDeps() && j.held == nil && !j.inLine {
		return
	}
	again := false
	switch j.life.state {
	case store.StateWaiting:
		facts := parentsOf(j.d.deps.Load(), j.def)
		if j.held == nil {
			if j.ticket == nil && !j.inLine || j.passed || gate(facts) {
				break // past the gate, and may stay there
			}
			j.log.Info("a parent no longer lets it run: out of the placer's queue")
			j.cancelWait()
			j.held = facts
			break
		}
		if !gate(facts) {
			j.held = facts
			break
		}
		j.held = nil
		j.log.Info("dependencies satisfied")
		if e, ok := j.pastGates(releasedAt(facts, j.waitingAt, j.d.now())); ok {
			j.apply(e)
		}
	case store.StateDone, store.StateFailed:
		parents, known := j.parentRecords()
		if !known {
			break
		}
		recorded := j.doneFP
		if j.life.state == store.StateFailed {
			// What its failed run followed; unknown after a restart.
			recorded = j.runMark
			if recorded == "" || recordFP(recorded) != j.defFP {
				break
			}
		}
		ok, rec := stillDone(recorded, j.defFP, parents)
		if !ok {
			j.log.Info("a parent ran a new definition: running again after it")
			again = true
			j.apply(event{kind: evStart})
			break
		}
		if j.life.state == store.StateDone && rec != j.doneFP {
			// Parents added to after, or removed, since the run:
			// recorded as they are now, in place.
			j.runMark = rec
			j.persist()
		}
		if j.life.state == store.StateDone {
			j.retellHeld()
		}
	}
	j.log.Debug("parents looked at", "state", j.life.state.String(), "runs_again", again)
}

// dependants are the jobs that name this one in after or after_any, in
// the graph as it is now, and the name they know it by: an array's
// indices are the array to them, which changes for them only when the
// array as a whole does. None where no job runs after another.
func (j *job) dependants() (g *depGraph, name string, kids []string) {
	if g = j.d.deps.Load(); g == nil {
		return nil, "", nil
	}
	name = j.name
	if j.arr != nil {
		name = j.arr.name
	}
	return g, name, g.dependants[name]
}

// retellHeld asks the job's dependants to look at their parents again
// where what runs anew upstream of this job, done, changed: one held
// because a job upstream runs a new definition (parentsOf) is let go when
// that job's edit is undone, this job's state staying as it was.
func (j *job) retellHeld() {
	g, name, kids := j.dependants()
	if len(kids) == 0 {
		return
	}
	r := g.renewing(name, map[string]string{})
	if j.arr != nil {
		if !j.arr.retell(r) {
			return // told by another index
		}
	} else {
		if r == j.upstreamNew {
			return
		}
		j.upstreamNew = r
	}
	for _, k := range kids {
		g.post(k, jobMessage{deps: true})
	}
}

// parentRecords are the done records of the batch parents in after, as
// they are now, by name; known is false while one of them is not in the
// graph.
func (j *job) parentRecords() (map[string]string, bool) {
	return parentRecords(j.def, j.d.deps.Load().record)
}

// mark is the done record of a run started now (doneMark). A run started
// past its gate (berth start --ignore-deps) names a parent no file
// declares as one not done: the job runs again once that parent is
// declared and has run to done, as after one that failed, and holds its
// own dependants meanwhile (depGraph.renewing; trial AU: it named none,
// and its dependant ran). A run its parents let start names what they
// were (a parent's file removed as the run was placed leaves it unknown).
func (j *job) mark() string {
	g := j.d.deps.Load()
	parents, _ := parentRecords(j.def, func(name string) (string, bool, bool) {
		record, service, known := g.record(name)
		return record, service, known || j.passed
	})
	return doneMark(j.defFP, parents)
}

func signalName(sig syscall.Signal) string { return unix.SignalName(sig) }
