package store

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/berthd/berth/supervisor/testkit"
)

// TestIntentsReplayed: a daemon killed while its runs' records were still
// to commit leaves their begins and ends in the intents; the next Open puts
// into the state what it lacks: a run that ended, with its end, and one
// that had only begun, open (the next daemon finds it lost). A line cut
// short by the kill is passed over, and the intents are emptied.
func TestIntentsReplayed(t *testing.T) {
	s, path := openTest(t, Options{})
	done, err := s.NextRunID()
	if err != nil {
		t.Fatal(err)
	}
	begun, err := s.NextRunID()
	if err != nil {
		t.Fatal(err)
	}
	later := s.Later(func(err error) { t.Errorf("a deferred write failed: %v", err) })

	// The writer held: nothing below commits.
	entered, release := hold(s, nil)
	defer release()
	held := make(chan error, 1)
	go func() { held <- s.PutJob(JobRecord{Name: "held"}) }()
	waitFor(t, entered, "the writer to hold its transaction")
	recorded := make(chan error, 1)
	s.Intend(RunRecord{ID: done, Job: "a", Fingerprint: "fp-a", Start: t0})
	later.BeginRun(RunRecord{ID: done, Job: "a", Fingerprint: "fp-a", Start: t0, PID: 4242}, func(err error) { recorded <- err })
	later.EndRun(done, t0.Add(time.Second), 0, "", ReasonExited, "")
	s.Intend(RunRecord{ID: begun, Job: "b", Fingerprint: "fp-b", Start: t0})

	// What a kill -9 leaves: the state as last committed, the intents as
	// appended, the last line cut.
	crashed := filepath.Join(t.TempDir(), "state.db")
	copyFile(t, path, crashed)
	copyFile(t, intentsPath(path), intentsPath(crashed))
	f, err := os.OpenFile(intentsPath(crashed), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(`{"end":{"id":`); err != nil {
		t.Fatal(err)
	}
	f.Close()
	release()
	if err := <-held; err != nil {
		t.Fatal(err)
	}
	if err := waitFor(t, recorded, "the run's record to commit"); err != nil {
		t.Fatal(err)
	}
	later.BeginRun(RunRecord{ID: begun, Job: "b", Fingerprint: "fp-b", Start: t0}, func(error) {})

	next := openTestAt(t, crashed, Options{})
	r, found, err := next.run(done)
	if err != nil || !found || r.Reason != ReasonExited || !r.End.Equal(t0.Add(time.Second)) || r.Job != "a" {
		t.Errorf("the run that ended: %+v, found %v, %v; want it ended, exited", r, found, err)
	}
	r, found, err = next.run(begun)
	if err != nil || !found || !r.End.IsZero() || r.Job != "b" {
		t.Errorf("the run that had begun: %+v, found %v, %v; want it open", r, found, err)
	}
	if fi, err := os.Stat(intentsPath(crashed)); err != nil || fi.Size() != 0 {
		t.Errorf("the intents after they were put in the state: %v, %v; want them empty", fi.Size(), err)
	}
	// The last line, cut short by the kill, is no line lost.
	if n := next.IntentsUnread(); n != 0 {
		t.Errorf("%d lines unread", n)
	}
}

// TestIntentsUnread: lines of the intents that are not berth's are
// counted, for the daemon to say; the last, cut short by a kill, is not.
func TestIntentsUnread(t *testing.T) {
	for _, c := range []struct {
		intents string
		unread  int
	}{
		{"garbage\n\x00\xff\n{\"end\":{\"id\":3}}\n{\"end\"", 2}, // the last cut short
		{"garbage\n", 1}, // a whole line, the last
		{"{\"end\":{\"id\":3}}\nnot json\n", 1},
		{"{\"end\":{\"id\":3}}\n", 0},
	} {
		path := filepath.Join(t.TempDir(), "state.db")
		if err := os.WriteFile(intentsPath(path), []byte(c.intents), 0o600); err != nil {
			t.Fatal(err)
		}
		s := openTestAt(t, path, Options{})
		if n := s.IntentsUnread(); n != c.unread {
			t.Errorf("%q: %d lines unread, want %d", c.intents, n, c.unread)
		}
	}
}

// TestIntentsEmptied: the intents are emptied once everything appended to
// them is committed, and not while a run announced is still to be queued.
func TestIntentsEmptied(t *testing.T) {
	s, path := openTest(t, Options{})
	later := s.Later(func(err error) { t.Errorf("a deferred write failed: %v", err) })
	size := func() int64 {
		fi, err := os.Stat(intentsPath(path))
		if err != nil {
			t.Fatal(err)
		}
		return fi.Size()
	}
	id, err := s.NextRunID()
	if err != nil {
		t.Fatal(err)
	}
	r := RunRecord{ID: id, Job: "a", Fingerprint: "fp-a", Start: t0}
	s.Intend(r)
	// A commit of something else leaves the announced run's begin.
	if err := s.PutJob(JobRecord{Name: "other"}); err != nil {
		t.Fatal(err)
	}
	if size() == 0 {
		t.Fatal("the intents were emptied while a run announced was still to be queued")
	}
	recorded := make(chan error, 1)
	later.BeginRun(r, func(err error) { recorded <- err })
	if err := waitFor(t, recorded, "the run's record to commit"); err != nil {
		t.Fatal(err)
	}
	later.EndRun(id, t0.Add(time.Second), 0, "", ReasonExited, "")
	if err := s.PutJob(JobRecord{Name: "a", State: StateDone}); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, 10*time.Second, "the intents to be emptied", func() bool { return size() == 0 })
}

// TestIntentsCannotOpen: where the file of intents cannot be opened (a
// directory in its place), the state opens all the same, and says why
// runs are not noted.
func TestIntentsCannotOpen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	if err := os.Mkdir(intentsPath(path), 0o700); err != nil {
		t.Fatal(err)
	}
	s := openTestAt(t, path, Options{})
	if s.IntentsProblem() == nil {
		t.Error("no problem said of intents that cannot be opened")
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o600); err != nil {
		t.Fatal(err)
	}
}
