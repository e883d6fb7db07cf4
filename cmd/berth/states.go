package main

import (
	"github.com/berthd/berth/supervisor"
	"github.com/berthd/berth/supervisor/store"
)

// The daemon sends a job's state by name. What the states are is the
// store's (they are stored); the order in which they are counted and
// listed, which hold a grant and which need a person, is supervisor's,
// shared with the daemon's own status line. What this file adds is the
// client's part: how a state looks, and where a state this client does not
// know (a newer daemon's) goes.

// statesByName is every state the client knows, by the name the daemon
// sends.
var statesByName = func() map[string]store.State {
	m := map[string]store.State{}
	for _, s := range supervisor.StatesInOrder() {
		m[s.String()] = s
	}
	return m
}()

// stateOf is the state a name stands for, or the zero State, which holds
// nothing and is no problem, for a name this client does not know.
func stateOf(name string) store.State { return statesByName[name] }

// stateNames is every state's name, in the order they are counted and
// listed.
func stateNames() []string {
	var names []string
	for _, s := range supervisor.StatesInOrder() {
		names = append(names, s.String())
	}
	return names
}

// unknownRank is where a state this client does not know is listed: after
// the last state that needs a person, since it needs a look too, and before
// what is over.
var unknownRank = func() int {
	r := 0
	for _, s := range supervisor.StatesInOrder() {
		if supervisor.IsProblem(s) {
			r = supervisor.Rank(s) + 1
		}
	}
	return r
}()

// stateRank places a state in the status listing.
func stateRank(name string) int {
	s, ok := statesByName[name]
	switch {
	case !ok:
		return unknownRank
	case supervisor.Rank(s) >= unknownRank:
		return supervisor.Rank(s) + 1
	}
	return supervisor.Rank(s)
}

// stateSGR is a state's colour: green for running, yellow for on its way
// there or out, red for what needs a person, dim for what is over.
func stateSGR(name string) string {
	switch s := stateOf(name); {
	case supervisor.IsProblem(s):
		return sgrRed
	case s == store.StateRunning:
		return sgrGreen
	case s == store.StateWaiting, s == store.StateBackoff, s == store.StateStarting, s == store.StateStopping:
		return sgrYellow
	case s == store.StateDone, s == store.StateStopped, s == store.StateDisabled:
		return sgrDim
	}
	return ""
}
