package main

import (
	"cmp"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/berthd/berth/supervisor"
)

// renderJobs is `berth jobs`: one line per job, in name order, for scripts
// as much as for people: a header, fixed columns, every cell non-empty ("-"),
// nothing cut, no colour. An array is one line: its state as a whole, what
// its indices hold together, and how many indices it has (INDICES, last, so
// that the columns before it stay where scripts read them).
func renderJobs(w io.Writer, jobs []supervisor.JobStatus, o renderOptions) {
	jobs = slices.Clone(jobs)
	slices.SortStableFunc(jobs, func(a, b supervisor.JobStatus) int { return strings.Compare(a.Name, b.Name) })
	t := &textTable{gap: 2, cols: []textColumn{
		{title: "NAME"}, {title: "STATE"}, {title: "CORES", right: true}, {title: "CARDS"},
		{title: "MEMORY", right: true}, {title: "SINCE"}, {title: "OWNER"}, {title: "INDICES", right: true},
	}}
	for _, j := range jobs {
		since := "-"
		if !j.Since.IsZero() {
			since = j.Since.In(renderZone).Format(time.RFC3339)
		}
		indices := "-"
		if j.Array != nil {
			indices = strconv.Itoa(j.Array.Size)
		}
		t.add(plainSpan(j.Name), plainSpan(j.State), plainSpan(coresCell(j.CPUs)), plainSpan(shareCell(j.GPUs, j.GPUMemBytes, nil)),
			plainSpan(memoryCell(j.RAMBytes)), plainSpan(since), plainSpan(cmp.Or(j.Owner, "-")), plainSpan(indices))
	}
	t.fitContent()
	renderOptions{}.writeLines(w, t.lines(""), 0)
}
