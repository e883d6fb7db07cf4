package store

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
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
	// after, when set, is called on the writer's goroutine with the
	// outcome, success (nil) included, once the operation's transaction has
	// committed or failed to; it must not block or write to the store. An
	// operation with after and no done is a deferred write.
	after func(error)
	// awaited: someone waits to hear of it through after (to show the run
	// it records), so it waits for company as briefly as a write someone
	// waits for does (see linger).
	awaited bool
	// key, when set, names what the operation writes (a job's record, a
	// run's pid or end) so that it may be written again: one whose commit
	// failed (disk full) is kept, the last of each key, and put before
	// the next commits until one succeeds (see commit).
	key  string
	kept bool // a copy of a write whose commit failed (see keep)
	// intent is the line appended to the file of intents as it is
	// queued (intents.go); announced: its line was appended before it
	// was queued (Intend, IntendEnd), and the file waits for it.
	intent    []byte
	announced bool
}

// Keys of the writes that are kept for another try when their commit fails.
func jobKey(name string) string { return "job\x00" + name }
func beginKey(id uint64) string { return "run\x00" + strconv.FormatUint(id, 10) }
func pidKey(id uint64) string   { return "pid\x00" + strconv.FormatUint(id, 10) }
func endKey(id uint64) string   { return "end\x00" + strconv.FormatUint(id, 10) }
func stopKey(id uint64) string  { return "stop\x00" + strconv.FormatUint(id, 10) }
func gpuMemKey(id uint64) string {
	return "gpumem\x00" + strconv.FormatUint(id, 10)
}

// retryEvery is how often writes kept after a failed commit are tried again
// when nothing else is written meanwhile. It is timed on the system's
// clock, as linger is: it decides how soon they go in, not what is kept.
const retryEvery = time.Second

// finish hands op its outcome.
func (op *operation) finish(err error) {
	switch {
	case op.done != nil:
		op.done <- err
	case err != nil && op.failed != nil:
		op.failed(err)
	}
	if op.after != nil {
		op.after(err)
	}
}

func (s *Store) wake() {
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// submit hands apply to the writer and waits for its transaction's outcome.
// With a key, a write whose commit fails is also kept and tried again.
func (s *Store) submit(apply func(tx *bbolt.Tx) error, key ...string) error {
	op := &operation{apply: apply, done: make(chan error, 1)}
	if len(key) > 0 {
		op.key = key[0]
	}
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
	if op.intent != nil {
		s.appendIntent(op.intent)
	}
	if op.announced && s.intents.announced > 0 {
		s.intents.announced--
	}
	if s.onQueued != nil {
		s.onQueued(len(s.queue))
	}
	wake := s.mustWake(op)
	s.mu.Unlock()
	if wake {
		s.wake()
	}
	return nil
}

// mustWake says whether op, just queued, must wake the writer; mu is held.
// A writer that holds a group for company takes what has queued at each
// look (linger), so only what changes the wait wakes it: a group grown
// full, or the first write someone waits for joining deferred ones.
// Woken for every write instead, a writer waiting out a longer company
// spent on the wakes what the fewer commits saved.
func (s *Store) mustWake(op *operation) bool {
	h := s.holding
	switch {
	case h.n == 0:
		return true
	case h.n+len(s.queue) >= maxGroup:
		return true
	default:
		return !h.waited && (op.done != nil || op.awaited)
	}
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
	var retry *time.Timer
	defer func() {
		if retry != nil {
			retry.Stop()
		}
	}()
	for {
		if len(s.pending) > 0 && retry == nil {
			retry = time.NewTimer(retryEvery)
		}
		var retryC <-chan time.Time
		if retry != nil {
			retryC = retry.C
		}
		select {
		case <-s.kick:
		case <-retryC:
			retry = nil
			if len(s.pending) > 0 {
				s.commit(nil, s.hook())
				s.emptyIntents()
			}
			continue
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
			if !closing {
				group = s.linger(group)
			}
			s.commit(group, hook)
			s.emptyIntents()
		}
	}
}

// defaultLinger is how long deferred writes wait for a write someone waits
// for, to share its commit: a run's end and its job's passing states then
// go with the next run's record or resting state, rather than costing a
// commit of their own.
const defaultLinger = 20 * time.Millisecond

// defaultCompany is the longest a write someone waits for waits for
// company before it commits, and defaultQuiet how long a pause in the
// writes ends that wait early. Short runs each bring two such writes,
// their record and where their job comes to rest, a millisecond or so
// apart; committed one by one they cost a commit each (two fdatasyncs, a
// quarter of the daemon's CPU per run), while gathered for a moment a
// commit carries the writes of several runs. The wait delays when a run,
// or a job at rest, is shown: by 4 ms after the last write of a burst
// (the start of a hundred programs) or a lone one, by 10 ms at most in a
// stream of short runs.
//
// With runs of /bin/true two at a time (berth-bench's throughput, A/Bs of
// interleaved pairs), a fixed wait of 2 ms gave a commit for every 5–6
// runs and 5 ms one for every 9–12, the daemon's CPU per run 0.95 and 0.85
// of what 2 ms cost (11 and 15 pairs). A fixed 10 ms halved the commits again and gained
// nothing (25 pairs: CPU 0.97, wall 1.00): the writer was woken for each
// write that joined the wait. Taking those at each look instead
// (mustWake), this wait gives a commit for every 17–20 runs, the CPU per
// run 0.930 and 0.925 of the fixed 5 ms, the wall time 0.962 and 1.00 (two
// A/Bs of 25 pairs); the start of 100 programs took 0.98 and 1.00 of the
// time (two A/Bs of 12 pairs), a reload's p50 0.96 (5 pairs).
//
// The quiet was 2 ms. On a machine where a fork cost 4–5× as much (each
// /bin/true 3.3 ms of CPU, not 0.7), runs came further apart, and 2 ms
// without a write ended the wait at one commit every 4 runs. At 4 ms
// (two A/Bs of 8 and 10 pairs against 2 ms) a commit came every 5 runs
// (0.834 and 0.820 of the commits), the daemon's CPU per run 0.934 and
// 0.972 of what it was, the wall time 0.977 and 0.969; the start of 100
// programs, which waits for the quiet once, 1.02 (9 pairs). 7 ms gained
// nothing more (8 pairs against 4 ms: commits 0.986, CPU 1.03): from
// there the 10 ms for company ends most waits.
const (
	defaultCompany = 10 * time.Millisecond
	defaultQuiet   = 4 * time.Millisecond
)

// linger holds group for company before it commits. A group of deferred
// writes waits until a write someone waits for joins it, or lingerFor
// passes. One with such a write then waits as long as company keeps
// coming: until quietFor passes with nothing new, or companyFor since the
// wait began. Either ends early when the group fills or Close begins.
// Writes that change none of this do not wake the writer (mustWake); what
// has queued meanwhile is taken at each look.
func (s *Store) linger(group []*operation) []*operation {
	waited := !deferredOnly(group)
	if (waited && s.companyFor <= 0) || (!waited && s.lingerFor <= 0) {
		return group
	}
	c := s.lingerClock
	var deadline time.Time
	first := s.lingerFor
	if waited {
		deadline = c.Now().Add(s.companyFor)
		first = min(s.quietFor, s.companyFor)
	}
	look := c.NewTimer(first)
	defer func() { look.Stop() }()
	s.hold(len(group), waited)
	defer s.hold(0, false)
	for {
		woken := false
		select {
		case <-look.C():
		case <-s.kick:
			woken = true
		}
		more, closing, _ := s.take(maxGroup - len(group))
		group = append(group, more...)
		if closing || len(group) >= maxGroup {
			return group
		}
		now := c.Now()
		switch {
		case !waited && !deferredOnly(more):
			// A waited-for write joined: from now on it is company that
			// counts.
			if s.companyFor <= 0 {
				return group
			}
			waited, deadline = true, now.Add(s.companyFor)
		case woken:
			// A wake from before the hold: the look is still to come.
			s.hold(len(group), waited)
			continue
		case !waited:
			return group // lingerFor is over
		case len(more) == 0 || !now.Before(deadline):
			return group // quiet, or the company's time is over
		}
		look.Stop()
		look = c.NewTimer(min(s.quietFor, deadline.Sub(now)))
		s.hold(len(group), waited)
	}
}

// hold tells enqueue of the group the writer holds (see mustWake).
func (s *Store) hold(n int, waited bool) {
	s.mu.Lock()
	s.holding = held{n: n, waited: waited}
	s.mu.Unlock()
}

// take removes up to n operations from the queue.
func (s *Store) take(n int) (group []*operation, closing bool, hook func(*bbolt.Tx) error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n = min(len(s.queue), n)
	s.intents.taken = s.intents.appended
	group = s.queue[:n:n]
	s.queue = s.queue[n:]
	if len(s.queue) == 0 {
		s.queue = nil // let the backing array go
	}
	return group, s.closing, s.beforeCommit
}

func deferredOnly(group []*operation) bool {
	for _, op := range group {
		if op.done != nil || op.awaited {
			return false
		}
	}
	return true
}

// hook is the test hook of the transactions to come.
func (s *Store) hook() func(*bbolt.Tx) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.beforeCommit
}

// commit applies group in one transaction and tells each caller the outcome.
// An operation that fails is answered with its own error and the group is
// replayed without it, so one bad request never costs the others their
// write. A failed commit (disk full, I/O error) is answered to every caller
// of the group; bbolt has rolled it back, so the next group starts clean.
//
// The keyed writes of a failed commit are kept (pending) and go first in
// the commits after, before the group's own, until one commits: the state
// that a full disk kept from being written (a job come to rest, a run's
// end) goes in once there is room, and anything newer of the same key,
// later in the group, still wins. Should the kept writes fail the commit
// again, the group is tried without them: they never keep newer writes
// (those that free space among them) out. A group that goes in so drops
// what is kept of its keys, which is older.
func (s *Store) commit(group []*operation, hook func(*bbolt.Tx) error) {
	if len(s.pending) > 0 {
		// Its failure is not told to the health yet: the group alone
		// may commit, and that is what says whether writes go in.
		rest, err := s.commitOnce(append(s.pendingOps(), group...), hook, false)
		if err == nil {
			s.pending, s.pendingKeys = nil, nil
			s.publishKept()
			s.health.committed(nil, false)
			for _, op := range rest {
				op.finish(nil)
			}
			return
		}
		group = slices.DeleteFunc(rest, func(op *operation) bool { return op.kept })
		if len(group) == 0 {
			s.publishKept()
			return
		}
	}
	// Without the kept writes, a write may fail for want of one of them
	// (a run's end, of its record): it is kept too, to go in after them.
	rest, err := s.commitOnce(group, hook, len(s.pending) > 0)
	if err != nil {
		s.keep(rest)
	} else {
		// What went in is newer than what is kept of the same key.
		for _, op := range rest {
			if op.key != "" {
				s.dropPending(op.key)
			}
		}
	}
	// A commit that went in while kept writes still wait is no sign the
	// state is recorded: what they hold (a job come to rest) is not.
	// Before the health turns and the callers hear back: what they then
	// ask of Kept is so.
	s.publishKept()
	s.health.committed(err, len(s.pending) > 0)
	for _, op := range rest {
		op.finish(err)
	}
}

// commitOnce applies ops in one transaction, replaying it without an
// operation that fails on its own (which is answered, and left out of
// rest; with keepFailed, kept as well, should it need a kept write). It
// returns the operations of the transaction and its outcome; it answers
// none of them, and tells the health nothing (commit does).
func (s *Store) commitOnce(ops []*operation, hook func(*bbolt.Tx) error, keepFailed bool) (rest []*operation, err error) {
	for len(ops) > 0 {
		failed := -1
		var opErr error
		later := superseded(ops)
		began := time.Now()
		err := s.db.Update(func(tx *bbolt.Tx) error {
			for i, op := range ops {
				if later != nil && later[i] {
					continue
				}
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
			if keepFailed {
				s.keep(ops[failed : failed+1])
			}
			ops[failed].finish(opErr)
			ops = append(ops[:failed:failed], ops[failed+1:]...)
			continue
		}
		if s.onCommit != nil {
			s.onCommit(time.Since(began), err)
		}
		if err != nil {
			err = fmt.Errorf("commit state %s: %w", s.path, err)
		} else {
			s.commits.Add(1)
		}
		// A commit into a file no longer at its path is lost with the
		// daemon: noticed at the first one, before its callers hear of it.
		s.watch.check()
		return ops, err
	}
	return nil, nil
}

// superseded marks the keyed writes that a later one of the same key
// overwrites in the same transaction (a job's record put again, a run's end
// or pid set again): only the last of each is applied, and the ones before
// it share its outcome. A job's passing states (waiting, starting, running)
// and its resting one often meet in one commit; applying each would read
// and write the same page of the jobs bucket once per state.
func superseded(ops []*operation) []bool {
	var out []bool
	seen := make(map[string]bool, len(ops))
	for i := len(ops) - 1; i >= 0; i-- {
		k := ops[i].key
		if k == "" {
			continue
		}
		if seen[k] {
			if out == nil {
				out = make([]bool, len(ops))
			}
			out[i] = true
			continue
		}
		seen[k] = true
	}
	return out
}

// keep sets aside the keyed writes of a group whose commit failed, the last
// of each key, in the order they came.
func (s *Store) keep(group []*operation) {
	for _, op := range group {
		if op.key == "" {
			continue
		}
		// Its caller has its answer: the copy answers nobody, and is
		// dropped should it fail on its own (what it wrote to is gone).
		key := op.key
		again := &operation{apply: op.apply, key: key, kept: true, failed: func(error) { s.dropPending(key) }}
		if i, ok := s.pendingKeys[op.key]; ok {
			s.pending[i] = again
			continue
		}
		if s.pendingKeys == nil {
			s.pendingKeys = map[string]int{}
		}
		s.pendingKeys[op.key] = len(s.pending)
		s.pending = append(s.pending, again)
	}
}

// dropPending forgets the kept write of key.
func (s *Store) dropPending(key string) {
	i, ok := s.pendingKeys[key]
	if !ok {
		return
	}
	s.pending = slices.Delete(s.pending, i, i+1)
	delete(s.pendingKeys, key)
	for k, j := range s.pendingKeys {
		if j > i {
			s.pendingKeys[k] = j - 1
		}
	}
}

// unrecorded says what the kept writes were, once the writer is done.
func (s *Store) unrecorded() *UnrecordedError {
	e := &UnrecordedError{Path: s.path, Err: s.Failing()}
	for _, op := range s.pending {
		if name, ok := strings.CutPrefix(op.key, jobKey("")); ok {
			e.Jobs = append(e.Jobs, name)
		} else {
			e.Runs++
		}
	}
	slices.Sort(e.Jobs)
	return e
}

// publishKept publishes the jobs whose records are kept (Kept).
func (s *Store) publishKept() {
	var jobs map[string]bool
	for key := range s.pendingKeys {
		if name, ok := strings.CutPrefix(key, jobKey("")); ok {
			if jobs == nil {
				jobs = map[string]bool{}
			}
			jobs[name] = true
		}
	}
	switch {
	case jobs != nil:
		s.keptJobs.Store(&jobs)
	case s.keptJobs.Load() != nil:
		s.keptJobs.Store(nil) // once: a commit with none kept costs nothing
	}
}

// Kept are the jobs whose latest record a failed commit kept for another
// try: not on disk yet, and lost should the daemon stop before it is.
// Nil while there are none. Read only.
func (s *Store) Kept() map[string]bool {
	if p := s.keptJobs.Load(); p != nil {
		return *p
	}
	return nil
}

// pendingOps are the kept writes, to go first in the next commit.
func (s *Store) pendingOps() []*operation {
	return append([]*operation(nil), s.pending...)
}
