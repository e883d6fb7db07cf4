package supervisor

import (
	"slices"

	"github.com/berthd/berth/supervisor/store"
)

// A job's states are stored, so their type and numbers are the store's
// (store.State). What they mean to the daemon and to whoever reads its
// status is here.

// displayOrder is the order in which states are counted and listed, by the
// daemon's status line and by berth status alike: what holds the machine,
// then what waits for it, then what needs a person, then what is over. It is
// not the stored numbering, which only grows.
var displayOrder = []store.State{
	store.StateRunning, store.StateStarting, store.StateStopping,
	store.StateWaiting, store.StateBackoff,
	store.StateFailed, store.StateUnplaceable, store.StateInvalid,
	store.StateDone, store.StateStopped, store.StateDisabled,
}

// StatesInOrder returns every state, in the order in which they are counted
// and listed.
func StatesInOrder() []store.State { return slices.Clone(displayOrder) }

// Rank is s's place in StatesInOrder; a state that is not there ranks last.
func Rank(s store.State) int {
	if i := slices.Index(displayOrder, s); i >= 0 {
		return i
	}
	return len(displayOrder)
}

// Holds reports whether a job in s has a grant: being started, running, or
// being stopped (a grant is given back only once the run is reaped).
func Holds(s store.State) bool {
	switch s {
	case store.StateStarting, store.StateRunning, store.StateStopping:
		return true
	}
	return false
}

// IsProblem reports whether a job in s needs a person before it runs again:
// it ended badly, fits no machine, or cannot run as declared.
func IsProblem(s store.State) bool {
	switch s {
	case store.StateFailed, store.StateUnplaceable, store.StateInvalid:
		return true
	}
	return false
}

// resting reports whether a job stays in state s until something happens to
// it: where a restarted daemon must find it again (a done job is not run
// twice, a person's stop holds). The other states a restarted daemon
// recomputes.
func resting(s store.State) bool {
	switch s {
	case store.StateDone, store.StateFailed, store.StateStopped, store.StateInvalid, store.StateUnplaceable, store.StateDisabled:
		return true
	}
	return false
}

// restingName says whether a state, by its name as the status shows it,
// is one a job rests in.
func restingName(name string) bool {
	for _, s := range displayOrder {
		if s.String() == name {
			return resting(s)
		}
	}
	return false
}
