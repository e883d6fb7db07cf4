package supervisor

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
)

// The store's sentinel errors, together so that callers (cmd/ turning them
// into sentences) see every outcome in one place.
var (
	// ErrStateLocked is returned by OpenStore, inside a *StateLockedError,
	// when another process holds the state file past the lock timeout.
	ErrStateLocked = errors.New("state is held by another berth daemon")

	// ErrStoreClosed is returned by every Store method called after Close.
	ErrStoreClosed = errors.New("state store is closed")

	// ErrRunNotFound is returned by SetRunPID, EndRun and MarkLost when no
	// run has the id: it was never begun, or it has been trimmed.
	ErrRunNotFound = errors.New("run not found")

	// ErrStateCorrupt is returned when the state file, or a record in it,
	// cannot be read. The file must be repaired or moved aside.
	ErrStateCorrupt = errors.New("state is corrupt")

	// ErrStateNewer is returned when the state file or a record in it was
	// written by a newer berth, in a format this one does not know.
	ErrStateNewer = errors.New("state was written by a newer berth")
)

// StateLockedError says that another process holds the state file. A second
// daemon on the same state directory must fail at once and name the holder,
// so that the operator knows which process to look at.
type StateLockedError struct {
	Path      string
	HolderPID int // 0 when unknown: the holder is in another pid namespace, or exited meanwhile
}

func (e *StateLockedError) Error() string {
	if e.HolderPID > 0 {
		return fmt.Sprintf("state %s is held by another berth daemon (pid %d) (systemctl status berth)", e.Path, e.HolderPID)
	}
	return fmt.Sprintf("state %s is held by another berth daemon (systemctl status berth)", e.Path)
}

// Is makes errors.Is(err, ErrStateLocked) true for a *StateLockedError.
func (e *StateLockedError) Is(target error) bool { return target == ErrStateLocked }

// RunRecord is one spawn of a job.
type RunRecord struct {
	ID          uint64 // unique across the store, increasing; assigned by BeginRun
	Job         string
	Fingerprint string // the job definition's process fingerprint when it ran
	CPUIDs      []int
	GPUs        []string // card names as the job saw them
	RAMBytes    int64
	PID         int
	StartTicks  uint64 // /proc/PID/stat field 22: recognises the process after a daemon restart despite PID reuse
	Start, End  time.Time
	ExitCode    int    // meaningful when Reason is ReasonExited or ReasonFailed and Signal == ""
	Signal      string // "SIGKILL" when it died by a signal, else ""
	Reason      Reason // 0 while running
}

// JobRecord is what survives a daemon restart about a job.
type JobRecord struct {
	Name            string
	State           State
	Fingerprint     string // process fingerprint of the definition last seen
	DoneFingerprint string // the definition whose last run ended done (once per definition), "" if none
	Restarts        int    // consecutive restarts so far (max_restarts counts these)
	Changed         time.Time
}

// StoreOptions tunes OpenStore. The zero value gives the defaults.
type StoreOptions struct {
	// LockTimeout bounds the wait for the file lock (default 100ms). It is
	// never infinite: bbolt's default of waiting forever would make a second
	// daemon hang silently instead of saying who holds the file.
	LockTimeout time.Duration

	// KeepRuns is how many runs are kept per job (default 100).
	KeepRuns int

	// OnHealth, when set, is called on the writer's goroutine each time
	// commits start failing (with the error) and when they succeed again
	// (with nil). It must not block or write to the store.
	OnHealth func(err error)

	// recoverAfter replaces storeRecoverAfter in tests.
	recoverAfter time.Duration
}

// storeRecoverAfter is how long commits must go without a failure before
// the state counts as recorded again. On a nearly full disk some commits
// fit in pages bbolt already has and others need new ones, so successes
// and failures alternate; without this the status and the log would flap.
const storeRecoverAfter = 5 * time.Second

const (
	storeDefaultLockTimeout = 100 * time.Millisecond
	storeDefaultKeepRuns    = 100

	// storeMaxGroup caps the operations in one transaction, so that one
	// commit's latency and the cost of replaying a group after one bad
	// operation stay bounded however many callers pile up.
	storeMaxGroup = 1024

	// storeFormat is the layout of buckets and keys. Records carry their
	// own version byte; this number changes only when the layout does.
	storeFormat = 1

	// Runs are appended at the end of the key space, and most updates
	// (pid, end) touch the newest pages, so pages are packed fuller than
	// bbolt's 50 %; not to 100 % because EndRun grows a record in place and
	// a packed page would split on the first update. The per-job indexes hold
	// fixed-size keys that never change, so they are packed full.
	storeRunsFill  = 0.9
	storeIndexFill = 1.0
)

// Bucket names: the layout of DESIGN.md's state.db. Keys of run buckets are
// big-endian ids, so byte order is chronological order.
var (
	storeBucketMeta      = []byte("meta")        // "format" → storeFormat, "instance" → Instance
	storeBucketJobs      = []byte("jobs")        // name → encoded JobRecord
	storeBucketRuns      = []byte("runs")        // id → encoded RunRecord; its sequence assigns ids
	storeBucketRunsByJob = []byte("runs_by_job") // one nested bucket per job name: id → empty
	storeBucketRunsOpen  = []byte("runs_open")   // id → empty, for every run with no End
	storeKeyFormat       = []byte("format")
	storeKeyInstance     = []byte("instance") // random hex, made with the file
)

// Store is the daemon's persistent state: jobs' last known state and the
// run history, in a bbolt file.
//
// Writes use group commit. One goroutine (write) owns every write
// transaction. A caller submits an operation and blocks until the
// transaction containing it has committed, fsync included (or, through
// Later, queues it and goes on). While one
// transaction commits, operations submitted meanwhile queue up, and the
// writer then applies all of them in the next single transaction. The
// cost of durability is an fsync pair per transaction (1–2 ms on the
// machines measured), so 100 runs ending at once cost a handful of fsyncs
// rather than 100, while a lone caller waits for one commit and no more.
// bbolt's own Batch is not used: it waits up to MaxBatchDelay for company,
// which made a lone caller several times slower (notes/libraries.md).
//
// Reads are bbolt read-only transactions, taken directly by the caller; they
// run concurrently with each other and with the writer.
type Store struct {
	db       *bbolt.DB
	path     string
	instance string
	keepRuns int

	// kick wakes the writer; capacity 1 and sent without blocking, so any
	// number of submissions while the writer is busy coalesce into one wake.
	kick chan struct{}
	// writerDone is closed when the writer has returned.
	writerDone chan struct{}

	// commits counts committed write transactions; tests read it to check
	// that concurrent operations share transactions.
	commits atomic.Uint64

	// failing is the error of the last failed commit, until the writer
	// sees commits succeed recoverAfter after it; failedAt is when it
	// failed, okAt when a commit last succeeded (Unix nanoseconds).
	// Written by the writer only.
	failing      atomic.Pointer[error]
	failedAt     atomic.Int64
	okAt         atomic.Int64
	recoverAfter time.Duration
	onHealth     func(error)

	lingerFor time.Duration // storeLinger; tests lengthen it

	closeOnce sync.Once
	closeErr  error // result of the first Close, returned by every Close

	// mu guards queue, closing and the two test hooks. It is never held
	// during a transaction.
	mu      sync.Mutex
	queue   []*storeOp // submitted, not yet taken by the writer
	closing bool       // Close has begun: no more submissions
	// beforeCommit, when set, runs inside every write transaction after its
	// operations; an error from it fails the whole group like a failed
	// commit would. Tests use it to inject faults and to hold the writer.
	beforeCommit func(tx *bbolt.Tx) error
	// onQueued, when set, is called (with mu held) after each submission
	// with the number of operations waiting; tests use it to know that
	// callers are queued without sleeping.
	onQueued func(queued int)
}

// storeOp is one write submitted to the writer.
type storeOp struct {
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
func (op *storeOp) finish(err error) {
	switch {
	case op.done != nil:
		op.done <- err
	case err != nil && op.failed != nil:
		op.failed(err)
	}
}

// OpenStore opens the state file at path, creating it (mode 0600) and its
// buckets if needed. The directory must exist.
//
// Outcomes:
//   - (*Store, nil): open; the caller must Close it.
//   - (nil, *StateLockedError): another process holds the file (errors.Is ErrStateLocked).
//   - (nil, err) with errors.Is(err, ErrStateCorrupt) or ErrStateNewer: the file cannot be used as it is.
//   - (nil, err): any other failure (permissions, I/O), naming the path.
func OpenStore(path string, opts StoreOptions) (*Store, error) {
	return storeOpen(path, opts, nil)
}

// storeOpen is OpenStore with a hook to adjust bbolt's options, which tests
// use to provoke real write failures (MaxSize).
func storeOpen(path string, opts StoreOptions, tune func(*bbolt.Options)) (*Store, error) {
	if opts.LockTimeout <= 0 {
		opts.LockTimeout = storeDefaultLockTimeout
	}
	if opts.KeepRuns <= 0 {
		opts.KeepRuns = storeDefaultKeepRuns
	}
	bo := &bbolt.Options{
		Timeout: opts.LockTimeout,
		// NoFreelistSync stays off. It would save writing the freelist on
		// each commit, but a commit costs its two fsyncs, not one page more
		// (in the EndRun benchmarks the difference was lost in the disk's
		// noise), while it makes opening, and every rolled-back write
		// transaction, scan the whole file to rebuild the freelist; and
		// rollbacks are what a failed group or a bad operation causes here.
		NoFreelistSync: false,
		// The hashmap freelist stays fast when trimming leaves many scattered
		// free pages; the array default degrades with fragmentation.
		FreelistType: bbolt.FreelistMapType,
	}
	if tune != nil {
		tune(bo)
	}
	db, err := storeBoltOpen(path, bo)
	if err != nil {
		if errors.Is(err, berrors.ErrTimeout) {
			return nil, &StateLockedError{Path: path, HolderPID: storeLockHolder(path)}
		}
		if errors.Is(err, berrors.ErrInvalid) || errors.Is(err, berrors.ErrChecksum) || errors.Is(err, berrors.ErrVersionMismatch) {
			return nil, fmt.Errorf("open state %s: %w: %w", path, ErrStateCorrupt, err)
		}
		return nil, fmt.Errorf("open state %s: %w", path, err)
	}
	instance, err := storeInit(db)
	if err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("open state %s: %w", path, err)
	}
	s := &Store{
		db:         db,
		path:       path,
		instance:   instance,
		keepRuns:   opts.KeepRuns,
		kick:       make(chan struct{}, 1),
		writerDone: make(chan struct{}),
		onHealth:   opts.OnHealth,
		lingerFor:  storeLinger,
	}
	s.recoverAfter = storeRecoverAfter
	if opts.recoverAfter != 0 {
		s.recoverAfter = max(0, opts.recoverAfter)
	}
	go s.write()
	return s, nil
}

// storeBoltOpen is bbolt.Open made safe against damaged files: bbolt panics
// on some (a freelist page of the wrong type) instead of returning an error.
// The file it had opened, and locked, is closed then, so that the failed
// open does not leave the state locked for the rest of the process's life.
func storeBoltOpen(path string, bo *bbolt.Options) (db *bbolt.DB, err error) {
	var file *os.File
	openFile := bo.OpenFile
	if openFile == nil {
		openFile = os.OpenFile
	}
	bo.OpenFile = func(name string, flag int, perm os.FileMode) (*os.File, error) {
		f, err := openFile(name, flag, perm)
		file = f
		return f, err
	}
	defer func() {
		if r := recover(); r != nil {
			if file != nil {
				// bbolt may have mapped the file, and a mapping keeps the
				// open file description, and so its flock, alive after
				// Close: unlock explicitly. The mapping itself leaks.
				_ = syscall.Flock(int(file.Fd()), syscall.LOCK_UN)
				_ = file.Close()
			}
			db, err = nil, fmt.Errorf("%w: %v", ErrStateCorrupt, r)
		}
	}()
	return bbolt.Open(path, 0o600, bo)
}

// storeInit checks the whole file and creates what is missing. The check
// reads every page (75 ms for 100 000 runs, a 35 MB file, on a slow VM), paid once
// per daemon start so that a damaged file is refused here, with its path,
// instead of making bbolt panic in the writer later and the daemon crash in
// a loop under systemd.
func storeInit(db *bbolt.DB) (instance string, err error) {
	defer func() {
		// bbolt panics on some kinds of damage (a page of the wrong type)
		// rather than returning an error.
		if r := recover(); r != nil {
			err = fmt.Errorf("%w: %v", ErrStateCorrupt, r)
		}
	}()
	err = db.View(func(tx *bbolt.Tx) error {
		var errs []error
		for e := range tx.Check() {
			if len(errs) < 5 {
				errs = append(errs, e)
			}
		}
		if len(errs) > 0 {
			return fmt.Errorf("%w: %w", ErrStateCorrupt, errors.Join(errs...))
		}
		return nil
	})
	if err != nil {
		return "", err
	}
	err = db.Update(func(tx *bbolt.Tx) error {
		for _, name := range [][]byte{storeBucketMeta, storeBucketJobs, storeBucketRuns, storeBucketRunsByJob, storeBucketRunsOpen} {
			if _, err := tx.CreateBucketIfNotExists(name); err != nil {
				return fmt.Errorf("create bucket %s: %w", name, err)
			}
		}
		meta := tx.Bucket(storeBucketMeta)
		switch v := meta.Get(storeKeyFormat); {
		case v == nil:
			if err := meta.Put(storeKeyFormat, []byte{storeFormat}); err != nil {
				return err
			}
		case len(v) != 1:
			return fmt.Errorf("%w: format key is %d bytes", ErrStateCorrupt, len(v))
		case v[0] > storeFormat:
			return fmt.Errorf("format %d: %w", v[0], ErrStateNewer)
		}
		if v := meta.Get(storeKeyInstance); v != nil {
			instance = string(v)
			return nil
		}
		var id [8]byte
		if _, err := rand.Read(id[:]); err != nil {
			return err
		}
		instance = hex.EncodeToString(id[:])
		return meta.Put(storeKeyInstance, []byte(instance))
	})
	return instance, err
}

// Instance names this state file for as long as it exists: run ids count
// from 1 in every state file, and the instance tells one berth's runs from
// another's (two users' daemons, or tests side by side).
func (s *Store) Instance() string { return s.instance }

// Close waits for submitted writes to commit, then closes the file and
// releases its lock. Later calls return the first call's result.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		s.mu.Lock()
		s.closing = true
		s.mu.Unlock()
		s.wake()
		<-s.writerDone
		if err := s.db.Close(); err != nil {
			s.closeErr = fmt.Errorf("close state %s: %w", s.path, err)
		}
	})
	return s.closeErr
}

func (s *Store) wake() {
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// submit hands apply to the writer and waits for its transaction's outcome.
func (s *Store) submit(apply func(tx *bbolt.Tx) error) error {
	op := &storeOp{apply: apply, done: make(chan error, 1)}
	if err := s.enqueue(op); err != nil {
		return err
	}
	return <-op.done
}

// enqueue queues op for the writer's next transaction.
func (s *Store) enqueue(op *storeOp) error {
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		return ErrStoreClosed
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
func (s *Store) write() {
	defer close(s.writerDone)
	for range s.kick {
		for {
			group, closing, hook := s.take(storeMaxGroup)
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

// storeLinger is how long deferred writes wait for a write someone waits
// for, to share its commit: the commit that records a run (BeginRun) then
// also carries the previous run's end, and a job's way to running waits
// for one commit, not for the previous run's end and then its own.
const storeLinger = 20 * time.Millisecond

// linger holds a group of deferred writes until a waited-for write joins
// it, the group fills, Close begins, or storeLinger passes.
func (s *Store) linger(group []*storeOp) []*storeOp {
	t := time.NewTimer(s.lingerFor)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			return group
		case <-s.kick:
			more, closing, _ := s.take(storeMaxGroup - len(group))
			group = append(group, more...)
			if closing || !deferredOnly(more) || len(group) >= storeMaxGroup {
				return group
			}
		}
	}
}

// take removes up to n operations from the queue.
func (s *Store) take(n int) (group []*storeOp, closing bool, hook func(*bbolt.Tx) error) {
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

func deferredOnly(group []*storeOp) bool {
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
func (s *Store) commit(group []*storeOp, hook func(*bbolt.Tx) error) {
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
		s.health(err)
		for _, op := range group {
			op.finish(err)
		}
		return
	}
}

// health records the outcome of a commit and reports a change.
func (s *Store) health(err error) {
	now := time.Now()
	if err != nil {
		was := s.Failing()
		s.failing.Store(&err)
		s.failedAt.Store(now.UnixNano())
		if was == nil && s.onHealth != nil {
			s.onHealth(err)
		}
		return
	}
	s.okAt.Store(now.UnixNano())
	if s.failing.Load() != nil && s.Failing() == nil {
		s.failing.Store(nil)
		if s.onHealth != nil {
			s.onHealth(nil)
		}
	}
}

// Failing is the error of the last failed commit while the state is not
// being recorded, nil while it is: once a commit has succeeded and
// recoverAfter has passed since the last failure (see storeRecoverAfter),
// whether or not anything has been written since.
func (s *Store) Failing() error {
	p := s.failing.Load()
	if p == nil {
		return nil
	}
	failed := s.failedAt.Load()
	if s.okAt.Load() > failed && time.Since(time.Unix(0, failed)) >= s.recoverAfter {
		return nil
	}
	return *p
}

// storeTx gives an operation its buckets with this transaction's fill
// factors set (bbolt does not persist FillPercent).
type storeTx struct {
	meta, jobs, runs, byJob, open *bbolt.Bucket
}

func storeBuckets(tx *bbolt.Tx) (storeTx, error) {
	b := storeTx{
		meta:  tx.Bucket(storeBucketMeta),
		jobs:  tx.Bucket(storeBucketJobs),
		runs:  tx.Bucket(storeBucketRuns),
		byJob: tx.Bucket(storeBucketRunsByJob),
		open:  tx.Bucket(storeBucketRunsOpen),
	}
	if b.meta == nil || b.jobs == nil || b.runs == nil || b.byJob == nil || b.open == nil {
		return b, fmt.Errorf("%w: a bucket is missing", ErrStateCorrupt)
	}
	if tx.Writable() {
		b.runs.FillPercent = storeRunsFill
	}
	return b, nil
}

func storeKey(id uint64) []byte { return binary.BigEndian.AppendUint64(nil, id) }

// getRun reads run id; found is false when there is none.
func (b storeTx) getRun(id uint64) (r RunRecord, found bool, err error) {
	v := b.runs.Get(storeKey(id))
	if v == nil {
		return RunRecord{}, false, nil
	}
	r, err = storeDecodeRun(v)
	if err != nil {
		return RunRecord{}, true, fmt.Errorf("run %d: %w", id, err)
	}
	if r.ID != id {
		return RunRecord{}, true, fmt.Errorf("run %d: %w: record says id %d", id, ErrStateCorrupt, r.ID)
	}
	return r, true, nil
}

// putRun writes an existing run back and keeps the open index in step.
func (b storeTx) putRun(r RunRecord) error {
	k := storeKey(r.ID)
	if err := b.runs.Put(k, storeEncodeRun(r)); err != nil {
		return err
	}
	if r.End.IsZero() {
		return b.open.Put(k, nil)
	}
	return b.open.Delete(k)
}

// addRun assigns r an id, writes it and its index entries, and trims the
// job's history to keep runs, all in the caller's transaction.
func (b storeTx) addRun(r *RunRecord, keep int) error {
	id, err := b.runs.NextSequence()
	if err != nil {
		return err
	}
	r.ID = id
	idx, err := b.byJob.CreateBucketIfNotExists([]byte(r.Job))
	if err != nil {
		return fmt.Errorf("index for job %q: %w", r.Job, err)
	}
	idx.FillPercent = storeIndexFill
	if err := b.putRun(*r); err != nil {
		return err
	}
	if err := idx.Put(storeKey(id), nil); err != nil {
		return err
	}
	return b.trim(idx, keep)
}

// trim deletes the oldest runs of one job's index beyond keep. Keys are
// collected first and deleted by key: Cursor.Delete followed by Next skips
// every other key (etcd-io/bbolt#146).
func (b storeTx) trim(idx *bbolt.Bucket, keep int) error {
	n := 0
	c := idx.Cursor()
	for k, _ := c.First(); k != nil; k, _ = c.Next() {
		n++
	}
	if n <= keep {
		return nil
	}
	old := make([][]byte, 0, n-keep)
	for k, _ := c.First(); k != nil && len(old) < n-keep; k, _ = c.Next() {
		old = append(old, bytes.Clone(k))
	}
	for _, k := range old {
		for _, bk := range []*bbolt.Bucket{idx, b.runs, b.open} {
			if err := bk.Delete(k); err != nil {
				return err
			}
		}
	}
	return nil
}

// BeginRun records a new run and returns it with its id, once committed.
// The daemon spawns only after this returns, so a run is on disk as started
// before its process can have exited. r.ID is ignored.
func (s *Store) BeginRun(r RunRecord) (RunRecord, error) {
	if r.Job == "" {
		return RunRecord{}, errors.New("begin run: job name is empty")
	}
	err := s.submit(func(tx *bbolt.Tx) error {
		b, err := storeBuckets(tx)
		if err != nil {
			return err
		}
		return b.addRun(&r, s.keepRuns)
	})
	if err != nil {
		return RunRecord{}, fmt.Errorf("begin run of job %q: %w", r.Job, err)
	}
	return r, nil
}

// updateRun is the operation that applies change to run id; what names the
// operation in its error.
func updateRun(id uint64, what string, change func(*RunRecord)) func(tx *bbolt.Tx) error {
	return func(tx *bbolt.Tx) error {
		b, err := storeBuckets(tx)
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

// SetRunPID records the process of run id once it has been spawned.
func (s *Store) SetRunPID(id uint64, pid int, startTicks uint64) error {
	return s.submit(setRunPID(id, pid, startTicks))
}

func setRunPID(id uint64, pid int, startTicks uint64) func(tx *bbolt.Tx) error {
	return updateRun(id, fmt.Sprintf("set pid of run %d", id), func(r *RunRecord) {
		r.PID, r.StartTicks = pid, startTicks
	})
}

// EndRun records how run id ended. It overwrites an earlier end, so the
// last word wins. reason must not be zero and end must be set: both mean
// "still running".
func (s *Store) EndRun(id uint64, end time.Time, exitCode int, signal string, reason Reason) error {
	apply, err := endRun(id, end, exitCode, signal, reason)
	if err != nil {
		return err
	}
	return s.submit(apply)
}

func endRun(id uint64, end time.Time, exitCode int, signal string, reason Reason) (func(tx *bbolt.Tx) error, error) {
	if reason == 0 || end.IsZero() {
		return nil, fmt.Errorf("end run %d: an ended run needs a reason and an end time", id)
	}
	return updateRun(id, fmt.Sprintf("end run %d", id), func(r *RunRecord) {
		r.End, r.ExitCode, r.Signal, r.Reason = end, exitCode, signal, reason
	}), nil
}

// MarkLost ends, with ReasonLost, the runs among ids that are still open:
// those a previous life of the daemon left running and that the daemon
// could not take back. Runs already ended are left as they are. All or
// nothing: an unknown id fails the whole call with ErrRunNotFound.
func (s *Store) MarkLost(ids []uint64, end time.Time) error {
	if end.IsZero() {
		return errors.New("mark runs lost: end time is zero")
	}
	err := s.submit(func(tx *bbolt.Tx) error {
		b, err := storeBuckets(tx)
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
			r.End, r.Reason = end, ReasonLost
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
	apply, err := putJob(j)
	if err != nil {
		return err
	}
	return s.submit(apply)
}

func putJob(j JobRecord) (func(tx *bbolt.Tx) error, error) {
	if j.Name == "" {
		return nil, errors.New("put job: name is empty")
	}
	v := storeEncodeJob(j)
	return func(tx *bbolt.Tx) error {
		b, err := storeBuckets(tx)
		if err == nil {
			err = b.jobs.Put([]byte(j.Name), v)
		}
		if err != nil {
			return fmt.Errorf("put job %q: %w", j.Name, err)
		}
		return nil
	}, nil
}

// Later is the store's deferred writes: each goes into the writer's next
// transaction, in the order given, and returns at once. The daemon waits for
// one write on a job's way to running, its run's record (BeginRun), so that
// a run is on record before its process exists; the pid, the end and the
// job's passing states follow without holding the job up (where it comes to
// rest is waited for: see job.persist). A daemon killed outright loses what
// it had not yet handed to bbolt, at most the writes of one commit:
// reconciliation finds a run's process without its pid, and a run with no
// recorded end is marked lost.
type Later struct {
	s      *Store
	failed func(error)
}

// Later returns the deferred form of the updates. failed is called with the
// error of each write that fails, on the writer's goroutine: it must not
// block or write to the store.
func (s *Store) Later(failed func(error)) Later { return Later{s: s, failed: failed} }

func (l Later) queue(apply func(tx *bbolt.Tx) error) {
	if err := l.s.enqueue(&storeOp{apply: apply, failed: l.failed}); err != nil {
		l.failed(err)
	}
}

// SetRunPID is Store.SetRunPID, deferred.
func (l Later) SetRunPID(id uint64, pid int, startTicks uint64) {
	l.queue(setRunPID(id, pid, startTicks))
}

// EndRun is Store.EndRun, deferred.
func (l Later) EndRun(id uint64, end time.Time, exitCode int, signal string, reason Reason) {
	apply, err := endRun(id, end, exitCode, signal, reason)
	if err != nil {
		l.failed(err)
		return
	}
	l.queue(apply)
}

// PutJob is Store.PutJob, deferred.
func (l Later) PutJob(j JobRecord) {
	apply, err := putJob(j)
	if err != nil {
		l.failed(err)
		return
	}
	l.queue(apply)
}

// DeleteJob forgets job name; deleting an unknown job is not an error. Its
// runs stay in the history (and are still trimmed if the name comes back).
func (s *Store) DeleteJob(name string) error {
	err := s.submit(func(tx *bbolt.Tx) error {
		b, err := storeBuckets(tx)
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

// view runs fn in a read-only transaction.
func (s *Store) view(fn func(b storeTx) error) error {
	err := s.db.View(func(tx *bbolt.Tx) error {
		b, err := storeBuckets(tx)
		if err != nil {
			return err
		}
		return fn(b)
	})
	if errors.Is(err, berrors.ErrDatabaseNotOpen) {
		return ErrStoreClosed
	}
	return err
}

// Jobs returns every stored job, sorted by name.
func (s *Store) Jobs() ([]JobRecord, error) {
	var jobs []JobRecord
	err := s.view(func(b storeTx) error {
		return b.jobs.ForEach(func(k, v []byte) error {
			j, err := storeDecodeJob(v)
			if err != nil {
				return fmt.Errorf("job %q: %w", k, err)
			}
			jobs = append(jobs, j)
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("read jobs: %w", err)
	}
	return jobs, nil
}

// Job returns the stored job name; found is false when there is none.
func (s *Store) Job(name string) (j JobRecord, found bool, err error) {
	if name == "" {
		return JobRecord{}, false, nil
	}
	err = s.view(func(b storeTx) error {
		v := b.jobs.Get([]byte(name))
		if v == nil {
			return nil
		}
		found = true
		j, err = storeDecodeJob(v)
		return err
	})
	if err != nil {
		return JobRecord{}, false, fmt.Errorf("read job %q: %w", name, err)
	}
	return j, found, nil
}

// Runs returns up to n runs of job, newest first; job "" means every job,
// n <= 0 means no limit.
func (s *Store) Runs(job string, n int) ([]RunRecord, error) {
	var runs []RunRecord
	err := s.view(func(b storeTx) error {
		if job == "" {
			c := b.runs.Cursor()
			for k, v := c.Last(); k != nil && (n <= 0 || len(runs) < n); k, v = c.Prev() {
				r, err := storeDecodeRun(v)
				if err != nil {
					return fmt.Errorf("run %d: %w", binary.BigEndian.Uint64(k), err)
				}
				runs = append(runs, r)
			}
			return nil
		}
		idx := b.byJob.Bucket([]byte(job))
		if idx == nil {
			return nil
		}
		c := idx.Cursor()
		for k, _ := c.Last(); k != nil && (n <= 0 || len(runs) < n); k, _ = c.Prev() {
			id := binary.BigEndian.Uint64(k)
			r, found, err := b.getRun(id)
			if err != nil {
				return err
			}
			if !found {
				return fmt.Errorf("%w: job %q lists run %d, which does not exist", ErrStateCorrupt, job, id)
			}
			runs = append(runs, r)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read runs: %w", err)
	}
	return runs, nil
}

// Run returns run id; found is false when there is none.
func (s *Store) Run(id uint64) (r RunRecord, found bool, err error) {
	err = s.view(func(b storeTx) error {
		r, found, err = b.getRun(id)
		return err
	})
	if err != nil {
		return RunRecord{}, false, fmt.Errorf("read run %d: %w", id, err)
	}
	return r, found, nil
}

// OpenRuns returns the runs with no end, oldest first: at start-up, what a
// previous life of the daemon left running.
func (s *Store) OpenRuns() ([]RunRecord, error) {
	var runs []RunRecord
	err := s.view(func(b storeTx) error {
		return b.open.ForEach(func(k, _ []byte) error {
			id := binary.BigEndian.Uint64(k)
			r, found, err := b.getRun(id)
			if err != nil {
				return err
			}
			if !found {
				return fmt.Errorf("%w: open run %d does not exist", ErrStateCorrupt, id)
			}
			runs = append(runs, r)
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("read open runs: %w", err)
	}
	return runs, nil
}

// Record encoding. Every value starts with a version byte; the rest is
// varints and length-prefixed strings in a fixed order. A new field means a
// new version whose decoder reads the old ones too; a version this build
// does not know is ErrStateNewer, never a guess.
const (
	storeRunV1 = 1
	storeJobV1 = 1
)

func storeEncodeRun(r RunRecord) []byte {
	b := make([]byte, 0, 96+len(r.Job)+len(r.Fingerprint))
	b = append(b, storeRunV1)
	b = binary.AppendUvarint(b, r.ID)
	b = storeAppendString(b, r.Job)
	b = storeAppendString(b, r.Fingerprint)
	b = binary.AppendUvarint(b, uint64(len(r.CPUIDs)))
	for _, c := range r.CPUIDs {
		b = binary.AppendVarint(b, int64(c))
	}
	b = binary.AppendUvarint(b, uint64(len(r.GPUs)))
	for _, g := range r.GPUs {
		b = storeAppendString(b, g)
	}
	b = binary.AppendVarint(b, r.RAMBytes)
	b = binary.AppendVarint(b, int64(r.PID))
	b = binary.AppendUvarint(b, r.StartTicks)
	b = storeAppendTime(b, r.Start)
	b = storeAppendTime(b, r.End)
	b = binary.AppendVarint(b, int64(r.ExitCode))
	b = storeAppendString(b, r.Signal)
	return append(b, byte(r.Reason))
}

// storeDecodeRun decodes a run record. It never panics, whatever the bytes:
// they come from a file that may be damaged.
func storeDecodeRun(v []byte) (RunRecord, error) {
	d := storeDecoder{b: v}
	var r RunRecord
	switch ver := d.readByte(); {
	case d.err != nil:
	case ver == storeRunV1:
		r.ID = d.readUvarint()
		r.Job = d.readString()
		r.Fingerprint = d.readString()
		if n := d.readCount(); n > 0 {
			r.CPUIDs = make([]int, n)
			for i := range r.CPUIDs {
				r.CPUIDs[i] = d.readInt()
			}
		}
		if n := d.readCount(); n > 0 {
			r.GPUs = make([]string, n)
			for i := range r.GPUs {
				r.GPUs[i] = d.readString()
			}
		}
		r.RAMBytes = d.readVarint()
		r.PID = d.readInt()
		r.StartTicks = d.readUvarint()
		r.Start = d.readTime()
		r.End = d.readTime()
		r.ExitCode = d.readInt()
		r.Signal = d.readString()
		r.Reason = Reason(d.readByte())
	default:
		return RunRecord{}, fmt.Errorf("decode run record: version %d: %w", ver, ErrStateNewer)
	}
	if err := d.finish(); err != nil {
		return RunRecord{}, fmt.Errorf("decode run record: %w", err)
	}
	return r, nil
}

func storeEncodeJob(j JobRecord) []byte {
	b := make([]byte, 0, 32+len(j.Name)+len(j.Fingerprint)+len(j.DoneFingerprint))
	b = append(b, storeJobV1)
	b = storeAppendString(b, j.Name)
	b = append(b, byte(j.State))
	b = storeAppendString(b, j.Fingerprint)
	b = storeAppendString(b, j.DoneFingerprint)
	b = binary.AppendVarint(b, int64(j.Restarts))
	return storeAppendTime(b, j.Changed)
}

// storeDecodeJob decodes a job record; like storeDecodeRun, it never panics.
func storeDecodeJob(v []byte) (JobRecord, error) {
	d := storeDecoder{b: v}
	var j JobRecord
	switch ver := d.readByte(); {
	case d.err != nil:
	case ver == storeJobV1:
		j.Name = d.readString()
		j.State = State(d.readByte())
		j.Fingerprint = d.readString()
		j.DoneFingerprint = d.readString()
		j.Restarts = d.readInt()
		j.Changed = d.readTime()
	default:
		return JobRecord{}, fmt.Errorf("decode job record: version %d: %w", ver, ErrStateNewer)
	}
	if err := d.finish(); err != nil {
		return JobRecord{}, fmt.Errorf("decode job record: %w", err)
	}
	return j, nil
}

func storeAppendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// storeAppendTime writes a flag byte (0: the zero time, which means "not
// yet"; 1: set), then Unix seconds and nanoseconds. The location is not
// kept: times come back in UTC.
func storeAppendTime(b []byte, t time.Time) []byte {
	if t.IsZero() {
		return append(b, 0)
	}
	b = append(b, 1)
	b = binary.AppendVarint(b, t.Unix())
	return binary.AppendUvarint(b, uint64(t.Nanosecond()))
}

// storeDecoder reads a record front to back. The first problem sticks in
// err and every later read returns a zero value, so decoders read
// straight through and check once.
type storeDecoder struct {
	b   []byte
	off int // bytes consumed, for messages
	err error
}

func (d *storeDecoder) fail(what string) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: %s at byte %d", ErrStateCorrupt, what, d.off)
	}
	d.b = nil
}

func (d *storeDecoder) advance(n int) {
	d.b = d.b[n:]
	d.off += n
}

func (d *storeDecoder) readByte() byte {
	if len(d.b) < 1 {
		d.fail("truncated")
		return 0
	}
	c := d.b[0]
	d.advance(1)
	return c
}

func (d *storeDecoder) readUvarint() uint64 {
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.fail("bad varint")
		return 0
	}
	d.advance(n)
	return v
}

func (d *storeDecoder) readVarint() int64 {
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.fail("bad varint")
		return 0
	}
	d.advance(n)
	return v
}

func (d *storeDecoder) readInt() int {
	v := d.readVarint()
	if int64(int(v)) != v {
		d.fail("integer out of range")
		return 0
	}
	return int(v)
}

// count reads a slice length. Every element takes at least one byte, so a
// length beyond what is left is damage, and refusing it keeps a few bad
// bytes from making the decoder allocate gigabytes.
func (d *storeDecoder) readCount() int {
	n := d.readUvarint()
	if n > uint64(len(d.b)) {
		d.fail("count beyond end")
		return 0
	}
	return int(n)
}

func (d *storeDecoder) readString() string {
	n := d.readUvarint()
	if n > uint64(len(d.b)) {
		d.fail("string beyond end")
		return ""
	}
	s := string(d.b[:n])
	d.advance(int(n))
	return s
}

// storeMinUnix and storeMaxUnix bound the seconds a time may have: years 1
// to 9999, where time.Unix and Time.Unix round-trip.
const (
	storeMinUnix = -62135596800
	storeMaxUnix = 253402300799
)

func (d *storeDecoder) readTime() time.Time {
	switch d.readByte() {
	case 0:
		return time.Time{}
	case 1:
		sec := d.readVarint()
		nsec := d.readUvarint()
		if d.err != nil {
			return time.Time{}
		}
		if sec < storeMinUnix || sec > storeMaxUnix || nsec >= 1e9 {
			d.fail("time out of range")
			return time.Time{}
		}
		return time.Unix(sec, int64(nsec)).UTC()
	default:
		d.fail("bad time flag")
		return time.Time{}
	}
}

// finish reports the first problem, or bytes left over: a record of a
// known version has an exact length, so extra bytes mean damage.
func (d *storeDecoder) finish() error {
	if d.err == nil && len(d.b) > 0 {
		d.fail(strconv.Itoa(len(d.b)) + " bytes left over")
	}
	return d.err
}

// storeParseLocks finds, in the text of /proc/locks, the pid of the process
// holding a flock on the file with inode ino on device major:minor; 0 when
// none is found or the kernel could not name it (a holder in another pid
// namespace shows as 0 or -1).
//
// Lines look like `1: FLOCK  ADVISORY  WRITE 1234 fd:01:5678 0 EOF`
// (device as hex major:minor, then the inode in decimal); processes
// waiting for a lock have `->` after the number and are skipped. Only
// FLOCK lines count: bbolt locks with flock(2), and a POSIX lock on the same
// file does not conflict with it. Some filesystems (btrfs subvolumes,
// overlayfs) report in /proc/locks a device other than the one stat shows,
// so when nothing matches device and inode both, the inode alone decides,
// provided every such line names the same process.
func storeParseLocks(r io.Reader, major, minor uint32, ino uint64) int {
	exact, byInode := 0, 0
	inodeAmbiguous := false
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 6 || f[1] == "->" || f[1] != "FLOCK" {
			continue
		}
		pid, err := strconv.Atoi(f[4])
		if err != nil || pid <= 0 {
			continue
		}
		dev := strings.Split(f[5], ":")
		if len(dev) != 3 {
			continue
		}
		lino, err := strconv.ParseUint(dev[2], 10, 64)
		if err != nil || lino != ino {
			continue
		}
		maj, err1 := strconv.ParseUint(dev[0], 16, 32)
		mnr, err2 := strconv.ParseUint(dev[1], 16, 32)
		if err1 == nil && err2 == nil && uint32(maj) == major && uint32(mnr) == minor {
			exact = pid
			continue
		}
		if byInode != 0 && byInode != pid {
			inodeAmbiguous = true
		}
		byInode = pid
	}
	switch {
	case exact != 0:
		return exact
	case !inodeAmbiguous:
		return byInode
	}
	return 0
}
