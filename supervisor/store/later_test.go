package store

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/berthd/berth/supervisor/clock"
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
	later.EndRun(r.ID, t0.Add(time.Minute), 3, "", ReasonFailed, "")
	later.PutJob(JobRecord{Name: "a", State: StateFailed})
	later.EndRun(987654, t0, 0, "", ReasonExited, "") // unknown: fails alone
	later.EndRun(r.ID, time.Time{}, 0, "", ReasonExited, "")
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
	later.EndRun(r.ID, t0.Add(time.Minute), 0, "", ReasonExited, "")
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
// what ends the moment early (here, Close) commits them together. A write
// that joins the wait leaves the writer asleep and is taken at the end.
func TestCompany(t *testing.T) {
	s, _ := openTest(t, Options{})
	s.companyFor = time.Hour // only Close can end the wait
	s.quietFor = time.Hour
	before := s.commits.Load()
	first := make(chan error, 1)
	go func() { first <- s.PutJob(JobRecord{Name: "a", State: StateDone}) }()
	holdsOne(t, s)
	id, err := s.NextRunID()
	if err != nil {
		t.Fatal(err)
	}
	recorded := make(chan error, 1)
	s.Later(func(err error) { t.Errorf("deferred write failed: %v", err) }).
		BeginRun(RunRecord{ID: id, Job: "b", Start: t0}, func(err error) { recorded <- err })
	s.mu.Lock()
	queued, kicked := len(s.queue), len(s.kick)
	s.mu.Unlock()
	if queued != 1 || kicked != 0 {
		t.Errorf("the run's record: %d queued, %d wakes pending; want it queued, the writer left asleep", queued, kicked)
	}
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

// holdsOne waits until the writer holds one write for company.
func holdsOne(t *testing.T, s *Store) {
	t.Helper()
	testkit.WaitFor(t, 10*time.Second, "the writer to hold the first write", func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.holding.n == 1 && len(s.queue) == 0
	})
}

// lingerSteps makes s time its waits for company on a fake clock. armed
// waits until the writer has armed its next look, so that what the test
// writes then is new to that look; look reaches it.
func lingerSteps(t *testing.T, s *Store) (fake *clock.Fake, armed, look func()) {
	fake = clock.NewFake(t0)
	s.lingerClock = fake
	armed = func() {
		t.Helper()
		select {
		case <-fake.Armed():
		case <-time.After(10 * time.Second):
			t.Fatal("timed out waiting for the writer to arm its next look")
		}
	}
	return fake, armed, func() { fake.Advance(s.quietFor) }
}

// TestCompanyWhileWritesCome: the wait goes on while writes keep joining
// it, and ends at the first look that finds none new.
func TestCompanyWhileWritesCome(t *testing.T) {
	s, _ := openTest(t, Options{})
	s.quietFor, s.companyFor = 2*time.Millisecond, time.Hour
	_, armed, look := lingerSteps(t, s)
	before := s.commits.Load()
	later := s.Later(func(err error) { t.Errorf("deferred write failed: %v", err) })
	first := make(chan error, 1)
	go func() { first <- s.PutJob(JobRecord{Name: "a", State: StateDone}) }()
	holdsOne(t, s)
	for i := range 3 {
		armed()
		later.PutJob(JobRecord{Name: fmt.Sprintf("b%d", i), State: StateDone})
		look()
	}
	// Each look found a new write and armed the next; this one finds none.
	armed()
	look()
	if err := waitFor(t, first, "the write, at the first quiet look"); err != nil {
		t.Fatal(err)
	}
	if got := s.commits.Load() - before; got != 1 {
		t.Errorf("%d commits, want 1: the four writes together", got)
	}
	for _, name := range []string{"a", "b0", "b1", "b2"} {
		if _, found, err := s.Job(name); !found || err != nil {
			t.Errorf("job %s not on file (%v)", name, err)
		}
	}
}

// TestCompanyHasItsTime: however busy the writes, one someone waits for
// waits no longer than companyFor.
func TestCompanyHasItsTime(t *testing.T) {
	s, _ := openTest(t, Options{})
	s.quietFor, s.companyFor = 2*time.Millisecond, 10*time.Millisecond
	fake, armed, look := lingerSteps(t, s)
	before := s.commits.Load()
	later := s.Later(func(err error) { t.Errorf("deferred write failed: %v", err) })
	first := make(chan error, 1)
	go func() { first <- s.PutJob(JobRecord{Name: "a", State: StateDone}) }()
	holdsOne(t, s)
	for i := range 5 {
		select {
		case err := <-first:
			t.Fatalf("committed (%v) after %d looks, before the company's 10 ms", err, i)
		default:
		}
		armed()
		later.PutJob(JobRecord{Name: fmt.Sprintf("b%d", i), State: StateDone})
		look()
	}
	if err := waitFor(t, first, "the write, at the company's end"); err != nil {
		t.Fatal(err)
	}
	// At the look that reached the end, with a write new to it.
	select {
	case <-fake.Armed():
		t.Error("the writer looked again after the company's end")
	default:
	}
	if got := s.commits.Load() - before; got != 1 {
		t.Errorf("%d commits, want 1", got)
	}
}

// TestCompanyFull: a group grown full wakes the writer and commits at once,
// whatever is left of the wait.
func TestCompanyFull(t *testing.T) {
	s, _ := openTest(t, Options{})
	s.quietFor, s.companyFor = time.Hour, time.Hour
	first := make(chan error, 1)
	go func() { first <- s.PutJob(JobRecord{Name: "a", State: StateDone}) }()
	holdsOne(t, s)
	later := s.Later(func(err error) { t.Errorf("deferred write failed: %v", err) })
	for i := range maxGroup - 1 {
		later.PutJob(JobRecord{Name: fmt.Sprintf("b%04d", i), State: StateDone})
	}
	if err := waitFor(t, first, "the write, once its group is full"); err != nil {
		t.Fatal(err)
	}
}

// TestMustWake: while the writer holds a group for company, a write wakes
// it only when it changes the wait.
func TestMustWake(t *testing.T) {
	waited := &operation{done: make(chan error, 1)}
	shown := &operation{awaited: true}
	deferred := &operation{}
	for _, c := range []struct {
		what    string
		holding held
		queued  int
		op      *operation
		want    bool
	}{
		{"nothing held", held{}, 1, deferred, true},
		{"deferred joining deferred", held{n: 3}, 1, deferred, false},
		{"waited-for joining deferred", held{n: 3}, 1, waited, true},
		{"shown joining deferred", held{n: 3}, 1, shown, true},
		{"waited-for joining company", held{n: 3, waited: true}, 1, waited, false},
		{"deferred joining company", held{n: 3, waited: true}, 1, deferred, false},
		{"the group full", held{n: maxGroup - 1, waited: true}, 1, deferred, true},
	} {
		s := &Store{holding: c.holding, queue: make([]*operation, c.queued)}
		if got := s.mustWake(c.op); got != c.want {
			t.Errorf("%s: mustWake = %v, want %v", c.what, got, c.want)
		}
	}
}

// TestSpawnErrorCause: a run that could not be started keeps why, across a
// reopening of the file, bounded in size.
func TestSpawnErrorCause(t *testing.T) {
	s, path := openTest(t, Options{})
	later := s.Later(func(err error) { t.Errorf("deferred write failed: %v", err) })
	a := begin(t, s, "a", t0)
	b := begin(t, s, "b", t0)
	later.EndSpawnError(a.ID, t0.Add(time.Millisecond), "program /opt/x does not exist")
	later.EndSpawnError(b.ID, t0.Add(time.Millisecond), "x"+strings.Repeat("é", maxCauseBytes)) // cut inside an é
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openTestAt(t, path, Options{})
	got, _, err := s.run(a.ID)
	if err != nil || got.Reason != ReasonSpawnError || got.Cause != "program /opt/x does not exist" || got.End.IsZero() {
		t.Errorf("run a: %+v, %v", got, err)
	}
	got, _, err = s.run(b.ID)
	if err != nil || len(got.Cause) > maxCauseBytes+len("…") || !utf8.ValidString(got.Cause) || !strings.HasSuffix(got.Cause, "…") {
		t.Errorf("run b: cause of %d bytes %q, %v", len(got.Cause), got.Cause, err)
	}
}

// TestStopBeganKeptWhileOpen: a stop's start is on record while its run
// is open, and is let go with its end, the record then one that a daemon
// from before runV6 reads.
func TestStopBeganKeptWhileOpen(t *testing.T) {
	s, path := openTest(t, Options{})
	r := begin(t, s, "a", t0)
	s.Later(func(err error) { t.Error(err) }).StopRun(r.ID, ReasonStopped, "restarted on request (berth restart)", t0.Add(time.Minute))
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openTestAt(t, path, Options{})
	got, _, err := s.run(r.ID)
	if err != nil || got.Stopping != ReasonStopped || !got.StopBegan.Equal(t0.Add(time.Minute)) {
		t.Fatalf("the run being stopped: %+v %v, want its stop's start on record", got, err)
	}
	if err := s.EndRun(r.ID, t0.Add(2*time.Minute), 0, "", ReasonStopped, got.Cause); err != nil {
		t.Fatal(err)
	}
	got, _, err = s.run(r.ID)
	if err != nil || !got.StopBegan.IsZero() || got.Stopping != ReasonStopped {
		t.Fatalf("the run ended: %+v %v, want its stop's start let go", got, err)
	}
	if ver := encodeRun(got)[0]; ver != runV5 {
		t.Errorf("an ended run is written as version %d, want %d", ver, runV5)
	}
}
