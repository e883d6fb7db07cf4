package store

import (
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"

	"github.com/berthd/berth/supervisor/clock"
	"github.com/berthd/berth/supervisor/testkit"
)

// TestFull drives bbolt into a real write failure, its size cap, and
// checks that the store reports it to the caller and stays usable.
func TestFull(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	const maxSize = 1 << 20
	var toldMu sync.Mutex
	var told []error
	opts := Options{OnHealth: func(err error) {
		toldMu.Lock()
		told = append(told, err)
		toldMu.Unlock()
	}, recoverAfter: -1} // the first success after the failures recovers
	s, err := openWith(path, opts, func(o *bbolt.Options) { o.MaxSize = maxSize })
	if err != nil {
		t.Fatal(err)
	}
	cleanupCheck(t, s, path)

	fp := strings.Repeat("f", 16<<10)
	var full error
	n := 0
	for ; n < 1000; n++ {
		if full = s.PutJob(JobRecord{Name: fmt.Sprintf("job-%04d", n), Fingerprint: fp}); full != nil {
			break
		}
	}
	if !errors.Is(full, berrors.ErrMaxSizeReached) {
		t.Fatalf("after %d jobs: %v, want ErrMaxSizeReached", n, full)
	}
	if !errors.Is(s.Failing(), berrors.ErrMaxSizeReached) {
		t.Errorf("Failing() = %v on a full store", s.Failing())
	}
	jobs, err := s.jobs()
	if err != nil {
		t.Fatalf("reading a full store: %v", err)
	}
	if len(jobs) != n {
		t.Errorf("%d jobs readable, want the %d committed", len(jobs), n)
	}
	// Freeing space makes writes work again.
	for i := range n / 2 {
		if err := s.deleteJob(fmt.Sprintf("job-%04d", i)); err != nil {
			t.Fatalf("delete from a full store: %v", err)
		}
	}
	if err := s.PutJob(JobRecord{Name: "after", Fingerprint: fp}); err != nil {
		t.Errorf("write after freeing space: %v", err)
	}
	if s.Failing() != nil {
		t.Errorf("Failing() = %v after a write succeeded again", s.Failing())
	}
	toldMu.Lock()
	defer toldMu.Unlock()
	if len(told) != 2 || !errors.Is(told[0], berrors.ErrMaxSizeReached) || told[1] != nil {
		t.Errorf("OnHealth told %v, want the failure once, then nil once", told)
	}
}

// injectFailures makes every commit fail while the returned flag is
// set.
func injectFailures(s *Store, injected error) *atomic.Bool {
	var fail atomic.Bool
	s.mu.Lock()
	s.beforeCommit = func(*bbolt.Tx) error {
		if fail.Load() {
			return injected
		}
		return nil
	}
	s.mu.Unlock()
	return &fail
}

// TestHealthHolds: after a failed commit, successes do not yet count
// as recording again (on a nearly full disk successes and failures
// alternate). Once a commit has succeeded and recoverAfter has passed since
// the last failure, the writer turns at that moment, with nothing written
// then: Failing clears and OnHealth is told nil, together.
func TestHealthHolds(t *testing.T) {
	fake := clock.NewFake(t0)
	told := make(chan error, 10)
	var s *Store
	s, _ = openTest(t, Options{Clock: fake, OnHealth: func(err error) {
		// The verdict is published before OnHealth hears of it.
		if got := s.Failing(); got != err {
			t.Errorf("OnHealth(%v) while Failing() = %v", err, got)
		}
		told <- err
	}})
	first := errors.New("injected: no space left on device")
	fail := injectFailures(s, first)

	fail.Store(true)
	if err := s.PutJob(JobRecord{Name: "a"}); !errors.Is(err, first) {
		t.Fatalf("PutJob = %v, want the injected error", err)
	}
	if err := waitFor(t, told, "OnHealth"); !errors.Is(err, first) {
		t.Errorf("OnHealth(%v), want the injected error", err)
	}
	fail.Store(false)
	for range 3 {
		if err := s.PutJob(JobRecord{Name: "a"}); err != nil {
			t.Fatal(err)
		}
	}
	if !errors.Is(s.Failing(), first) {
		t.Errorf("Failing() = %v right after the failure, want it still reported", s.Failing())
	}
	fake.Advance(defaultRecoverAfter - time.Second)
	if !errors.Is(s.Failing(), first) || fake.Pending() != 1 {
		t.Errorf("Failing() = %v, %d timers armed, before recoverAfter has passed", s.Failing(), fake.Pending())
	}

	// A failure on the way starts the wait again, and the status shows the
	// latest cause without telling OnHealth again.
	second := errors.New("injected: input/output error")
	fail = injectFailures(s, second)
	fail.Store(true)
	if err := s.PutJob(JobRecord{Name: "a"}); !errors.Is(err, second) {
		t.Fatalf("PutJob = %v, want the second injected error", err)
	}
	if !errors.Is(s.Failing(), second) || fake.Pending() != 0 {
		t.Errorf("Failing() = %v, %d timers armed, after a second failure", s.Failing(), fake.Pending())
	}
	fail.Store(false)
	if err := s.PutJob(JobRecord{Name: "a"}); err != nil {
		t.Fatal(err)
	}
	fake.Advance(defaultRecoverAfter - time.Second)
	if !errors.Is(s.Failing(), second) {
		t.Errorf("Failing() = %v %v after the second failure, want it still reported", s.Failing(), defaultRecoverAfter-time.Second)
	}

	// Nothing more is written: the writer turns when the time comes.
	fake.Advance(time.Second)
	if err := waitFor(t, told, "OnHealth"); err != nil {
		t.Errorf("OnHealth(%v), want nil once recoverAfter has passed", err)
	}
	if err := s.Failing(); err != nil {
		t.Errorf("Failing() = %v once OnHealth was told nil", err)
	}
	select {
	case err := <-told:
		t.Errorf("OnHealth told %v more", err)
	default:
	}
}

// TestHealthHoldsWhileKept: commits that go in while a failed one's
// writes are still kept (on a full disk, a small write fits where the kept
// one does not) are no sign the state is recorded: a job shown done is not
// on disk. The health turns only once the kept writes are in.
func TestHealthHoldsWhileKept(t *testing.T) {
	fake := clock.NewFake(t0)
	told := make(chan error, 10)
	s, _ := openTest(t, Options{Clock: fake, OnHealth: func(err error) { told <- err }})
	var keptFails atomic.Bool
	keptFails.Store(true)
	s.mu.Lock()
	s.beforeCommit = func(tx *bbolt.Tx) error {
		if keptFails.Load() && tx.Bucket(bucketJobs).Get([]byte("batch")) != nil {
			return errors.New("injected: no space left on device")
		}
		return nil
	}
	s.mu.Unlock()
	if err := s.PutJob(JobRecord{Name: "batch", State: StateDone}); err == nil {
		t.Fatal("PutJob went in while its commit fails")
	}
	if err := waitFor(t, told, "OnHealth"); err == nil {
		t.Fatal("OnHealth(nil), want the failure")
	}
	for range 3 {
		if err := s.PutJob(JobRecord{Name: "small", State: StateRunning}); err != nil {
			t.Fatalf("a write without the kept one: %v", err)
		}
	}
	if n := fake.Pending(); n != 0 {
		t.Errorf("%d timers armed to turn the health while batch's done is kept, not written", n)
	}
	if kept := s.Kept(); !maps.Equal(kept, map[string]bool{"batch": true}) {
		t.Errorf("Kept() = %v while batch's done is kept, and small's went in", kept)
	}
	fake.Advance(2 * defaultRecoverAfter)
	if s.Failing() == nil || fake.Pending() != 0 {
		t.Errorf("Failing() = %v, %d timers armed, while batch's done is kept, not written", s.Failing(), fake.Pending())
	}
	select {
	case err := <-told:
		t.Fatalf("OnHealth(%v) while batch's done is kept", err)
	default:
	}

	keptFails.Store(false)
	// The writer tries the kept writes again by itself.
	if err := waitFor(t, told, "OnHealth once the kept write is in"); err != nil {
		t.Errorf("OnHealth(%v), want nil", err)
	}
	if j, ok, _ := s.Job("batch"); !ok || j.State != StateDone {
		t.Errorf("batch: %+v %v, want done on disk", j, ok)
	}
	if kept := s.Kept(); len(kept) != 0 {
		t.Errorf("Kept() = %v once it is in", kept)
	}
}

// TestHealthRecoversAtOnce: a success that comes recoverAfter or more
// after the last failure turns the verdict in its own commit, before its
// caller hears back.
func TestHealthRecoversAtOnce(t *testing.T) {
	fake := clock.NewFake(t0)
	told := make(chan error, 10)
	s, _ := openTest(t, Options{Clock: fake, OnHealth: func(err error) { told <- err }})
	injected := errors.New("injected: no space left on device")
	fail := injectFailures(s, injected)
	fail.Store(true)
	if err := s.PutJob(JobRecord{Name: "a"}); !errors.Is(err, injected) {
		t.Fatalf("PutJob = %v, want the injected error", err)
	}
	fail.Store(false)
	fake.Advance(defaultRecoverAfter)
	if !errors.Is(s.Failing(), injected) {
		t.Errorf("Failing() = %v with no success since the failure", s.Failing())
	}
	if err := s.PutJob(JobRecord{Name: "a"}); err != nil {
		t.Fatal(err)
	}
	if err := s.Failing(); err != nil {
		t.Errorf("Failing() = %v after a success %v after the failure", err, defaultRecoverAfter)
	}
	if err := waitFor(t, told, "OnHealth"); !errors.Is(err, injected) {
		t.Errorf("OnHealth(%v) first, want the injected error", err)
	}
	if err := waitFor(t, told, "OnHealth"); err != nil {
		t.Errorf("OnHealth(%v) second, want nil", err)
	}
}

// TestKeptWrites: what a failed commit kept from being written (a job come
// to rest, a run's end) is written once commits succeed again: with the
// next write, or by itself when nothing else comes; and a newer write of
// the same record still wins over the kept one.
func TestKeptWrites(t *testing.T) {
	s, _ := openTest(t, Options{})
	rec, err := s.BeginRun(RunRecord{Job: "batch", Start: t0})
	if err != nil {
		t.Fatal(err)
	}
	fail := injectFailures(s, errors.New("injected: no space left on device"))
	fail.Store(true)
	if err := s.PutJob(JobRecord{Name: "batch", State: StateDone}); err == nil {
		t.Fatal("PutJob went in while commits fail")
	}
	if err := s.PutJob(JobRecord{Name: "svc", State: StateRunning}); err == nil {
		t.Fatal("PutJob went in while commits fail")
	}
	done := make(chan error, 1)
	s.Later(func(err error) { done <- err }).EndRun(rec.ID, t0.Add(time.Minute), 0, "", ReasonExited, "")
	if err := waitFor(t, done, "the deferred end to fail"); err == nil {
		t.Fatal("a deferred write failed with no error")
	}
	fail.Store(false)

	// The next write carries them; svc's newer record wins over its kept one.
	if err := s.PutJob(JobRecord{Name: "svc", State: StateStopped}); err != nil {
		t.Fatal(err)
	}
	if j, ok, _ := s.Job("batch"); !ok || j.State != StateDone {
		t.Errorf("batch after space came back: %+v %v, want done", j, ok)
	}
	if j, _, _ := s.Job("svc"); j.State != StateStopped {
		t.Errorf("svc: %v, want the newer stopped", j.State)
	}
	if runs, _ := s.Runs("batch", 1); len(runs) != 1 || runs[0].Reason != ReasonExited {
		t.Errorf("batch's run: %+v, want its end recorded", runs)
	}

	// With nothing else written, a kept write goes in by itself.
	fail.Store(true)
	if err := s.PutJob(JobRecord{Name: "lone", State: StateFailed}); err == nil {
		t.Fatal("PutJob went in while commits fail")
	}
	fail.Store(false)
	testkit.WaitFor(t, 10*time.Second, "the kept write to go in by itself", func() bool {
		j, ok, _ := s.Job("lone")
		return ok && j.State == StateFailed
	})
}

// TestKeptWritesBeforeTheirs: a run that starts and ends while commits
// fail has its record kept, then its end; tried without the kept writes
// (which the store does when they fail again), the end finds no run and
// fails on its own. It must still go in after its record once there is
// room: a batch job that finished on a full disk is not run again by the
// next daemon (the daemon's end of a run was lost, the run left open, and
// marked lost at the next start).
func TestKeptWritesBeforeTheirs(t *testing.T) {
	s, _ := openTest(t, Options{})
	fail := injectFailures(s, errors.New("injected: no space left on device"))
	fail.Store(true)
	later := s.Later(func(error) {})
	id, err := s.NextRunID()
	if err != nil {
		t.Fatal(err)
	}
	begun := make(chan error, 1)
	later.BeginRun(RunRecord{ID: id, Job: "batch", Start: t0}, func(err error) { begun <- err })
	if err := waitFor(t, begun, "the run's record to fail"); err == nil {
		t.Fatal("a run's record went in while commits fail")
	}
	later.EndRun(id, t0.Add(time.Minute), 0, "", ReasonExited, "")
	// A write someone waits for: by the time it is answered, the end
	// has been tried, with the kept record and without it.
	if err := s.PutJob(JobRecord{Name: "batch", State: StateDone}); err == nil {
		t.Fatal("PutJob went in while commits fail")
	}
	fail.Store(false)
	testkit.WaitFor(t, 10*time.Second, "the run's record and its end to go in", func() bool {
		runs, _ := s.Runs("batch", 1)
		return len(runs) == 1 && runs[0].Reason == ReasonExited
	})
	if j, ok, _ := s.Job("batch"); !ok || j.State != StateDone {
		t.Errorf("batch: %+v %v, want done", j, ok)
	}
}

// TestKeptWritesSupersededByTheGroup: a write kept after a failed commit
// is older than a write of the same key that went in without it (the
// kept writes failed again, the group alone committed): it must not go
// in after it. A job seen done, its record written over by its older
// "waiting", ran again at the next start.
func TestKeptWritesSupersededByTheGroup(t *testing.T) {
	s, _ := openTest(t, Options{})
	var failures atomic.Int32
	s.mu.Lock()
	s.beforeCommit = func(*bbolt.Tx) error {
		if failures.Add(-1) >= 0 {
			return errors.New("injected: no space left on device")
		}
		return nil
	}
	s.mu.Unlock()
	failures.Store(2) // the first alone, then the second with the kept one
	if err := s.PutJob(JobRecord{Name: "batch", State: StateWaiting}); err == nil {
		t.Fatal("PutJob went in while commits fail")
	}
	// Tried after the kept waiting and failing with it, then alone.
	if err := s.PutJob(JobRecord{Name: "batch", State: StateDone}); err != nil {
		t.Fatalf("the newer write, alone: %v", err)
	}
	// A later write carries what is still kept, if anything is.
	if err := s.PutJob(JobRecord{Name: "other", State: StateRunning}); err != nil {
		t.Fatal(err)
	}
	if j, _, _ := s.Job("batch"); j.State != StateDone {
		t.Errorf("batch: %v, want the newer done", j.State)
	}
}

// TestCloseSaysWhatIsUnrecorded: a store closed while writes a failed
// commit kept are still not in says which jobs' records and how many
// writes of runs are lost with it.
func TestCloseSaysWhatIsUnrecorded(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	s, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	rec, err := s.BeginRun(RunRecord{Job: "batch", Start: t0})
	if err != nil {
		t.Fatal(err)
	}
	injected := errors.New("injected: no space left on device")
	fail := injectFailures(s, injected)
	fail.Store(true)
	for _, name := range []string{"train", "batch"} {
		if err := s.PutJob(JobRecord{Name: name, State: StateDone}); err == nil {
			t.Fatal("PutJob went in while commits fail")
		}
	}
	ended := make(chan error, 1)
	s.Later(func(err error) { ended <- err }).EndRun(rec.ID, t0.Add(time.Minute), 0, "", ReasonExited, "")
	if err := waitFor(t, ended, "the deferred end to fail"); err == nil {
		t.Fatal("a deferred write failed with no error")
	}
	u, ok := errors.AsType[*UnrecordedError](s.Close())
	if !ok || !slices.Equal(u.Jobs, []string{"batch", "train"}) || u.Runs != 1 || !errors.Is(u, injected) {
		t.Fatalf("Close: %+v, want batch's and train's records and one run's end, failed with the injected error", u)
	}
}
