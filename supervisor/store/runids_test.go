package store

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"go.etcd.io/bbolt"
)

// sequenceOf reads the runs bucket's sequence of a closed state file: the
// highest run id reserved on disk.
func sequenceOf(t *testing.T, path string) uint64 {
	t.Helper()
	db, err := bbolt.Open(path, 0o600, &bbolt.Options{Timeout: time.Second, ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var seq uint64
	err = db.View(func(tx *bbolt.Tx) error {
		seq = tx.Bucket(bucketRuns).Sequence()
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return seq
}

// TestRunIDsNeverTwice: the ids a store hands out are reserved on disk
// before they are handed out, so that a daemon that dies with ids handed
// out and never recorded does not hand them out again. While nothing can
// be committed, a store hands out what its reserved block holds and then
// refuses; after a reopen, ids follow every one handed out before.
func TestRunIDsNeverTwice(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	s, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	// Every commit fails: the only ids there are, are the first block's,
	// reserved as the file was opened.
	s.mu.Lock()
	s.beforeCommit = func(*bbolt.Tx) error { return errors.New("the disk is gone") }
	s.mu.Unlock()
	var handed []uint64
	for {
		id, err := s.NextRunID()
		if err != nil {
			break
		}
		handed = append(handed, id)
		if len(handed) > 10*runBlock {
			t.Fatalf("%d ids handed out while no commit succeeded", len(handed))
		}
	}
	if len(handed) != runBlock {
		t.Errorf("%d ids handed out while no commit succeeded, want the first block's %d", len(handed), runBlock)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if seq := sequenceOf(t, path); seq < slices.Max(handed) {
		t.Errorf("ids up to %d handed out, but only %d reserved on disk", slices.Max(handed), seq)
	}

	// Commits succeed: blocks follow one another, reserved ahead of use,
	// and the next life starts past all of them.
	s = openTestAt(t, path, Options{})
	seen := map[uint64]bool{}
	for _, id := range handed {
		seen[id] = true
	}
	last := slices.Max(handed)
	for range 5 * runBlock {
		id, err := s.NextRunID()
		if err != nil {
			t.Fatal(err)
		}
		if seen[id] || id <= last {
			t.Fatalf("id %d handed out after %d, or twice", id, last)
		}
		seen[id], last = true, id
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if seq := sequenceOf(t, path); seq < last {
		t.Errorf("ids up to %d handed out, but only %d reserved on disk", last, seq)
	}
	s = openTestAt(t, path, Options{})
	if r := begin(t, s, "next", t0); r.ID <= last {
		t.Errorf("the next life's first run is %d, not past the %d handed out before", r.ID, last)
	}
}

// TestRunIDsGivenBackAtClose: a clean close gives back what is left of
// the block, so that the next daemon's runs follow the last one handed
// out, and nothing is handed out after the close.
func TestRunIDsGivenBackAtClose(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	s := openTestAt(t, path, Options{})
	var last uint64
	for range 3 {
		last = begin(t, s, "a", t0).ID
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if seq := sequenceOf(t, path); seq != last {
		t.Errorf("the sequence after a clean close is %d, want the last id handed out, %d", seq, last)
	}
	if id, err := s.NextRunID(); !errors.Is(err, ErrClosed) {
		t.Errorf("NextRunID after Close = %d, %v; want ErrClosed", id, err)
	}
	s = openTestAt(t, path, Options{})
	if r := begin(t, s, "a", t0); r.ID != last+1 {
		t.Errorf("the next life's first run is %d, want %d", r.ID, last+1)
	}
}

// TestLaterBeginRun: a run recorded without waiting is told recorded once
// its commit is done, and not before; a record whose commit fails is told
// so, kept, and written with a later commit.
func TestLaterBeginRun(t *testing.T) {
	s, _ := openTest(t, Options{})
	later := s.Later(func(err error) { t.Errorf("deferred write failed: %v", err) })
	entered, release := hold(s, nil)
	defer release()
	held := make(chan error, 1)
	go func() { held <- s.PutJob(JobRecord{Name: "held"}) }()
	waitFor(t, entered, "the writer to hold its transaction")

	id, err := s.NextRunID()
	if err != nil {
		t.Fatal(err)
	}
	recorded := make(chan error, 1)
	later.BeginRun(RunRecord{ID: id, Job: "a", Fingerprint: "fp-a", PID: 4242, StartTicks: 77, Start: t0}, func(err error) { recorded <- err })
	select {
	case err := <-recorded:
		t.Fatalf("told recorded (%v) while the writer was held", err)
	default:
	}
	if _, found, _ := s.run(id); found {
		t.Fatal("the run is on file before its commit")
	}
	release()
	if err := waitFor(t, recorded, "the run to be told recorded"); err != nil {
		t.Fatal(err)
	}
	if err := <-held; err != nil {
		t.Fatal(err)
	}
	got, found, err := s.run(id)
	if err != nil || !found || got.PID != 4242 || got.StartTicks != 77 || got.Job != "a" || !got.End.IsZero() {
		t.Errorf("run %d after its record: %+v, %v, %v", id, got, found, err)
	}

	// A commit that fails: told so, kept, and in with the next commit.
	fail := true
	s.mu.Lock()
	s.beforeCommit = func(*bbolt.Tx) error {
		if fail {
			return errors.New("no room")
		}
		return nil
	}
	s.mu.Unlock()
	id2, err := s.NextRunID()
	if err != nil {
		t.Fatal(err)
	}
	later.BeginRun(RunRecord{ID: id2, Job: "a", Start: t0}, func(err error) { recorded <- err })
	if err := waitFor(t, recorded, "the failed record to be told"); err == nil {
		t.Fatal("a record whose commit failed was told recorded")
	}
	s.mu.Lock()
	fail = false
	s.mu.Unlock()
	if err := s.PutJob(JobRecord{Name: "a", State: StateDone}); err != nil {
		t.Fatal(err)
	}
	if _, found, _ := s.run(id2); !found {
		t.Error("the record whose commit failed is not written with the next commit")
	}

	// A run without an id or job is refused at once.
	later.BeginRun(RunRecord{Job: "a"}, func(err error) { recorded <- err })
	if err := waitFor(t, recorded, "the refusal"); err == nil {
		t.Error("a run without an id was told recorded")
	}
}

// TestRecordLost: runs a previous daemon numbered and started but never
// recorded are recorded lost; a run on record, one trimmed from its job's
// history, an id never reserved, and one of this daemon's own (which a
// process claiming it made up: no run of it has started) are not.
func TestRecordLost(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	s, err := Open(path, Options{keepRuns: 2})
	if err != nil {
		t.Fatal(err)
	}
	end := t0.Add(time.Hour)
	known := begin(t, s, "a", t0)
	old := begin(t, s, "b", t0)
	begin(t, s, "b", t0)
	begin(t, s, "b", t0) // b's history is full, old trimmed
	unrecorded, err := s.NextRunID()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openTestAt(t, path, Options{keepRuns: 2})
	own, err := s.NextRunID()
	if err != nil {
		t.Fatal(err)
	}
	found := []RunRecord{
		{ID: known.ID, Job: "a"},
		{ID: old.ID, Job: "b"},
		{ID: unrecorded, Job: "c", PID: 99, Start: t0.Add(time.Minute)},
		{ID: 1 << 40, Job: "c"}, // no daemon reserved it
		{ID: own + 1, Job: "c"}, // this daemon's, and not handed out yet
	}
	un, err := s.Unrecorded(found)
	if err != nil {
		t.Fatal(err)
	}
	if got := runIDs(un); !slices.Equal(got, []uint64{unrecorded}) {
		t.Errorf("unrecorded %v, want [%d]", got, unrecorded)
	}
	got, err := s.RecordLost(found[:3], end, "")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, []uint64{unrecorded}) {
		t.Errorf("recorded %v, want [%d]", got, unrecorded)
	}
	r, ok, err := s.run(unrecorded)
	if err != nil || !ok {
		t.Fatalf("run %d: %v, %v", unrecorded, ok, err)
	}
	want := RunRecord{ID: unrecorded, Job: "c", PID: 99, Start: t0.Add(time.Minute), End: end, Reason: ReasonLost}
	if !equalRun(r, want) {
		t.Errorf("recorded %+v, want %+v", r, want)
	}
	if k, _, _ := s.run(known.ID); k.Reason != 0 {
		t.Errorf("a run on record was changed: %+v", k)
	}
	if _, found, _ := s.run(old.ID); found {
		t.Error("a run trimmed from its job's history came back")
	}
	// Again: nothing more to record.
	if got, err := s.RecordLost([]RunRecord{{ID: unrecorded, Job: "c"}}, end, ""); err != nil || len(got) != 0 {
		t.Errorf("recording again: %v, %v", got, err)
	}
	// An id no daemon reserved is refused.
	if _, err := s.RecordLost([]RunRecord{{ID: 1 << 40, Job: "c"}}, end, ""); err == nil {
		t.Error("an id never reserved was recorded")
	}
}

func equalRun(a, b RunRecord) bool {
	a, b = normRun(a), normRun(b)
	return a.ID == b.ID && a.Job == b.Job && a.PID == b.PID && a.Start.Equal(b.Start) && a.End.Equal(b.End) && a.Reason == b.Reason
}

// TestLeftNothing: a file says whether a daemon before can have left runs
// running unrecorded. A new file cannot; one closed says so, once, to the
// daemon that opens it next; one whose daemon died with it open (here: a
// copy taken while it was open, which is what the disk holds then) can.
func TestLeftNothing(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "state.db")
	s, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !s.LeftNothing() {
		t.Error("a new file says a daemon may have left runs")
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err = Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !s.LeftNothing() {
		t.Error("a file whose daemon closed it says it may have left runs")
	}
	begin(t, s, "a", t0)
	// What the disk holds if this daemon is killed now.
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	killed := filepath.Join(t.TempDir(), "state.db")
	if err := os.WriteFile(killed, data, 0o600); err != nil {
		t.Fatal(err)
	}
	s = openTestAt(t, killed, Options{})
	if s.LeftNothing() {
		t.Error("a file whose daemon died with it open says it left nothing")
	}
	if runs, err := s.Runs("a", 0); err != nil || len(runs) != 1 {
		t.Errorf("the killed daemon's run: %v, %v", runs, err)
	}
}
