package store

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
)

func TestReopen(t *testing.T) {
	s, path := openTest(t, Options{})
	for i := range 5 {
		r := begin(t, s, fmt.Sprintf("job-%d", i%2), t0.Add(time.Duration(i)*time.Minute))
		if i < 3 {
			if err := s.EndRun(r.ID, r.Start.Add(time.Second), i, "", ReasonFailed, ""); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, name := range []string{"job-0", "job-1"} {
		if err := s.PutJob(JobRecord{Name: name, State: StateBackoff, Restarts: 2, Changed: t0}); err != nil {
			t.Fatal(err)
		}
	}
	read := func(s *Store) (jobs []JobRecord, runs, open []RunRecord) {
		t.Helper()
		var err error
		if jobs, err = s.jobs(); err != nil {
			t.Fatal(err)
		}
		if runs, err = s.Runs("", 0); err != nil {
			t.Fatal(err)
		}
		if open, err = s.OpenRuns(); err != nil {
			t.Fatal(err)
		}
		return jobs, runs, open
	}
	jobs1, runs1, open1 := read(s)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s = openTestAt(t, path, Options{})
	jobs2, runs2, open2 := read(s)
	if !reflect.DeepEqual(jobs1, jobs2) || !reflect.DeepEqual(runs1, runs2) || !reflect.DeepEqual(open1, open2) {
		t.Errorf("reopened store differs:\njobs %+v\n  vs %+v\nruns %+v\n  vs %+v\nopen %+v\n  vs %+v",
			jobs1, jobs2, runs1, runs2, open1, open2)
	}
	if len(runs2) != 5 || len(open2) != 2 || len(jobs2) != 2 {
		t.Errorf("reopened store has %d runs, %d open, %d jobs; want 5, 2, 2", len(runs2), len(open2), len(jobs2))
	}
	if r := begin(t, s, "job-0", t0); r.ID <= runs1[0].ID {
		t.Errorf("id after reopen %d, want above %d", r.ID, runs1[0].ID)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("state file mode %v, %v; want 0600", fi.Mode().Perm(), err)
	}
}

// TestInstance: a state file keeps its instance across opens, and two
// files have different ones.
func TestInstance(t *testing.T) {
	s, path := openTest(t, Options{})
	first := s.Instance()
	if len(first) != 16 {
		t.Fatalf("instance %q, want 16 hex digits", first)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if again := openTestAt(t, path, Options{}).Instance(); again != first {
		t.Errorf("instance after reopening %q, want %q", again, first)
	}
	if other, _ := openTest(t, Options{}); other.Instance() == first {
		t.Errorf("two state files share the instance %q", first)
	}
}

func TestClosed(t *testing.T) {
	s, _ := openTest(t, Options{})
	r := begin(t, s, "a", t0)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Errorf("second Close = %v", err)
	}
	if _, err := s.BeginRun(RunRecord{Job: "a"}); !errors.Is(err, ErrClosed) {
		t.Errorf("BeginRun after Close = %v", err)
	}
	if err := s.EndRun(r.ID, t0, 0, "", ReasonExited, ""); !errors.Is(err, ErrClosed) {
		t.Errorf("EndRun after Close = %v", err)
	}
	if _, err := s.jobs(); !errors.Is(err, ErrClosed) {
		t.Errorf("Jobs after Close = %v", err)
	}
	if _, _, err := s.run(r.ID); !errors.Is(err, ErrClosed) {
		t.Errorf("Run after Close = %v", err)
	}
}

// TestCorruptFile: a bbolt file of berth's that is damaged is refused as
// corrupt, naming the path, and left unlocked. (A file that is no bbolt
// file at all is not berth's: TestOpenRefusesWhatBerthDidNotWrite.)
func TestCorruptFile(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	t.Run("both meta pages damaged", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "state.db")
		s, err := Open(path, Options{})
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		// A byte of each meta page's root, after the magic: the checksums
		// no longer match.
		ps := os.Getpagesize()
		data[boltPageHeader+16] ^= 0xff
		data[ps+boltPageHeader+16] ^= 0xff
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		s, err = Open(path, Options{})
		if err == nil {
			s.Close()
			t.Fatal("Open of a file with both meta pages damaged succeeded")
		}
		if !errors.Is(err, ErrCorrupt) || errors.Is(err, ErrNotState) || !strings.Contains(err.Error(), path) {
			t.Errorf("error %q: want ErrCorrupt naming %s", err, path)
		}
		t.Log(err)
		checkUnlocked(t, path)
	})

	t.Run("damaged pages", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "state.db")
		s, err := Open(path, Options{})
		if err != nil {
			t.Fatal(err)
		}
		for i := range 50 {
			begin(t, s, fmt.Sprintf("job-%d", i%5), t0)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		// Keep the two meta pages, so bbolt opens it; scramble the rest.
		ps := os.Getpagesize()
		for i := 2 * ps; i < len(data); i++ {
			data[i] = byte(rng.Uint32())
		}
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		s, err = Open(path, Options{})
		if err == nil {
			s.Close()
			t.Fatal("Open of a damaged file succeeded")
		}
		if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), path) {
			t.Errorf("error %q: want ErrCorrupt naming %s", err, path)
		}
		t.Log(err)
		checkUnlocked(t, path)
	})
}

// checkUnlocked fails the test if a failed open left path locked.
func checkUnlocked(t *testing.T, path string) {
	t.Helper()
	db, err := bbolt.Open(path, 0o600, &bbolt.Options{Timeout: 100 * time.Millisecond, ReadOnly: true})
	if err == nil {
		db.Close()
	} else if errors.Is(err, berrors.ErrTimeout) {
		t.Error("the failed open left the file locked")
	}
}

// rawUpdate writes into a closed store's file directly, as another
// build of berth might have.
func rawUpdate(t *testing.T, path string, fn func(tx *bbolt.Tx) error) {
	t.Helper()
	db, err := bbolt.Open(path, 0o600, &bbolt.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.Update(fn); err != nil {
		t.Fatal(err)
	}
}

func TestNewerFormat(t *testing.T) {
	t.Run("record", func(t *testing.T) {
		s, path := openTest(t, Options{})
		r := begin(t, s, "a", t0)
		if err := s.PutJob(JobRecord{Name: "a"}); err != nil {
			t.Fatal(err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		rawUpdate(t, path, func(tx *bbolt.Tx) error {
			if err := tx.Bucket(bucketRuns).Put(runKey(r.ID), []byte{99, 1, 2, 3}); err != nil {
				return err
			}
			return tx.Bucket(bucketJobs).Put([]byte("a"), []byte{jobV4 + 1, 1, 'a'})
		})
		s, err := Open(path, Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		if _, _, err := s.run(r.ID); !errors.Is(err, ErrNewer) {
			t.Errorf("Run of a version-99 record = %v, want ErrNewer", err)
		}
		if _, err := s.Runs("a", 0); !errors.Is(err, ErrNewer) {
			t.Errorf("Runs over a version-99 record = %v, want ErrNewer", err)
		}
		if err := s.EndRun(r.ID, t0, 0, "", ReasonExited, ""); !errors.Is(err, ErrNewer) {
			t.Errorf("EndRun of a version-99 record = %v, want ErrNewer", err)
		}
		if _, err := s.jobs(); !errors.Is(err, ErrNewer) {
			t.Errorf("Jobs over a version-5 record = %v, want ErrNewer", err)
		}
		// Put back what this build can read, for the check at cleanup.
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		rawUpdate(t, path, func(tx *bbolt.Tx) error {
			if err := tx.Bucket(bucketRuns).Put(runKey(r.ID), encodeRun(r)); err != nil {
				return err
			}
			return tx.Bucket(bucketJobs).Put([]byte("a"), encodeJob(JobRecord{Name: "a"}))
		})
	})
	t.Run("layout", func(t *testing.T) {
		s, path := openTest(t, Options{})
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		rawUpdate(t, path, func(tx *bbolt.Tx) error {
			return tx.Bucket(bucketMeta).Put(keyFormat, []byte{format + 1})
		})
		s2, err := Open(path, Options{})
		if err == nil {
			s2.Close()
			t.Fatal("Open of a newer layout succeeded")
		}
		if !errors.Is(err, ErrNewer) || !strings.Contains(err.Error(), path) {
			t.Errorf("error %q: want ErrNewer naming %s", err, path)
		}
	})
}
