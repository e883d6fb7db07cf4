package main

import (
	"cmp"
	"io"
	"slices"
	"strconv"
	"time"

	"github.com/berthd/berth/accounting"
	"github.com/berthd/berth/supervisor"
	"github.com/berthd/berth/supervisor/store"
)

// renderHistory is `berth history`: runs, newest first.
func renderHistory(w io.Writer, runs []supervisor.RunView, o renderOptions) {
	if len(runs) == 0 {
		io.WriteString(w, "no runs\n")
		return
	}
	o.writeLines(w, historyTable(runs, true, o.clock()), 0)
}

func historyTable(runs []supervisor.RunView, withJob bool, now time.Time) []textLine {
	runs = slices.Clone(runs)
	slices.SortStableFunc(runs, func(a, b supervisor.RunView) int { return cmp.Compare(b.ID, a.ID) })
	t := &textTable{gap: 2, cols: []textColumn{{title: "RUN", right: true}}}
	if withJob {
		t.cols = append(t.cols, textColumn{title: "JOB"})
	}
	t.cols = append(t.cols, textColumn{title: "START"}, textColumn{title: "DURATION", right: true},
		textColumn{title: "CORES", right: true}, textColumn{title: "CARDS"}, textColumn{title: "RESULT"})
	for _, r := range runs {
		row := []textSpan{plainSpan(strconv.FormatUint(r.ID, 10))}
		if withJob {
			row = append(row, plainSpan(r.Job))
		}
		result, sgr := runResult(r)
		row = append(row, plainSpan(r.Start.In(renderZone).Format("2006-01-02 15:04:05")),
			plainSpan(runDuration(r, now)), plainSpan(coresCell(r.CPUs)), plainSpan(shareCell(r.GPUs, r.GPUMemBytes, r.GPUMemPeakBytes)), styledSpan(result, sgr))
		t.add(row...)
	}
	t.fitContent()
	return t.lines(sgrBold)
}

// runDuration is how long a run lasted, or has lasted so far, to the second
// (to the minute past an hour: nobody reads the seconds of a day-long run).
// A lost run's end is only when it was found lost: it lasted at most that.
func runDuration(r supervisor.RunView, now time.Time) string {
	if r.End != nil && r.Reason == store.ReasonLost.String() {
		return "≤" + spanOf(r.Start, *r.End)
	}
	end := now
	if r.End != nil {
		end = *r.End
	}
	return spanOf(r.Start, end)
}

// spanOf is the time from start to end as runDuration writes it.
func spanOf(start, end time.Time) string {
	d := max(0, end.Sub(start))
	switch {
	case d == 0:
		return "0s"
	case d < time.Second:
		d = d.Round(time.Millisecond)
	case d < time.Hour:
		d = d.Round(time.Second)
	default:
		d = d.Round(time.Minute)
	}
	return accounting.FormatDuration(d)
}

// runResult is how a run ended, "failed (exit 3)", "timed out (SIGTERM)",
// with its colour.
func runResult(r supervisor.RunView) (string, string) {
	if r.End == nil {
		return "running", sgrGreen
	}
	reason := r.Reason
	if reason == "" {
		reason = "ended"
	}
	var detail string
	switch {
	case r.Reason == store.ReasonOOM.String():
		// What it went over says more than the kernel's SIGKILL.
		reason = supervisor.MsgEnded(store.ReasonOOM, 0, "", 0, r.RAMBytes)
	case r.Reason == store.ReasonKilled.String() && r.Signal != "SIGKILL" && (r.Signal != "" || r.ExitCode != nil):
		// The main process ended at the stop signal, or exited; what
		// was left of its processes (its group, or those outside it:
		// trial AV) ignored it and was killed.
		main := r.Signal
		if main == "" {
			main = "exit " + strconv.Itoa(*r.ExitCode)
		}
		detail = "its main process " + main + ", the rest of its processes SIGKILL"
	case r.Signal != "":
		detail = r.Signal
	case r.ExitCode != nil:
		detail = "exit " + strconv.Itoa(*r.ExitCode)
	}
	if detail != "" {
		reason += " (" + detail + ")"
	}
	if r.Cause != "" {
		// Why it could not start, or why berth stopped it.
		reason += ": " + r.Cause
	}
	if r.GPUMemBytes > 0 && r.GPUMemPeakBytes != nil && *r.GPUMemPeakBytes > r.GPUMemBytes {
		// Said however it ended: the jobs beside it paid for it.
		reason += "; " + msgRanOverShare(*r.GPUMemPeakBytes, r.GPUMemBytes)
		if r.End != nil && (r.Reason == "exited" || r.Reason == "stopped") {
			return reason, sgrYellow
		}
	}
	switch r.Reason {
	case "exited", "stopped":
		return reason, ""
	case "lost":
		return reason, sgrYellow
	}
	return reason, sgrRed
}
