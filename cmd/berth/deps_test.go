package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
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
	testkit.WaitFor(d.t, waitLong, what, func() bool { return strings.Join(d.order(), " ") == strings.Join(want, " ") })
}

// TestDaemonPipeline: prepare → train → evaluate runs in order; a failing
// parent holds its dependants with a reason that says how it failed; the
// fix runs them; an edit of the first re-runs the pipeline downstream of
// it, an edit of the last only the last; a kill -9 of the daemon re-runs
// nothing.
func TestDaemonPipeline(t *testing.T) {
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
	if code != exitOK || !strings.Contains(out, "after prep, which failed (exit 3); runs when prep succeeds") {
		t.Errorf("berth status does not say why train waits (exit %d):\n%s", code, out)
	}
	out, _, _ = d.cli("status", "--json")
	if !strings.Contains(out, `"exit_code": 3`) && !strings.Contains(out, `"exit_code":3`) {
		t.Errorf("berth status --json has no exit_code 3:\n%s", out)
	}
	if e, _ := d.job("eval"); e.State != "waiting" || len(e.After) != 1 || e.After[0].Job != "train" {
		t.Errorf("eval: %+v", e)
	}

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
	// Two reloads: the jobs have looked at their parents (posted at the
	// first) by the time the second is answered.
	d.post("/v1/reload")
	d.post("/v1/reload")
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
	d := newTestDaemon(t, map[string]string{
		"svc.lua":    service("db", `, restart = "always"`),
		"client.lua": step("client", "client", 0, `, after = "db"`),
		"flaky.lua":  step("flaky", "flaky", 4, ""),
		"report.lua": step("report", "report", 0, `, after_any = "flaky"`),
		"off.lua":    step("off", "off", 0, `, enabled = false`),
		"held.lua":   step("held", "held", 0, `, after = "off"`),
	})
	d.start(daemonOptions{args: []string{"--cpus", "8"}})
	d.waitState("client", "done")
	d.waitState("db", "running")
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
