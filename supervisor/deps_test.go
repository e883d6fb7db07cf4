package supervisor

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/berthd/berth/luaapi"
	"github.com/berthd/berth/supervisor/store"
	"github.com/berthd/berth/supervisor/testkit"
)

// TestSatisfied walks every state of a parent, batch and service, for
// after and after_any.
func TestSatisfied(t *testing.T) {
	t.Parallel()
	type want struct{ after, afterAny, service, serviceAny bool }
	// A service satisfies after_any once it rests: stopped, or given up.
	table := map[store.State]want{
		store.StateDone:    {after: true, afterAny: true, serviceAny: true},
		store.StateFailed:  {afterAny: true, serviceAny: true},
		store.StateStopped: {afterAny: true, serviceAny: true},
		store.StateRunning: {service: true, serviceAny: true},
	}
	for _, s := range allStates {
		w := table[s]
		if got := satisfied(depAfter, s, false); got != w.after {
			t.Errorf("after a batch job %s: %v, want %v", s, got, w.after)
		}
		if got := satisfied(depAfterAny, s, false); got != w.afterAny {
			t.Errorf("after_any a batch job %s: %v, want %v", s, got, w.afterAny)
		}
		if got := satisfied(depAfter, s, true); got != w.service {
			t.Errorf("after a service %s: %v, want %v", s, got, w.service)
		}
		if got := satisfied(depAfterAny, s, true); got != w.serviceAny {
			t.Errorf("after_any a service %s: %v, want %v", s, got, w.serviceAny)
		}
	}
}

// TestGate: one unsatisfied parent holds the job.
func TestGate(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		facts []Dependency
		want  bool
	}{
		{nil, true},
		{[]Dependency{{Job: "a", Satisfied: true}}, true},
		{[]Dependency{{Job: "a", Satisfied: true}, {Job: "b"}}, false},
		{[]Dependency{{Job: "a", State: "unknown"}}, false},
	} {
		if got := gate(c.facts); got != c.want {
			t.Errorf("gate(%+v) = %v", c.facts, got)
		}
	}
}

// TestDoneRecord: a job without batch parents records its process
// fingerprint alone, as before dependencies; a parent that ran a new
// definition undoes done; parents added or removed apply in place.
func TestDoneRecord(t *testing.T) {
	t.Parallel()
	if got := doneMark("fp", nil); got != "fp" {
		t.Errorf("no parents: %q", got)
	}
	rec := doneMark("fp", map[string]string{"prep": "p1", "fetch": "f1"})
	if again := doneMark("fp", map[string]string{"fetch": "f1", "prep": "p1"}); again != rec {
		t.Errorf("the record depends on map order: %q, %q", rec, again)
	}
	// A parent's record that names parents of its own does not nest.
	nested := doneMark("fp", map[string]string{"train": doneMark("t", map[string]string{"prep": "p"})})
	if ok, _ := stillDone(nested, "fp", map[string]string{"train": doneMark("t", map[string]string{"prep": "p"})}); !ok {
		t.Errorf("a nested record %q is not still done", nested)
	}

	for _, c := range []struct {
		name    string
		fp      string
		parents map[string]string
		done    bool
		keep    string
	}{
		{"unchanged", "fp", map[string]string{"prep": "p1", "fetch": "f1"}, true, rec},
		{"own edit", "fp2", map[string]string{"prep": "p1", "fetch": "f1"}, false, rec},
		{"parent ran a new definition", "fp", map[string]string{"prep": "p2", "fetch": "f1"}, false, rec},
		{"parent not done yet", "fp", map[string]string{"prep": "", "fetch": "f1"}, false, rec},
		{"parent removed", "fp", map[string]string{"prep": "p1"}, true, doneMark("fp", map[string]string{"prep": "p1"})},
		{"parent added", "fp", map[string]string{"prep": "p1", "fetch": "f1", "more": "m1"}, true,
			doneMark("fp", map[string]string{"prep": "p1", "fetch": "f1", "more": "m1"})},
		{"all removed", "fp", nil, true, "fp"},
	} {
		done, keep := stillDone(rec, c.fp, c.parents)
		if done != c.done || keep != c.keep {
			t.Errorf("%s: (%v, %q), want (%v, %q)", c.name, done, keep, c.done, c.keep)
		}
	}
	// A record from before dependencies, and a job that gains after.
	if ok, keep := stillDone("fp", "fp", map[string]string{"prep": "p1"}); !ok || keep != doneMark("fp", map[string]string{"prep": "p1"}) {
		t.Errorf("gaining after: (%v, %q)", ok, keep)
	}

	// Each parent the record names, read back; a name that only begins
	// or ends like one, or a record without parents, names none.
	two := doneMark("fp", map[string]string{"prep": "p1", "prep2": "p2"})
	for _, c := range []struct {
		record, name, want string
		named              bool
	}{
		{two, "prep", digest("p1"), true},
		{two, "prep2", digest("p2"), true},
		{two, "pre", "", false},
		{two, "fp", "", false},
		{"fp", "prep", "", false},
		{"", "prep", "", false},
	} {
		if got, named := recordParent(c.record, c.name); got != c.want || named != c.named {
			t.Errorf("recordParent(%q, %q) = (%q, %v), want (%q, %v)", c.record, c.name, got, named, c.want, c.named)
		}
	}
}

// TestFactOf: what a dependant is told of a parent: how its last run
// ended only where it has ended, and whether it lets the dependant run.
func TestFactOf(t *testing.T) {
	t.Parallel()
	batch := &luaapi.Job{Restart: luaapi.RestartNo}
	svc := &luaapi.Job{Restart: luaapi.RestartAlways}
	exit3 := lastEnd{known: true, code: 3, reason: store.ReasonFailed}
	for _, c := range []struct {
		name      string
		kind      string
		v         jobView
		exit      int // -1: none
		signal    string
		satisfied bool
	}{
		{"failed, after", depAfter, jobView{Def: batch, State: store.StateFailed, LastEnd: exit3}, 3, "", false},
		{"failed, after_any", depAfterAny, jobView{Def: batch, State: store.StateFailed, LastEnd: exit3}, 3, "", true},
		{"killed", depAfter, jobView{Def: batch, State: store.StateFailed,
			LastEnd: lastEnd{known: true, signal: "SIGKILL", reason: store.ReasonFailed}}, -1, "SIGKILL", false},
		{"running again after a failure", depAfter, jobView{Def: batch, State: store.StateRunning, LastEnd: exit3}, -1, "", false},
		{"done", depAfter, jobView{Def: batch, State: store.StateDone, LastEnd: lastEnd{known: true, reason: store.ReasonExited}}, 0, "", true},
		{"failed, end unknown", depAfter, jobView{Def: batch, State: store.StateFailed}, -1, "", false},
		{"service running", depAfter, jobView{Def: svc, State: store.StateRunning}, -1, "", true},
		{"service in backoff", depAfterAny, jobView{Def: svc, State: store.StateBackoff, LastEnd: exit3}, -1, "", false},
		// Handed a new definition it has not taken: about to run it.
		{"done, redefined", depAfter, jobView{Def: batch, State: store.StateDone, LastEnd: lastEnd{known: true, reason: store.ReasonExited}, Redefining: true}, 0, "", false},
		{"failed, redefined, after_any", depAfterAny, jobView{Def: batch, State: store.StateFailed, LastEnd: exit3, Redefining: true}, 3, "", false},
		{"service running, redefined", depAfter, jobView{Def: svc, State: store.StateRunning, Redefining: true}, -1, "", true},
	} {
		f := factOf("prep", c.kind, c.v)
		exit := -1
		if f.ExitCode != nil {
			exit = *f.ExitCode
		}
		if exit != c.exit || f.Signal != c.signal || f.Satisfied != c.satisfied || f.Job != "prep" || f.Kind != c.kind ||
			f.State != c.v.State.String() || f.Service != (c.v.Def == svc) {
			t.Errorf("%s: %+v (exit %d)", c.name, f, exit)
		}
	}
}

// TestParentsBehind: an after parent that is done satisfies the edge only
// while it is up to date with its own parents, all the way up. a → b → c
// → d with d after { a, c }: when a has run a new definition and b has
// not run again since, c is behind (through b) although c's own record
// matches b, and d is held; once b and c have run again, d may run.
func TestParentsBehind(t *testing.T) {
	t.Parallel()
	defs := map[string]*luaapi.Job{
		"a": {Name: "a"},
		"b": {Name: "b", After: []string{"a"}},
		"c": {Name: "c", After: []string{"b"}},
		"d": {Name: "d", After: []string{"a", "c"}},
	}
	g := &depGraph{jobs: map[string]*job{}, dependants: map[string][]string{}}
	done := func(name, record string) {
		g.jobs[name] = &job{name: name, v: jobView{Def: defs[name], State: store.StateDone, DoneFP: record}}
	}
	a1 := doneMark("fa", nil)
	b1 := doneMark("fb", map[string]string{"a": a1})
	c1 := doneMark("fc", map[string]string{"b": b1})
	done("a", a1)
	done("b", b1)
	done("c", c1)
	if facts := parentsOf(g, defs["d"]); !gate(facts) {
		t.Fatalf("all up to date, d is held: %+v", facts)
	}

	// a runs a new definition to done: b and c are behind it.
	a2 := doneMark("fa2", nil)
	done("a", a2)
	facts := parentsOf(g, defs["d"])
	if gate(facts) {
		t.Fatalf("c is behind a new run of a, d is let run: %+v", facts)
	}
	if !facts[0].Satisfied || facts[0].Behind != "" {
		t.Errorf("a: %+v", facts[0])
	}
	if facts[1].Satisfied || facts[1].Behind != "b" {
		t.Errorf("c: %+v, want behind b", facts[1])
	}

	// b has run again after a; c not yet: c itself is behind.
	b2 := doneMark("fb", map[string]string{"a": a2})
	done("b", b2)
	if facts := parentsOf(g, defs["d"]); gate(facts) || facts[1].Behind != "c" {
		t.Errorf("b ran again, c not: %+v", facts)
	}

	// c has run again: d may run.
	done("c", doneMark("fc", map[string]string{"b": b2}))
	if facts := parentsOf(g, defs["d"]); !gate(facts) {
		t.Errorf("all ran again, d is held: %+v", facts)
	}

	// A service upstream never makes anyone behind; after_any is not
	// looked through.
	defs["b"].Restart = luaapi.RestartAlways
	done("a", doneMark("fa3", nil))
	if facts := parentsOf(g, defs["d"]); !gate(facts) {
		t.Errorf("a service between a and c: %+v", facts)
	}
}

// TestRenewing: a job done is out of date while a job at or upstream of
// its parents runs, or waits to run, a definition other than the one its
// done run followed; not while one runs again as it was (berth restart),
// and not once the chain has run again.
func TestRenewing(t *testing.T) {
	t.Parallel()
	defs := map[string]*luaapi.Job{
		"a": {Name: "a", Cmd: []string{"true"}},
		"b": {Name: "b", Cmd: []string{"true"}, After: []string{"a"}},
		"c": {Name: "c", Cmd: []string{"true"}, After: []string{"b"}},
	}
	g := &depGraph{jobs: map[string]*job{}, dependants: map[string][]string{}}
	set := func(name string, state store.State, record string) {
		g.jobs[name] = &job{name: name, v: jobView{Def: defs[name], State: state, DoneFP: record}}
	}
	renewing := func(name string) string { return g.renewing(name, map[string]string{}) }
	fp := func(name string) string { return defs[name].ProcessFingerprint() }
	a1 := doneMark(fp("a"), nil)
	b1 := doneMark(fp("b"), map[string]string{"a": a1})
	set("a", store.StateDone, a1)
	set("b", store.StateDone, b1)
	set("c", store.StateDone, doneMark(fp("c"), map[string]string{"b": b1}))
	if r := renewing("c"); r != "" {
		t.Errorf("all up to date: c renews after %q", r)
	}
	// a runs again as it was: nothing downstream runs again.
	set("a", store.StateRunning, a1)
	if r := renewing("c"); r != "" {
		t.Errorf("a restarted as it was: c renews after %q", r)
	}
	// a's definition edited, its run under way, waiting, or come to rest
	// short of done: b and c are out of date, after a.
	defs["a"] = &luaapi.Job{Name: "a", Cmd: []string{"false"}}
	for _, st := range []store.State{store.StateWaiting, store.StateRunning, store.StateBackoff, store.StateFailed, store.StateStopped} {
		set("a", st, a1)
		if rb, rc := renewing("b"), renewing("c"); rb != "a" || rc != "a" {
			t.Errorf("a %s a new definition: b renews after %q, c after %q; want a", st, rb, rc)
		}
	}
	// a done anew, b running again after it: c is out of date after b.
	a2 := doneMark(fp("a"), nil)
	set("a", store.StateDone, a2)
	set("b", store.StateRunning, b1)
	if r := renewing("c"); r != "b" {
		t.Errorf("b runs again after a's new run: c renews after %q, want b", r)
	}
	// b done again: c is running itself, and nothing is out of date.
	b2 := doneMark(fp("b"), map[string]string{"a": a2})
	set("b", store.StateDone, b2)
	set("c", store.StateDone, doneMark(fp("c"), map[string]string{"b": b2}))
	if r := renewing("c"); r != "" {
		t.Errorf("all ran again: c renews after %q", r)
	}
	// A service parent is not looked at.
	defs["b"].Restart = luaapi.RestartAlways
	set("b", store.StateRunning, b2)
	if r := renewing("c"); r != "" {
		t.Errorf("after a service: c renews after %q", r)
	}
}

// TestUpstreamHold: a job whose parent waits for a parent that failed
// says which job upstream holds it, however far up, as the graph is now.
func TestUpstreamHold(t *testing.T) {
	t.Parallel()
	d, _ := runDaemon(t, `job "fp" { cmd = "exit 3", cpus = 0 }
job "fc" { cmd = "true", cpus = 0, after = "fp" }
job "fgc" { cmd = "true", cpus = 0, after = "fc" }
job "ffgc" { cmd = "true", cpus = 0, after_any = "fgc" }`, nil)
	waitJob(t, d, "fp", "failed", func(js JobStatus) bool { return js.State == "failed" })
	for _, name := range []string{"fgc", "ffgc"} {
		var js JobStatus
		testkit.WaitFor(t, 20*time.Second, name+" held upstream by fp", func() bool {
			for _, j := range d.Status().Jobs {
				if j.Name == name {
					js = j
				}
			}
			return len(js.After) == 1 && js.After[0].Upstream != nil
		})
		if up := js.After[0].Upstream; up.Job != "fp" || up.State != "failed" || up.ExitCode == nil || *up.ExitCode != 3 {
			t.Errorf("%s: upstream %+v, want fp, failed with exit 3", name, up)
		}
	}
}

// TestStatusAfterShown: the status lists at most afterShown of a waiting
// job's parents, those that hold it first, and how many it left out.
func TestStatusAfterShown(t *testing.T) {
	t.Parallel()
	var src strings.Builder
	var names []string
	for i := 1; i <= 12; i++ {
		disabled := i > 2 // p1 and p2 run, to done
		fmt.Fprintf(&src, "job \"p%d\" { cmd = \"true\", cpus = 0, enabled = %v }\n", i, !disabled)
		names = append(names, fmt.Sprintf("%q", fmt.Sprintf("p%d", i)))
	}
	fmt.Fprintf(&src, "job \"kid\" { cmd = \"true\", cpus = 0, after = { %s } }\n", strings.Join(names, ", "))
	d, _ := runDaemon(t, src.String(), nil)
	for _, p := range []string{"p1", "p2"} {
		waitJob(t, d, p, "done", func(js JobStatus) bool { return js.State == "done" })
	}
	js := waitJob(t, d, "kid", "waiting for its parents", func(js JobStatus) bool {
		return js.State == "waiting" && js.After != nil && !slices.ContainsFunc(js.After, func(f Dependency) bool { return f.Job == "p1" && !f.Satisfied })
	})
	if len(js.After) != afterShown || js.AfterLeftOut != 12-afterShown {
		t.Fatalf("kid's after: %d listed, %d left out; want %d and %d", len(js.After), js.AfterLeftOut, afterShown, 12-afterShown)
	}
	for _, f := range js.After {
		if f.Satisfied {
			t.Errorf("%s, which lets kid run, is listed before a parent that holds it", f.Job)
		}
	}
}

// TestParentMoved: what a dependant's record holds of a parent against
// the parent's done record now. An array's record carries the range of
// its indices: new indices run to done are something new, a range shrunk
// or grown with its new indices still to run (no record) is not, nor is
// an array with no record for a moment as its file goes or comes back
// (trial BA H1: its dependant ran again, at times, each way); a record
// written before ranges were kept reads as before, and takes the range
// once it is read beside the array as it was (trial BA). A record that
// names an array parent is no array's for it (the review).
func TestParentMoved(t *testing.T) {
	t.Parallel()
	arr := func(from, to int) string { return spanned("X", luaapi.Range{From: from, To: to}) }
	afterArr := func(x string) string { return doneMark("fpC", map[string]string{"b": arr(1, 2), "e": x}) }
	idx := doneMark("fpB", map[string]string{"a": arr(1, 2)}) // an index of an array after an array
	for _, tt := range []struct {
		name   string
		was, r string
		moved  bool
	}{
		{"a job, the same", parentDigest("p1"), "p1", false},
		{"a job, a new definition", parentDigest("p1"), "p2", true},
		{"a job never done, run past", "", "", false},
		{"a job never done, run past, done since", "", "p1", true},
		{"a job after an array, the same", parentDigest(afterArr("e1")), afterArr("e1"), false},
		{"a job after an array, after another parent's new definition", parentDigest(afterArr("e1")), afterArr("e2"), true},
		{"an array, the same", parentDigest(arr(1, 2)), arr(1, 2), false},
		{"an array, a new definition", parentDigest(arr(1, 2)), spanned("Y", luaapi.Range{From: 1, To: 2}), true},
		{"an array shrunk", parentDigest(arr(1, 2)), arr(1, 1), false},
		{"an array grown, its new indices done", parentDigest(arr(1, 2)), arr(1, 3), true},
		{"an array grown below", parentDigest(arr(2, 3)), arr(1, 3), true},
		{"an array grown, its new indices to run", parentDigest(arr(1, 2)), "", false},
		{"an array after an array, the same", parentDigest(spanned(idx, luaapi.Range{From: 1, To: 3})), spanned(idx, luaapi.Range{From: 1, To: 3}), false},
		{"an array after an array, grown", parentDigest(spanned(idx, luaapi.Range{From: 1, To: 3})), spanned(idx, luaapi.Range{From: 1, To: 4}), true},
		{"an array, a record before ranges, the same", parentDigest("X"), arr(1, 3), false},
		{"an array, a record before ranges, grown", parentDigest("X"), "", true},
	} {
		if got := parentMoved(tt.was, tt.r); got != tt.moved {
			t.Errorf("%s: parentMoved(%q, %q) = %v, want %v", tt.name, tt.was, tt.r, got, tt.moved)
		}
	}
	// A record written before ranges were kept takes the range of the
	// array as it is, the same.
	legacy := doneMark("fp", map[string]string{"sw": "X"})
	if ok, keep := stillDone(legacy, "fp", map[string]string{"sw": arr(1, 2)}); !ok || keep != doneMark("fp", map[string]string{"sw": arr(1, 2)}) {
		t.Errorf("a record before ranges: (%v, %q)", ok, keep)
	}
	// Still done beside an array shrunk, or grown with its new indices to
	// run: the record keeps the range its run followed.
	rec := doneMark("fp", map[string]string{"sw": arr(1, 2)})
	for _, now := range []string{arr(1, 1), ""} {
		if ok, keep := stillDone(rec, "fp", map[string]string{"sw": now}); !ok || keep != rec {
			t.Errorf("sw now %q: (%v, %q), want (true, %q)", now, ok, keep, rec)
		}
	}
	// What renewing reads of the range a record followed.
	if was, _ := recordParent(doneMark("fpD", map[string]string{"b": spanned(idx, luaapi.Range{From: 1, To: 3})}), "b"); !strings.HasSuffix(was, "@1-3") {
		t.Errorf("the range of b a record holds: %q, want it to end @1-3", was)
	}
}
