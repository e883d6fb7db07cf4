package main

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/berthd/berth/supervisor"
	"github.com/berthd/berth/supervisor/store"
)

// An array (array = N in a job file) is one job per index, named
// NAME[INDEX], each with its own runs. The daemon lists the array as one
// entry whose Array says how its indices stand, and berth writes it as one
// line too: a sweep of ten thousand indices must not bury the other jobs.
// This file is how the listings write that entry.

// memberName is the name of index i of array name, as the daemon names it.
func memberName(name string, i int) string { return name + "[" + strconv.Itoa(i) + "]" }

// isArray tells the detail of an array from a job's.
func isArray(d supervisor.JobDetail) bool {
	return (d.Definition.Array != nil || d.Status.Array != nil) && !isIndex(d)
}

// isIndex is whether d is one index of an array (sweep[7]), which has the
// array's definition but is a job of its own. No job's name has a "]".
func isIndex(d supervisor.JobDetail) bool { return strings.HasSuffix(d.Status.Name, "]") }

// arrayStates are the states an array's counts name first, in the order
// they are read: how far it got, what runs, what waits, what went wrong.
// Any other state that has indices follows them.
var arrayStates = []string{
	store.StateDone.String(), store.StateRunning.String(), store.StateWaiting.String(), store.StateFailed.String(),
}

// arrayCountsText is "37 done · 4 running · 59 waiting", then any other
// state that has indices ("2 unplaceable"), in the order states are
// listed. A state no index is in is left out: `berth status | grep
// waiting` finds the arrays with an index waiting, not every array.
func arrayCountsText(a *supervisor.ArrayStatus) string {
	parts := make([]string, 0, len(arrayStates)+len(a.Counts))
	for _, s := range arrayStates {
		if a.Counts[s] > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", a.Counts[s], s))
		}
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

// rangesCount is how many indices ranges such as "1-37,40,42-50" name.
func rangesCount(ranges string) int {
	n := 0
	for _, r := range strings.Split(ranges, ",") {
		lo, hi, isRange := strings.Cut(r, "-")
		if !isRange {
			hi = lo
		}
		a, errA := strconv.Atoi(lo)
		b, errB := strconv.Atoi(hi)
		if errA == nil && errB == nil && b >= a {
			n += b - a + 1
		}
	}
	return n
}

// indicesByState is the block of berth show that lists an array's indices
// by state, one line each, "  done     37  1-37,40": the states in the
// order they are listed, the counts aligned, and the ranges broken after
// a comma where they are longer than width, the rest under the first.
func indicesByState(indices map[string]string, width int) []textLine {
	counts := make(map[string]int, len(indices))
	for s, r := range indices {
		counts[s] = max(1, rangesCount(r))
	}
	states := statesOf(counts)
	nameWidth, countWidth := 0, 0
	for _, s := range states {
		nameWidth = max(nameWidth, runeLen(s))
		countWidth = max(countWidth, len(strconv.Itoa(counts[s])))
	}
	var out []textLine
	for _, s := range states {
		n := strconv.Itoa(counts[s])
		lead := ln(plainSpan("  "), styledSpan(s, stateSGR(s)),
			plainSpan(strings.Repeat(" ", nameWidth-runeLen(s)+2+countWidth-len(n))+n+"  "))
		indent := lead.width()
		var items []flowItem
		for i, r := range strings.Split(indices[s], ",") {
			sep := ","
			if i == 0 {
				sep = ""
			}
			items = append(items, flowItem{sep: sep, text: ln(plainSpan(r))})
		}
		lines := flow(items, max(8, width-indent), 0)
		for i, l := range lines {
			if i == 0 {
				out = append(out, append(lead, l...))
			} else {
				out = append(out, append(ln(plainSpan(strings.Repeat(" ", indent))), l...))
			}
		}
	}
	return out
}
