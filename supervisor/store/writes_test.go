package store

import (
	"errors"
	"reflect"
	"slices"
	"testing"
	"time"
)

func TestRunRoundTrip(t *testing.T) {
	s, _ := openTest(t, Options{})
	in := RunRecord{
		ID:          999, // ignored
		Job:         "train-resnet",
		Fingerprint: "sha256:abc",
		CPUIDs:      []int{0, 1, 2, 3},
		GPUs:        []string{"GPU-6b1c9d0e", "MIG-2/1/0"},
		RAMBytes:    32 << 30,
		Start:       t0,
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
	if !reflect.DeepEqual(normRun(begun), normRun(want)) {
		t.Errorf("BeginRun returned\n%+v\nwant\n%+v", begun, want)
	}

	if err := s.setRunPID(begun.ID, 4242, 987654321); err != nil {
		t.Fatal(err)
	}
	want.PID, want.StartTicks = 4242, 987654321
	got, found, err := s.run(begun.ID)
	if err != nil || !found {
		t.Fatalf("Run: %v, found %v", err, found)
	}
	if !reflect.DeepEqual(got, normRun(want)) {
		t.Errorf("after SetRunPID\n%+v\nwant\n%+v", got, normRun(want))
	}

	end := t0.Add(90 * time.Minute)
	if err := s.EndRun(begun.ID, end, -1, "SIGKILL", ReasonKilled, ""); err != nil {
		t.Fatal(err)
	}
	want.End, want.ExitCode, want.Signal, want.Reason = end, -1, "SIGKILL", ReasonKilled
	got, _, err = s.run(begun.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, normRun(want)) {
		t.Errorf("after EndRun\n%+v\nwant\n%+v", got, normRun(want))
	}

	if _, found, err := s.run(begun.ID + 1); err != nil || found {
		t.Errorf("Run(unknown) = found %v, %v; want not found", found, err)
	}
	if err := s.setRunPID(12345, 1, 1); !errors.Is(err, ErrRunNotFound) {
		t.Errorf("SetRunPID(unknown) = %v, want ErrRunNotFound", err)
	}
	if err := s.EndRun(12345, end, 0, "", ReasonExited, ""); !errors.Is(err, ErrRunNotFound) {
		t.Errorf("EndRun(unknown) = %v, want ErrRunNotFound", err)
	}
	if err := s.EndRun(begun.ID, time.Time{}, 0, "", ReasonExited, ""); err == nil {
		t.Error("EndRun with a zero end time succeeded")
	}
	if err := s.EndRun(begun.ID, end, 0, "", 0, ""); err == nil {
		t.Error("EndRun with reason 0 succeeded")
	}
	if _, err := s.BeginRun(RunRecord{}); err == nil {
		t.Error("BeginRun without a job succeeded")
	}
}

func TestTrim(t *testing.T) {
	const keep = 5
	s, path := openTest(t, Options{keepRuns: keep})
	var ids = map[string][]uint64{}
	for i := range 12 {
		for _, job := range []string{"x", "y"} {
			r := begin(t, s, job, t0.Add(time.Duration(i)*time.Minute))
			ids[job] = append(ids[job], r.ID)
			if i%2 == 0 { // some ended, some left open: trimming must drop both kinds
				if err := s.EndRun(r.ID, r.Start.Add(time.Second), 0, "", ReasonExited, ""); err != nil {
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
		if got, want := runIDs(runs), newest(job, n); !slices.Equal(got, want) {
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
		if _, found, _ := s.run(id); found {
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
	if err := s.deleteJob("x"); err != nil {
		t.Fatal(err)
	}
	check("x", keep)
	r := begin(t, s, "x", t0.Add(time.Hour))
	ids["x"] = append(ids["x"], r.ID)
	check("x", keep)

	// Keeping fewer runs after a restart trims at the job's next run.
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openTestAt(t, path, Options{keepRuns: 3})
	for _, job := range []string{"x", "y"} {
		check(job, keep)
		r = begin(t, s, job, t0.Add(2*time.Hour))
		ids[job] = append(ids[job], r.ID)
		check(job, 3)
	}
}

func TestOpenRunsMarkLost(t *testing.T) {
	s, _ := openTest(t, Options{})
	r1 := begin(t, s, "a", t0)
	r2 := begin(t, s, "b", t0.Add(time.Second))
	r3 := begin(t, s, "a", t0.Add(2*time.Second))
	if err := s.setRunPID(r3.ID, 77, 5); err != nil {
		t.Fatal(err)
	}
	ended := t0.Add(time.Minute)
	if err := s.EndRun(r2.ID, ended, 3, "", ReasonFailed, ""); err != nil {
		t.Fatal(err)
	}
	open, err := s.OpenRuns()
	if err != nil {
		t.Fatal(err)
	}
	if got := runIDs(open); !slices.Equal(got, []uint64{r1.ID, r3.ID}) {
		t.Fatalf("OpenRuns = %v, want [%d %d]", got, r1.ID, r3.ID)
	}
	if open[1].PID != 77 || open[1].StartTicks != 5 {
		t.Errorf("open run lost its pid: %+v", open[1])
	}

	lost := t0.Add(time.Hour)
	// All or nothing: an unknown id changes nothing.
	if err := s.MarkLost([]uint64{r1.ID, 424242}, lost, ""); !errors.Is(err, ErrRunNotFound) {
		t.Fatalf("MarkLost with an unknown id = %v, want ErrRunNotFound", err)
	}
	if open, _ := s.OpenRuns(); len(open) != 2 {
		t.Fatalf("a failed MarkLost changed the open runs: %v", runIDs(open))
	}
	// An already ended run is left as it was.
	if err := s.MarkLost([]uint64{r1.ID, r2.ID, r3.ID}, lost, "the daemon went away"); err != nil {
		t.Fatal(err)
	}
	if open, _ := s.OpenRuns(); len(open) != 0 {
		t.Errorf("OpenRuns after MarkLost = %v, want none", runIDs(open))
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
		r, _, err := s.run(tt.id)
		if err != nil {
			t.Fatal(err)
		}
		if !r.End.Equal(tt.end) || r.Reason != tt.reason || r.ExitCode != tt.code {
			t.Errorf("run %d: end %v reason %v code %d; want %v %v %d", tt.id, r.End, r.Reason, r.ExitCode, tt.end, tt.reason, tt.code)
		}
		if lostOne := tt.reason == ReasonLost; lostOne != (r.Cause == "the daemon went away") {
			t.Errorf("run %d: cause %q", tt.id, r.Cause)
		}
	}
	if err := s.MarkLost(nil, lost, ""); err != nil {
		t.Errorf("MarkLost(nil) = %v", err)
	}
}

func TestJobs(t *testing.T) {
	s, _ := openTest(t, Options{})
	jobs := map[string]JobRecord{}
	for i, name := range []string{"sweep-2", "eval", "train", "sweep-10"} {
		j := JobRecord{
			Name: name, State: StateRunning, Fingerprint: "fp-" + name,
			Restarts: i, Changed: t0.Add(time.Duration(i) * time.Second),
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
	if !reflect.DeepEqual(got, normJob(j)) {
		t.Errorf("Job(eval) = %+v, want %+v", got, j)
	}
	if err := s.deleteJob("train"); err != nil {
		t.Fatal(err)
	}
	if err := s.deleteJob("never-was"); err != nil {
		t.Errorf("DeleteJob(unknown) = %v", err)
	}
	delete(jobs, "train")
	if _, found, err := s.Job("train"); found || err != nil {
		t.Errorf("Job(deleted) = found %v, %v", found, err)
	}

	list, err := s.jobs()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, j := range list {
		names = append(names, j.Name)
		if !reflect.DeepEqual(j, normJob(jobs[j.Name])) {
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
