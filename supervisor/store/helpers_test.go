package store

import (
	"encoding/binary"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.etcd.io/bbolt"
)

// openTest opens a store on a fresh file; see openTestAt.
func openTest(tb testing.TB, opts Options) (*Store, string) {
	tb.Helper()
	path := filepath.Join(tb.TempDir(), "state.db")
	return openTestAt(tb, path, opts), path
}

// openTestAt opens a store on path and, when the test ends, closes it
// and checks the file: bbolt's own consistency check, then the store's
// invariants between its buckets.
func openTestAt(tb testing.TB, path string, opts Options) *Store {
	tb.Helper()
	s, err := Open(path, opts)
	if err != nil {
		tb.Fatalf("Open: %v", err)
	}
	cleanupCheck(tb, s, path)
	return s
}

func cleanupCheck(tb testing.TB, s *Store, path string) {
	tb.Cleanup(func() {
		if err := s.Close(); err != nil {
			tb.Errorf("Close: %v", err)
		}
		checkFile(tb, path, s.keepRuns)
	})
}

// checkFile opens path with bbolt directly and checks it.
func checkFile(tb testing.TB, path string, keep int) {
	tb.Helper()
	db, err := bbolt.Open(path, 0o600, &bbolt.Options{Timeout: time.Second, ReadOnly: true})
	if err != nil {
		tb.Fatalf("reopen %s for checking: %v", path, err)
	}
	defer db.Close()
	err = db.View(func(tx *bbolt.Tx) error {
		for err := range tx.Check() {
			tb.Errorf("bbolt check of %s: %v", path, err)
		}
		checkIndexes(tb, tx, keep)
		return nil
	})
	if err != nil {
		tb.Fatal(err)
	}
}

// checkIndexes checks that the runs, the per-job indexes and the open
// index agree, that no job keeps more than keep runs, and that every
// record decodes.
func checkIndexes(tb testing.TB, tx *bbolt.Tx, keep int) {
	tb.Helper()
	b, err := bucketsOf(tx)
	if err != nil {
		tb.Fatal(err)
	}
	_ = b.runs.ForEach(func(k, v []byte) error {
		id := binary.BigEndian.Uint64(k)
		r, err := decodeRun(v)
		if err != nil {
			tb.Errorf("run %d: %v", id, err)
			return nil
		}
		if r.ID != id {
			tb.Errorf("run under key %d says id %d", id, r.ID)
		}
		if open := b.open.Get(k) != nil; open != r.End.IsZero() {
			tb.Errorf("run %d: in open index %v, end %v", id, open, r.End)
		}
		if idx := b.byJob.Bucket([]byte(r.Job)); idx == nil || idx.Get(k) == nil {
			tb.Errorf("run %d of job %q missing from its job's index", id, r.Job)
		}
		return nil
	})
	_ = b.byJob.ForEach(func(job, _ []byte) error {
		n := 0
		_ = b.byJob.Bucket(job).ForEach(func(k, _ []byte) error {
			n++
			v := b.runs.Get(k)
			if v == nil {
				tb.Errorf("index of job %q lists missing run %d", job, binary.BigEndian.Uint64(k))
			} else if r, err := decodeRun(v); err == nil && r.Job != string(job) {
				tb.Errorf("index of job %q lists run %d of job %q", job, r.ID, r.Job)
			}
			return nil
		})
		if n > keep {
			tb.Errorf("job %q keeps %d runs, more than %d", job, n, keep)
		}
		return nil
	})
	_ = b.open.ForEach(func(k, _ []byte) error {
		if b.runs.Get(k) == nil {
			tb.Errorf("open index lists missing run %d", binary.BigEndian.Uint64(k))
		}
		return nil
	})
	_ = b.jobs.ForEach(func(k, v []byte) error {
		j, err := decodeJob(v)
		if err != nil {
			tb.Errorf("job %q: %v", k, err)
		} else if j.Name != string(k) {
			tb.Errorf("job under key %q says name %q", k, j.Name)
		}
		return nil
	})
}

// waitFor waits for ch to close or receive and returns what it received,
// failing the test after a deadline instead of hanging. It is the tests'
// one way to wait.
func waitFor[T any](tb testing.TB, ch <-chan T, what string) T {
	tb.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(10 * time.Second):
		tb.Fatalf("timed out waiting for %s", what)
		var zero T
		return zero
	}
}

// hold makes the writer stop inside its next transaction until the
// returned release is called; entered is closed once it is stopped there.
// Any transaction after that one calls then (nil: succeed).
func hold(s *Store, then func(*bbolt.Tx) error) (entered <-chan struct{}, release func()) {
	in, out := make(chan struct{}), make(chan struct{})
	var first atomic.Bool
	s.mu.Lock()
	s.beforeCommit = func(tx *bbolt.Tx) error {
		if first.CompareAndSwap(false, true) {
			close(in)
			<-out
			return nil
		}
		if then != nil {
			return then(tx)
		}
		return nil
	}
	s.mu.Unlock()
	return in, sync.OnceFunc(func() { close(out) })
}

// whenQueued returns a channel closed once n operations are waiting (the
// first time: the queue may come back to n after the writer took some).
func whenQueued(s *Store, n int) <-chan struct{} {
	ch := make(chan struct{})
	once := sync.OnceFunc(func() { close(ch) })
	s.mu.Lock()
	s.onQueued = func(q int) {
		if q == n {
			once()
		}
	}
	s.mu.Unlock()
	return ch
}

var t0 = time.Date(2025, 3, 1, 12, 0, 0, 123456789, time.UTC)

func normTime(t time.Time) time.Time {
	if t.IsZero() {
		return time.Time{}
	}
	return t.UTC().Round(0)
}

// normRun makes r comparable with reflect.DeepEqual to what the store
// returns: times in UTC without monotonic reading, empty slices as nil.
func normRun(r RunRecord) RunRecord {
	r.Start, r.End, r.StopBegan = normTime(r.Start), normTime(r.End), normTime(r.StopBegan)
	if len(r.CPUIDs) == 0 {
		r.CPUIDs = nil
	}
	if len(r.GPUs) == 0 {
		r.GPUs = nil
	}
	return r
}

func normJob(j JobRecord) JobRecord {
	j.Changed = normTime(j.Changed)
	return j
}

func runIDs(runs []RunRecord) []uint64 {
	ids := []uint64{}
	for _, r := range runs {
		ids = append(ids, r.ID)
	}
	return ids
}

func begin(tb testing.TB, s *Store, job string, start time.Time) RunRecord {
	tb.Helper()
	r, err := s.BeginRun(RunRecord{Job: job, Fingerprint: "fp-" + job, Start: start})
	if err != nil {
		tb.Fatalf("BeginRun(%s): %v", job, err)
	}
	return r
}
