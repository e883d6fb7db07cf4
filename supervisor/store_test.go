package supervisor

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
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

// storeOpenTest opens a store on a fresh file; see storeOpenTestAt.
func storeOpenTest(tb testing.TB, opts StoreOptions) (*Store, string) {
	tb.Helper()
	path := filepath.Join(tb.TempDir(), "state.db")
	return storeOpenTestAt(tb, path, opts), path
}

// storeOpenTestAt opens a store on path and, when the test ends, closes it
// and checks the file: bbolt's own consistency check, then the store's
// invariants between its buckets.
func storeOpenTestAt(tb testing.TB, path string, opts StoreOptions) *Store {
	tb.Helper()
	s, err := OpenStore(path, opts)
	if err != nil {
		tb.Fatalf("OpenStore: %v", err)
	}
	storeCleanupCheck(tb, s, path)
	return s
}

func storeCleanupCheck(tb testing.TB, s *Store, path string) {
	tb.Cleanup(func() {
		if err := s.Close(); err != nil {
			tb.Errorf("Close: %v", err)
		}
		storeCheckFile(tb, path, s.keepRuns)
	})
}

// storeCheckFile opens path with bbolt directly and checks it.
func storeCheckFile(tb testing.TB, path string, keep int) {
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
		storeCheckIndexes(tb, tx, keep)
		return nil
	})
	if err != nil {
		tb.Fatal(err)
	}
}

// storeCheckIndexes checks that the runs, the per-job indexes and the open
// index agree, that no job keeps more than keep runs, and that every
// record decodes.
func storeCheckIndexes(tb testing.TB, tx *bbolt.Tx, keep int) {
	tb.Helper()
	b, err := storeBuckets(tx)
	if err != nil {
		tb.Fatal(err)
	}
	_ = b.runs.ForEach(func(k, v []byte) error {
		id := binary.BigEndian.Uint64(k)
		r, err := storeDecodeRun(v)
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
			} else if r, err := storeDecodeRun(v); err == nil && r.Job != string(job) {
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
		j, err := storeDecodeJob(v)
		if err != nil {
			tb.Errorf("job %q: %v", k, err)
		} else if j.Name != string(k) {
			tb.Errorf("job under key %q says name %q", k, j.Name)
		}
		return nil
	})
}

// storeWait waits for ch to close or receive, failing the test after a
// deadline instead of hanging.
func storeWait(tb testing.TB, ch <-chan struct{}, what string) {
	tb.Helper()
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		tb.Fatalf("timed out waiting for %s", what)
	}
}

// storeHold makes the writer stop inside its next transaction until the
// returned release is called; entered is closed once it is stopped there.
// Any transaction after that one calls then (nil: succeed).
func storeHold(s *Store, then func(*bbolt.Tx) error) (entered <-chan struct{}, release func()) {
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

// storeWhenQueued returns a channel closed once n operations are waiting.
func storeWhenQueued(s *Store, n int) <-chan struct{} {
	ch := make(chan struct{})
	s.mu.Lock()
	s.onQueued = func(q int) {
		if q == n {
			close(ch)
		}
	}
	s.mu.Unlock()
	return ch
}

var storeT0 = time.Date(2025, 3, 1, 12, 0, 0, 123456789, time.UTC)

func storeNormTime(t time.Time) time.Time {
	if t.IsZero() {
		return time.Time{}
	}
	return t.UTC().Round(0)
}

// storeNormRun makes r comparable with reflect.DeepEqual to what the store
// returns: times in UTC without monotonic reading, empty slices as nil.
func storeNormRun(r RunRecord) RunRecord {
	r.Start, r.End = storeNormTime(r.Start), storeNormTime(r.End)
	if len(r.CPUIDs) == 0 {
		r.CPUIDs = nil
	}
	if len(r.GPUs) == 0 {
		r.GPUs = nil
	}
	return r
}

func storeNormJob(j JobRecord) JobRecord {
	j.Changed = storeNormTime(j.Changed)
	return j
}

func storeIDs(runs []RunRecord) []uint64 {
	ids := []uint64{}
	for _, r := range runs {
		ids = append(ids, r.ID)
	}
	return ids
}

func storeBegin(tb testing.TB, s *Store, job string, start time.Time) RunRecord {
	tb.Helper()
	r, err := s.BeginRun(RunRecord{Job: job, Fingerprint: "fp-" + job, Start: start})
	if err != nil {
		tb.Fatalf("BeginRun(%s): %v", job, err)
	}
	return r
}

func TestStoreRunRoundTrip(t *testing.T) {
	s, _ := storeOpenTest(t, StoreOptions{})
	in := RunRecord{
		ID:          999, // ignored
		Job:         "train-resnet",
		Fingerprint: "sha256:abc",
		CPUIDs:      []int{0, 1, 2, 3},
		GPUs:        []string{"GPU-6b1c9d0e", "MIG-2/1/0"},
		RAMBytes:    32 << 30,
		Start:       storeT0,
	}
	begun, err := s.BeginRun(in)
	if err != nil {
		t.Fatal(err)
	}
	if begun.ID == 0 || begun.ID == 999 {
		t.Fatalf("BeginRun assigned id %d", begun.ID)
	}
	want := in
	want.ID = begun.ID
	if !reflect.DeepEqual(storeNormRun(begun), storeNormRun(want)) {
		t.Errorf("BeginRun returned\n%+v\nwant\n%+v", begun, want)
	}

	if err := s.SetRunPID(begun.ID, 4242, 987654321); err != nil {
		t.Fatal(err)
	}
	want.PID, want.StartTicks = 4242, 987654321
	got, found, err := s.Run(begun.ID)
	if err != nil || !found {
		t.Fatalf("Run: %v, found %v", err, found)
	}
	if !reflect.DeepEqual(got, storeNormRun(want)) {
		t.Errorf("after SetRunPID\n%+v\nwant\n%+v", got, storeNormRun(want))
	}

	end := storeT0.Add(90 * time.Minute)
	if err := s.EndRun(begun.ID, end, -1, "SIGKILL", ReasonKilled); err != nil {
		t.Fatal(err)
	}
	want.End, want.ExitCode, want.Signal, want.Reason = end, -1, "SIGKILL", ReasonKilled
	got, _, err = s.Run(begun.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, storeNormRun(want)) {
		t.Errorf("after EndRun\n%+v\nwant\n%+v", got, storeNormRun(want))
	}

	if _, found, err := s.Run(begun.ID + 1); err != nil || found {
		t.Errorf("Run(unknown) = found %v, %v; want not found", found, err)
	}
	if err := s.SetRunPID(12345, 1, 1); !errors.Is(err, ErrRunNotFound) {
		t.Errorf("SetRunPID(unknown) = %v, want ErrRunNotFound", err)
	}
	if err := s.EndRun(12345, end, 0, "", ReasonExited); !errors.Is(err, ErrRunNotFound) {
		t.Errorf("EndRun(unknown) = %v, want ErrRunNotFound", err)
	}
	if err := s.EndRun(begun.ID, time.Time{}, 0, "", ReasonExited); err == nil {
		t.Error("EndRun with a zero end time succeeded")
	}
	if err := s.EndRun(begun.ID, end, 0, "", 0); err == nil {
		t.Error("EndRun with reason 0 succeeded")
	}
	if _, err := s.BeginRun(RunRecord{}); err == nil {
		t.Error("BeginRun without a job succeeded")
	}
}

func TestStoreRunsOrder(t *testing.T) {
	s, _ := storeOpenTest(t, StoreOptions{})
	var ids = map[string][]uint64{}
	for i, job := range []string{"a", "b", "a", "b", "a"} {
		r := storeBegin(t, s, job, storeT0.Add(time.Duration(i)*time.Minute))
		ids[job] = append(ids[job], r.ID)
	}
	all := append(slices.Clone(ids["a"]), ids["b"]...)
	slices.Sort(all)
	slices.Reverse(all)
	newestA := slices.Clone(ids["a"])
	slices.Reverse(newestA)

	tests := []struct {
		job  string
		n    int
		want []uint64
	}{
		{"", 0, all},
		{"", 2, all[:2]},
		{"", 100, all},
		{"a", 0, newestA},
		{"a", 2, newestA[:2]},
		{"a", -1, newestA},
		{"nope", 0, []uint64{}},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s/%d", tt.job, tt.n), func(t *testing.T) {
			runs, err := s.Runs(tt.job, tt.n)
			if err != nil {
				t.Fatal(err)
			}
			if got := storeIDs(runs); !slices.Equal(got, tt.want) {
				t.Errorf("Runs(%q, %d) = %v, want %v", tt.job, tt.n, got, tt.want)
			}
			for _, r := range runs {
				if tt.job != "" && r.Job != tt.job {
					t.Errorf("run %d is of job %q", r.ID, r.Job)
				}
			}
		})
	}
}

func TestStoreTrim(t *testing.T) {
	const keep = 5
	s, path := storeOpenTest(t, StoreOptions{KeepRuns: keep})
	var ids = map[string][]uint64{}
	for i := range 12 {
		for _, job := range []string{"x", "y"} {
			r := storeBegin(t, s, job, storeT0.Add(time.Duration(i)*time.Minute))
			ids[job] = append(ids[job], r.ID)
			if i%2 == 0 { // some ended, some left open: trimming must drop both kinds
				if err := s.EndRun(r.ID, r.Start.Add(time.Second), 0, "", ReasonExited); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	newest := func(job string, n int) []uint64 {
		l := slices.Clone(ids[job][len(ids[job])-n:])
		slices.Reverse(l)
		return l
	}
	check := func(job string, n int) {
		t.Helper()
		runs, err := s.Runs(job, 0)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := storeIDs(runs), newest(job, n); !slices.Equal(got, want) {
			t.Errorf("runs of %s = %v, want the newest %d: %v", job, got, n, want)
		}
	}
	check("x", keep)
	check("y", keep)
	all, err := s.Runs("", 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 2*keep {
		t.Errorf("%d runs in all, want %d", len(all), 2*keep)
	}
	for _, id := range ids["x"][:12-keep] {
		if _, found, _ := s.Run(id); found {
			t.Errorf("trimmed run %d still readable", id)
		}
	}
	open, err := s.OpenRuns()
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range open {
		if !slices.Contains(newest(r.Job, keep), r.ID) {
			t.Errorf("trimmed run %d still listed as open", r.ID)
		}
	}

	// A deleted job keeps its history, and trimming still applies when
	// the name comes back.
	if err := s.PutJob(JobRecord{Name: "x", State: StateDone}); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteJob("x"); err != nil {
		t.Fatal(err)
	}
	check("x", keep)
	r := storeBegin(t, s, "x", storeT0.Add(time.Hour))
	ids["x"] = append(ids["x"], r.ID)
	check("x", keep)

	// Keeping fewer runs after a restart trims at the job's next run.
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = storeOpenTestAt(t, path, StoreOptions{KeepRuns: 3})
	for _, job := range []string{"x", "y"} {
		check(job, keep)
		r = storeBegin(t, s, job, storeT0.Add(2*time.Hour))
		ids[job] = append(ids[job], r.ID)
		check(job, 3)
	}
}

func TestStoreOpenRunsMarkLost(t *testing.T) {
	s, _ := storeOpenTest(t, StoreOptions{})
	r1 := storeBegin(t, s, "a", storeT0)
	r2 := storeBegin(t, s, "b", storeT0.Add(time.Second))
	r3 := storeBegin(t, s, "a", storeT0.Add(2*time.Second))
	if err := s.SetRunPID(r3.ID, 77, 5); err != nil {
		t.Fatal(err)
	}
	ended := storeT0.Add(time.Minute)
	if err := s.EndRun(r2.ID, ended, 3, "", ReasonFailed); err != nil {
		t.Fatal(err)
	}
	open, err := s.OpenRuns()
	if err != nil {
		t.Fatal(err)
	}
	if got := storeIDs(open); !slices.Equal(got, []uint64{r1.ID, r3.ID}) {
		t.Fatalf("OpenRuns = %v, want [%d %d]", got, r1.ID, r3.ID)
	}
	if open[1].PID != 77 || open[1].StartTicks != 5 {
		t.Errorf("open run lost its pid: %+v", open[1])
	}

	lost := storeT0.Add(time.Hour)
	// All or nothing: an unknown id changes nothing.
	if err := s.MarkLost([]uint64{r1.ID, 424242}, lost); !errors.Is(err, ErrRunNotFound) {
		t.Fatalf("MarkLost with an unknown id = %v, want ErrRunNotFound", err)
	}
	if open, _ := s.OpenRuns(); len(open) != 2 {
		t.Fatalf("a failed MarkLost changed the open runs: %v", storeIDs(open))
	}
	// An already ended run is left as it was.
	if err := s.MarkLost([]uint64{r1.ID, r2.ID, r3.ID}, lost); err != nil {
		t.Fatal(err)
	}
	if open, _ := s.OpenRuns(); len(open) != 0 {
		t.Errorf("OpenRuns after MarkLost = %v, want none", storeIDs(open))
	}
	for _, tt := range []struct {
		id     uint64
		end    time.Time
		reason Reason
		code   int
	}{
		{r1.ID, lost, ReasonLost, 0},
		{r2.ID, ended, ReasonFailed, 3},
		{r3.ID, lost, ReasonLost, 0},
	} {
		r, _, err := s.Run(tt.id)
		if err != nil {
			t.Fatal(err)
		}
		if !r.End.Equal(tt.end) || r.Reason != tt.reason || r.ExitCode != tt.code {
			t.Errorf("run %d: end %v reason %v code %d; want %v %v %d", tt.id, r.End, r.Reason, r.ExitCode, tt.end, tt.reason, tt.code)
		}
	}
	if err := s.MarkLost(nil, lost); err != nil {
		t.Errorf("MarkLost(nil) = %v", err)
	}
}

func TestStoreJobs(t *testing.T) {
	s, _ := storeOpenTest(t, StoreOptions{})
	jobs := map[string]JobRecord{}
	for i, name := range []string{"sweep-2", "eval", "train", "sweep-10"} {
		j := JobRecord{
			Name: name, State: StateRunning, Fingerprint: "fp-" + name,
			Restarts: i, Changed: storeT0.Add(time.Duration(i) * time.Second),
		}
		if err := s.PutJob(j); err != nil {
			t.Fatal(err)
		}
		jobs[name] = j
	}
	// Overwrite one.
	j := jobs["eval"]
	j.State, j.DoneFingerprint, j.Restarts = StateDone, j.Fingerprint, 0
	if err := s.PutJob(j); err != nil {
		t.Fatal(err)
	}
	jobs["eval"] = j

	got, found, err := s.Job("eval")
	if err != nil || !found {
		t.Fatalf("Job(eval) = found %v, %v", found, err)
	}
	if !reflect.DeepEqual(got, storeNormJob(j)) {
		t.Errorf("Job(eval) = %+v, want %+v", got, j)
	}
	if err := s.DeleteJob("train"); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteJob("never-was"); err != nil {
		t.Errorf("DeleteJob(unknown) = %v", err)
	}
	delete(jobs, "train")
	if _, found, err := s.Job("train"); found || err != nil {
		t.Errorf("Job(deleted) = found %v, %v", found, err)
	}

	list, err := s.Jobs()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, j := range list {
		names = append(names, j.Name)
		if !reflect.DeepEqual(j, storeNormJob(jobs[j.Name])) {
			t.Errorf("Jobs has %+v, want %+v", j, jobs[j.Name])
		}
	}
	if want := []string{"eval", "sweep-10", "sweep-2"}; !slices.Equal(names, want) {
		t.Errorf("Jobs names = %v, want %v", names, want)
	}
	if err := s.PutJob(JobRecord{}); err == nil {
		t.Error("PutJob without a name succeeded")
	}
}

func TestStoreReopen(t *testing.T) {
	s, path := storeOpenTest(t, StoreOptions{})
	for i := range 5 {
		r := storeBegin(t, s, fmt.Sprintf("job-%d", i%2), storeT0.Add(time.Duration(i)*time.Minute))
		if i < 3 {
			if err := s.EndRun(r.ID, r.Start.Add(time.Second), i, "", ReasonFailed); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, name := range []string{"job-0", "job-1"} {
		if err := s.PutJob(JobRecord{Name: name, State: StateBackoff, Restarts: 2, Changed: storeT0}); err != nil {
			t.Fatal(err)
		}
	}
	read := func(s *Store) (jobs []JobRecord, runs, open []RunRecord) {
		t.Helper()
		var err error
		if jobs, err = s.Jobs(); err != nil {
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

	s = storeOpenTestAt(t, path, StoreOptions{})
	jobs2, runs2, open2 := read(s)
	if !reflect.DeepEqual(jobs1, jobs2) || !reflect.DeepEqual(runs1, runs2) || !reflect.DeepEqual(open1, open2) {
		t.Errorf("reopened store differs:\njobs %+v\n  vs %+v\nruns %+v\n  vs %+v\nopen %+v\n  vs %+v",
			jobs1, jobs2, runs1, runs2, open1, open2)
	}
	if len(runs2) != 5 || len(open2) != 2 || len(jobs2) != 2 {
		t.Errorf("reopened store has %d runs, %d open, %d jobs; want 5, 2, 2", len(runs2), len(open2), len(jobs2))
	}
	if r := storeBegin(t, s, "job-0", storeT0); r.ID <= runs1[0].ID {
		t.Errorf("id after reopen %d, want above %d", r.ID, runs1[0].ID)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("state file mode %v, %v; want 0600", fi.Mode().Perm(), err)
	}
}

func TestStoreLocked(t *testing.T) {
	s, path := storeOpenTest(t, StoreOptions{})
	storeBegin(t, s, "held", storeT0)

	// Without the timeout the second open would wait for the lock forever
	// and the test would time out.
	const timeout = 100 * time.Millisecond
	s2, err := OpenStore(path, StoreOptions{LockTimeout: timeout})
	if err == nil {
		s2.Close()
		t.Fatal("a second OpenStore on a held file succeeded")
	}
	var le *StateLockedError
	if !errors.As(err, &le) {
		t.Fatalf("error %v (%T) is not a *StateLockedError", err, err)
	}
	if !errors.Is(err, ErrStateLocked) {
		t.Error("errors.Is(err, ErrStateLocked) is false")
	}
	if le.Path != path {
		t.Errorf("Path = %q, want %q", le.Path, path)
	}
	// flock locks belong to the open file description, so our own second
	// open conflicts, and /proc/locks names this process as the holder.
	if le.HolderPID != os.Getpid() {
		t.Errorf("HolderPID = %d, want this process, %d", le.HolderPID, os.Getpid())
	}
	if want := fmt.Sprintf("(pid %d)", os.Getpid()); !strings.Contains(err.Error(), want) {
		t.Errorf("message %q does not name the holder", err)
	}

	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = storeOpenTestAt(t, path, StoreOptions{LockTimeout: timeout})
	if runs, err := s.Runs("held", 0); err != nil || len(runs) != 1 {
		t.Errorf("after reopening: %d runs, %v", len(runs), err)
	}
}

func TestStoreLockedErrorMessage(t *testing.T) {
	tests := []struct {
		err  StateLockedError
		want string
	}{
		{StateLockedError{"/var/lib/berth/state.db", 1234}, "state /var/lib/berth/state.db is held by another berth daemon (pid 1234) (systemctl status berth)"},
		{StateLockedError{"/var/lib/berth/state.db", 0}, "state /var/lib/berth/state.db is held by another berth daemon (systemctl status berth)"},
	}
	for _, tt := range tests {
		if got := tt.err.Error(); got != tt.want {
			t.Errorf("Error() = %q, want %q", got, tt.want)
		}
		if err := error(&tt.err); !errors.Is(fmt.Errorf("open: %w", err), ErrStateLocked) {
			t.Errorf("wrapped %v is not ErrStateLocked", err)
		}
	}
}

func TestStoreParseLocks(t *testing.T) {
	const major, minor, ino = 0xfd, 0x01, 5678
	tests := []struct {
		name  string
		locks string
		want  int
	}{
		{"exact", "1: FLOCK  ADVISORY  WRITE 1234 fd:01:5678 0 EOF\n", 1234},
		{"among others", "1: POSIX  ADVISORY  WRITE 99 fd:01:5678 0 EOF\n" +
			"2: FLOCK  ADVISORY  WRITE 77 fd:01:9999 0 EOF\n" +
			"3: FLOCK  ADVISORY  WRITE 1234 fd:01:5678 0 EOF\n" +
			"3: -> FLOCK  ADVISORY  WRITE 555 fd:01:5678 0 EOF\n", 1234},
		{"waiter only", "1: -> FLOCK  ADVISORY  WRITE 555 fd:01:5678 0 EOF\n", 0},
		{"posix only", "1: POSIX  ADVISORY  WRITE 99 fd:01:5678 0 EOF\n", 0},
		{"shared holder", "1: FLOCK  ADVISORY  READ 4321 fd:01:5678 0 EOF\n", 4321},
		{"exact beats inode only", "1: FLOCK  ADVISORY  WRITE 11 00:2a:5678 0 EOF\n" +
			"2: FLOCK  ADVISORY  WRITE 1234 fd:01:5678 0 EOF\n", 1234},
		{"other device, same inode", "1: FLOCK  ADVISORY  WRITE 11 00:2a:5678 0 EOF\n", 11},
		{"inode only, ambiguous", "1: FLOCK  ADVISORY  WRITE 11 00:2a:5678 0 EOF\n" +
			"2: FLOCK  ADVISORY  WRITE 12 00:2b:5678 0 EOF\n", 0},
		{"other pid namespace", "1: FLOCK  ADVISORY  WRITE 0 fd:01:5678 0 EOF\n", 0},
		{"ofd style -1", "1: FLOCK  ADVISORY  WRITE -1 fd:01:5678 0 EOF\n", 0},
		{"garbage", "x\n\n1: FLOCK ADVISORY WRITE abc fd:01:5678 0 EOF\n1: FLOCK ADVISORY WRITE 5 fd01 0 EOF\n", 0},
		{"empty", "", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := storeParseLocks(strings.NewReader(tt.locks), major, minor, ino); got != tt.want {
				t.Errorf("storeParseLocks = %d, want %d", got, tt.want)
			}
		})
	}
}

func TestStoreCorruptFile(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	garbage := make([]byte, 4*os.Getpagesize())
	for i := range garbage {
		garbage[i] = byte(rng.Uint32())
	}
	tests := []struct {
		name  string
		bytes []byte
	}{
		{"garbage", garbage},
		{"short", []byte("hello, not a database")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "state.db")
			if err := os.WriteFile(path, tt.bytes, 0o600); err != nil {
				t.Fatal(err)
			}
			s, err := OpenStore(path, StoreOptions{})
			if err == nil {
				s.Close()
				t.Fatal("OpenStore of a corrupt file succeeded")
			}
			if !strings.Contains(err.Error(), path) {
				t.Errorf("error %q does not name %s", err, path)
			}
			if errors.Is(err, ErrStateLocked) {
				t.Errorf("a corrupt file reported as locked: %v", err)
			}
			t.Log(err)
			storeCheckUnlocked(t, path)
		})
	}

	t.Run("damaged pages", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "state.db")
		s, err := OpenStore(path, StoreOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for i := range 50 {
			storeBegin(t, s, fmt.Sprintf("job-%d", i%5), storeT0)
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
		s, err = OpenStore(path, StoreOptions{})
		if err == nil {
			s.Close()
			t.Fatal("OpenStore of a damaged file succeeded")
		}
		if !errors.Is(err, ErrStateCorrupt) || !strings.Contains(err.Error(), path) {
			t.Errorf("error %q: want ErrStateCorrupt naming %s", err, path)
		}
		t.Log(err)
		storeCheckUnlocked(t, path)
	})
}

// storeCheckUnlocked fails the test if a failed open left path locked.
func storeCheckUnlocked(t *testing.T, path string) {
	t.Helper()
	db, err := bbolt.Open(path, 0o600, &bbolt.Options{Timeout: 100 * time.Millisecond, ReadOnly: true})
	if err == nil {
		db.Close()
	} else if errors.Is(err, berrors.ErrTimeout) {
		t.Error("the failed open left the file locked")
	}
}

// storeRawUpdate writes into a closed store's file directly, as another
// build of berth might have.
func storeRawUpdate(t *testing.T, path string, fn func(tx *bbolt.Tx) error) {
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

func TestStoreNewerFormat(t *testing.T) {
	t.Run("record", func(t *testing.T) {
		s, path := storeOpenTest(t, StoreOptions{})
		r := storeBegin(t, s, "a", storeT0)
		if err := s.PutJob(JobRecord{Name: "a"}); err != nil {
			t.Fatal(err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		storeRawUpdate(t, path, func(tx *bbolt.Tx) error {
			if err := tx.Bucket(storeBucketRuns).Put(storeKey(r.ID), []byte{99, 1, 2, 3}); err != nil {
				return err
			}
			return tx.Bucket(storeBucketJobs).Put([]byte("a"), []byte{2, 1, 'a'})
		})
		s, err := OpenStore(path, StoreOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		if _, _, err := s.Run(r.ID); !errors.Is(err, ErrStateNewer) {
			t.Errorf("Run of a version-99 record = %v, want ErrStateNewer", err)
		}
		if _, err := s.Runs("a", 0); !errors.Is(err, ErrStateNewer) {
			t.Errorf("Runs over a version-99 record = %v, want ErrStateNewer", err)
		}
		if err := s.EndRun(r.ID, storeT0, 0, "", ReasonExited); !errors.Is(err, ErrStateNewer) {
			t.Errorf("EndRun of a version-99 record = %v, want ErrStateNewer", err)
		}
		if _, err := s.Jobs(); !errors.Is(err, ErrStateNewer) {
			t.Errorf("Jobs over a version-2 record = %v, want ErrStateNewer", err)
		}
		// Put back what this build can read, for the check at cleanup.
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		storeRawUpdate(t, path, func(tx *bbolt.Tx) error {
			if err := tx.Bucket(storeBucketRuns).Put(storeKey(r.ID), storeEncodeRun(r)); err != nil {
				return err
			}
			return tx.Bucket(storeBucketJobs).Put([]byte("a"), storeEncodeJob(JobRecord{Name: "a"}))
		})
	})
	t.Run("layout", func(t *testing.T) {
		s, path := storeOpenTest(t, StoreOptions{})
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		storeRawUpdate(t, path, func(tx *bbolt.Tx) error {
			return tx.Bucket(storeBucketMeta).Put(storeKeyFormat, []byte{storeFormat + 1})
		})
		s2, err := OpenStore(path, StoreOptions{})
		if err == nil {
			s2.Close()
			t.Fatal("OpenStore of a newer layout succeeded")
		}
		if !errors.Is(err, ErrStateNewer) || !strings.Contains(err.Error(), path) {
			t.Errorf("error %q: want ErrStateNewer naming %s", err, path)
		}
	})
}

// TestStoreGroupCommit holds the writer inside one transaction while 199
// more callers submit, so the test does not depend on timing: exactly two
// transactions must carry all 200 writes.
func TestStoreGroupCommit(t *testing.T) {
	const n = 200
	s, _ := storeOpenTest(t, StoreOptions{})
	ids := make([]uint64, n)
	for i := range ids {
		ids[i] = storeBegin(t, s, fmt.Sprintf("job-%d", i), storeT0).ID
	}

	entered, release := storeHold(s, nil)
	defer release()
	queued := storeWhenQueued(s, n-1)
	before := s.commits.Load()
	errs := make(chan error, n)
	end := func(id uint64) { errs <- s.EndRun(id, storeT0.Add(time.Hour), 0, "", ReasonExited) }
	go end(ids[0])
	storeWait(t, entered, "the writer to hold its transaction")
	for _, id := range ids[1:] {
		go end(id)
	}
	storeWait(t, queued, "199 callers to queue")
	release()
	for range n {
		select {
		case err := <-errs:
			if err != nil {
				t.Error(err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("timed out waiting for EndRun")
		}
	}
	if got := s.commits.Load() - before; got != 2 {
		t.Errorf("%d EndRuns took %d transactions, want 2 (one held, one for the 199 queued behind it)", n, got)
	}
	if open, err := s.OpenRuns(); err != nil || len(open) != 0 {
		t.Errorf("after every EndRun: %d runs open, %v", len(open), err)
	}
}

// TestStoreCommitFailure injects a failing commit for one group: every
// caller in it gets the error, none of its writes lands, and the store
// carries on.
func TestStoreCommitFailure(t *testing.T) {
	s, _ := storeOpenTest(t, StoreOptions{})
	first := storeBegin(t, s, "a", storeT0)
	var ids []uint64
	for range 10 {
		ids = append(ids, storeBegin(t, s, "b", storeT0).ID)
	}

	injected := errors.New("injected: no space left on device")
	var failures atomic.Int32
	entered, release := storeHold(s, func(*bbolt.Tx) error {
		if failures.Add(1) == 1 {
			return injected
		}
		return nil
	})
	defer release()
	before := s.commits.Load()

	held := make(chan error, 1)
	go func() { held <- s.EndRun(first.ID, storeT0.Add(time.Hour), 0, "", ReasonExited) }()
	storeWait(t, entered, "the writer to hold its transaction")
	queued := storeWhenQueued(s, len(ids)+1)
	errs := make(chan error, len(ids)+1)
	for _, id := range ids {
		go func() { errs <- s.EndRun(id, storeT0.Add(time.Hour), 1, "", ReasonFailed) }()
	}
	go func() { errs <- s.PutJob(JobRecord{Name: "b", State: StateFailed}) }()
	storeWait(t, queued, "the group to queue")
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
	if got := storeIDs(open); !slices.Equal(got, ids) {
		t.Errorf("open runs after the failed group = %v, want %v (its writes undone)", got, ids)
	}
	if _, found, _ := s.Job("b"); found {
		t.Error("the failed group's PutJob landed")
	}

	// The next operations commit normally.
	for _, id := range ids {
		if err := s.EndRun(id, storeT0.Add(time.Hour), 1, "", ReasonFailed); err != nil {
			t.Fatalf("after the failure: %v", err)
		}
	}
	if err := s.PutJob(JobRecord{Name: "b", State: StateFailed}); err != nil {
		t.Fatal(err)
	}
	if open, _ := s.OpenRuns(); len(open) != 0 {
		t.Errorf("runs still open after retrying: %v", storeIDs(open))
	}
}

// TestStoreBadOperationInGroup checks that one failing operation fails alone:
// the others of its group commit, in one transaction.
func TestStoreBadOperationInGroup(t *testing.T) {
	s, _ := storeOpenTest(t, StoreOptions{})
	first := storeBegin(t, s, "a", storeT0)
	var ids []uint64
	for range 5 {
		ids = append(ids, storeBegin(t, s, "b", storeT0).ID)
	}
	entered, release := storeHold(s, nil)
	defer release()
	before := s.commits.Load()
	held := make(chan error, 1)
	go func() { held <- s.EndRun(first.ID, storeT0.Add(time.Hour), 0, "", ReasonExited) }()
	storeWait(t, entered, "the writer to hold its transaction")

	const ops = 5 + 2
	queued := storeWhenQueued(s, ops)
	good := make(chan error, 5)
	for _, id := range ids {
		go func() { good <- s.EndRun(id, storeT0.Add(time.Hour), 0, "", ReasonExited) }()
	}
	unknown := make(chan error, 1)
	go func() { unknown <- s.EndRun(987654, storeT0.Add(time.Hour), 0, "", ReasonExited) }()
	tooLong := make(chan error, 1)
	go func() { tooLong <- s.PutJob(JobRecord{Name: strings.Repeat("x", bbolt.MaxKeySize+1)}) }()
	storeWait(t, queued, "the group to queue")
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
		t.Errorf("runs still open: %v", storeIDs(open))
	}
}

// TestStoreFull drives bbolt into a real write failure, its size cap, and
// checks that the store reports it to the caller and stays usable.
func TestStoreFull(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	const maxSize = 1 << 20
	var healthMu sync.Mutex
	var health []error
	opts := StoreOptions{OnHealth: func(err error) {
		healthMu.Lock()
		health = append(health, err)
		healthMu.Unlock()
	}, recoverAfter: -1} // the first success after the failures recovers
	s, err := storeOpen(path, opts, func(o *bbolt.Options) { o.MaxSize = maxSize })
	if err != nil {
		t.Fatal(err)
	}
	storeCleanupCheck(t, s, path)

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
	jobs, err := s.Jobs()
	if err != nil {
		t.Fatalf("reading a full store: %v", err)
	}
	if len(jobs) != n {
		t.Errorf("%d jobs readable, want the %d committed", len(jobs), n)
	}
	// Freeing space makes writes work again.
	for i := range n / 2 {
		if err := s.DeleteJob(fmt.Sprintf("job-%04d", i)); err != nil {
			t.Fatalf("delete from a full store: %v", err)
		}
	}
	if err := s.PutJob(JobRecord{Name: "after", Fingerprint: fp}); err != nil {
		t.Errorf("write after freeing space: %v", err)
	}
	if s.Failing() != nil {
		t.Errorf("Failing() = %v after a write succeeded again", s.Failing())
	}
	healthMu.Lock()
	defer healthMu.Unlock()
	if len(health) != 2 || !errors.Is(health[0], berrors.ErrMaxSizeReached) || health[1] != nil {
		t.Errorf("health reported %v, want the failure once, then nil once", health)
	}
}

func TestStoreClosed(t *testing.T) {
	s, _ := storeOpenTest(t, StoreOptions{})
	r := storeBegin(t, s, "a", storeT0)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Errorf("second Close = %v", err)
	}
	if _, err := s.BeginRun(RunRecord{Job: "a"}); !errors.Is(err, ErrStoreClosed) {
		t.Errorf("BeginRun after Close = %v", err)
	}
	if err := s.EndRun(r.ID, storeT0, 0, "", ReasonExited); !errors.Is(err, ErrStoreClosed) {
		t.Errorf("EndRun after Close = %v", err)
	}
	if _, err := s.Jobs(); !errors.Is(err, ErrStoreClosed) {
		t.Errorf("Jobs after Close = %v", err)
	}
	if _, _, err := s.Run(r.ID); !errors.Is(err, ErrStoreClosed) {
		t.Errorf("Run after Close = %v", err)
	}
}

// TestStoreConcurrent runs readers against the writer, for the race
// detector, and checks that Close lets in-flight writes finish.
func TestStoreConcurrent(t *testing.T) {
	s, _ := storeOpenTest(t, StoreOptions{KeepRuns: 10})
	var writers, readers sync.WaitGroup
	stop := make(chan struct{})
	for w := range 8 {
		writers.Go(func() {
			job := fmt.Sprintf("job-%d", w%3)
			for i := range 10 {
				r, err := s.BeginRun(RunRecord{Job: job, CPUIDs: []int{w}, Start: storeT0})
				if err != nil {
					t.Error(err)
					return
				}
				if err := s.SetRunPID(r.ID, 1000+i, uint64(i)); err != nil && !errors.Is(err, ErrRunNotFound) {
					t.Error(err) // another writer's run of the same job may have trimmed it
				}
				if err := s.EndRun(r.ID, storeT0.Add(time.Second), 0, "", ReasonExited); err != nil && !errors.Is(err, ErrRunNotFound) {
					t.Error(err)
				}
				if err := s.PutJob(JobRecord{Name: job, State: StateRunning, Restarts: i}); err != nil {
					t.Error(err)
				}
			}
		})
	}
	for range 4 {
		readers.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				if _, err := s.Runs("", 20); err != nil {
					t.Error(err)
				}
				if _, err := s.Runs("job-1", 0); err != nil {
					t.Error(err)
				}
				if _, err := s.OpenRuns(); err != nil {
					t.Error(err)
				}
				if _, err := s.Jobs(); err != nil {
					t.Error(err)
				}
			}
		})
	}
	writers.Wait()
	close(stop)
	readers.Wait()
	for _, job := range []string{"job-0", "job-1", "job-2"} {
		if runs, err := s.Runs(job, 0); err != nil || len(runs) != 10 {
			t.Errorf("%s: %d runs, %v; want 10", job, len(runs), err)
		}
	}
}

func TestStoreCodec(t *testing.T) {
	runs := []RunRecord{
		{ID: 1, Job: "a"},
		{
			ID: 1<<64 - 1, Job: "train-resnet", Fingerprint: "sha256:00ff", CPUIDs: []int{0, 7, 1 << 40, -1},
			GPUs: []string{"0", "GPU-6b1c", "MIG-1/2/3", ""}, RAMBytes: -1, PID: 1<<31 - 1, StartTicks: 1<<64 - 1,
			Start: storeT0, End: storeT0.Add(time.Nanosecond), ExitCode: -129, Signal: "SIGKILL", Reason: ReasonKilled,
		},
		{ID: 3, Job: "é ✓", Start: time.Unix(0, 0), End: time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC), Reason: 200},
		{ID: 4, Job: "early", Start: time.Date(1, 1, 1, 0, 0, 0, 1, time.UTC)},
	}
	for _, r := range runs {
		enc := storeEncodeRun(r)
		got, err := storeDecodeRun(enc)
		if err != nil {
			t.Errorf("decode %+v: %v", r, err)
			continue
		}
		if !reflect.DeepEqual(got, storeNormRun(r)) {
			t.Errorf("round trip\n%+v\nbecame\n%+v", r, got)
		}
		for i := range len(enc) {
			if _, err := storeDecodeRun(enc[:i]); !errors.Is(err, ErrStateCorrupt) {
				t.Errorf("decode of %d of %d bytes = %v, want ErrStateCorrupt", i, len(enc), err)
			}
		}
		if _, err := storeDecodeRun(append(slices.Clone(enc), 0)); !errors.Is(err, ErrStateCorrupt) {
			t.Errorf("decode with a byte left over = %v, want ErrStateCorrupt", err)
		}
	}
	jobs := []JobRecord{
		{Name: "a"},
		{Name: "sweep-1", State: StateDone, Fingerprint: "x", DoneFingerprint: "x", Restarts: 1<<31 - 1, Changed: storeT0},
	}
	for _, j := range jobs {
		enc := storeEncodeJob(j)
		got, err := storeDecodeJob(enc)
		if err != nil || !reflect.DeepEqual(got, storeNormJob(j)) {
			t.Errorf("round trip %+v: %+v, %v", j, got, err)
		}
		for i := range len(enc) {
			if _, err := storeDecodeJob(enc[:i]); !errors.Is(err, ErrStateCorrupt) {
				t.Errorf("decode of %d of %d bytes = %v, want ErrStateCorrupt", i, len(enc), err)
			}
		}
	}
	for _, v := range [][]byte{{storeRunV1 + 1}, {255, 0, 0}} {
		if _, err := storeDecodeRun(v); !errors.Is(err, ErrStateNewer) {
			t.Errorf("decode run %v = %v, want ErrStateNewer", v, err)
		}
		if _, err := storeDecodeJob(v); !errors.Is(err, ErrStateNewer) {
			t.Errorf("decode job %v = %v, want ErrStateNewer", v, err)
		}
	}
	// A count that claims more elements than bytes remain is refused before
	// anything is allocated for it.
	huge := []byte{storeRunV1, 1, 1, 'a', 0}
	huge = binary.AppendUvarint(huge, 1<<62)
	if _, err := storeDecodeRun(huge); !errors.Is(err, ErrStateCorrupt) {
		t.Errorf("decode with a huge count = %v", err)
	}
}

// storeFuzzRoundTrip checks what a decoder accepted: encoding it and
// decoding that must work and give the same bytes again.
func storeFuzzRoundTrip[R any](t *testing.T, data []byte, dec func([]byte) (R, error), enc func(R) []byte) {
	r, err := dec(data)
	if err != nil {
		if !errors.Is(err, ErrStateCorrupt) && !errors.Is(err, ErrStateNewer) {
			t.Fatalf("decode error %v is neither ErrStateCorrupt nor ErrStateNewer", err)
		}
		return
	}
	e1 := enc(r)
	r2, err := dec(e1)
	if err != nil {
		t.Fatalf("re-decoding %x: %v", e1, err)
	}
	if e2 := enc(r2); !bytes.Equal(e1, e2) {
		t.Fatalf("unstable encoding: %x then %x", e1, e2)
	}
}

func FuzzStoreDecodeRun(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{storeRunV1})
	f.Add(storeEncodeRun(RunRecord{ID: 1, Job: "a"}))
	f.Add(storeEncodeRun(RunRecord{ID: 7, Job: "train", CPUIDs: []int{1, 2}, GPUs: []string{"0"}, Start: storeT0, End: storeT0, Signal: "SIGKILL", Reason: ReasonFailed}))
	f.Fuzz(func(t *testing.T, data []byte) {
		storeFuzzRoundTrip(t, data, storeDecodeRun, storeEncodeRun)
	})
}

func FuzzStoreDecodeJob(f *testing.F) {
	f.Add([]byte{})
	f.Add(storeEncodeJob(JobRecord{Name: "a"}))
	f.Add(storeEncodeJob(JobRecord{Name: "sweep-1", State: StateDone, Fingerprint: "x", DoneFingerprint: "x", Restarts: 3, Changed: storeT0}))
	f.Fuzz(func(t *testing.T, data []byte) {
		storeFuzzRoundTrip(t, data, storeDecodeJob, storeEncodeJob)
	})
}

// storeBenchRuns creates n open runs over 100 jobs in one transaction, so
// that the setup does not dominate the benchmark.
func storeBenchRuns(b *testing.B, s *Store, n int) []uint64 {
	ids := make([]uint64, n)
	err := s.submit(func(tx *bbolt.Tx) error {
		bk, err := storeBuckets(tx)
		if err != nil {
			return err
		}
		for i := range ids {
			r := RunRecord{Job: fmt.Sprintf("job-%d", i%100), Fingerprint: "fp", CPUIDs: []int{0, 1}, GPUs: []string{"0"}, Start: storeT0}
			if err := bk.addRun(&r, s.keepRuns); err != nil {
				return err
			}
			ids[i] = r.ID
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	return ids
}

func storeBenchEndRun(b *testing.B, parallel bool) {
	s, _ := storeOpenTest(b, StoreOptions{KeepRuns: b.N})
	ids := storeBenchRuns(b, s, b.N)
	end := storeT0.Add(time.Hour)
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
				if err := s.EndRun(id, end, 0, "", ReasonExited); err != nil {
					b.Error(err)
				}
			}
		})
	} else {
		for _, id := range ids {
			if err := s.EndRun(id, end, 0, "", ReasonExited); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "runs/s")
	b.ReportMetric(float64(b.N)/float64(max(1, s.commits.Load()-before)), "runs/commit")
}

func BenchmarkStoreEndRunSerial(b *testing.B)   { storeBenchEndRun(b, false) }
func BenchmarkStoreEndRunParallel(b *testing.B) { storeBenchEndRun(b, true) }

// TestStoreLater checks the deferred writes: they return before anything is
// committed, land in the order given (the last state of a job wins), share
// the next transaction with a waiting caller's write, reach the file by
// Close, and report their failures to the callback.
func TestStoreLater(t *testing.T) {
	s, path := storeOpenTest(t, StoreOptions{})
	r := storeBegin(t, s, "a", storeT0)
	var failures []error
	var mu sync.Mutex
	later := s.Later(func(err error) {
		mu.Lock()
		failures = append(failures, err)
		mu.Unlock()
	})

	entered, release := storeHold(s, nil)
	defer release()
	held := make(chan error, 1)
	go func() { held <- s.PutJob(JobRecord{Name: "held"}) }()
	storeWait(t, entered, "the writer to hold its transaction")
	before := s.commits.Load()

	// With the writer held, none of these can have committed when they
	// return.
	later.SetRunPID(r.ID, 4242, 77)
	later.PutJob(JobRecord{Name: "a", State: StateRunning})
	later.EndRun(r.ID, storeT0.Add(time.Minute), 3, "", ReasonFailed)
	later.PutJob(JobRecord{Name: "a", State: StateFailed})
	later.EndRun(987654, storeT0, 0, "", ReasonExited) // unknown: fails alone
	later.EndRun(r.ID, time.Time{}, 0, "", ReasonExited)
	if got, _, _ := s.Run(r.ID); got.PID != 0 || !got.End.IsZero() {
		t.Fatalf("a deferred write committed before the writer was free: %+v", got)
	}
	// A waiting caller's write goes into the same transaction.
	queued := storeWhenQueued(s, 6)
	waited := make(chan error, 1)
	go func() { waited <- s.PutJob(JobRecord{Name: "b", State: StateDone}) }()
	storeWait(t, queued, "the waiting write to queue behind the deferred ones")
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
	got, _, err := s.Run(r.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.PID != 4242 || got.StartTicks != 77 || got.ExitCode != 3 || got.Reason != ReasonFailed {
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
	if n := len(failures); n != 3 || !errors.Is(failures[2], ErrStoreClosed) {
		t.Errorf("a deferred write after Close reported %v", failures)
	}
	mu.Unlock()
	s = storeOpenTestAt(t, path, StoreOptions{})
	if j, found, _ := s.Job("last"); !found || j.State != StateStopped {
		t.Errorf("the write queued before Close is not on file: %+v", j)
	}
}

// TestStoreLaterLingers: deferred writes wait for a write someone waits for
// and go into its commit, rather than costing a commit of their own.
func TestStoreLaterLingers(t *testing.T) {
	s, _ := storeOpenTest(t, StoreOptions{})
	s.lingerFor = time.Hour // only the waited-for write can end the wait
	r := storeBegin(t, s, "a", storeT0)
	before := s.commits.Load()
	later := s.Later(func(err error) { t.Errorf("deferred write failed: %v", err) })
	later.EndRun(r.ID, storeT0.Add(time.Minute), 0, "", ReasonExited)
	later.PutJob(JobRecord{Name: "a", State: StateDone})
	next, err := s.BeginRun(RunRecord{Job: "b", Start: storeT0})
	if err != nil {
		t.Fatal(err)
	}
	if got := s.commits.Load() - before; got != 1 {
		t.Errorf("%d commits, want 1: the deferred writes in the waited-for one's", got)
	}
	if got, _, _ := s.Run(r.ID); got.End.IsZero() || next.ID == 0 {
		t.Errorf("the deferred end is not in: %+v", got)
	}
	// Close does not wait out the linger either.
	later.PutJob(JobRecord{Name: "a", State: StateStopped})
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestStoreHealthHolds: after a failed commit, one success does not yet
// count as recording again (on a nearly full disk successes and failures
// alternate); commits must go without failure for a while first.
func TestStoreHealthHolds(t *testing.T) {
	var health []error
	var mu sync.Mutex
	s, _ := storeOpenTest(t, StoreOptions{OnHealth: func(err error) {
		mu.Lock()
		health = append(health, err)
		mu.Unlock()
	}, recoverAfter: time.Hour})
	injected := errors.New("injected: no space left on device")
	var fail atomic.Bool
	s.mu.Lock()
	s.beforeCommit = func(*bbolt.Tx) error {
		if fail.Load() {
			return injected
		}
		return nil
	}
	s.mu.Unlock()
	fail.Store(true)
	if err := s.PutJob(JobRecord{Name: "a"}); !errors.Is(err, injected) {
		t.Fatalf("PutJob = %v, want the injected error", err)
	}
	fail.Store(false)
	for range 3 {
		if err := s.PutJob(JobRecord{Name: "a"}); err != nil {
			t.Fatal(err)
		}
	}
	if !errors.Is(s.Failing(), injected) {
		t.Errorf("Failing() = %v right after the failure, want it still reported", s.Failing())
	}
	mu.Lock()
	defer mu.Unlock()
	if len(health) != 1 || !errors.Is(health[0], injected) {
		t.Errorf("health reported %v, want the failure once and no recovery yet", health)
	}
}

// TestStoreInstance: a state file keeps its instance across opens, and two
// files have different ones.
func TestStoreInstance(t *testing.T) {
	s, path := storeOpenTest(t, StoreOptions{})
	first := s.Instance()
	if len(first) != 16 {
		t.Fatalf("instance %q, want 16 hex digits", first)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if again := storeOpenTestAt(t, path, StoreOptions{}).Instance(); again != first {
		t.Errorf("instance after reopening %q, want %q", again, first)
	}
	if other, _ := storeOpenTest(t, StoreOptions{}); other.Instance() == first {
		t.Errorf("two state files share the instance %q", first)
	}
}
