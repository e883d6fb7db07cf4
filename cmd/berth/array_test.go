package main

import (
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/berthd/berth/supervisor"
	"github.com/berthd/berth/supervisor/testkit"
)

// TestDaemonArrayKill9: a 1 000-index array with max_parallel = 4 never
// has more than 4 indices running, and finishes every index exactly once,
// across a kill -9 of the daemon in the middle.
func TestDaemonArrayKill9(t *testing.T) {
	t.Parallel()
	const size, bound = 1000, 4
	d := newTestDaemon(t, nil)
	d.write("sweep.lua", `job "sweep" { cmd = { "/bin/sh", "-c", "sleep 0.02; echo $BERTH_ARRAY_INDEX >> OUT/finished" }, cpus = 1, array = `+
		strconv.Itoa(size)+`, max_parallel = `+strconv.Itoa(bound)+` }`)
	opts := daemonOptions{args: []string{"--cpus", "16"}, env: []string{d.markEnv()}}
	d.start(opts)

	finished := func() int {
		b, _ := os.ReadFile(filepath.Join(d.out, "finished"))
		return strings.Count(string(b), "\n")
	}
	testkit.WaitFor(t, 2*time.Minute, "a third of the indices to finish", func() bool {
		if st, ok := d.job("sweep"); ok && st.Array != nil && st.Array.Counts["running"] > bound {
			t.Errorf("status shows %d indices running; max_parallel is %d", st.Array.Counts["running"], bound)
		}
		return finished() >= size/3
	})
	if err := d.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	d.cmd.Wait()
	d.start(opts)
	st := d.waitJobLong("sweep", "done", 3*time.Minute, func(js supervisor.JobStatus) bool { return js.State == "done" })
	if st.Array == nil || st.Array.Counts["done"] != size || len(st.Array.Counts) != 1 {
		t.Fatalf("the array ended as %+v", st.Array)
	}

	// Exactly one successful run per index; any other run of an index was
	// lost with the killed daemon.
	runs := d.history("sweep")
	lost := map[string]bool{}
	ok := map[string]int{}
	for _, r := range runs {
		switch r.Reason {
		case "exited":
			ok[r.Job]++
		case "lost":
			lost[strconv.FormatUint(r.ID, 10)] = true
			if !strings.HasPrefix(r.Cause, "the daemon went away while it ran") {
				t.Errorf("run %d of %s lost, its cause %q: want why", r.ID, r.Job, r.Cause)
			}
		default:
			t.Errorf("run %d of %s ended %s", r.ID, r.Job, r.Reason)
		}
	}
	for i := 1; i <= size; i++ {
		if n := ok["sweep["+strconv.Itoa(i)+"]"]; n != 1 {
			t.Errorf("index %d succeeded %d times", i, n)
		}
	}
	t.Logf("%d runs, %d lost with the killed daemon", len(runs), len(lost))
	// The bound, as the runs were recorded: each run's record begins
	// before its process and ends after it was reaped. A run lost with the
	// killed daemon ends when the next one found it, before that one
	// started anything.
	switch most, at := mostAtOnce(runs); {
	case most > bound:
		t.Errorf("%d runs were in progress at once at %v; max_parallel is %d", most, at, bound)
	case most < bound:
		// Runs of 20 ms each, let in as soon as a place frees.
		t.Errorf("at most %d runs were in progress at once: the bound of %d was never met, and so not tested", most, bound)
	}
	b, _ := os.ReadFile(filepath.Join(d.out, "finished"))
	seen := map[string]int{}
	for _, i := range strings.Fields(string(b)) {
		seen[i]++
	}
	if len(seen) != size {
		t.Errorf("%d indices ran to the end, want %d", len(seen), size)
	}
	d.stop()
}

// mostAtOnce is the largest number of runs in progress at one moment, and
// that moment.
func mostAtOnce(runs []supervisor.RunView) (int, time.Time) {
	type edge struct {
		at    time.Time
		delta int
	}
	var edges []edge
	for _, r := range runs {
		if r.End == nil {
			continue
		}
		edges = append(edges, edge{r.Start, 1}, edge{*r.End, -1})
	}
	// At one instant, an end comes before a start.
	slices.SortFunc(edges, func(a, b edge) int {
		if c := a.at.Compare(b.at); c != 0 {
			return c
		}
		return a.delta - b.delta
	})
	most, now := 0, 0
	var at time.Time
	for _, e := range edges {
		now += e.delta
		if now > most {
			most, at = now, e.at
		}
	}
	return most, at
}

// waitJobLong is waitJob with a longer bound, for an array of many runs.
func (d *testDaemon) waitJobLong(name, what string, limit time.Duration, cond func(supervisor.JobStatus) bool) supervisor.JobStatus {
	d.t.Helper()
	var js supervisor.JobStatus
	testkit.WaitFor(d.t, limit, name+" "+what, func() bool {
		var ok bool
		js, ok = d.job(name)
		return ok && cond(js)
	})
	return js
}

func TestMostAtOnce(t *testing.T) {
	t0 := time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC)
	run := func(from, to int) supervisor.RunView {
		end := t0.Add(time.Duration(to) * time.Second)
		return supervisor.RunView{Start: t0.Add(time.Duration(from) * time.Second), End: &end}
	}
	for _, c := range []struct {
		runs []supervisor.RunView
		want int
	}{
		{nil, 0},
		{[]supervisor.RunView{run(0, 1), run(1, 2), run(2, 3)}, 1}, // one ends as the next starts
		{[]supervisor.RunView{run(0, 10), run(1, 2), run(1, 3), run(5, 6)}, 3},
		{[]supervisor.RunView{run(0, 4), run(1, 5), run(2, 6), run(3, 7), run(3, 4)}, 5},
	} {
		if got, _ := mostAtOnce(c.runs); got != c.want {
			t.Errorf("mostAtOnce = %d, want %d", got, c.want)
		}
	}
}

// sortedOrder is what ran, sorted: the indices of an array run in any
// order their places allow.
func (d *testDaemon) sortedOrder() []string {
	o := d.order()
	slices.Sort(o)
	return o
}

func (d *testDaemon) waitSorted(what string, want ...string) {
	d.t.Helper()
	slices.Sort(want)
	defer func() {
		if d.t.Failed() {
			d.t.Logf("ran: %v", d.order())
		}
	}()
	testkit.WaitFor(d.t, waitLong, what, func() bool { return slices.Equal(d.sortedOrder(), want) })
}

// TestDaemonArrayLife: an array runs each index once per definition: a
// daemon restart reruns none, a new range runs only the new indices, an
// edit of what it runs runs them all again. An array as a parent lets its
// dependant run once every index is done, and again after it reruns.
func TestDaemonArrayLife(t *testing.T) {
	t.Parallel()
	sweep := func(cmd, array string) string {
		return `job "sweep" { cmd = { "sh", "-c", "echo ` + cmd + `$BERTH_ARRAY_INDEX >> OUT/order" }, cpus = 1, array = ` + array + `, max_parallel = 2 }`
	}
	d := newTestDaemon(t, map[string]string{
		"sweep.lua":  sweep("a", "3"),
		"report.lua": step("report", "report", 0, `, after = "sweep"`),
	})
	d.start(daemonOptions{args: []string{"--cpus", "4"}})
	d.waitSorted("the indices, then report", "a1", "a2", "a3", "report")
	if o := d.order(); o[len(o)-1] != "report" {
		t.Errorf("report ran before every index was done: %v", o)
	}
	d.waitState("report", "done")

	d.stop()
	d.start(daemonOptions{args: []string{"--cpus", "4"}})
	d.waitState("sweep", "done")
	d.waitState("report", "done")

	// More indices: the new ones run, the done ones stay done; the array
	// was not done meanwhile, and is again: report runs again after it.
	d.write("sweep.lua", sweep("a", "{ from = 1, to = 5 }"))
	d.waitSorted("the new indices, then report", "a1", "a2", "a3", "a4", "a5", "report", "report")
	d.waitState("report", "done")

	// Fewer: the others are gone, and what is left is done.
	d.write("sweep.lua", sweep("a", "2"))
	d.waitJob("sweep", "two indices", func(j supervisor.JobStatus) bool {
		return j.Array != nil && j.Array.Size == 2 && j.State == "done"
	})
	if st, ok := d.job("sweep[3]"); ok {
		t.Errorf("index 3 is still there: %+v", st)
	}

	// A new definition runs every index again, and report after them.
	d.write("sweep.lua", sweep("b", "2"))
	d.waitSorted("every index again, then report", "a1", "a2", "a3", "a4", "a5", "report", "report", "b1", "b2", "report")
	d.waitState("report", "done")
	if detail := d.detail("sweep"); detail.Indices["done"] != "1-2" || len(detail.Indices) != 1 {
		t.Errorf("berth show sweep lists the indices %v", detail.Indices)
	}
	d.stop()
}

// TestDaemonArrayAfter: the indices of an array that waits for a parent
// wait at the dependency gate, the array's line says for what, and they
// run once the parent is done.
func TestDaemonArrayAfter(t *testing.T) {
	t.Parallel()
	d := newTestDaemon(t, map[string]string{
		"prep.lua":  gated("prep", "prep", "go", ""),
		"sweep.lua": `job "sweep" { cmd = { "sh", "-c", "echo s$BERTH_ARRAY_INDEX >> OUT/order" }, cpus = 1, array = 3, max_parallel = 1, after = "prep" }`,
	})
	d.start(daemonOptions{args: []string{"--cpus", "4"}})
	st := d.waitJob("sweep", "held by prep", func(j supervisor.JobStatus) bool {
		return j.State == "waiting" && len(j.After) == 1 && j.After[0].Job == "prep" && j.After[0].State == "running"
	})
	if st.Array.Counts["waiting"] != 3 {
		t.Errorf("counts %v", st.Array.Counts)
	}
	d.open("go")
	d.waitState("sweep", "done")
	if got := strings.Join(d.order(), " "); got != "prep s1 s2 s3" {
		t.Errorf("ran %q", got)
	}

	// A dependant of the array runs once it is done; a restart of one of
	// its indices, or of all, of the same definition re-runs what is
	// restarted alone, as a restart of a job does.
	d.write("summary.lua", step("summary", "summary", 0, `, after = "sweep"`))
	d.waitOrder("summary to run after sweep", "prep", "s1", "s2", "s3", "summary")
	d.waitState("summary", "done")
	d.post("/v1/jobs/" + url.PathEscape("sweep[2]") + "/restart")
	d.waitOrder("sweep[2] to run again", "prep", "s1", "s2", "s3", "summary", "s2")
	d.waitState("sweep", "done")
	d.post("/v1/jobs/sweep/restart")
	d.waitOrder("sweep to run again", "prep", "s1", "s2", "s3", "summary", "s2", "s1", "s2", "s3")
	d.waitState("sweep", "done")
	// (Had summary run again after either, the next wait would see it.)
	d.write("sweep.lua", `job "sweep" { cmd = { "sh", "-c", "echo t$BERTH_ARRAY_INDEX >> OUT/order" }, cpus = 1, array = 3, max_parallel = 1, after = "prep" }`)
	d.waitOrder("an edit of sweep to run it, then summary", "prep", "s1", "s2", "s3", "summary", "s2", "s1", "s2", "s3", "t1", "t2", "t3", "summary")
	d.stop()
}

// TestDaemonArrayHeldStart: an array held by a parent that failed says so
// to a plain start or a restart, as a job does, and a start with
// --ignore-deps runs every index (it started none: "no index to start").
func TestDaemonArrayHeldStart(t *testing.T) {
	t.Parallel()
	d := newTestDaemon(t, map[string]string{
		"jobs.lua": `job "p" { cmd = "exit 1", cpus = 0 }
job "sweep" { cmd = { "sh", "-c", "echo s$BERTH_ARRAY_INDEX >> OUT/order" }, cpus = 1, array = 3, after = "p" }`,
	})
	d.start(daemonOptions{args: []string{"--cpus", "4"}})
	d.waitState("p", "failed")
	d.waitJob("sweep", "held by p", func(j supervisor.JobStatus) bool {
		return j.State == "waiting" && len(j.After) == 1 && j.After[0].State == "failed"
	})
	for _, verb := range []string{"start", "restart"} {
		out, errOut, code := d.cli(verb, "sweep")
		if code != exitOK || !strings.HasPrefix(out, "sweep is held by p, and a "+verb+" does not change that") {
			t.Errorf("berth %s sweep, held: exit %d\n%s%s", verb, code, out, errOut)
		}
	}
	out, errOut, code := d.cli("start", "sweep", "--ignore-deps")
	if code != exitOK || out != "sweep: start requested for 3 indices (berth status shows them)\n" {
		t.Errorf("berth start sweep --ignore-deps: exit %d\n%s%s", code, out, errOut)
	}
	d.waitState("sweep", "done")
	if got := d.order(); len(got) != 3 {
		t.Errorf("ran %q, want the three indices once each", got)
	}
	// Done past its parents, a job restarted waits for them again, and
	// the answer says so (it said "requested", and nothing ran).
	d.write("one.lua", `job "one" { cmd = "true", cpus = 1, after = "p" }`)
	d.cli("reload")
	d.waitState("one", "waiting")
	d.cli("start", "one", "--ignore-deps")
	d.waitState("one", "done")
	out, errOut, code = d.cli("restart", "one")
	if code != exitOK || !strings.HasPrefix(out, "one: restart requested; it waits now: after p, which failed (exit 1)") {
		t.Errorf("berth restart one, done past its failed parent: exit %d\n%s%s", code, out, errOut)
	}
	d.stop()
}
