package store

import "testing"

// TestStoredNumbers pins the number of every stored enum value: a state or
// a reason is written to disk as this byte, so renumbering one would make
// every state file mean something else. A new value gets a new number and
// a row here.
func TestStoredNumbers(t *testing.T) {
	states := []struct {
		s    State
		n    uint8
		name string
	}{
		{StateWaiting, 1, "waiting"},
		{StateStarting, 2, "starting"},
		{StateRunning, 3, "running"},
		{StateStopping, 4, "stopping"},
		{StateBackoff, 5, "backoff"},
		{StateDone, 6, "done"},
		{StateFailed, 7, "failed"},
		{StateStopped, 8, "stopped"},
		{StateInvalid, 9, "invalid"},
		{StateUnplaceable, 10, "unplaceable"},
		{StateDisabled, 11, "disabled"},
	}
	for _, tt := range states {
		if uint8(tt.s) != tt.n || tt.s.String() != tt.name {
			t.Errorf("state %q is %d, want %q %d", tt.s, uint8(tt.s), tt.name, tt.n)
		}
	}
	if len(states) != len(stateNames) {
		t.Errorf("%d states pinned here, %d named: pin the new ones", len(states), len(stateNames))
	}

	reasons := []struct {
		r    Reason
		n    uint8
		name string
	}{
		{ReasonExited, 1, "exited"},
		{ReasonFailed, 2, "failed"},
		{ReasonTimedOut, 3, "timed out"},
		{ReasonStopped, 4, "stopped"},
		{ReasonKilled, 5, "killed after stop_timeout"},
		{ReasonLost, 6, "lost"},
		{ReasonSpawnError, 7, "spawn error"},
		{ReasonOOM, 8, "out of memory"},
	}
	for _, tt := range reasons {
		if uint8(tt.r) != tt.n || tt.r.String() != tt.name {
			t.Errorf("reason %q is %d, want %q %d", tt.r, uint8(tt.r), tt.name, tt.n)
		}
	}
	if len(reasons) != len(reasonNames) {
		t.Errorf("%d reasons pinned here, %d named: pin the new ones", len(reasons), len(reasonNames))
	}

	// A number this build does not know prints as one, never as a name.
	if got := State(200).String(); got != "state(200)" {
		t.Errorf("State(200) = %q", got)
	}
	if got := Reason(200).String(); got != "reason(200)" {
		t.Errorf("Reason(200) = %q", got)
	}
	// Zero is never stored as a state and means "still running" as a reason.
	if got := State(0).String(); got != "new" {
		t.Errorf("State(0) = %q, want new", got)
	}
	if got := Reason(0).String(); got != "" {
		t.Errorf("Reason(0) = %q, want empty", got)
	}
}
