package main

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/berthd/berth/supervisor"
	"github.com/berthd/berth/supervisor/testkit"
)

// halfFails is an array of six whose odd indices fail, each saying which
// it is on its output.
const halfFails = `job "sweep" { cmd = { "/bin/sh", "-c", "echo index $BERTH_ARRAY_INDEX; test $((BERTH_ARRAY_INDEX % 2)) -eq 0" }, cpus = 1, array = 6 }`

// waitArray waits until every run of array name has ended, runs in all,
// and its indices stand as counts say.
func (d *testDaemon) waitArray(name string, runs int, counts map[string]int) supervisor.JobStatus {
	d.t.Helper()
	testkit.WaitFor(d.t, waitLong, name+" to have run "+count(runs, "run"), func() bool {
		h := d.history(name)
		return len(h) == runs && !slices.ContainsFunc(h, func(r supervisor.RunView) bool { return r.End == nil })
	})
	return d.waitJob(name, fmt.Sprintf("with its indices by state %v", counts), func(j supervisor.JobStatus) bool {
		if j.Array == nil || len(j.Array.Counts) != len(counts) {
			return false
		}
		for s, n := range counts {
			if j.Array.Counts[s] != n {
				return false
			}
		}
		return true
	})
}

// TestDaemonArrayClient: berth logs ARRAY --index N reads that index's
// output, and berth logs ARRAY is refused with the sentence that names
// --index; berth status writes the array as one line; berth restart ARRAY
// --failed restarts its failed indices and no other, says how many, and
// says so when none failed; --failed on a job that is not an array
// restarts nothing.
func TestDaemonArrayClient(t *testing.T) {
	t.Parallel()
	d := newTestDaemon(t, map[string]string{
		"sweep.lua": halfFails,
		"plain.lua": `job "plain" { cmd = { "true" }, cpus = 1 }`,
		"one.lua":   `job "one" { cmd = { "/bin/sh", "-c", "echo index $BERTH_ARRAY_INDEX" }, cpus = 1, array = { from = 5, to = 5 } }`,
	})
	d.start(daemonOptions{args: []string{"--cpus", "4"}})
	d.waitState("plain", "done")
	// An array of one index has one output: berth logs ARRAY is its.
	d.waitArray("one", 1, map[string]int{"done": 1})
	if out, errOut, code := d.cli("logs", "one"); code != exitOK || strings.TrimSpace(withoutHeader(t, out)) != "index 5" {
		t.Errorf("berth logs one: exit %d, %q, stderr %q", code, out, errOut)
	}
	sweep := d.waitArray("sweep", 6, map[string]int{"done": 3, "failed": 3})
	if sweep.State != "failed" || sweep.Array.Size != 6 {
		t.Errorf("sweep: %+v", sweep)
	}

	out, errOut, code := d.cli("logs", "sweep", "--index", "2")
	if code != exitOK || strings.TrimSpace(withoutHeader(t, out)) != "index 2" {
		t.Errorf("berth logs sweep --index 2: exit %d, %q, stderr %q", code, out, errOut)
	}
	out, errOut, code = d.cli("logs", "sweep")
	if code != exitFailed || out != "" || !strings.Contains(errOut, "sweep is an array") || !strings.Contains(errOut, "berth logs sweep --index 1") {
		t.Errorf("berth logs sweep: exit %d, %q, stderr %q", code, out, errOut)
	}
	out, errOut, code = d.cli("logs", "plain", "--index", "2")
	if code != exitFailed || !strings.Contains(errOut, "plain is not an array") {
		t.Errorf("berth logs plain --index 2: exit %d, %q, stderr %q", code, out, errOut)
	}
	out, errOut, code = d.cli("logs", "sweep", "--index", "7")
	if code != exitFailed || !strings.Contains(errOut, "array sweep has no index 7: its indices are 1 to 6") {
		t.Errorf("berth logs sweep --index 7: exit %d, %q, stderr %q", code, out, errOut)
	}

	out, _, _ = d.cli("status")
	if !strings.Contains(out, "3 done · 3 failed") {
		t.Errorf("berth status does not count sweep's indices:\n%s", out)
	}
	out, _, _ = d.cli("jobs")
	if !slices.ContainsFunc(strings.Split(out, "\n"), func(l string) bool {
		f := strings.Fields(l)
		return len(f) == 8 && f[0] == "sweep" && f[1] == "failed" && f[7] == "6"
	}) {
		t.Errorf("berth jobs has no line for sweep, failed, of 6 indices:\n%s", out)
	}

	// --failed on a job that is not an array restarts nothing.
	out, errOut, code = d.cli("restart", "plain", "--failed")
	if code != exitFailed || !strings.Contains(errOut, "plain is not an array") {
		t.Errorf("berth restart plain --failed: exit %d, %q, stderr %q", code, out, errOut)
	}

	out, errOut, code = d.cli("restart", "sweep", "--failed")
	if code != exitOK || strings.TrimSpace(out) != "restarting 3 failed indices of sweep (berth status shows them)" {
		t.Fatalf("berth restart sweep --failed: exit %d, %q, stderr %q", code, out, errOut)
	}
	d.waitArray("sweep", 9, map[string]int{"done": 3, "failed": 3})
	var again []string
	for _, r := range d.history("sweep")[:3] {
		again = append(again, r.Job)
	}
	slices.Sort(again)
	if strings.Join(again, " ") != "sweep[1] sweep[3] sweep[5]" {
		t.Errorf("berth restart sweep --failed ran %q, want the odd indices", again)
	}
	if h := d.history("plain"); len(h) != 1 {
		t.Errorf("plain ran %d times; --failed restarted it", len(h))
	}
	out, _, _ = d.cli("history", "sweep", "--index", "3")
	if lines := strings.Split(strings.TrimSpace(out), "\n"); len(lines) != 3 || strings.Count(out, "sweep[3]") != 2 {
		t.Errorf("berth history sweep --index 3 is not index 3's two runs:\n%s", out)
	}
	// --index names one index wherever a job is named.
	if out, errOut, code := d.cli("show", "sweep", "--index", "5"); code != exitOK || !strings.HasPrefix(out, "sweep[5] — failed") {
		t.Errorf("berth show sweep --index 5: exit %d\n%s%s", code, out, errOut)
	}
	if out, _, code := d.cli("start", "sweep", "--index", "2"); code != exitOK || !strings.HasPrefix(out, "sweep[2]: ") {
		t.Errorf("berth start sweep --index 2: exit %d, %q", code, out)
	}
	if _, errOut, code := d.cli("stop", "sweep", "--index", "99"); code != exitFailed || !strings.Contains(errOut, "has no index 99") {
		t.Errorf("berth stop sweep --index 99: exit %d, %q", code, errOut)
	}
	if _, errOut, code := d.cli("show", "plain", "--index", "1"); code != exitFailed || !strings.Contains(errOut, "not an array") {
		t.Errorf("berth show plain --index 1: exit %d, %q", code, errOut)
	}
	d.waitArray("sweep", 10, map[string]int{"done": 3, "failed": 3})
	out, _, _ = d.cli("show", "sweep")
	for _, want := range []string{"indices by state", "failed  3  1,3,5", "done    3  2,4,6", "max_parallel  no bound", "sweep[5]"} {
		if !strings.Contains(out, want) {
			t.Errorf("berth show sweep lacks %q:\n%s", want, out)
		}
	}

	// Once none has failed, --failed has nothing to do, which is no error.
	d.write("sweep.lua", strings.Replace(halfFails, "test $((BERTH_ARRAY_INDEX % 2)) -eq 0", "true", 1))
	d.waitArray("sweep", 16, map[string]int{"done": 6}) // 9, the start of sweep[2], and 6 of the new definition
	out, errOut, code = d.cli("restart", "sweep", "--failed")
	if code != exitOK || !strings.HasPrefix(out, "no failed index in sweep") {
		t.Errorf("berth restart sweep --failed, none failed: exit %d, %q, stderr %q", code, out, errOut)
	}
	// Every index is done: a stop has nothing to do, and says so, as of a
	// job done.
	out, _, code = d.cli("stop", "sweep")
	if code != exitOK || strings.TrimSpace(out) != "sweep: already done (berth status shows it)" {
		t.Errorf("berth stop sweep: exit %d, %q", code, out)
	}
	d.stop()
}

// TestIndexSpellings: JOB --index N is JOB[N], as the help says, also
// when there is no such index: the same sentence (the daemon's), exit
// code and --json code (trial AT: --index said "failed", in words of its
// own, where JOB[N] said no_such_job).
func TestIndexSpellings(t *testing.T) {
	t.Parallel()
	d := newTestDaemon(t, map[string]string{
		"arr.lua":   `job "arr" { cmd = { "true" }, cpus = 0, array = 3 }`,
		"plain.lua": `job "plain" { cmd = { "true" }, cpus = 0 }`,
	})
	d.start(daemonOptions{})
	d.waitState("plain", "done")
	// (Each call is a client of its own, whose connection stays open a
	// while: few enough that the daemon's bound per uid is not reached.)
	for _, cmd := range []string{"show", "history", "logs", "stop"} {
		for _, job := range []string{"arr", "plain", "nothing"} {
			flagged := []string{cmd, job, "--index", "9"}
			named := []string{cmd, job + "[9]"}
			if cmd != "logs" {
				flagged, named = append(flagged, "--json"), append(named, "--json")
			}
			out, errOut, code := d.cli(flagged...)
			out2, errOut2, code2 := d.cli(named...)
			if code != exitFailed || out != out2 || errOut != errOut2 || code != code2 {
				t.Errorf("berth %s: exit %d\n%s%s\nberth %s: exit %d\n%s%s", strings.Join(flagged, " "), code, out, errOut,
					strings.Join(named, " "), code2, out2, errOut2)
			}
		}
	}
}
