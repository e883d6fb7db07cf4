package store

import (
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/fnv"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"

	"github.com/berthd/berth/supervisor/clock"
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
// rather than 100. A write someone waits for also waits a moment for
// company before its commit, while other writes keep coming (4 ms after
// the last, 10 ms at most: defaultQuiet, defaultCompany), and writes no
// one waits for wait longer, for a write someone does (see linger). bbolt's own
// Batch is not used: it knows no writes that no one waits for, and keeps
// no failed write for a later commit (see commit).
//
// Reads are bbolt read-only transactions, taken directly by the caller; they
// run concurrently with each other and with the writer.
type Store struct {
	db       *bbolt.DB
	path     string
	instance string
	keepRuns int
	// lock is the state directory's lock file, held open, and so locked,
	// until Close (lockfile.go).
	lock *stateLock

	// kick wakes the writer; capacity 1 and sent without blocking, so any
	// number of submissions while the writer is busy coalesce into one wake.
	kick chan struct{}
	// writerDone is closed when the writer has returned.
	writerDone chan struct{}

	// commits counts committed write transactions; tests read it to check
	// that concurrent operations share transactions.
	commits atomic.Uint64

	// ids are the run ids reserved on disk, handed out by NextRunID;
	// firstOwn is the first of this daemon's: a run below it is a previous
	// daemon's.
	ids      idBlocks
	firstOwn uint64
	// created: Open found no state file, and began a new state.
	created bool
	// intentsErr is why the file of intents could not be opened, and
	// intentsUnread how many of its lines could not be read at Open.
	intentsErr    error
	intentsUnread int
	// leftNothing: the file is new, or the daemon that had it before
	// closed it (LeftNothing).
	leftNothing bool

	// health is whether the state is being recorded, as the writer
	// decides it.
	health health
	// keptJobs are the jobs whose latest record is among the kept writes,
	// not on disk (Kept); nil while none is. The writer publishes it.
	keptJobs atomic.Pointer[map[string]bool]
	// watch is whether the state file is still at its path, as the
	// writer decides it.
	watch pathWatch

	lingerFor  time.Duration // defaultLinger; tests lengthen it
	companyFor time.Duration // defaultCompany; tests lengthen it
	quietFor   time.Duration // defaultQuiet; tests lengthen it
	// lingerClock times linger: clock.Real, where the writer's Clock may
	// be a daemon test's fake that nobody moves; store tests step it.
	lingerClock clock.Clock
	onCommit    func(took time.Duration, err error) // Options.OnCommit

	// clock times the retries of kept writes (the health's too).
	clock clock.Clock
	// pending are the keyed writes whose commit failed, to go first in
	// the next commit; pendingKeys indexes them by key. Owned by the
	// writer goroutine.
	pending     []*operation
	pendingKeys map[string]int

	// intents are the runs' begins and ends on their way, in a file beside
	// the state (intents.go); mu guards them.
	intents intents

	closeOnce sync.Once
	closeErr  error // result of the first Close, returned by every Close

	// mu guards queue, closing and the two test hooks. It is never held
	// during a transaction.
	mu      sync.Mutex
	queue   []*operation // submitted, not yet taken by the writer
	closing bool         // Close has begun: no more submissions
	// beforeCommit, when set, runs inside every write transaction after its
	// operations; an error from it fails the whole group like a failed
	// commit would. Tests use it to inject faults and to hold the writer.
	beforeCommit func(tx *bbolt.Tx) error
	// onQueued, when set, is called (with mu held) after each submission
	// with the number of operations waiting; tests use it to know that
	// callers are queued without sleeping.
	onQueued func(queued int)
	// holding is the group the writer holds for company (linger), for
	// enqueue to tell which submissions must wake it (mustWake).
	holding held
}

// held is what enqueue knows of the group the writer holds for company:
// how many operations it has (none: the writer holds none and takes
// whatever comes), and whether someone waits for one of them.
type held struct {
	n      int
	waited bool
}

// Options tunes Open. The zero value gives the defaults.
type Options struct {
	// OnHealth, when set, is called on the writer's goroutine when the
	// state stops being recorded (with the error of the commit that failed)
	// and when it is recorded again (with nil), just after Failing changes
	// to say the same. It must not block or write to the store.
	OnHealth func(err error)

	// Clock is the time the writer decides by: when the state counts as
	// recorded again. Nil means clock.Real. (How long deferred writes
	// linger for company is a matter of throughput, not of behaviour, and
	// is timed on the system's clock.)
	Clock clock.Clock

	// lockTimeout bounds the wait for the file lock (defaultLockTimeout).
	// It is never infinite: bbolt's default of waiting forever would make a
	// second daemon hang silently instead of saying who holds the file.
	lockTimeout time.Duration
	// keepRuns is how many runs are kept per job (defaultKeepRuns).
	keepRuns int
	// recoverAfter replaces defaultRecoverAfter in tests; below zero, the
	// first success after a failure recovers.
	recoverAfter time.Duration
	// pathCheckEvery replaces defaultPathCheckEvery in tests.
	pathCheckEvery time.Duration

	// OnGone, when set, is called on the writer's goroutine when the state
	// file is found removed or replaced under the store (with what
	// happened), and when it is found back (with nil), just after Gone
	// changes to say the same. It must not block or write to the store.
	OnGone func(*GoneError)

	// OnCommit, when set, is called on the writer's goroutine after each
	// write transaction has committed or failed to (err), with how long
	// it took, fsync included, on the system's clock: the daemon's
	// metrics observe it. A transaction replayed without an operation
	// that failed on its own is not a commit, and is not told. It must
	// be quick, not block, and not write to the store.
	OnCommit func(took time.Duration, err error)
}

const (
	defaultLockTimeout = 100 * time.Millisecond
	defaultKeepRuns    = 100
)

// Open opens the state file at path, after taking the lock file beside
// it. Only a missing file starts a new state: the file is then made whole
// beside the path and renamed into place, so that no half-made file is
// ever at the path. A file that is there must be a state berth wrote. The
// directory must exist.
//
// Outcomes:
//   - (*Store, nil): open; the caller must Close it.
//   - (nil, *LockedError): another process holds the state (errors.Is ErrLocked).
//   - (nil, *NotStateError): a file is at path, but not a state berth wrote (errors.Is ErrNotState).
//   - (nil, err) with errors.Is(err, ErrCorrupt) or ErrNewer: the file cannot be used as it is.
//   - (nil, err): any other failure (permissions, I/O), naming the path.
func Open(path string, opts Options) (*Store, error) {
	return openWith(path, opts, nil)
}

// openWith is Open with a hook to adjust bbolt's options, which tests
// use to provoke real write failures (MaxSize).
func openWith(path string, opts Options, tune func(*bbolt.Options)) (_ *Store, err error) {
	if opts.lockTimeout <= 0 {
		opts.lockTimeout = defaultLockTimeout
	}
	if opts.keepRuns <= 0 {
		opts.keepRuns = defaultKeepRuns
	}
	if opts.pathCheckEvery <= 0 {
		opts.pathCheckEvery = defaultPathCheckEvery
	}
	bo := &bbolt.Options{
		Timeout: opts.lockTimeout,
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
	// The lock file first: everything below, making a new file included,
	// is done by the one daemon that owns the directory.
	lock, err := lockState(path, opts.lockTimeout)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			lock.Close()
		}
	}()
	size, missing, err := examine(path)
	if err != nil {
		return nil, err
	}
	if missing {
		if err := create(path, *bo); err != nil {
			return nil, fmt.Errorf("create state %s: %w", path, err)
		}
	}
	if !missing {
		if reach, short := truncated(path, size); short {
			return nil, fmt.Errorf("open state %s: %w: it is %d bytes, and its pages reach %d: it was cut short", path, ErrCorrupt, size, reach)
		}
	}
	db, opened, err := boltOpen(path, bo)
	if err != nil {
		if errors.Is(err, berrors.ErrTimeout) {
			// The lock file was removed, and this process made and took a
			// new one; the state file's own lock still says who holds it.
			lock.forget()
			return nil, &LockedError{Path: path, HolderPID: lockHolder(path), Removed: true}
		}
		if errors.Is(err, berrors.ErrInvalid) || errors.Is(err, berrors.ErrChecksum) || errors.Is(err, berrors.ErrVersionMismatch) {
			if !looksBolt(path) {
				return nil, &NotStateError{Path: path, Problem: NotStateNotBolt, Size: size}
			}
			return nil, fmt.Errorf("open state %s: %w: %w", path, ErrCorrupt, err)
		}
		return nil, fmt.Errorf("open state %s: %w", path, err)
	}
	var ids idBlocks
	instance, closedBefore, err := prepare(db, &ids)
	if err != nil {
		_ = db.Close()
		if errors.Is(err, errNoMeta) {
			return nil, &NotStateError{Path: path, Problem: NotStateForeign, Size: size}
		}
		return nil, fmt.Errorf("open state %s: %w", path, err)
	}
	s := &Store{
		db:          db,
		path:        path,
		instance:    instance,
		keepRuns:    opts.keepRuns,
		lock:        lock,
		kick:        make(chan struct{}, 1),
		writerDone:  make(chan struct{}),
		lingerFor:   defaultLinger,
		companyFor:  defaultCompany,
		quietFor:    defaultQuiet,
		lingerClock: clock.Real,
		onCommit:    opts.OnCommit,
	}
	s.ids.next, s.ids.limit = ids.next, ids.limit
	s.firstOwn = ids.next
	s.leftNothing = missing || closedBefore
	s.created = missing
	s.clock = opts.Clock
	if s.clock == nil {
		s.clock = clock.Real
	}
	s.health.clock = s.clock
	s.health.onHealth = opts.OnHealth
	s.health.recoverAfter = defaultRecoverAfter
	if opts.recoverAfter != 0 {
		s.health.recoverAfter = max(0, opts.recoverAfter)
	}
	s.watch.path, s.watch.opened = path, opened
	s.watch.every, s.watch.onGone = opts.pathCheckEvery, opts.OnGone
	if s.intents.f, s.intentsUnread, err = openIntents(db, path, opts.keepRuns, s.firstOwn); err != nil {
		if !errors.Is(err, errIntentsFile) {
			_ = db.Close()
			return nil, fmt.Errorf("open state %s: %w", path, err)
		}
		// Runs go on without intents: a daemon killed as one ends may
		// run it again. Said by the daemon (IntentsProblem).
		s.intents.f, s.intentsErr, err = nil, err, nil
	}
	go s.write()
	return s, nil
}

// examine looks at what is at path before bbolt does: bbolt makes a new
// database of a missing file and of an empty one alike, and an empty one
// must be refused. missing says there is no file; size is the file's.
func examine(path string) (size int64, missing bool, err error) {
	fi, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, true, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("open state %s: %w", path, err)
	}
	if fi.Mode().IsRegular() && fi.Size() == 0 {
		return 0, false, &NotStateError{Path: path, Problem: NotStateEmpty}
	}
	return fi.Size(), false, nil
}

// create makes a new state file at path: whole, with berth's metadata, in
// a file beside it that is then renamed into place. A daemon killed
// meanwhile leaves the path missing, as it was, never a file without the
// metadata that the next start would refuse. The caller holds the lock.
func create(path string, bo bbolt.Options) error {
	tmp := path + ".new"
	// What a daemon killed while making one left.
	if err := os.Remove(tmp); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	db, err := bbolt.Open(tmp, 0o600, &bo)
	if err != nil {
		return err
	}
	err = db.Update(initialise)
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		_ = os.Remove(tmp)
		return err
	}
	// The rename is durable once the directory is.
	dir, err := os.Open(filepath.Dir(path))
	if err != nil {
		return err
	}
	defer dir.Close()
	return dir.Sync()
}

// initialise writes what makes a bbolt file berth's: the meta bucket with
// the format and a new instance.
func initialise(tx *bbolt.Tx) error {
	meta, err := tx.CreateBucket(bucketMeta)
	if err != nil {
		return err
	}
	if err := meta.Put(keyFormat, []byte{format}); err != nil {
		return err
	}
	var id [8]byte
	if _, err := rand.Read(id[:]); err != nil {
		return err
	}
	return meta.Put(keyInstance, []byte(hex.EncodeToString(id[:])))
}

// boltMagic is the number at the start of each of a bbolt file's meta
// pages, after the page header.
const (
	boltMagic      = 0xED0CDAED
	boltPageHeader = 16
)

// looksBolt reports whether path has bbolt's magic number where one of
// its meta pages would have it: a damaged bbolt file rather than another
// kind of file. The second meta page is one page in, and the page size is
// not known when the first page is damaged: every size bbolt supports is
// tried, as bbolt itself does.
func looksBolt(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	var buf [4]byte
	for _, off := range append([]int64{0}, pageSizesTried()...) {
		if n, _ := f.ReadAt(buf[:], off+boltPageHeader); n == len(buf) && binary.NativeEndian.Uint32(buf[:]) == boltMagic {
			return true
		}
	}
	return false
}

// truncated says whether the bbolt file at path, size bytes long, is
// shorter than its pages, and how far they reach: bbolt maps the file and
// reads a page past its end, which the kernel answers with SIGBUS, a
// crash that no recover catches. Of its two meta pages, the valid one of
// the later transaction says where its pages end (pgid × page size); a
// file with no valid meta page is left to bbolt, which refuses it.
func truncated(path string, size int64) (reach int64, short bool) {
	f, err := os.Open(path)
	if err != nil {
		return 0, false
	}
	defer f.Close()
	type meta struct{ pageSize, pgid, txid uint64 }
	read := func(off int64) (meta, bool) {
		var b [64]byte // magic, version, page size, flags, root, sequence, freelist, pgid, txid, checksum
		if n, _ := f.ReadAt(b[:], off+boltPageHeader); n < len(b) {
			return meta{}, false
		}
		ne := binary.NativeEndian
		h := fnv.New64a()
		h.Write(b[:56])
		if ne.Uint32(b[0:]) != boltMagic || h.Sum64() != ne.Uint64(b[56:]) {
			return meta{}, false
		}
		return meta{pageSize: uint64(ne.Uint32(b[8:])), pgid: ne.Uint64(b[40:]), txid: ne.Uint64(b[48:])}, true
	}
	first, ok0 := read(0)
	var second meta
	ok1 := false
	if ok0 {
		second, ok1 = read(int64(first.pageSize))
	} else {
		for _, off := range pageSizesTried() {
			if second, ok1 = read(off); ok1 {
				break
			}
		}
	}
	var m meta
	switch {
	case ok0 && ok1:
		m = first
		if second.txid > first.txid {
			m = second
		}
	case ok0:
		m = first
	case ok1:
		m = second
	default:
		return 0, false
	}
	if m.pgid > math.MaxInt64/max(m.pageSize, 1) {
		return math.MaxInt64, true
	}
	reach = int64(m.pgid * m.pageSize)
	return reach, size < reach
}

// pageSizesTried are the page sizes bbolt tries for a second meta page:
// 1 KiB to 16 MiB.
func pageSizesTried() []int64 {
	sizes := make([]int64, 0, 15)
	for i := range 15 {
		sizes = append(sizes, 1024<<i)
	}
	return sizes
}

// boltOpen is bbolt.Open made safe against damaged files: bbolt panics
// on some (a freelist page of the wrong type) instead of returning an error.
// The file it had opened, and locked, is closed then, so that the failed
// open does not leave the state locked for the rest of the process's life.
//
// opened is the identity of the file it opened, for telling later whether
// the path still names it (pathWatch).
func boltOpen(path string, bo *bbolt.Options) (db *bbolt.DB, opened fileID, err error) {
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
			db, err = nil, fmt.Errorf("%w: %v", ErrCorrupt, r)
		}
	}()
	db, err = bbolt.Open(path, 0o600, bo)
	if err != nil {
		return nil, fileID{}, err
	}
	if opened, err = fstatID(file); err != nil {
		_ = db.Close()
		return nil, fileID{}, err
	}
	return db, opened, nil
}

// errNoMeta is prepare's finding that a bbolt file has no meta bucket
// with a format in it: not a file berth wrote, since berth makes a new one
// with its metadata in one transaction before the file is at its path.
var errNoMeta = errors.New("no meta bucket with a format")

// prepare checks the whole file, that it is berth's, creates what is
// missing, reserves the first block of run ids into ids, and takes away
// the mark of a daemon that closed it (closedBefore says it was there).
// The check reads every page (75 ms for 100 000 runs, a 35 MB
// file, on a slow VM), paid once per daemon start so that a damaged file
// is refused here, with its path, instead of making bbolt panic in the
// writer later and the daemon crash in a loop under systemd.
func prepare(db *bbolt.DB, ids *idBlocks) (instance string, closedBefore bool, err error) {
	defer func() {
		// bbolt panics on some kinds of damage (a page of the wrong type)
		// rather than returning an error.
		if r := recover(); r != nil {
			err = fmt.Errorf("%w: %v", ErrCorrupt, r)
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
			return fmt.Errorf("%w: %w", ErrCorrupt, errors.Join(errs...))
		}
		if meta := tx.Bucket(bucketMeta); meta == nil || meta.Get(keyFormat) == nil {
			return errNoMeta
		}
		return nil
	})
	if err != nil {
		return "", false, err
	}
	err = db.Update(func(tx *bbolt.Tx) error {
		for _, name := range [][]byte{bucketJobs, bucketRuns, bucketRunsByJob, bucketRunsOpen} {
			if _, err := tx.CreateBucketIfNotExists(name); err != nil {
				return fmt.Errorf("create bucket %s: %w", name, err)
			}
		}
		meta := tx.Bucket(bucketMeta)
		switch v := meta.Get(keyFormat); {
		case len(v) != 1:
			return fmt.Errorf("%w: format key is %d bytes", ErrCorrupt, len(v))
		case v[0] > format:
			return fmt.Errorf("format %d: %w", v[0], ErrNewer)
		}
		if err := ids.reserveAtOpen(tx); err != nil {
			return err
		}
		closedBefore = meta.Get(keyClosed) != nil
		if err := meta.Delete(keyClosed); err != nil {
			return err
		}
		if v := meta.Get(keyInstance); v != nil {
			instance = string(v)
			return nil
		}
		var id [8]byte
		if _, err := rand.Read(id[:]); err != nil {
			return err
		}
		instance = hex.EncodeToString(id[:])
		return meta.Put(keyInstance, []byte(instance))
	})
	return instance, closedBefore, err
}

// LeftNothing reports whether no daemon before this one can have left a
// run of this state running without a record: the file is new, or the
// daemon that had it before closed it (Close), rather than being killed
// or losing the machine. A file a berth before this mark had says false.
func (s *Store) LeftNothing() bool { return s.leftNothing }

// Instance names this state file for as long as it exists: run ids count
// from 1 in every state file, and the instance tells one berth's runs from
// another's (two users' daemons, or tests side by side).
func (s *Store) Instance() string { return s.instance }

// Close waits for submitted writes to commit, marks the file closed
// (LeftNothing) in the same commit, then closes the file and releases
// its lock. Later calls return the first call's result.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		// The mark goes with the last commit, after every write queued
		// before it.
		_ = s.enqueue(&operation{apply: func(tx *bbolt.Tx) error {
			b, err := bucketsOf(tx)
			if err != nil {
				return err
			}
			if err := s.giveBack(tx); err != nil {
				return err
			}
			return b.meta.Put(keyClosed, []byte{1})
		}})
		s.mu.Lock()
		s.closing = true
		s.mu.Unlock()
		s.wake()
		<-s.writerDone
		if len(s.pending) > 0 {
			s.closeErr = s.unrecorded()
		}
		if s.intents.f != nil {
			_ = s.intents.f.Close()
		}
		if err := s.db.Close(); err != nil && s.closeErr == nil {
			s.closeErr = fmt.Errorf("close state %s: %w", s.path, err)
		}
		// The state file is closed, and only then the directory let go.
		_ = s.lock.Close()
	})
	return s.closeErr
}
