package store

import (
	"fmt"
	"time"

	"go.etcd.io/bbolt"
)

// maxGroup caps the operations in one transaction, so that one
// commit's latency and the cost of replaying a group after one bad
// operation stay bounded however many callers pile up.
const maxGroup = 1024

// operation is one write submitted to the writer.
type operation struct {
	// apply does the operation inside the writer's transaction. It may run
	// more than once, in a fresh transaction each time (when another
	// operation of its group fails), so it derives everything from tx and
	// its arguments, and an error from it must mean "nothing of mine should
	// be committed": the group is then replayed without it.
	apply func(tx *bbolt.Tx) error
	// done receives the operation's outcome exactly once: a channel of
	// capacity 1 the caller waits on, or, for a deferred write, a function
	// the writer calls with the error (and not at all on success).
	done   chan error
	failed func(error)
}

// finish hands op its outcome.
func (op *operation) finish(err error) {
	switch {
	case op.done != nil:
		op.done <- err
	case err != nil && op.failed != nil:
		op.failed(err)
	}
}

func (s *Store) wake() {
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// submit hands apply to the writer and waits for its transaction's outcome.
func (s *Store) submit(apply func(tx *bbolt.Tx) error) error {
	op := &operation{apply: apply, done: make(chan error, 1)}
	if err := s.enqueue(op); err != nil {
		return err
	}
	return <-op.done
}

// enqueue queues op for the writer's next transaction.
func (s *Store) enqueue(op *operation) error {
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		return ErrClosed
	}
	s.queue = append(s.queue, op)
	if s.onQueued != nil {
		s.onQueued(len(s.queue))
	}
	s.mu.Unlock()
	s.wake()
	return nil
}

// write is the writer goroutine: it takes whatever has queued up and commits
// it as one transaction, until Close has been called and the queue is empty.
// Between groups it also keeps the store's health (see health), whose
// recovery is due on the clock even when nothing is written, and looks
// whether the state file is still at its path (see pathWatch).
func (s *Store) write() {
	defer close(s.writerDone)
	defer s.health.disarm()
	check := time.NewTicker(s.watch.every)
	defer check.Stop()
	for {
		select {
		case <-s.kick:
		case <-s.health.due():
			s.health.recovered()
			continue
		case <-check.C:
			s.watch.check()
			continue
		}
		for {
			group, closing, hook := s.take(maxGroup)
			if len(group) == 0 {
				if closing {
					return
				}
				break
			}
			if !closing && deferredOnly(group) {
				group = s.linger(group)
			}
			s.commit(group, hook)
		}
	}
}

// defaultLinger is how long deferred writes wait for a write someone waits
// for, to share its commit: the commit that records a run (BeginRun) then
// also carries the previous run's end, and a job's way to running waits
// for one commit, not for the previous run's end and then its own.
const defaultLinger = 20 * time.Millisecond

// linger holds a group of deferred writes until a waited-for write joins
// it, the group fills, Close begins, or defaultLinger passes.
func (s *Store) linger(group []*operation) []*operation {
	t := time.NewTimer(s.lingerFor)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			return group
		case <-s.kick:
			more, closing, _ := s.take(maxGroup - len(group))
			group = append(group, more...)
			if closing || !deferredOnly(more) || len(group) >= maxGroup {
				return group
			}
		}
	}
}

// take removes up to n operations from the queue.
func (s *Store) take(n int) (group []*operation, closing bool, hook func(*bbolt.Tx) error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n = min(len(s.queue), n)
	group = s.queue[:n:n]
	s.queue = s.queue[n:]
	if len(s.queue) == 0 {
		s.queue = nil // let the backing array go
	}
	return group, s.closing, s.beforeCommit
}

func deferredOnly(group []*operation) bool {
	for _, op := range group {
		if op.done != nil {
			return false
		}
	}
	return true
}

// commit applies group in one transaction and tells each caller the outcome.
// An operation that fails is answered with its own error and the group is
// replayed without it, so one bad request never costs the others their
// write. A failed commit (disk full, I/O error) is answered to every caller
// of the group; bbolt has rolled it back, so the next group starts clean.
func (s *Store) commit(group []*operation, hook func(*bbolt.Tx) error) {
	for len(group) > 0 {
		failed := -1
		var opErr error
		err := s.db.Update(func(tx *bbolt.Tx) error {
			for i, op := range group {
				if err := op.apply(tx); err != nil {
					failed, opErr = i, err
					return err
				}
			}
			if hook != nil {
				return hook(tx)
			}
			return nil
		})
		if failed >= 0 {
			group[failed].finish(opErr)
			group = append(group[:failed:failed], group[failed+1:]...)
			continue
		}
		if err != nil {
			err = fmt.Errorf("commit state %s: %w", s.path, err)
		} else {
			s.commits.Add(1)
		}
		s.health.committed(err)
		// A commit into a file no longer at its path is lost with the
		// daemon: noticed at the first one, before its callers hear of it.
		s.watch.check()
		for _, op := range group {
			op.finish(err)
		}
		return
	}
}
