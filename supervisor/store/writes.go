package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"time"

	"go.etcd.io/bbolt"
)

// BeginRun records a new run and returns it with its id, once committed.
// The daemon spawns a run as a unit only after this returns, so that a
// unit is on record before it exists. r.ID is ignored.
func (s *Store) BeginRun(r RunRecord) (RunRecord, error) {
	if r.Job == "" {
		return RunRecord{}, errors.New("begin run: job name is empty")
	}
	id, err := s.NextRunID()
	if err != nil {
		return RunRecord{}, fmt.Errorf("begin run of job %q: %w", r.Job, err)
	}
	r.ID = id
	if err := s.submit(beginRunOp(r, s.keepRuns)); err != nil {
		return RunRecord{}, fmt.Errorf("begin run of job %q: %w", r.Job, err)
	}
	return r, nil
}

func beginRunOp(r RunRecord, keep int) func(tx *bbolt.Tx) error {
	return func(tx *bbolt.Tx) error {
		b, err := bucketsOf(tx)
		if err != nil {
			return err
		}
		return b.addRun(r, keep)
	}
}

// Unrecorded returns the runs among runs that the state has no record of:
// runs a previous daemon numbered (r.ID, from a block it reserved) and
// started, and was killed before it recorded, found by the processes they
// left. A run on record is not among them, nor one older than what its
// job's history keeps (it was recorded, then trimmed), nor one whose id
// no daemon reserved.
func (s *Store) Unrecorded(runs []RunRecord) ([]RunRecord, error) {
	var out []RunRecord
	err := s.view(func(b buckets) error {
		for _, r := range runs {
			if b.unrecorded(r, s.keepRuns, s.firstOwn) {
				out = append(out, r)
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read runs: %w", err)
	}
	return out, nil
}

// unrecorded reports whether r is a run no record has, nor ever had, of
// an id a previous daemon reserved: below, the first id of this daemon's
// own, which a process claiming it cannot have had.
func (b buckets) unrecorded(r RunRecord, keep int, below uint64) bool {
	if r.ID == 0 || r.ID >= below || r.ID > b.runs.Sequence() || b.runs.Get(runKey(r.ID)) != nil {
		return false
	}
	if idx := b.byJob.Bucket([]byte(r.Job)); idx != nil && idx.Stats().KeyN >= keep {
		if first, _ := idx.Cursor().First(); first != nil && binary.BigEndian.Uint64(first) > r.ID {
			return false // trimmed
		}
	}
	return true
}

// RecordLost records the runs among runs that Unrecorded would return,
// ended at end with ReasonLost and cause, and returns their ids. A run
// with no start (or one after end) starts at end.
func (s *Store) RecordLost(runs []RunRecord, end time.Time, cause string) ([]uint64, error) {
	if end.IsZero() {
		return nil, errors.New("record lost runs: end time is zero")
	}
	var recorded []uint64
	err := s.submit(func(tx *bbolt.Tx) error {
		recorded = recorded[:0]
		b, err := bucketsOf(tx)
		if err != nil {
			return err
		}
		for _, r := range runs {
			if r.Job == "" {
				return fmt.Errorf("run %d: job name is empty", r.ID)
			}
			if r.ID > b.runs.Sequence() {
				return fmt.Errorf("run %d: not among the ids reserved", r.ID)
			}
			if !b.unrecorded(r, s.keepRuns, s.firstOwn) {
				continue
			}
			r.End, r.Reason, r.Cause = end, ReasonLost, cause
			if r.Start.IsZero() || r.Start.After(end) {
				r.Start = end
			}
			if err := b.addRun(r, s.keepRuns); err != nil {
				return err
			}
			recorded = append(recorded, r.ID)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("record lost runs: %w", err)
	}
	return recorded, nil
}

// updateRun is the operation that applies change to run id; what names the
// operation in its error.
func updateRun(id uint64, what string, change func(*RunRecord)) func(tx *bbolt.Tx) error {
	return func(tx *bbolt.Tx) error {
		b, err := bucketsOf(tx)
		if err != nil {
			return err
		}
		r, found, err := b.getRun(id)
		if err == nil && !found {
			err = ErrRunNotFound
		}
		if err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		change(&r)
		return b.putRun(r)
	}
}

// setRunPID is Later.SetRunPID, waited for; tests use it.
func (s *Store) setRunPID(id uint64, pid int, startTicks uint64) error {
	return s.submit(setRunPIDOp(id, pid, startTicks), pidKey(id))
}

func setRunPIDOp(id uint64, pid int, startTicks uint64) func(tx *bbolt.Tx) error {
	return updateRun(id, fmt.Sprintf("set pid of run %d", id), func(r *RunRecord) {
		r.PID, r.StartTicks = pid, startTicks
	})
}

// EndRun is Later.EndRun, waited for: a run whose result is kept until it
// is recorded (a systemd unit's) is let go only once it is.
func (s *Store) EndRun(id uint64, end time.Time, exitCode int, signal string, reason Reason, cause string) error {
	apply, err := endRunOp(id, end, exitCode, signal, reason, cause)
	if err != nil {
		return err
	}
	return s.submit(apply, endKey(id))
}

// EndWithoutExit records the end of a run whose exit status no one could
// learn: its process was not this daemon's child (a previous daemon's,
// stopped by this one). cause says how it ended, in place of a code.
func (s *Store) EndWithoutExit(id uint64, end time.Time, reason Reason, cause string) error {
	return s.EndRun(id, end, 0, "", reason, cause)
}

// maxCauseBytes bounds a stored spawn error: it quotes paths, which are
// at most 4 KiB each, and a record is read whole with every history.
const maxCauseBytes = 1024

func endRunOp(id uint64, end time.Time, exitCode int, signal string, reason Reason, cause string) (func(tx *bbolt.Tx) error, error) {
	if reason == 0 || end.IsZero() {
		return nil, fmt.Errorf("end run %d: an ended run needs a reason and an end time", id)
	}
	if len(cause) > maxCauseBytes {
		cause = strings.ToValidUTF8(cause[:maxCauseBytes], "") + "…"
	}
	return updateRun(id, fmt.Sprintf("end run %d", id), func(r *RunRecord) {
		r.End, r.ExitCode, r.Signal, r.Reason, r.Cause = end, exitCode, signal, reason, cause
		r.StopBegan = time.Time{} // needed no more: an ended record stays one an older daemon reads
	}), nil
}

// MarkLost ends, with ReasonLost and cause (why it was lost), the runs
// among ids that are still open: those a previous life of the daemon left
// running and that the daemon could not take back. Runs already ended are
// left as they are. All or nothing: an unknown id fails the whole call
// with ErrRunNotFound.
func (s *Store) MarkLost(ids []uint64, end time.Time, cause string) error {
	if end.IsZero() {
		return errors.New("mark runs lost: end time is zero")
	}
	err := s.submit(func(tx *bbolt.Tx) error {
		b, err := bucketsOf(tx)
		if err != nil {
			return err
		}
		for _, id := range ids {
			r, found, err := b.getRun(id)
			if err != nil {
				return err
			}
			if !found {
				return fmt.Errorf("run %d: %w", id, ErrRunNotFound)
			}
			if !r.End.IsZero() {
				continue
			}
			r.End, r.Reason, r.Cause = end, ReasonLost, cause
			if err := b.putRun(r); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("mark runs lost: %w", err)
	}
	return nil
}

// PutJob writes j, replacing what was stored under its name.
func (s *Store) PutJob(j JobRecord) error {
	apply, err := putJobOp(j)
	if err != nil {
		return err
	}
	return s.submit(apply, jobKey(j.Name))
}

func putJobOp(j JobRecord) (func(tx *bbolt.Tx) error, error) {
	if j.Name == "" {
		return nil, errors.New("put job: name is empty")
	}
	v := encodeJob(j)
	return func(tx *bbolt.Tx) error {
		b, err := bucketsOf(tx)
		if err == nil {
			err = b.jobs.Put([]byte(j.Name), v)
		}
		if err != nil {
			return fmt.Errorf("put job %q: %w", j.Name, err)
		}
		return nil
	}, nil
}

// deleteJob forgets job name; deleting an unknown job is not an error. Its
// runs stay in the history (and are still trimmed if the name comes back).
// The daemon deletes no job's record; tests use it to free space.
func (s *Store) deleteJob(name string) error {
	err := s.submit(func(tx *bbolt.Tx) error {
		b, err := bucketsOf(tx)
		if err != nil {
			return err
		}
		if name == "" {
			return nil
		}
		return b.jobs.Delete([]byte(name))
	})
	if err != nil {
		return fmt.Errorf("delete job %q: %w", name, err)
	}
	return nil
}
