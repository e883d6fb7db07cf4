package store

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestRunsOrder(t *testing.T) {
	s, _ := openTest(t, Options{})
	var ids = map[string][]uint64{}
	for i, job := range []string{"a", "b", "a", "b", "a"} {
		r := begin(t, s, job, t0.Add(time.Duration(i)*time.Minute))
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
			if got := runIDs(runs); !slices.Equal(got, tt.want) {
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

// TestRunsOfPrefix: the runs of an array's indices, newest first, and
// none of a job whose name merely begins alike.
func TestRunsOfPrefix(t *testing.T) {
	newestOf(t, []string{"sweep[1]", "sweep[2]", "sweeper", "sweep[1]", "sweep[10]", "sweep", "sweep[2]"},
		func(job string) bool { return strings.HasPrefix(job, "sweep[") },
		func(s *Store, n int) ([]RunRecord, error) { return s.RunsOfPrefix("sweep[", n) })
}

// TestRunsWhere: the newest n runs of the jobs kept, however many runs of
// other jobs are newer.
func TestRunsWhere(t *testing.T) {
	alices := func(job string) bool { return strings.HasPrefix(job, "alice/") }
	newestOf(t, []string{"alice/a", "bob/b", "alice/a[2]", "c", "bob/b", "alice/d", "bob/b"}, alices,
		func(s *Store, n int) ([]RunRecord, error) { return s.RunsWhere(alices, n) })
}

// newestOf runs jobs, one run each in turn, and checks that read gives the
// newest n runs of those kept, for n of none, a few and more than all.
func newestOf(t *testing.T, jobs []string, kept func(job string) bool, read func(s *Store, n int) ([]RunRecord, error)) {
	t.Helper()
	s, _ := openTest(t, Options{})
	var want []uint64
	for i, job := range jobs {
		r := begin(t, s, job, t0.Add(time.Duration(i)*time.Minute))
		if kept(job) {
			want = append(want, r.ID)
		}
	}
	slices.Reverse(want)
	for _, n := range []int{0, 2, 5, 100} {
		runs, err := read(s, n)
		if err != nil {
			t.Fatal(err)
		}
		w := want
		if n > 0 && n < len(w) {
			w = w[:n]
		}
		if got := runIDs(runs); !slices.Equal(got, w) {
			t.Errorf("n %d: runs %v, want %v", n, got, w)
		}
	}
}

// TestConcurrent runs readers against the writer, for the race
// detector, and checks that Close lets in-flight writes finish.
func TestConcurrent(t *testing.T) {
	s, _ := openTest(t, Options{keepRuns: 10})
	var writers, readers sync.WaitGroup
	stop := make(chan struct{})
	for w := range 8 {
		writers.Go(func() {
			job := fmt.Sprintf("job-%d", w%3)
			for i := range 10 {
				r, err := s.BeginRun(RunRecord{Job: job, CPUIDs: []int{w}, Start: t0})
				if err != nil {
					t.Error(err)
					return
				}
				if err := s.setRunPID(r.ID, 1000+i, uint64(i)); err != nil && !errors.Is(err, ErrRunNotFound) {
					t.Error(err) // another writer's run of the same job may have trimmed it
				}
				if err := s.EndRun(r.ID, t0.Add(time.Second), 0, "", ReasonExited, ""); err != nil && !errors.Is(err, ErrRunNotFound) {
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
				if _, err := s.jobs(); err != nil {
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
