package supervisor

import (
	"slices"
	"strings"
	"testing"

	"github.com/berthd/berth/supervisor/store"
)

// TestStatesInOrder pins the order the status line and berth status share,
// and checks that a state added later is not left out of it.
func TestStatesInOrder(t *testing.T) {
	t.Parallel()
	var names []string
	for _, s := range StatesInOrder() {
		names = append(names, s.String())
	}
	want := "running starting stopping waiting backoff failed unplaceable invalid done stopped disabled"
	if got := strings.Join(names, " "); got != want {
		t.Errorf("order\n %s\nwant\n %s", got, want)
	}
	for _, s := range allStates[1:] {
		if n := strings.Count(" "+want+" ", " "+s.String()+" "); n != 1 {
			t.Errorf("%v is in the order %d times, want once", s, n)
		}
		if got := StatesInOrder()[Rank(s)]; got != s {
			t.Errorf("%v ranks %d, where %v is", s, Rank(s), got)
		}
	}
	if r := Rank(store.State(0)); r != len(StatesInOrder()) {
		t.Errorf("a state outside the order ranks %d, want last", r)
	}
	order := StatesInOrder()
	order[0] = store.StateDisabled
	if StatesInOrder()[0] != store.StateRunning {
		t.Error("a caller's copy changed the order")
	}
}

func TestStateKinds(t *testing.T) {
	t.Parallel()
	var holds, problems []store.State
	for _, s := range allStates {
		if Holds(s) {
			holds = append(holds, s)
		}
		if IsProblem(s) {
			problems = append(problems, s)
		}
	}
	if want := []store.State{store.StateStarting, store.StateRunning, store.StateStopping}; !slices.Equal(holds, want) {
		t.Errorf("holding %v, want %v", holds, want)
	}
	if want := []store.State{store.StateFailed, store.StateInvalid, store.StateUnplaceable}; !slices.Equal(problems, want) {
		t.Errorf("problems %v, want %v", problems, want)
	}
}
