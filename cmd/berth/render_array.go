package main

import (
	"fmt"
	"slices"
	"strings"

	"github.com/berthd/berth/supervisor"
	"github.com/berthd/berth/supervisor/store"
)

// An array (array = N in a job file) is one job per index, named
// NAME[INDEX], each with its own runs. The daemon lists the array as one
// entry whose Array says how its indices stand, and berth writes it as one
// line too: a sweep of ten thousand indices must not bury the other jobs.
// This file is how the listings write that entry.

// arrayStates are the states an array's counts always name, zeros
// included, in the order they are read: how far it got, what runs, what
// waits, what went wrong. Any other state that has indices follows them.
var arrayStates = []string{
	store.StateDone.String(), store.StateRunning.String(), store.StateWaiting.String(), store.StateFailed.String(),
}

// arrayCountsText is "37 done · 4 running · 59 waiting · 0 failed", then
// any other state that has indices ("2 unplaceable"), in the order states
// are listed.
func arrayCountsText(a *supervisor.ArrayStatus) string {
	parts := make([]string, 0, len(arrayStates)+len(a.Counts))
	for _, s := range arrayStates {
		parts = append(parts, fmt.Sprintf("%d %s", a.Counts[s], s))
	}
	for _, s := range statesOf(a.Counts) {
		if !slices.Contains(arrayStates, s) {
			parts = append(parts, fmt.Sprintf("%d %s", a.Counts[s], s))
		}
	}
	return strings.Join(parts, " · ")
}

// statesOf is the states that counts has at least one of, in the order
// states are listed (stateNames); those this client does not know (a
// newer daemon's) follow, by name.
func statesOf(counts map[string]int) []string {
	states := stateNames()
	known := len(states)
	for state := range counts {
		if !slices.Contains(states, state) {
			states = append(states, state)
		}
	}
	slices.Sort(states[known:])
	return slices.DeleteFunc(states, func(s string) bool { return counts[s] <= 0 })
}

// countStates counts jobs by state as the daemon counts them: an array
// by its indices, each of which is a job.
func countStates(jobs []supervisor.JobStatus) map[string]int {
	counts := map[string]int{}
	for _, j := range jobs {
		if j.Array == nil {
			counts[j.State]++
			continue
		}
		for s, n := range j.Array.Counts {
			counts[s] += n
		}
	}
	return counts
}
