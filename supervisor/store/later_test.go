package store

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/berthd/berth/supervisor/testkit"
)

// TestLater checks the deferred writes: they return before anything is
// committed, land in the order given (the last state of a job wins), share
// the next transaction with a waiting caller's write, reach the file by
// Close, and report their failures to the callback.
func TestLater(t *testing.T) {
	s, path := openTest(t, Options{})
	r := begin(t, s, "a", t0)
	var failures []error
	var mu sync.Mutex
	later := s.Later(func(err error) {
		mu.Lock()
		failures = append(failures, err)
		mu.Unlock()
	})

	entered, release := hold(s, nil)
	defer release()
	held := make(chan error, 1)
	go func() { held <- s.PutJob(JobRecord{Name: "held"}) }()
	waitFor(t, entered, "the writer to hold its transaction")
	before := s.commits.Load()

	// With the writer held, none of these can have committed when they
	// return.
	later.SetRunPID(r.ID, 4242, 77)
	later.SetRunGPUMemPeak(r.ID, 2<<30)
	later.SetRunGPUMemPeak(r.ID, 3<<30)
	later.PutJob(JobRecord{Name: "a", State: StateRunning})
	later.EndRun(r.ID, t0.Add(time.Minute), 3, "", ReasonFailed)
	later.PutJob(JobRecord{Name: "a", State: StateFailed})
	later.EndRun(987654, t0, 0, "", ReasonExited) // unknown: fails alone
	later.EndRun(r.ID, time.Time{}, 0, "", ReasonExited)
	if got, _, _ := s.run(r.ID); got.PID != 0 || !got.End.IsZero() {
		t.Fatalf("a deferred write committed before the writer was free: %+v", got)
	}
	// A waiting caller's write goes into the same transaction.
	queued := whenQueued(s, 8)
	waited := make(chan error, 1)
	go func() { waited <- s.PutJob(JobRecord{Name: "b", State: StateDone}) }()
	waitFor(t, queued, "the waiting write to queue behind the deferred ones")
	release()
	if err := <-held; err != nil {
		t.Fatal(err)
	}
	if err := <-waited; err != nil {
		t.Fatal(err)
	}
	if got := s.commits.Load() - before; got != 2 {
		t.Errorf("%d transactions, want 2: the held one, then the deferred writes with the waiting one", got)
	}
	got, _, err := s.run(r.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.PID != 4242 || got.StartTicks != 77 || got.ExitCode != 3 || got.Reason != ReasonFailed || got.GPUMemPeakBytes != 3<<30 {
		t.Errorf("run after the deferred writes: %+v", got)
	}
	if j, _, _ := s.Job("a"); j.State != StateFailed {
		t.Errorf("job a is %v, want the last state written, failed", j.State)
	}
	mu.Lock()
	// The end with no time fails at once, the unknown run when committed.
	if len(failures) != 2 || !errors.Is(failures[1], ErrRunNotFound) {
		t.Errorf("failures reported: %v, want the end with no time's, then the unknown run's", failures)
	}
	mu.Unlock()

	// Close commits what is still queued.
	later.PutJob(JobRecord{Name: "last", State: StateStopped})
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	later.PutJob(JobRecord{Name: "closed"})
	mu.Lock()
	if n := len(failures); n != 3 || !errors.Is(failures[2], ErrClosed) {
		t.Errorf("a deferred write after Close reported %v", failures)
	}
	mu.Unlock()
	s = openTestAt(t, path, Options{})
	if j, found, _ := s.Job("last"); !found || j.State != StateStopped {
		t.Errorf("the write queued before Close is not on file: %+v", j)
	}
}

// TestLaterLingers: deferred writes wait for a write someone waits for
// and go into its commit, rather than costing a commit of their own.
func TestLaterLingers(t *testing.T) {
	s, _ := openTest(t, Options{})
	s.lingerFor = time.Hour // only the waited-for write can end the wait
	r := begin(t, s, "a", t0)
	before := s.commits.Load()
	later := s.Later(func(err error) { t.Errorf("deferred write failed: %v", err) })
	later.EndRun(r.ID, t0.Add(time.Minute), 0, "", ReasonExited)
	later.PutJob(JobRecord{Name: "a", State: StateDone})
	next, err := s.BeginRun(RunRecord{Job: "b", Start: t0})
	if err != nil {
		t.Fatal(err)
	}
	if got := s.commits.Load() - before; got != 1 {
		t.Errorf("%d commits, want 1: the deferred writes in the waited-for one's", got)
	}
	if got, _, _ := s.run(r.ID); got.End.IsZero() || next.ID == 0 {
		t.Errorf("the deferred end is not in: %+v", got)
	}
	// Close does not wait out the linger either.
	later.PutJob(JobRecord{Name: "a", State: StateStopped})
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestCompany: a write someone waits for waits a moment for company before
// it commits, so that the writes of several short runs share a commit;
// what ends the moment early (here, Close) commits them together.
func TestCompany(t *testing.T) {
	s, _ := openTest(t, Options{})
	s.companyFor = time.Hour // only Close can end the wait
	before := s.commits.Load()
	taken := func(what string) {
		t.Helper()
		testkit.WaitFor(t, 10*time.Second, what, func() bool {
			s.mu.Lock()
			defer s.mu.Unlock()
			return len(s.queue) == 0
		})
	}
	first := make(chan error, 1)
	go func() { first <- s.PutJob(JobRecord{Name: "a", State: StateDone}) }()
	taken("the writer to take the first write")
	id, err := s.NextRunID()
	if err != nil {
		t.Fatal(err)
	}
	recorded := make(chan error, 1)
	s.Later(func(err error) { t.Errorf("deferred write failed: %v", err) }).
		BeginRun(RunRecord{ID: id, Job: "b", Start: t0}, func(err error) { recorded <- err })
	// Taken into the first one's group, which has not committed: had the
	// first committed alone, the writer would take the second only after.
	taken("the writer to take the run's record")
	if got := s.commits.Load() - before; got != 0 {
		t.Fatalf("%d commits while the first write waited for company, want none", got)
	}
	closed := make(chan error, 1)
	go func() { closed <- s.Close() }()
	if err := waitFor(t, first, "the first write, once Close ends the wait"); err != nil {
		t.Fatal(err)
	}
	if err := waitFor(t, recorded, "the run's record"); err != nil {
		t.Fatal(err)
	}
	if err := waitFor(t, closed, "Close"); err != nil {
		t.Fatal(err)
	}
	if got := s.commits.Load() - before; got != 1 {
		t.Errorf("%d commits, want 1: the two writes together", got)
	}
}
