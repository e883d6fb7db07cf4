package store

import (
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
)

// TestGroupCommit holds the writer inside one transaction while 199
// more callers submit, so the test does not depend on timing: exactly two
// transactions must carry all 200 writes.
func TestGroupCommit(t *testing.T) {
	const n = 200
	s, _ := openTest(t, Options{})
	ids := make([]uint64, n)
	for i := range ids {
		ids[i] = begin(t, s, fmt.Sprintf("job-%d", i), t0).ID
	}

	entered, release := hold(s, nil)
	defer release()
	queued := whenQueued(s, n-1)
	before := s.commits.Load()
	errs := make(chan error, n)
	end := func(id uint64) { errs <- s.EndRun(id, t0.Add(time.Hour), 0, "", ReasonExited, "") }
	go end(ids[0])
	waitFor(t, entered, "the writer to hold its transaction")
	for _, id := range ids[1:] {
		go end(id)
	}
	waitFor(t, queued, "199 callers to queue")
	release()
	for range n {
		if err := waitFor(t, errs, "EndRun"); err != nil {
			t.Error(err)
		}
	}
	if got := s.commits.Load() - before; got != 2 {
		t.Errorf("%d EndRuns took %d transactions, want 2 (one held, one for the 199 queued behind it)", n, got)
	}
	if open, err := s.OpenRuns(); err != nil || len(open) != 0 {
		t.Errorf("after every EndRun: %d runs open, %v", len(open), err)
	}
}

// TestCommitFailure injects a failing commit for one group: every
// caller in it gets the error, none of its writes lands, and the store
// carries on.
func TestCommitFailure(t *testing.T) {
	s, _ := openTest(t, Options{})
	first := begin(t, s, "a", t0)
	var ids []uint64
	for range 10 {
		ids = append(ids, begin(t, s, "b", t0).ID)
	}

	injected := errors.New("injected: no space left on device")
	var failures atomic.Int32
	entered, release := hold(s, func(*bbolt.Tx) error {
		if failures.Add(1) == 1 {
			return injected
		}
		return nil
	})
	defer release()
	before := s.commits.Load()

	held := make(chan error, 1)
	go func() { held <- s.EndRun(first.ID, t0.Add(time.Hour), 0, "", ReasonExited, "") }()
	waitFor(t, entered, "the writer to hold its transaction")
	queued := whenQueued(s, len(ids)+1)
	errs := make(chan error, len(ids)+1)
	for _, id := range ids {
		go func() { errs <- s.EndRun(id, t0.Add(time.Hour), 1, "", ReasonFailed, "") }()
	}
	go func() { errs <- s.PutJob(JobRecord{Name: "b", State: StateFailed}) }()
	waitFor(t, queued, "the group to queue")
	release()

	if err := <-held; err != nil {
		t.Errorf("the held transaction failed: %v", err)
	}
	for range len(ids) + 1 {
		if err := <-errs; !errors.Is(err, injected) {
			t.Errorf("a caller of the failed group got %v, want the injected error", err)
		}
	}
	if got := s.commits.Load() - before; got != 1 {
		t.Errorf("%d commits counted, want 1 (the failed one is not)", got)
	}
	open, err := s.OpenRuns()
	if err != nil {
		t.Fatal(err)
	}
	if got := runIDs(open); !slices.Equal(got, ids) {
		t.Errorf("open runs after the failed group = %v, want %v (its writes undone)", got, ids)
	}
	if _, found, _ := s.Job("b"); found {
		t.Error("the failed group's PutJob landed")
	}

	// The next operations commit normally.
	for _, id := range ids {
		if err := s.EndRun(id, t0.Add(time.Hour), 1, "", ReasonFailed, ""); err != nil {
			t.Fatalf("after the failure: %v", err)
		}
	}
	if err := s.PutJob(JobRecord{Name: "b", State: StateFailed}); err != nil {
		t.Fatal(err)
	}
	if open, _ := s.OpenRuns(); len(open) != 0 {
		t.Errorf("runs still open after retrying: %v", runIDs(open))
	}
}

// TestBadOperationInGroup checks that one failing operation fails alone:
// the others of its group commit, in one transaction.
func TestBadOperationInGroup(t *testing.T) {
	s, _ := openTest(t, Options{})
	first := begin(t, s, "a", t0)
	var ids []uint64
	for range 5 {
		ids = append(ids, begin(t, s, "b", t0).ID)
	}
	entered, release := hold(s, nil)
	defer release()
	before := s.commits.Load()
	held := make(chan error, 1)
	go func() { held <- s.EndRun(first.ID, t0.Add(time.Hour), 0, "", ReasonExited, "") }()
	waitFor(t, entered, "the writer to hold its transaction")

	const ops = 5 + 2
	queued := whenQueued(s, ops)
	good := make(chan error, 5)
	for _, id := range ids {
		go func() { good <- s.EndRun(id, t0.Add(time.Hour), 0, "", ReasonExited, "") }()
	}
	unknown := make(chan error, 1)
	go func() { unknown <- s.EndRun(987654, t0.Add(time.Hour), 0, "", ReasonExited, "") }()
	tooLong := make(chan error, 1)
	go func() { tooLong <- s.PutJob(JobRecord{Name: strings.Repeat("x", bbolt.MaxKeySize+1)}) }()
	waitFor(t, queued, "the group to queue")
	release()

	if err := <-held; err != nil {
		t.Error(err)
	}
	for range 5 {
		if err := <-good; err != nil {
			t.Errorf("a good operation failed with its group: %v", err)
		}
	}
	if err := <-unknown; !errors.Is(err, ErrRunNotFound) {
		t.Errorf("EndRun(unknown) = %v, want ErrRunNotFound", err)
	}
	if err := <-tooLong; !errors.Is(err, berrors.ErrKeyTooLarge) {
		t.Errorf("PutJob(too long a name) = %v, want ErrKeyTooLarge", err)
	}
	if got := s.commits.Load() - before; got != 2 {
		t.Errorf("%d transactions, want 2: the held one, and the group less its bad operations", got)
	}
	if open, _ := s.OpenRuns(); len(open) != 0 {
		t.Errorf("runs still open: %v", runIDs(open))
	}
}

// benchRuns creates n open runs over 100 jobs in one transaction, so
// that the setup does not dominate the benchmark.
func benchRuns(b *testing.B, s *Store, n int) []uint64 {
	ids := make([]uint64, n)
	for i := range ids {
		id, err := s.NextRunID()
		if err != nil {
			b.Fatal(err)
		}
		ids[i] = id
	}
	err := s.submit(func(tx *bbolt.Tx) error {
		bk, err := bucketsOf(tx)
		if err != nil {
			return err
		}
		for i := range ids {
			r := RunRecord{ID: ids[i], Job: fmt.Sprintf("job-%d", i%100), Fingerprint: "fp", CPUIDs: []int{0, 1}, GPUs: []string{"0"}, Start: t0}
			if err := bk.addRun(r, s.keepRuns); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	return ids
}

func benchEndRun(b *testing.B, parallel bool) {
	s, _ := openTest(b, Options{keepRuns: b.N})
	ids := benchRuns(b, s, b.N)
	end := t0.Add(time.Hour)
	var next atomic.Int64
	before := s.commits.Load()
	b.ResetTimer()
	if parallel {
		// 100 runs ending at once, as on a busy machine: far more callers
		// than cores.
		b.SetParallelism(max(1, 100/runtime.GOMAXPROCS(0)))
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				id := ids[next.Add(1)-1]
				if err := s.EndRun(id, end, 0, "", ReasonExited, ""); err != nil {
					b.Error(err)
				}
			}
		})
	} else {
		for _, id := range ids {
			if err := s.EndRun(id, end, 0, "", ReasonExited, ""); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "runs/s")
	b.ReportMetric(float64(b.N)/float64(max(1, s.commits.Load()-before)), "runs/commit")
}

func BenchmarkEndRunSerial(b *testing.B) { benchEndRun(b, false) }

func BenchmarkEndRunParallel(b *testing.B) { benchEndRun(b, true) }

// TestSupersededWrites: writes of one record that meet in a transaction
// are all answered, and the last one is what is written.
func TestSupersededWrites(t *testing.T) {
	s, _ := openTest(t, Options{})
	r := begin(t, s, "a", t0)
	entered, release := hold(s, nil)
	defer release()
	errs := make(chan error, 4)
	go func() { errs <- s.PutJob(JobRecord{Name: "other"}) }()
	waitFor(t, entered, "the writer to hold its transaction")
	queued := whenQueued(s, 4)
	later := s.Later(func(err error) { errs <- err })
	later.PutJob(JobRecord{Name: "a", State: StateWaiting})
	later.PutJob(JobRecord{Name: "a", State: StateRunning})
	later.EndRun(r.ID, t0.Add(time.Minute), 3, "", ReasonFailed, "")
	go func() { errs <- s.PutJob(JobRecord{Name: "a", State: StateFailed}) }()
	waitFor(t, queued, "the four writes to queue behind the held one")
	release()
	for range 2 {
		if err := waitFor(t, errs, "the waited writes"); err != nil {
			t.Error(err)
		}
	}
	if j, _, _ := s.Job("a"); j.State != StateFailed {
		t.Errorf("a is %v, want the last write's failed", j.State)
	}
	if runs, _ := s.Runs("a", 1); len(runs) != 1 || runs[0].Reason != ReasonFailed || runs[0].ExitCode != 3 {
		t.Errorf("a's run: %+v", runs)
	}
}

// TestOnCommit checks what the daemon's metrics are told: every commit
// and every failed commit, each with its time, and not a transaction
// replayed without an operation that failed on its own (nothing was
// committed for it).
func TestOnCommit(t *testing.T) {
	type told struct {
		took time.Duration
		err  error
	}
	var mu sync.Mutex // guards calls: written by the writer, read here
	var calls []told
	s, _ := openTest(t, Options{OnCommit: func(took time.Duration, err error) {
		mu.Lock()
		calls = append(calls, told{took, err})
		mu.Unlock()
	}})
	injected := errors.New("injected: no space left on device")
	setHook := func(err error) {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.beforeCommit = nil
		if err != nil {
			s.beforeCommit = func(*bbolt.Tx) error { return err }
		}
	}
	for _, tc := range []struct {
		name    string
		hook    error // what every transaction fails with
		write   func() error
		want    int   // calls told by the write
		wantErr error // what the last one carried
	}{
		{"a commit", nil, func() error { return s.PutJob(JobRecord{Name: "a", State: StateRunning}) }, 1, nil},
		{"an operation that fails alone", nil, func() error {
			return s.EndRun(987654, t0, 0, "", ReasonExited, "")
		}, 0, nil},
		// BeginRun is not kept for another try, so no retry is told later.
		{"a failed commit", injected, func() error { _, err := s.BeginRun(RunRecord{Job: "a", Start: t0}); return err }, 1, injected},
		{"a commit again", nil, func() error { return s.PutJob(JobRecord{Name: "a", State: StateDone}) }, 1, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			setHook(tc.hook)
			defer setHook(nil)
			mu.Lock()
			before := len(calls)
			mu.Unlock()
			_ = tc.write() // each caller is answered after OnCommit ran
			mu.Lock()
			got := slices.Clone(calls[before:])
			mu.Unlock()
			if len(got) != tc.want {
				t.Fatalf("told %d times, want %d: %+v", len(got), tc.want, got)
			}
			if len(got) == 0 {
				return
			}
			last := got[len(got)-1]
			if !errors.Is(last.err, tc.wantErr) || (tc.wantErr == nil) != (last.err == nil) {
				t.Errorf("told error %v, want %v", last.err, tc.wantErr)
			}
			if last.took <= 0 {
				t.Errorf("told it took %v, want a positive time", last.took)
			}
		})
	}
}
