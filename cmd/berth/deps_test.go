package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/berthd/berth/supervisor"
	"github.com/berthd/berth/supervisor/testkit"
)

// step is a pipeline job that appends its name (and tag) to OUT/order,
// then exits with code.
func step(name, tag string, code int, extra string) string {
	return fmt.Sprintf(`job %q { cmd = { "sh", "-c", "echo %s >> OUT/order; exit %d" }, cpus = 1 %s }`, name, tag, code, extra)
}

func (d *testDaemon) order() []string {
	data, _ := os.ReadFile(filepath.Join(d.out, "order"))
	return strings.Fields(string(data))
}

// waitOrder waits until the jobs have run, in all, exactly as want says.
func (d *testDaemon) waitOrder(what string, want ...string) {
	d.t.Helper()
	seen := ""
	defer func() {
		if got := strings.Join(want, " "); seen != got {
			d.t.Logf("ran %q, want %q", seen, got)
		}
	}()
	testkit.WaitFor(d.t, waitLong, what, func() bool {
		seen = strings.Join(d.order(), " ")
		return seen == strings.Join(want, " ")
	})
}

// TestDaemonPipeline: prepare → train → evaluate runs in order; a failing
// parent holds its dependants with a reason that says how it failed; the
// fix runs them; an edit of the first re-runs the pipeline downstream of
// it, an edit of the last only the last; a kill -9 of the daemon re-runs
// nothing.
func TestDaemonPipeline(t *testing.T) {
	t.Parallel()
	d := newTestDaemon(t, map[string]string{
		"1-prep.lua":  step("prep", "prep-broken", 3, ""),
		"2-train.lua": step("train", "train", 0, `, after = "prep"`),
		"3-eval.lua":  step("eval", "eval", 0, `, after = { "train" }`),
	})
	d.start(daemonOptions{args: []string{"--cpus", "4"}})

	// prep fails: train is held, saying why, in facts and in words.
	d.waitState("prep", "failed")
	train := d.waitJob("train", "held by prep's failure", func(j supervisor.JobStatus) bool {
		return j.State == "waiting" && len(j.After) == 1 && j.After[0].State == "failed"
	})
	if p := train.After[0]; p.Job != "prep" || p.Kind != "after" || p.ExitCode == nil || *p.ExitCode != 3 || p.Satisfied {
		t.Errorf("train's parent: %+v", p)
	}
	if train.Short != nil || train.CPUs != 0 {
		t.Errorf("a job held by its parents is in the placer: %+v", train)
	}
	out, _, code := d.cli("status")
	if code != exitOK || !strings.Contains(out, "after prep, which failed (exit 3); runs when prep succeeds (berth logs prep shows why; berth start train --ignore-deps runs it anyway)") {
		t.Errorf("berth status does not say why train waits (exit %d):\n%s", code, out)
	}
	// A plain start of a held job says what holds it, and what runs it.
	out, _, code = d.cli("start", "train")
	if code != exitOK || !strings.Contains(out, "train is held by prep, and a start does not change that") || !strings.Contains(out, "--ignore-deps") {
		t.Errorf("berth start train, held (exit %d):\n%s", code, out)
	}
	// A restart neither (it said "restart requested", and did nothing).
	out, _, code = d.cli("restart", "train")
	if code != exitOK || !strings.Contains(out, "train is held by prep, and a restart does not change that") {
		t.Errorf("berth restart train, held (exit %d):\n%s", code, out)
	}
	out, _, _ = d.cli("status", "--json")
	if !strings.Contains(out, `"exit_code": 3`) && !strings.Contains(out, `"exit_code":3`) {
		t.Errorf("berth status --json has no exit_code 3:\n%s", out)
	}
	// The JSON has the why the text has (trial AO: none, after alone).
	const heldWhy = "after prep, which failed (exit 3); runs when prep succeeds"
	var st supervisor.Status
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		t.Fatal(err)
	}
	var jobs []supervisor.JobStatus
	out, _, _ = d.cli("jobs", "--json")
	if err := json.Unmarshal([]byte(out), &jobs); err != nil {
		t.Fatal(err)
	}
	var shown supervisor.JobDetail
	out, _, _ = d.cli("show", "train", "--json")
	if err := json.Unmarshal([]byte(out), &shown); err != nil {
		t.Fatal(err)
	}
	for what, list := range map[string][]supervisor.JobStatus{"status": st.Jobs, "jobs": jobs, "show": {shown.Status}} {
		i := slices.IndexFunc(list, func(j supervisor.JobStatus) bool { return j.Name == "train" })
		if i < 0 || !strings.HasPrefix(list[i].Why, heldWhy) {
			t.Errorf("berth %s --json: train's why is not %q: %+v", what, heldWhy, list)
		}
	}
	if e, _ := d.job("eval"); e.State != "waiting" || len(e.After) != 1 || e.After[0].Job != "train" {
		t.Errorf("eval: %+v", e)
	}

	// A new daemon knows how prep failed, from its history.
	d.cmd.Process.Signal(syscall.SIGKILL)
	d.cmd.Wait()
	d.start(daemonOptions{args: []string{"--cpus", "4"}})
	d.waitJob("train", "held by prep's failure, told how it ended", func(j supervisor.JobStatus) bool {
		return j.State == "waiting" && len(j.After) == 1 && j.After[0].ExitCode != nil && *j.After[0].ExitCode == 3
	})

	// The fix: prep succeeds, then train, then eval, in that order.
	d.write("1-prep.lua", step("prep", "prep", 0, ""))
	d.waitState("eval", "done")
	d.waitOrder("the pipeline to run in order", "prep-broken", "prep", "train", "eval")
	d.waitState("eval", "done")

	// berth show lists parents and dependants with their states.
	out, _, _ = d.cli("show", "train")
	if !strings.Contains(out, "prep (done)") || !strings.Contains(out, "eval (done)") {
		t.Errorf("berth show train does not list prep and eval:\n%s", out)
	}
	out, _, _ = d.cli("show", "train", "--json")
	var detail supervisor.JobDetail
	if err := json.Unmarshal([]byte(out), &detail); err != nil {
		t.Fatal(err)
	}
	if len(detail.Parents) != 1 || detail.Parents[0].Job != "prep" || !detail.Parents[0].Satisfied ||
		len(detail.Dependants) != 1 || detail.Dependants[0].Job != "eval" || detail.Dependants[0].State != "done" {
		t.Errorf("show --json: parents %+v, dependants %+v", detail.Parents, detail.Dependants)
	}

	// A plain restart of prep, same definition: nothing downstream runs.
	d.post("/v1/jobs/prep/restart")
	// (Were train to run after it, the next wait would see it.)
	d.waitOrder("prep to run again", "prep-broken", "prep", "train", "eval", "prep")
	d.waitState("prep", "done")

	// An edit of prep re-runs train and eval after it.
	d.write("1-prep.lua", step("prep", "prep2", 0, ""))
	d.waitOrder("the pipeline to run again after prep's edit", "prep-broken", "prep", "train", "eval", "prep", "prep2", "train", "eval")
	d.waitState("eval", "done")

	// An edit of eval re-runs eval alone.
	d.write("3-eval.lua", step("eval", "eval2", 0, `, after = { "train" }`))
	d.waitOrder("eval to run again after its edit", "prep-broken", "prep", "train", "eval", "prep", "prep2", "train", "eval", "eval2")
	d.waitState("eval", "done")
	for _, n := range []string{"prep", "train"} {
		if j, _ := d.job(n); j.State != "done" {
			t.Errorf("editing eval touched %s: %+v", n, j)
		}
	}
	before := d.order()

	// kill -9 and a new daemon: every job stays done.
	d.cmd.Process.Signal(syscall.SIGKILL)
	d.cmd.Wait()
	d.start(daemonOptions{args: []string{"--cpus", "4"}})
	// The barrier: each dependant has looked at its parents in this life
	// (the daemon's debug line, written once it has decided); one that
	// decided to run again is no longer done by then.
	d.waitLooked("train", 1)
	d.waitLooked("eval", 1)
	for _, n := range []string{"prep", "train", "eval"} {
		if j, _ := d.job(n); j.State != "done" {
			t.Errorf("after a kill -9, %s is %s, not done", n, j.State)
		}
	}
	if got := d.order(); strings.Join(got, " ") != strings.Join(before, " ") {
		t.Errorf("after a kill -9 jobs ran again: %q, was %q", got, before)
	}
	d.stop()
}

// TestDaemonDepsServiceAndIgnore: a service as a parent lets its
// dependants run once it runs; after_any lets a job run after a parent
// that failed; berth start --ignore-deps runs a held job once.
func TestDaemonDepsServiceAndIgnore(t *testing.T) {
	t.Parallel()
	d := newTestDaemon(t, map[string]string{
		"svc.lua":    service("db", `, restart = "always"`),
		"client.lua": step("client", "client", 0, `, after = "db"`),
		"flaky.lua":  step("flaky", "flaky", 4, ""),
		"report.lua": step("report", "report", 0, `, after_any = "flaky"`),
		"off.lua":    step("off", "off", 0, `, enabled = false`),
		"held.lua":   step("held", "held", 0, `, after = "off"`),
		"cycle.lua":  step("ping", "ping", 0, `, after = "pong"`) + "\n" + step("pong", "pong", 0, `, after = "ping"`),
	})
	d.start(daemonOptions{args: []string{"--cpus", "8"}})
	// A cycle makes its jobs invalid, saying so with file and line; the
	// rest of the set runs.
	for _, n := range []string{"ping", "pong"} {
		j := d.waitState(n, "invalid")
		if !strings.Contains(j.Why, "cycle.lua:") || !strings.Contains(j.Why, "after makes a cycle") {
			t.Errorf("%s: why %q", n, j.Why)
		}
	}
	d.waitState("client", "done")
	d.waitState("db", "running")
	// From history: the client's run started once the service's had.
	db, client := d.detail("db"), d.detail("client")
	if len(db.Runs) != 1 || len(client.Runs) != 1 || client.Runs[0].Start.Before(db.Runs[0].Start) || client.Runs[0].ID < db.Runs[0].ID {
		t.Errorf("runs of db %+v, of client %+v", db.Runs, client.Runs)
	}
	d.waitState("report", "done")
	if f, _ := d.job("flaky"); f.State != "failed" {
		t.Errorf("flaky: %+v", f)
	}
	held := d.waitJob("held", "held by a disabled parent", func(j supervisor.JobStatus) bool {
		return j.State == "waiting" && len(j.After) == 1 && j.After[0].State == "disabled"
	})
	if held.Run != 0 {
		t.Errorf("held ran: %+v", held)
	}
	out, errOut, code := d.cli("start", "held", "--ignore-deps")
	if code != exitOK {
		t.Fatalf("berth start --ignore-deps: exit %d: %s%s", code, out, errOut)
	}
	d.waitState("held", "done")
	d.waitLog(`ignore_deps=true`)
	if strings.Contains(strings.Join(d.order(), " "), "off") {
		t.Errorf("the disabled parent ran: %q", d.order())
	}
	d.stop()
}

// TestDaemonDepsUndeclaredParentHoldsWhatFollows: a job run past its
// parent that failed (--ignore-deps) runs again once that parent has run
// to done, and holds its own dependant meanwhile; removing the parent's
// file does not let the dependant run (trial AU: it ran, on the output of
// a job berth itself called out of date). Its file back, the parent runs,
// then the job, then its dependant, each once.
func TestDaemonDepsUndeclaredParentHoldsWhatFollows(t *testing.T) {
	t.Parallel()
	d := newTestDaemon(t, map[string]string{
		"pa.lua":   step("pa", "pa", 3, ""),
		"pipe.lua": step("ch", "ch", 0, `, after = "pa"`) + "\n" + step("gc", "gc", 0, `, after = "ch"`),
	})
	d.start(daemonOptions{args: []string{"--cpus", "4"}})
	d.waitState("pa", "failed")
	if out, errOut, code := d.cli("start", "ch", "--ignore-deps"); code != exitOK {
		t.Fatalf("berth start ch --ignore-deps: exit %d: %s%s", code, out, errOut)
	}
	d.waitState("ch", "done")
	held := func(what string) {
		t.Helper()
		gc := d.waitJob("gc", "held behind pa, "+what, func(j supervisor.JobStatus) bool {
			return j.State == "waiting" && len(j.After) == 1 && j.After[0].Job == "ch" && j.After[0].Behind == "pa"
		})
		if gc.Run != 0 {
			t.Errorf("gc ran, %s: %+v", what, gc)
		}
	}
	held("which failed")
	looked := d.looked("gc")
	if err := os.Rename(filepath.Join(d.jobs, "pa.lua"), filepath.Join(d.dir, "pa.lua")); err != nil {
		t.Fatal(err)
	}
	d.cli("reload")
	d.waitGone("pa")
	d.waitLooked("gc", looked+1)
	held("which no file declares")
	if got := d.order(); slices.Contains(got, "gc") {
		t.Errorf("gc ran with pa's file removed: %q", got)
	}

	d.write("pa.lua", step("pa", "pa", 0, ""))
	d.cli("reload")
	d.waitState("gc", "done")
	d.waitOrder("pa back, and succeeding", "pa", "ch", "pa", "ch", "gc")
	d.stop()
}

// TestDaemonDepsRunPastUndeclaredParent: a job run past a parent no file
// declares (--ignore-deps) holds its dependant until that parent is
// declared and has run to done, and then runs again itself first (trial
// AU: its record named no such parent, and its dependant ran at once).
func TestDaemonDepsRunPastUndeclaredParent(t *testing.T) {
	t.Parallel()
	d := newTestDaemon(t, map[string]string{
		"pipe.lua": step("ch", "ch", 0, `, after = "pa"`) + "\n" + step("gc", "gc", 0, `, after = "ch"`),
	})
	d.start(daemonOptions{args: []string{"--cpus", "4"}})
	d.waitJob("ch", "held by pa, which no file declares", func(j supervisor.JobStatus) bool {
		return j.State == "waiting" && len(j.After) == 1 && j.After[0].State == "unknown"
	})
	if out, errOut, code := d.cli("start", "ch", "--ignore-deps"); code != exitOK {
		t.Fatalf("berth start ch --ignore-deps: exit %d: %s%s", code, out, errOut)
	}
	d.waitState("ch", "done")
	gc := d.waitJob("gc", "held behind pa", func(j supervisor.JobStatus) bool {
		return j.State == "waiting" && len(j.After) == 1 && j.After[0].Job == "ch" && j.After[0].Behind == "pa"
	})
	if gc.Run != 0 {
		t.Errorf("gc ran past pa, which no file declares: %+v", gc)
	}
	if ch, _ := d.job("ch"); !strings.Contains(ch.Why, "once a job file declares pa and it succeeds") {
		t.Errorf("ch's why: %q, want it to say pa is to be declared (trial AV: \"it is new\")", ch.Why)
	}
	d.write("pa.lua", step("pa", "pa", 0, ""))
	d.cli("reload")
	d.waitState("gc", "done")
	d.waitOrder("pa declared, and succeeding", "ch", "pa", "ch", "gc")
	d.stop()
}

// TestCheckDeps: berth check validates the graph: a cycle is an error on
// each job in it, with its file and line and the whole cycle, and an
// unknown name has a suggestion.
func TestCheckDeps(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "pipe.lua"), []byte(`job "prep" { cmd = "true", after = "eval" }
job "train" { cmd = "true", after = "prep" }
job "eval" { cmd = "true", after = { "train" } }
job "report" { cmd = "true", after_any = "evall" }
`), 0o644); err != nil {
		t.Fatal(err)
	}
	out, _, code := berth(t, nil, "check", dir)
	if code != exitFailed {
		t.Errorf("exit %d, want %d", code, exitFailed)
	}
	for _, want := range []string{
		dir + `/pipe.lua:1: job "prep": after makes a cycle: prep → eval → train → prep`,
		dir + `/pipe.lua:2: job "train": after makes a cycle: train → prep → eval → train`,
		dir + `/pipe.lua:3: job "eval": after makes a cycle: eval → train → prep → eval`,
		dir + `/pipe.lua:4: job "report": field "after_any": job "evall" does not exist (did you mean "eval"?`,
		"4 errors",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("berth check does not say %q:\n%s", want, out)
		}
	}
}

// TestCheckPersonsDeps: in a person's file a bare name is their own job
// only (never an administrator's of that name); berth check resolves them
// as the daemon does.
func TestCheckPersonsDeps(t *testing.T) {
	needPeople(t)
	admin, spool, mine := checkDirs(t)
	if err := os.WriteFile(filepath.Join(admin, "fetch.lua"), []byte(`job "fetch" { cmd = "true" }`), 0o644); err != nil {
		t.Fatal(err)
	}
	u, _ := user.Lookup(alice)
	uid, _ := strconv.Atoi(u.Uid)
	path := filepath.Join(mine, "p.lua")
	if err := os.WriteFile(path, []byte(`job "prep" { cmd = "true", after = "fetch" }
job "a" { cmd = "true", after = { "prep", "b" } }
job "b" { cmd = "true", after = "a" }
`), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{path, mine} {
		if err := os.Chown(p, uid, -1); err != nil {
			t.Fatal(err)
		}
	}
	out, _, code := berth(t, map[string]string{"BERTH_USER_JOBS": spool}, "check", admin, mine)
	if code != exitFailed {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	for _, want := range []string{
		path + `:1: job "` + alice + `/prep": field "after": ` + alice + ` has no job "fetch" (berth jobs lists them); the job "fetch" is an administrator's`,
		path + `:2: job "` + alice + `/a": after makes a cycle: ` + alice + `/a → ` + alice + `/b → ` + alice + `/a`,
		path + `:3: job "` + alice + `/b": after makes a cycle: ` + alice + `/b → ` + alice + `/a → ` + alice + `/b`,
		"3 errors",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("berth check does not say %q:\n%s", want, out)
		}
	}
}

// detail is berth show NAME --json.
func (d *testDaemon) detail(name string) supervisor.JobDetail {
	d.t.Helper()
	out, errOut, code := d.cli("show", name, "--json")
	var detail supervisor.JobDetail
	if code != exitOK {
		d.t.Fatalf("berth show %s: exit %d: %s", name, code, errOut)
	}
	if err := json.Unmarshal([]byte(out), &detail); err != nil {
		d.t.Fatal(err)
	}
	return detail
}

// gated is a pipeline job that appends its tag to OUT/order, then runs
// until the file OUT/gate exists.
func gated(name, tag, gate, extra string) string {
	return fmt.Sprintf(`job %q { cmd = { "sh", "-c", "echo %s >> OUT/order; while [ ! -e OUT/%s ]; do sleep 0.02; done" }, cpus = 1 %s }`, name, tag, gate, extra)
}

// open creates OUT/name, which a gated job waits for.
func (d *testDaemon) open(name string) {
	d.t.Helper()
	if err := os.WriteFile(filepath.Join(d.out, name), nil, 0o644); err != nil {
		d.t.Fatal(err)
	}
}

// waitRuns waits until the jobs have run at least len(want) times in all,
// and until each of rest is done, then says whether they ran exactly as
// want says.
func (d *testDaemon) waitRuns(what string, want []string, rest ...string) {
	d.t.Helper()
	testkit.WaitFor(d.t, waitLong, what, func() bool {
		if len(d.order()) < len(want) {
			return false
		}
		for _, n := range rest {
			if j, _ := d.job(n); j.State != "done" {
				return false
			}
		}
		return true
	})
	if got := d.order(); strings.Join(got, " ") != strings.Join(want, " ") {
		d.t.Errorf("%s: ran %q, want %q", what, got, want)
	}
}

// looked is how many times job has looked at its parents in this life of
// the daemon (the debug line depsChanged writes once it has decided).
func (d *testDaemon) looked(job string) int {
	return strings.Count(d.logs.String(), "parents looked at: job="+job+" ")
}

// waitLooked waits until job has looked at its parents n times in this
// life of the daemon.
func (d *testDaemon) waitLooked(job string, n int) {
	d.t.Helper()
	testkit.WaitFor(d.t, waitLong, fmt.Sprintf("%s to look at its parents %d times", job, n), func() bool {
		return d.looked(job) >= n
	})
}

// TestDaemonDepsDiamond: eval after { prep, train }, train after prep. An
// edit of prep runs train and then eval, each once: eval never runs after
// the new prep and the old train, though prep's end wakes both at once.
func TestDaemonDepsDiamond(t *testing.T) {
	t.Parallel()
	d := newTestDaemon(t, map[string]string{
		"1-prep.lua":  step("prep", "prep", 0, ""),
		"2-train.lua": step("train", "train", 0, `, after = "prep"`),
		"3-eval.lua":  step("eval", "eval", 0, `, after = { "prep", "train" }`),
	})
	d.start(daemonOptions{args: []string{"--cpus", "4"}})
	want := []string{"prep", "train", "eval"}
	d.waitRuns("the pipeline to run", want, "prep", "train", "eval")
	// The race it guards against is one of timing: three edits.
	for _, tag := range []string{"prep2", "prep3", "prep4"} {
		d.write("1-prep.lua", step("prep", tag, 0, ""))
		want = append(want, tag, "train", "eval")
		d.waitRuns("the pipeline to run again after "+tag, want, "prep", "train", "eval")
	}
	d.stop()
}

// TestDaemonDepsBornWithParentsEdit: a job declared in the same save as
// an edit of its parent waits for the parent's new run; it ran at once, on
// the output of the parent's old definition, then again after the new
// one (trial AB). The race is one of timing: three rounds.
func TestDaemonDepsBornWithParentsEdit(t *testing.T) {
	t.Parallel()
	prep := func(tag string) string {
		return fmt.Sprintf(`job "prep" { cmd = { "sh", "-c", "sleep 0.2; echo %s >> OUT/order" }, cpus = 0 }`, tag)
	}
	d := newTestDaemon(t, map[string]string{"pipeline.lua": prep("prep")})
	d.start(daemonOptions{args: []string{"--cpus", "4"}})
	want := []string{"prep"}
	d.waitRuns("the first prep", want, "prep")
	for i := 1; i <= 3; i++ {
		kid, tag := fmt.Sprintf("kid%d", i), fmt.Sprintf("prep%d", i)
		d.write("pipeline.lua", prep(tag)+"\n"+fmt.Sprintf(`job %q { cmd = { "sh", "-c", "echo %s >> OUT/order" }, cpus = 0, after = "prep" }`, kid, kid))
		want = append(want, tag, kid)
		d.waitRuns(kid+" after "+tag, want, "prep", kid)
	}
	// Nothing ran twice meanwhile, nor runs again: the last kid is done
	// for the prep it ran after.
	if j, _ := d.job("kid3"); j.RunsAgainAfter != "" {
		t.Errorf("kid3: %+v", j)
	}
	d.stop()
	if got := d.order(); strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("ran %q, want %q", got, want)
	}
}

// TestDaemonDepsStartedMiddleKeepsBehind: p1 edited to fail, and p2,
// after it, started by a person, so that p2 waits for p1: p3, done after
// p2, is still shown to run again after p1 (trial AO: it was shown up to
// date, then ran again once p1 was mended).
func TestDaemonDepsStartedMiddleKeepsBehind(t *testing.T) {
	t.Parallel()
	chain := func(p1 string) string {
		return fmt.Sprintf(`job "p1" { cmd = { "sh", "-c", "echo 1 >> OUT/order; %s" }, cpus = 0 }`, p1) + "\n" +
			`job "p2" { cmd = { "sh", "-c", "echo 2 >> OUT/order" }, cpus = 0, after = "p1" }` + "\n" +
			`job "p3" { cmd = { "sh", "-c", "echo 3 >> OUT/order" }, cpus = 0, after = "p2" }`
	}
	d := newTestDaemon(t, map[string]string{"chain.lua": chain("exit 0")})
	d.start(daemonOptions{args: []string{"--cpus", "4"}})
	d.waitRuns("the chain", []string{"1", "2", "3"}, "p1", "p2", "p3")
	d.write("chain.lua", chain("exit 3"))
	d.waitState("p1", "failed")
	d.waitJob("p3", "behind p1", func(j supervisor.JobStatus) bool { return j.RunsAgainAfter == "p1" })
	if out, _, code := d.cli("start", "p2"); code != exitOK {
		t.Fatalf("berth start p2: exit %d\n%s", code, out)
	}
	d.waitState("p2", "waiting")
	if j, _ := d.job("p3"); j.State != "done" || j.RunsAgainAfter != "p1" {
		t.Errorf("p3 with p2 waiting for p1's new definition: %+v, want done, to run again after p1", j)
	}
	d.write("chain.lua", chain("true"))
	d.waitRuns("the chain again after p1's new definition", []string{"1", "2", "3", "1", "1", "2", "3"}, "p1", "p2", "p3")
}

// TestDaemonDepsGrandparentEdited: prep edited while train runs: train's
// run, which followed the old prep, ends done, and eval does not run on
// it; once prep's new run is done, train runs again, and eval once after
// it (trial AH: eval ran on the old train, then again). Then prep edited
// to fail, and back: a job declared meanwhile after train, held for
// prep's new definition, runs once that definition is undone, train's
// state not having changed.
func TestDaemonDepsGrandparentEdited(t *testing.T) {
	t.Parallel()
	const train = "\n" + `job "train" { cmd = { "sh", "-c", "echo t >> OUT/order; while [ ! -e OUT/T ]; do sleep 0.02; done" }, cpus = 0, after = "prep" }` +
		"\n" + `job "eval" { cmd = { "sh", "-c", "echo e >> OUT/order" }, cpus = 0, after = "train" }`
	prep := func(tag string, code int) string {
		return fmt.Sprintf(`job "prep" { cmd = { "sh", "-c", "echo %s >> OUT/order; while [ ! -e OUT/P ]; do sleep 0.02; done; exit %d" }, cpus = 0 }`, tag, code)
	}
	d := newTestDaemon(t, map[string]string{"pipeline.lua": prep("p1", 0) + train})
	d.start(daemonOptions{args: []string{"--cpus", "4"}})
	d.open("P")
	d.waitOrder("prep, then train running", "p1", "t")
	if err := os.Remove(filepath.Join(d.out, "P")); err != nil {
		t.Fatal(err)
	}
	d.write("pipeline.lua", prep("p2", 0)+train)
	d.waitOrder("prep's new run while train runs", "p1", "t", "p2")
	d.open("T")
	d.waitState("train", "done")
	d.waitJob("eval", "held until train runs again after prep", func(j supervisor.JobStatus) bool {
		return j.State == "waiting" && len(j.After) == 1 && !j.After[0].Satisfied && j.After[0].Behind == "prep"
	})
	d.open("P")
	d.waitRuns("train again after prep's new run, then eval once", []string{"p1", "t", "p2", "t", "e"}, "prep", "train", "eval")

	// prep edited to fail: report, declared then, waits for it.
	d.write("pipeline.lua", prep("p3", 1)+train)
	d.waitState("prep", "failed")
	d.write("pipeline.lua", prep("p3", 1)+train+"\n"+`job "report" { cmd = { "sh", "-c", "echo r >> OUT/order" }, cpus = 0, after = "train" }`)
	d.waitJob("report", "held for prep's new definition", func(j supervisor.JobStatus) bool {
		return j.State == "waiting" && len(j.After) == 1 && j.After[0].Behind == "prep"
	})
	// The edit undone: train's output is of prep's definition again, and
	// report runs on it (prep may run that definition again, failed as it
	// was: the same output); train and eval do not run again.
	d.write("pipeline.lua", prep("p2", 0)+train+"\n"+`job "report" { cmd = { "sh", "-c", "echo r >> OUT/order" }, cpus = 0, after = "train" }`)
	d.waitState("report", "done")
	d.waitState("prep", "done")
	if got := d.order(); !slices.Equal(got[:6], []string{"p1", "t", "p2", "t", "e", "p3"}) || slices.Contains(got[6:], "t") || slices.Contains(got[6:], "e") ||
		strings.Count(strings.Join(got, " "), "r") != 1 {
		t.Errorf("ran %q: train or eval ran again, or report not once", got)
	}
	d.stop()
}

// TestDaemonDepsArrayAfterArray: prep → sweep (an array) → sum (an
// array): an edit of prep runs each once more, and each index of sum
// looks at its parents a few times, not once for each index of sweep and
// each change (the review: N×M messages).
func TestDaemonDepsArrayAfterArray(t *testing.T) {
	t.Parallel()
	prep := func(tag string) string {
		return fmt.Sprintf(`job "prep" { cmd = { "sh", "-c", "echo %s >> OUT/order" }, cpus = 0 }`, tag)
	}
	const rest = "\n" + `job "sweep" { cmd = "true", cpus = 0, array = 20, after = "prep" }` +
		"\n" + `job "sum" { cmd = { "sh", "-c", "echo s$BERTH_ARRAY_INDEX >> OUT/order" }, cpus = 0, array = 20, after = "sweep" }`
	d := newTestDaemon(t, map[string]string{"pipeline.lua": prep("p1") + rest})
	d.start(daemonOptions{args: []string{"--cpus", "4"}})
	d.waitState("sum", "done")
	before := d.looked("sum[1]")
	d.write("pipeline.lua", prep("p2")+rest)
	d.waitJob("sum", "done again", func(j supervisor.JobStatus) bool {
		return j.State == "done" && len(d.order()) == 42
	})
	if n := d.looked("sum[1]") - before; n > 40 {
		t.Errorf("sum[1] looked at its parents %d times for one edit of prep, want a few", n)
	}
	d.stop()
}

// TestDaemonDepsBornWithArrayEdit: the same of an array parent, whose
// indices take the new definition each on its own.
func TestDaemonDepsBornWithArrayEdit(t *testing.T) {
	t.Parallel()
	sweep := func(tag string) string {
		return fmt.Sprintf(`job "sweep" { cmd = { "sh", "-c", "sleep 0.2; echo %s-$BERTH_ARRAY_INDEX >> OUT/order" }, cpus = 0, array = 2, max_parallel = 1 }`, tag)
	}
	d := newTestDaemon(t, map[string]string{"pipeline.lua": sweep("s0")})
	d.start(daemonOptions{args: []string{"--cpus", "4"}})
	want := []string{"s0-1", "s0-2"}
	d.waitRuns("the first sweep", want, "sweep")
	for i := 1; i <= 3; i++ {
		kid, tag := fmt.Sprintf("kid%d", i), fmt.Sprintf("s%d", i)
		d.write("pipeline.lua", sweep(tag)+"\n"+fmt.Sprintf(`job %q { cmd = { "sh", "-c", "echo %s >> OUT/order" }, cpus = 0, after = "sweep" }`, kid, kid))
		want = append(want, tag+"-1", tag+"-2", kid)
		d.waitRuns(kid+" after "+tag, want, "sweep", kid)
	}
	d.stop()
	if got := d.order(); strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("ran %q, want %q", got, want)
	}
}

// TestDaemonDepsReleasedInOrder: the jobs one parent's end lets run take
// their places in line together, in the order their file declares them
// (trial AH: dep2 before dep, as their goroutines happened to look).
func TestDaemonDepsReleasedInOrder(t *testing.T) {
	t.Parallel()
	jobs := `job "holder" { cmd = "sleep 600", cpus = 2 }
job "pre" { cmd = { "sh", "-c", "while [ ! -e OUT/go ]; do sleep 0.02; done" }, cpus = 0 }
`
	const n = 8
	for i := range n {
		jobs += fmt.Sprintf("job \"d%d\" { cmd = \"true\", cpus = 1, after = \"pre\" }\n", i+1)
	}
	d := newTestDaemon(t, map[string]string{"jobs.lua": jobs})
	d.start(daemonOptions{args: []string{"--cpus", "2"}})
	d.waitState("holder", "running")
	d.waitState("pre", "running")
	for i := range n {
		d.waitJob(fmt.Sprintf("d%d", i+1), "held by pre", func(j supervisor.JobStatus) bool { return j.State == "waiting" && len(j.After) > 0 })
	}
	// One declared later, in a file of its own that sorts first, comes
	// after them (the review: it came first, its place among those born
	// with it 0 as theirs began at 0).
	d.write("0-late.lua", `job "d0" { cmd = "true", cpus = 1, after = "pre" }`)
	d.waitJob("d0", "held by pre", func(j supervisor.JobStatus) bool { return j.State == "waiting" && len(j.After) > 0 })
	d.open("go")
	testkit.WaitFor(t, waitLong, "every d in the placer's queue", func() bool {
		s := d.status()
		in := 0
		for _, j := range s.Jobs {
			if j.QueuePosition != 0 {
				in++
			}
		}
		return in == n+1
	})
	for i := range n {
		if j, _ := d.job(fmt.Sprintf("d%d", i+1)); j.QueuePosition != i+1 {
			t.Errorf("d%d is %d in line, want %d", i+1, j.QueuePosition, i+1)
		}
	}
	if j, _ := d.job("d0"); j.QueuePosition != n+1 {
		t.Errorf("d0, declared later, is %d in line, want %d", j.QueuePosition, n+1)
	}
	d.stop()
}

// TestDaemonDepsReleasedCoreGoesToFirst: the core a parent frees as it
// ends, which lets five jobs run, goes to the first of them its file
// declares (trial AI: to whichever looked first).
func TestDaemonDepsReleasedCoreGoesToFirst(t *testing.T) {
	t.Parallel()
	jobs := `job "holder" { cmd = "sleep 600", cpus = 1 }
job "pre" { cmd = { "sh", "-c", "while [ ! -e OUT/go ]; do sleep 0.02; done" }, cpus = 1 }
`
	names := []string{"zeta", "d-e", "alpha", "k5", "d-a"}
	for _, n := range names {
		jobs += fmt.Sprintf("job %q { cmd = \"sleep 600\", cpus = 1, after = \"pre\" }\n", n)
	}
	d := newTestDaemon(t, map[string]string{"jobs.lua": jobs})
	d.start(daemonOptions{args: []string{"--cpus", "2"}})
	d.waitState("holder", "running")
	d.waitState("pre", "running")
	for _, n := range names {
		d.waitJob(n, "held by pre", func(j supervisor.JobStatus) bool { return j.State == "waiting" && len(j.After) > 0 })
	}
	d.open("go")
	d.waitState(names[0], "running")
	for i, n := range names[1:] {
		if j, _ := d.job(n); j.State != "waiting" || j.QueuePosition != i+1 {
			t.Errorf("%s: %s, %d in line; want waiting, %d in line", n, j.State, j.QueuePosition, i+1)
		}
	}
	d.stop()
}

// TestDaemonDepsRunAgain: a dependant running when its parent ends a new
// definition runs again after it; one that failed runs again once its
// parent ran a new definition to done; one in the placer's queue whose
// parent runs again leaves the queue and is held.
func TestDaemonDepsRunAgain(t *testing.T) {
	t.Parallel()
	d := newTestDaemon(t, map[string]string{
		"1-prep.lua":  step("prep", "prep", 0, ""),
		"2-train.lua": gated("train", "train", "go", `, after = "prep"`),
		"3-check.lua": `job "check" { cmd = { "sh", "-c", "echo check >> OUT/order; test -e OUT/good" }, cpus = 1, after = "prep" }`,
	})
	d.start(daemonOptions{args: []string{"--cpus", "4"}})
	d.waitState("check", "failed")
	d.waitState("train", "running")

	// prep runs a new definition to done while train runs, and makes
	// what check lacked.
	d.write("1-prep.lua", `job "prep" { cmd = { "sh", "-c", "echo prep2 >> OUT/order; touch OUT/good" }, cpus = 1 }`)
	d.waitJob("check", "check to run again after prep2", func(j supervisor.JobStatus) bool { return j.State == "done" })
	if j, _ := d.job("train"); j.State != "running" {
		t.Fatalf("train: %+v", j)
	}
	d.open("go")
	// The train that ran after the old prep ends, and runs again.
	testkit.WaitFor(t, waitLong, "train to run again after prep2", func() bool {
		return strings.Count(strings.Join(d.order(), " "), "train") == 2
	})
	d.waitState("train", "done")
	d.stop()
}

// TestDaemonDepsBornWithRestingParentsEdit: a parent whose edit leaves
// it as it was (stopped: the edit applies at its next start) lets a job
// declared in the same save run once it has taken the edit; the job was
// held until some later change of the parent (review).
func TestDaemonDepsBornWithRestingParentsEdit(t *testing.T) {
	t.Parallel()
	parent := func(tag string) string {
		return fmt.Sprintf(`job "p" { cmd = { "sh", "-c", "echo %s; exec sleep 600" }, cpus = 0 }`, tag)
	}
	d := newTestDaemon(t, map[string]string{"p.lua": parent("p0")})
	d.start(daemonOptions{})
	d.waitState("p", "running")
	d.cli("stop", "p")
	d.waitState("p", "stopped")
	for i := 1; i <= 3; i++ {
		kid := fmt.Sprintf("kid%d", i)
		d.write("p.lua", parent(fmt.Sprintf("p%d", i))+"\n"+step(kid, kid, 0, `, after_any = "p"`))
		d.waitState(kid, "done")
	}
	if j, _ := d.job("p"); j.State != "stopped" {
		t.Errorf("p: %+v", j)
	}
	d.stop()
}

// TestDaemonDepsStopDoneToRunAgain: a job done that runs again after its
// parent's new definition may be stopped: it rests stopped, rather than
// being said "already done" and running all the same (trial AB), and runs
// when it is started. A job done and up to date stays done.
func TestDaemonDepsStopDoneToRunAgain(t *testing.T) {
	t.Parallel()
	d := newTestDaemon(t, map[string]string{
		"1-prep.lua":  step("prep", "prep", 0, ""),
		"2-train.lua": step("train", "train", 0, `, after = "prep"`),
	})
	d.start(daemonOptions{args: []string{"--cpus", "4"}})
	d.waitRuns("the pipeline", []string{"prep", "train"}, "prep", "train")
	if out, _, code := d.cli("stop", "train"); code != exitOK || out != "train: already done (berth status shows it)\n" {
		t.Errorf("stop of train done and up to date: exit %d\n%s", code, out)
	}
	d.write("1-prep.lua", gated("prep", "prep2", "go", ""))
	d.waitJob("train", "train to run again after prep", func(j supervisor.JobStatus) bool { return j.RunsAgainAfter == "prep" })
	if out, _, code := d.cli("stop", "train"); code != exitOK || out != "train: stopped, so that it does not run again after its parents; berth start train runs it\n" {
		t.Errorf("stop of train to run again: exit %d\n%s", code, out)
	}
	if j := d.waitState("train", "stopped"); j.Why != "stopped" {
		t.Errorf("train held from running again: why %q", j.Why)
	}
	d.open("go")
	d.waitState("prep", "done")
	if j, _ := d.job("train"); j.State != "stopped" {
		t.Errorf("train after prep's new run: %+v", j)
	}
	d.cli("start", "train")
	d.waitRuns("train started", []string{"prep", "train", "prep2", "train"}, "train")
	d.stop()
}

// TestDaemonDepsQueueAndEdit: a job in the placer's queue whose parent runs again
// leaves the queue and is held; a held job whose after is removed runs.
func TestDaemonDepsQueueAndEdit(t *testing.T) {
	t.Parallel()
	d := newTestDaemon(t, map[string]string{
		"0-hog.lua":   gated("hog", "hog", "hog", ""),
		"1-prep.lua":  `job "prep" { cmd = { "sh", "-c", "echo prep >> OUT/order" }, cpus = 0 }`,
		"2-train.lua": step("train", "train", 0, `, after = "prep"`),
	})
	d.start(daemonOptions{args: []string{"--cpus", "1"}})
	d.waitState("hog", "running")
	d.waitState("prep", "done")
	d.waitJob("train", "train in the placer's queue", func(j supervisor.JobStatus) bool {
		return j.State == "waiting" && len(j.After) == 0 && j.Short != nil
	})
	d.write("1-prep.lua", `job "prep" { cmd = { "sh", "-c", "echo prep-broken >> OUT/order; exit 3" }, cpus = 0 }`)
	d.waitState("prep", "failed")
	d.waitJob("train", "train out of the queue, held by prep", func(j supervisor.JobStatus) bool {
		return j.State == "waiting" && len(j.After) == 1 && j.After[0].State == "failed"
	})
	d.open("hog")
	d.waitState("hog", "done")
	// Its after removed (an edit of policy alone): it runs.
	d.write("2-train.lua", step("train", "train", 0, ""))
	d.waitState("train", "done")
	// hog and the first prep start together, in either order.
	if got := d.order(); len(got) != 4 || got[2] != "prep-broken" || got[3] != "train" {
		t.Errorf("ran %q", got)
	}
	d.stop()
}

// TestDaemonDepsParentGone: a parent whose file goes away holds its
// dependants rather than making them invalid: a run keeps running, a done
// job stays done, a waiting one says the parent is not declared; the
// same file back runs nothing again.
func TestDaemonDepsParentGone(t *testing.T) {
	t.Parallel()
	d := newTestDaemon(t, map[string]string{
		"1-prep.lua":  step("prep", "prep", 0, ""),
		"2-train.lua": gated("train", "train", "go", `, after = "prep"`),
	})
	d.start(daemonOptions{args: []string{"--cpus", "4"}})
	d.waitState("train", "running")
	if err := os.Remove(filepath.Join(d.jobs, "1-prep.lua")); err != nil {
		t.Fatal(err)
	}
	d.write("3-eval.lua", step("eval", "eval", 0, `, after = "prep"`))
	eval := d.waitJob("eval", "eval held by a parent not declared", func(j supervisor.JobStatus) bool {
		return j.State == "waiting" && len(j.After) == 1 && j.After[0].State == "unknown"
	})
	if eval.Run != 0 {
		t.Errorf("eval ran: %+v", eval)
	}
	st := d.status()
	found := false
	for _, p := range st.Problems {
		if p.Code == "unknown_job" && p.Job == "train" && strings.HasSuffix(p.File, "2-train.lua") && p.Line > 0 {
			found = true
		}
	}
	if !found {
		t.Errorf("no unknown_job problem for train with file and line: %+v", st.Problems)
	}
	if j, _ := d.job("train"); j.State != "running" {
		t.Fatalf("train, its parent gone: %+v", j)
	}
	out, _, _ := d.cli("status")
	if !strings.Contains(out, "after prep, which is not declared (declare it") {
		t.Errorf("berth status does not say prep is not declared:\n%s", out)
	}
	d.open("go")
	d.waitState("train", "done")

	// The same file back: prep is done as it was, eval runs, train not.
	looked := d.looked("train")
	d.write("1-prep.lua", step("prep", "prep", 0, ""))
	d.waitState("eval", "done")
	d.waitLooked("train", looked+1)
	if got := strings.Join(d.order(), " "); got != "prep train eval" {
		t.Errorf("ran %q", got)
	}
	if j, _ := d.job("train"); j.State != "done" {
		t.Errorf("train: %+v", j)
	}
	d.stop()
}

// TestDaemonDepsFailedAcrossRestart: what a failed run was run after is
// kept with the run, so that after a daemon restart it still runs again
// once its parent runs a new definition to done.
func TestDaemonDepsFailedAcrossRestart(t *testing.T) {
	t.Parallel()
	d := newTestDaemon(t, map[string]string{
		"1-prep.lua":  step("prep", "prep", 0, ""),
		"3-check.lua": `job "check" { cmd = { "sh", "-c", "echo check >> OUT/order; test -e OUT/good" }, cpus = 1, after = "prep" }`,
	})
	d.start(daemonOptions{args: []string{"--cpus", "4"}})
	d.waitState("check", "failed")
	d.cmd.Process.Signal(syscall.SIGKILL)
	d.cmd.Wait()
	d.start(daemonOptions{args: []string{"--cpus", "4"}})
	d.waitLooked("check", 1)
	if j, _ := d.job("check"); j.State != "failed" {
		t.Fatalf("check after a restart: %+v", j)
	}
	d.write("1-prep.lua", `job "prep" { cmd = { "sh", "-c", "echo prep2 >> OUT/order; touch OUT/good" }, cpus = 1 }`)
	d.waitState("check", "done")
	if got := strings.Join(d.order(), " "); got != "prep check prep2 check" {
		t.Errorf("ran %q", got)
	}
	d.stop()
}
