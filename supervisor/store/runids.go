package store

import (
	"fmt"
	"sync"

	"go.etcd.io/bbolt"
)

// runBlock is how many run ids are reserved on disk at a time. A daemon
// hands out ids from the block in memory, so that a run can be numbered,
// and its process started, before its record commits; a crash wastes what
// is left of the block, never hands an id out twice, and a clean close
// gives it back (giveBack). It is large enough for a daemon that starts a
// few hundred jobs at once not to wait for a block: the commit that
// reserves the next one competes with their forks for the cores.
const runBlock = 256

// idBlocks are the ids reserved on disk and not yet handed out: next to
// limit. The runs bucket's sequence is the highest id reserved (before
// blocks, it was the last id handed out; either way every id above it is
// free, so files of both kinds read the same).
type idBlocks struct {
	mu sync.Mutex // guards next, limit and reserving
	// next is the next id to hand out, limit the last one reserved on
	// disk: next > limit means none is left.
	next, limit uint64
	// reserving says a reservation of the next block is queued, so that
	// another is not queued behind it.
	reserving bool
	// givenBack: the store closed, and what was left of the block went
	// back to the file (giveBack): none is handed out or reserved again.
	givenBack bool
}

// reserveOp raises the runs bucket's sequence to at least to. Raising
// only, so that it may run more than once, and in any order with others.
func reserveOp(to uint64) func(tx *bbolt.Tx) error {
	return func(tx *bbolt.Tx) error {
		b, err := bucketsOf(tx)
		if err != nil {
			return err
		}
		if b.runs.Sequence() >= to {
			return nil
		}
		return b.runs.SetSequence(to)
	}
}

// reserveAtOpen reserves the first block of this daemon's life in tx, the
// transaction that opens the file: its ids follow every id a previous
// daemon reserved, whether or not it used them.
func (ids *idBlocks) reserveAtOpen(tx *bbolt.Tx) error {
	runs := tx.Bucket(bucketRuns)
	from := runs.Sequence() + 1
	if err := runs.SetSequence(from + runBlock - 1); err != nil {
		return fmt.Errorf("reserve run ids: %w", err)
	}
	ids.next, ids.limit = from, from+runBlock-1
	return nil
}

// NextRunID hands out a run id that no run of this state file has had or
// will have, after a crash too: it comes from a block reserved on disk.
// It returns at once while the block lasts; the next block is reserved in
// the background once half of this one is gone, and only a caller that
// finds none left waits for a commit. An error means no block could be
// reserved (the state is not being written).
func (s *Store) NextRunID() (uint64, error) {
	for {
		s.ids.mu.Lock()
		if s.ids.givenBack {
			s.ids.mu.Unlock()
			return 0, fmt.Errorf("reserve run ids: %w", ErrClosed)
		}
		if s.ids.next <= s.ids.limit {
			id := s.ids.next
			s.ids.next++
			if !s.ids.reserving && s.ids.limit-s.ids.next < runBlock/2 {
				s.ids.reserving = true
				to := s.ids.limit + runBlock
				s.ids.mu.Unlock()
				s.queueReserve(to)
				return id, nil
			}
			s.ids.mu.Unlock()
			return id, nil
		}
		// None left (the queued reservation, if any, has not committed
		// yet): reserve the next block, and wait.
		to := s.ids.limit + runBlock
		s.ids.mu.Unlock()
		if err := s.submit(reserveOp(to)); err != nil {
			return 0, fmt.Errorf("reserve run ids: %w", err)
		}
		s.reserved(to)
	}
}

// queueReserve reserves ids up to to without anyone waiting: the write
// goes with the next commit.
func (s *Store) queueReserve(to uint64) {
	op := &operation{apply: reserveOp(to), after: func(err error) {
		s.ids.mu.Lock()
		s.ids.reserving = false
		s.ids.mu.Unlock()
		if err == nil {
			s.reserved(to)
		}
	}}
	if err := s.enqueue(op); err != nil {
		s.ids.mu.Lock()
		s.ids.reserving = false
		s.ids.mu.Unlock()
	}
}

// giveBack lowers the runs bucket's sequence, in the last commit of a
// clean close, to the last id handed out: the next daemon goes on from
// there, where a crash leaves the gap of the block it had reserved. Any
// later NextRunID finds no id left, and the store no longer commits.
func (s *Store) giveBack(tx *bbolt.Tx) error {
	s.ids.mu.Lock()
	defer s.ids.mu.Unlock()
	used := s.ids.next - 1
	s.ids.limit, s.ids.givenBack = used, true
	runs := tx.Bucket(bucketRuns)
	if runs == nil || runs.Sequence() <= used {
		return nil
	}
	return runs.SetSequence(used)
}

// reserved notes that ids up to to are reserved on disk.
func (s *Store) reserved(to uint64) {
	s.ids.mu.Lock()
	defer s.ids.mu.Unlock()
	if !s.ids.givenBack {
		s.ids.limit = max(s.ids.limit, to)
	}
}
