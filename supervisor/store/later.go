package store

import (
	"fmt"
	"strings"
	"time"

	"go.etcd.io/bbolt"
)

// Later is the store's deferred writes: each goes into the writer's next
// transaction, in the order given, and returns at once. A run's record
// (BeginRun) commits while its process starts, and is told committed: the
// daemon shows the run only then. The pid, the end and the job's passing
// states follow without holding the job up (where it comes to rest is
// waited for: see the supervisor's job.persist). A daemon killed outright
// loses what it had not yet handed to bbolt, at most the writes of one
// commit: reconciliation finds processes of runs never recorded by their
// BERTH_RUN (RecordLost), and marks lost a run with no recorded end.
type Later struct {
	s      *Store
	failed func(error)
}

// Later returns the deferred form of the updates. failed is called with the
// error of each write that fails, on the writer's goroutine: it must not
// block or write to the store.
func (s *Store) Later(failed func(error)) Later { return Later{s: s, failed: failed} }

func (l Later) queue(apply func(tx *bbolt.Tx) error, key string) {
	if err := l.s.enqueue(&operation{apply: apply, failed: l.failed, key: key}); err != nil {
		l.failed(err)
	}
}

// BeginRun records the new run r, whose id the caller took from
// NextRunID, with the next commit, which waits for company no longer than
// a write someone waits for does (the run is shown once it is on disk),
// and calls recorded with the outcome on
// the writer's goroutine (it must not block or write to the store). A
// record whose commit fails is kept and written with a later one, as a
// job's resting state is (see Store.commit), though recorded hears of the
// failure.
func (l Later) BeginRun(r RunRecord, recorded func(error)) {
	if r.Job == "" || r.ID == 0 {
		l.s.unannounce()
		recorded(fmt.Errorf("begin run %d of job %q: a run needs an id and a job", r.ID, r.Job))
		return
	}
	op := &operation{apply: beginRunOp(r, l.s.keepRuns), key: beginKey(r.ID), after: recorded, awaited: true, announced: true}
	if err := l.s.enqueue(op); err != nil {
		l.s.unannounce()
		recorded(err)
	}
}

// SetRunPID records the process of run id once it has been spawned.
func (l Later) SetRunPID(id uint64, pid int, startTicks uint64) {
	l.queue(setRunPIDOp(id, pid, startTicks), pidKey(id))
}

// SetRunGPUMemPeak records the most card memory run id was seen to hold.
func (l Later) SetRunGPUMemPeak(id uint64, bytes int64) {
	l.queue(updateRun(id, fmt.Sprintf("set the card memory peak of run %d", id), func(r *RunRecord) {
		r.GPUMemPeakBytes = max(r.GPUMemPeakBytes, bytes)
	}), gpuMemKey(id))
}

// StopRun records that berth began to stop run id at began, for reason
// (ReasonStopped, ReasonTimedOut), as cause says: the next daemon ends a
// run it finds open so, should this one go away before the run ends, and
// sees a stop under way through from when it began.
func (l Later) StopRun(id uint64, reason Reason, cause string, began time.Time) {
	if len(cause) > maxCauseBytes {
		cause = strings.ToValidUTF8(cause[:maxCauseBytes], "") + "…"
	}
	l.queue(updateRun(id, fmt.Sprintf("stop run %d", id), func(r *RunRecord) {
		if r.End.IsZero() {
			r.Stopping, r.Cause, r.StopBegan = reason, cause, began
		}
	}), stopKey(id))
}

// EndRun records how run id ended, and cause, why it was stopped where it
// was ("" for a run that ended by itself). It overwrites an earlier end,
// so the last word wins. reason must not be zero and end must be set: both
// mean "still running".
func (l Later) EndRun(id uint64, end time.Time, exitCode int, signal string, reason Reason, cause string) {
	apply, err := endRunOp(id, end, exitCode, signal, reason, cause)
	if err != nil {
		l.failed(err)
		return
	}
	l.queueEnd(apply, id, endIntent(id, end, exitCode, signal, reason, cause))
}

// EndIntended is EndRun for a run whose end Store.IntendEnd has already
// appended to the intents.
func (l Later) EndIntended(id uint64, end time.Time, exitCode int, signal string, reason Reason, cause string) {
	apply, err := endRunOp(id, end, exitCode, signal, reason, cause)
	if err != nil {
		l.s.unannounce()
		l.failed(err)
		return
	}
	if err := l.s.enqueue(&operation{apply: apply, failed: l.failed, key: endKey(id), announced: true}); err != nil {
		l.s.unannounce()
		l.failed(err)
	}
}

// queueEnd queues the end of run id, and appends it to the intents.
func (l Later) queueEnd(apply func(tx *bbolt.Tx) error, id uint64, intent []byte) {
	if err := l.s.enqueue(&operation{apply: apply, failed: l.failed, key: endKey(id), intent: intent}); err != nil {
		l.failed(err)
	}
}

// EndSpawnError records that run id could not be started, and why (the
// spawn's error, kept with the run as its Cause).
func (l Later) EndSpawnError(id uint64, end time.Time, cause string) {
	apply, err := endRunOp(id, end, 0, "", ReasonSpawnError, cause)
	if err != nil {
		l.failed(err)
		return
	}
	l.queueEnd(apply, id, endIntent(id, end, 0, "", ReasonSpawnError, cause))
}

// PutJob is Store.PutJob, deferred.
func (l Later) PutJob(j JobRecord) {
	apply, err := putJobOp(j)
	if err != nil {
		l.failed(err)
		return
	}
	l.queue(apply, jobKey(j.Name))
}
