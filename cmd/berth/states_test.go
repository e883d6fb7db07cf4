package main

import (
	"slices"
	"testing"

	"github.com/berthd/berth/supervisor"
)

// TestStateRank: the client lists states in the daemon's order, and a state
// it does not know (a newer daemon's) with what needs a look, before what
// is over.
func TestStateRank(t *testing.T) {
	names := append(stateNames(), "hibernating")
	slices.SortStableFunc(names, func(a, b string) int { return stateRank(a) - stateRank(b) })
	want := []string{"running", "starting", "stopping", "waiting", "backoff", "failed",
		"unplaceable", "invalid", "hibernating", "done", "stopped", "disabled"}
	if !slices.Equal(names, want) {
		t.Errorf("listed as\n %v\nwant\n %v", names, want)
	}
}

// TestStateColors: every state the client knows has a colour, and red is
// exactly what needs a person.
func TestStateColors(t *testing.T) {
	for _, name := range stateNames() {
		sgr := stateSGR(name)
		if sgr == "" {
			t.Errorf("%s has no colour", name)
		}
		if (sgr == sgrRed) != supervisor.IsProblem(stateOf(name)) {
			t.Errorf("%s is red: %v, a problem: %v", name, sgr == sgrRed, supervisor.IsProblem(stateOf(name)))
		}
	}
	if sgr := stateSGR("hibernating"); sgr != "" {
		t.Errorf("an unknown state is coloured %q", sgr)
	}
}
