package supervisor

import (
	"testing"

	"github.com/berthd/berth/supervisor/store"
)

// TestSatisfied walks every state of a parent, batch and service, for
// after and after_any.
func TestSatisfied(t *testing.T) {
	type want struct{ after, afterAny, service bool }
	table := map[store.State]want{
		store.StateDone:    {after: true, afterAny: true},
		store.StateFailed:  {afterAny: true},
		store.StateStopped: {afterAny: true},
		store.StateRunning: {service: true},
	}
	for _, s := range allStates {
		w := table[s]
		if got := satisfied(depAfter, s, false); got != w.after {
			t.Errorf("after a batch job %s: %v, want %v", s, got, w.after)
		}
		if got := satisfied(depAfterAny, s, false); got != w.afterAny {
			t.Errorf("after_any a batch job %s: %v, want %v", s, got, w.afterAny)
		}
		for _, kind := range []string{depAfter, depAfterAny} {
			if got := satisfied(kind, s, true); got != w.service {
				t.Errorf("%s a service %s: %v, want %v", kind, s, got, w.service)
			}
		}
	}
}

// TestGate: one unsatisfied parent holds the job.
func TestGate(t *testing.T) {
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
}
