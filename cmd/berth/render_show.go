package main

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/berthd/berth/accounting"
	"github.com/berthd/berth/supervisor"
)

// renderShow is `berth show JOB`: where the job stands, its definition as
// loaded, the environment its next run would get, its last runs and where
// its output is. Nothing is cut: this is the page a person reads to the end.
// For an array it adds its indices by state; its environment is its first
// index's, its runs are its indices', and its output is each index's own.
func renderShow(w io.Writer, d supervisor.JobDetail, o renderOptions) {
	st, def := d.Status, d.Definition
	name := cmp.Or(def.Name, st.Name)
	if isIndex(d) {
		name = st.Name
	}
	now := o.clock()
	array := isArray(d)

	var out []textLine
	head := ln(styledSpan(name, sgrBold), plainSpan(" — "), styledSpan(cmp.Or(st.State, "unknown"), stateSGR(st.State)))
	if !st.Since.IsZero() {
		head = append(head, plainSpan(fmt.Sprintf(" since %s (%s ago)",
			st.Since.In(renderZone).Format("2006-01-02 15:04:05"), compactAge(st.Since, now))))
	}
	out = append(out, head)

	var kv keyValues
	if st.Owner != "" {
		kv.add("owner", plainSpan(st.Owner))
	}
	if why := reason(st, now); why != "" {
		switch a := st.Array; {
		case a == nil || a.Queued == nil:
		case st.Quota != nil:
			// Held by its owner's quota, outside the machine's queue
			// (trial AS).
			why = fmt.Sprintf("index %d, waiting: %s", *a.Queued, why)
		case st.Short != nil:
			// An array waits in the placer's queue through one index.
			why = fmt.Sprintf("index %d, in the queue: %s", *a.Queued, why)
		}
		if st.RetryAt != nil {
			// As the status line says it, with the moment.
			why += "; " + msgRetryIn(st.RetryAt.Sub(now)) + ", at " + secondAt(*st.RetryAt, now)
		}
		if st.KillAt != nil {
			why += "; " + msgKillIn(st.KillAt.Sub(now))
			if st.KillAt.After(now) {
				why += ", at " + secondAt(*st.KillAt, now)
			}
		}
		sgr := ""
		if supervisor.IsProblem(stateOf(st.State)) {
			sgr = sgrRed
		}
		kv.add("why", styledSpan(why, sgr))
	}
	if st.Run != 0 && (st.PID != 0 || supervisor.Holds(stateOf(st.State))) {
		run := strconv.FormatUint(st.Run, 10)
		if st.PID != 0 {
			run += ", pid " + strconv.Itoa(st.PID)
		}
		kv.add("run", plainSpan(run))
		if d.Outdated {
			kv.add("note", styledSpan(msgRunOutdated(), sgrYellow))
		}
		kv.add("holds", plainSpan(holdsText(st)))
		if over := msgOverShare(st); over != "" {
			kv.add("warning", styledSpan(over, sgrYellow))
		}
	}
	if array && (st.CPUs > 0 || len(st.GPUs) > 0 || st.RAMBytes > 0) {
		kv.add("holds", plainSpan(holdsText(st)+" (its indices together)"))
	}
	switch {
	case st.Restarts > 0 && array:
		kv.add("restarts", plainSpan(strconv.Itoa(st.Restarts)+" (the sum of its indices' restarts in a row)"))
	case st.GaveUp:
		kv.add("restarts", plainSpan(msgGaveUpShow(st.Name, st.Restarts)))
	case st.Restarts > 0:
		kv.add("restarts", plainSpan(strconv.Itoa(st.Restarts)+" in a row"))
	}
	for _, kind := range []string{"after", "after_any"} {
		var names []string
		for _, p := range d.Parents {
			if p.Kind == kind {
				names = append(names, msgDependency(p, now))
			}
		}
		if len(names) > 0 {
			kv.add(kind, plainSpan(strings.Join(names, ", ")))
		}
	}
	if len(d.Dependants) > 0 {
		names := make([]string, len(d.Dependants))
		for i, p := range d.Dependants {
			names[i] = msgDependency(p, now)
		}
		kv.add("dependants", plainSpan(strings.Join(names, ", ")))
	}
	if st.ExpectedStart != nil {
		kv.add("starts", plainSpan("~"+expectedAt(*st.ExpectedStart).Format("2006-01-02 15:04")+" (expected)"))
	}

	var def2 keyValues
	if def.Description != "" {
		def2.add("description", plainSpan(def.Description))
	}
	if d.Hidden != "" {
		def2.add("hidden", plainSpan(d.Hidden))
	} else {
		def2.add("cmd", plainSpan(quoteArgv(def.Cmd)))
	}
	if def.Dir != "" {
		def2.add("dir", plainSpan(def.Dir))
	}
	if def.User != "" {
		def2.add("user", plainSpan(def.User))
	}
	if def.Group != "" {
		def2.add("group", plainSpan(def.Group))
	}
	if a := def.Array; a != nil {
		def2.add("array", plainSpan(fmt.Sprintf("%d-%d (%s)", a.From, a.To, count(a.To-a.From+1, "index"))))
		maxParallel := "no bound"
		if def.MaxParallel > 0 {
			maxParallel = strconv.Itoa(def.MaxParallel)
		}
		def2.add("max_parallel", plainSpan(maxParallel))
	}
	def2.add("resources", plainSpan(resourcesText(def)))
	def2.add("restart", plainSpan(def.Restart))
	maxRestarts := "unlimited"
	if def.MaxRestarts != nil {
		maxRestarts = strconv.Itoa(*def.MaxRestarts)
	}
	def2.add("max_restarts", plainSpan(maxRestarts))
	def2.add("timeout", plainSpan(cmp.Or(def.Timeout, "none")))
	def2.add("stop_signal", plainSpan(def.StopSignal))
	def2.add("stop_timeout", plainSpan(def.StopTimeout))
	def2.add("priority", plainSpan(strconv.Itoa(def.Priority)))
	def2.add("on_change", plainSpan(def.OnChange))
	def2.add("enabled", plainSpan(strconv.FormatBool(def.Enabled)))

	keyWidth := max(kv.keyWidth(), def2.keyWidth())
	out = append(out, kv.lines(keyWidth)...)
	if array {
		out = append(out, nil, ln(plainSpan("indices by state")))
		if len(d.Indices) == 0 {
			out = append(out, ln(plainSpan("  none known yet")))
		}
		out = append(out, indicesByState(d.Indices, o.columns())...)
	}
	if d.Removed {
		out = append(out, nil, ln(plainSpan("was declared in "), styledSpan(fileLine(def.File, def.Line), sgrBold),
			plainSpan(" (no job file declares it any more)")))
	} else if d.FileRefused {
		out = append(out, nil, ln(plainSpan("declared in "), styledSpan(fileLine(def.File, def.Line), sgrBold),
			styledSpan(" (the version in force: the file's latest is refused; berth status says why)", sgrYellow)))
	} else {
		out = append(out, nil, ln(plainSpan("declared in "), styledSpan(fileLine(def.File, def.Line), sgrBold)))
	}
	out = append(out, def2.lines(keyWidth)...)
	first := name
	if a := def.Array; a != nil && array {
		first = memberName(name, a.From)
	}
	if !d.Removed { // (one no file declares has no next run)
		out = append(out, nextEnvLines(d, first, array)...)
	}

	out = append(out, nil, ln(plainSpan("last runs")))
	if len(d.Runs) == 0 {
		out = append(out, ln(plainSpan("  none yet")))
	} else {
		for _, l := range historyTable(d.Runs, array, now) {
			out = append(out, append(ln(plainSpan("  ")), l...))
		}
	}

	switch a := def.Array; {
	case d.EnvHidden != "":
		// Not the caller's job: its output is not theirs to read either.
		out = append(out, nil, ln(plainSpan("logs  (its owner's and the administrators' to read)")))
	case a != nil && array && d.Logs == "journal":
		out = append(out, nil, ln(plainSpan("logs  "), styledSpan("berth logs "+quoteArg(name)+" --index N", sgrBold),
			plainSpan(" (one index at a time; "+msgLogsInJournal+")")))
	case a != nil && array:
		// Each index has its own output; the daemon names where the
		// first index's goes.
		out = append(out, nil, ln(plainSpan("logs  "), styledSpan(d.Logs, sgrBold),
			plainSpan(fmt.Sprintf(" for index %d (or berth logs %s --index N, one index at a time)", a.From, quoteArg(name)))))
	case d.Logs == "journal":
		out = append(out, nil, ln(plainSpan("logs  "), styledSpan("berth logs "+quoteArg(name), sgrBold),
			plainSpan(" ("+msgLogsInJournal+")")))
	default:
		out = append(out, nil, ln(plainSpan("logs  "), styledSpan(d.Logs, sgrBold),
			plainSpan(" (or berth logs "+quoteArg(name)+")")))
	}
	o.writeLines(w, out, 0)
}

// nextEnvLines is show's environment of the next run (of first, an
// array's first index), each variable marked with where it comes from.
func nextEnvLines(d supervisor.JobDetail, first string, array bool) []textLine {
	st, def := d.Status, d.Definition
	var out []textLine
	legend := "berth: set from the grant; job: the job's env"
	if def.User != "" {
		legend = "berth: set from the grant; user: " + def.User + "'s login; job: the job's env"
	}
	if a := def.Array; a != nil && array {
		// Each index has its own BERTH_ARRAY_INDEX (and grant): the
		// daemon shows the first's.
		out = append(out, nil, ln(plainSpan(fmt.Sprintf("environment of the next run of %s, the first index (%s)", first, legend))))
	} else {
		out = append(out, nil, ln(plainSpan("environment of the next run ("+legend+")")))
	}
	if d.EnvHidden != "" {
		out = append(out, ln(plainSpan("  ("+d.EnvHidden+")")))
	} else if len(d.NextEnv) == 0 && st.State == "unplaceable" {
		out = append(out, ln(plainSpan("  (none: it can never run on this machine, as its why says)")))
	} else if len(d.NextEnv) == 0 {
		out = append(out, ln(plainSpan("  (empty)")))
	} else if r := def.Resources; r.CPUs > 0 || r.GPUs > 0 || r.GPUMemBytes > 0 {
		// Which cores and cards are the placer's to choose when it starts.
		out = append(out, ln(styledSpan("  (its cores and cards as if granted now, the lowest free; the run gets those free when it starts)", sgrDim)))
	}
	env := slices.Clone(d.NextEnv)
	slices.Sort(env)
	// An unaccounted job's share of threads is BERTH_CPUS, in each thread
	// variable the daemon's environment does not set: one that says
	// otherwise is the daemon's.
	share := ""
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "BERTH_CPUS="); ok {
			share = v
		}
	}
	for _, kv := range env {
		key, value, _ := strings.Cut(kv, "=")
		mark := "     "
		switch {
		case hasKey(def.Env, key):
			mark = "job  "
		case def.Resources.CPUs == 0 && slices.Contains(accounting.ThreadVars, key) && value != share:
		case derivedVar(key):
			mark = "berth"
		case def.User != "" && loginVar(key):
			mark = "user "
		}
		out = append(out, ln(plainSpan("  "), styledSpan(mark, sgrDim), plainSpan("  "+kv)))
	}
	return out
}

func holdsText(st supervisor.JobStatus) string {
	var parts []string
	if st.CPUs > 0 {
		cores := count(st.CPUs, "core")
		if len(st.CPUIDs) == st.CPUs {
			ids := make([]string, len(st.CPUIDs))
			for i, id := range st.CPUIDs {
				ids[i] = strconv.Itoa(id)
			}
			cores += " (" + strings.Join(ids, ",") + ")"
		}
		parts = append(parts, cores)
	}
	switch {
	case st.GPUMemBytes > 0 && len(st.GPUs) == 1:
		parts = append(parts, accounting.FormatSize(st.GPUMemBytes)+" of card "+st.GPUs[0])
	case st.GPUMemBytes > 0 && len(st.GPUs) > 0:
		parts = append(parts, "shares of "+accounting.FormatSize(st.GPUMemBytes)+" together on cards "+strings.Join(st.GPUs, ","))
	case len(st.GPUs) > 0:
		parts = append(parts, plural(len(st.GPUs), "card")+" "+strings.Join(st.GPUs, ","))
	}
	if st.RAMBytes > 0 {
		parts = append(parts, accounting.FormatSize(st.RAMBytes)+" memory")
	}
	if len(parts) == 0 {
		return "nothing"
	}
	held := strings.Join(parts, ", ")
	if u := st.Used; u != nil && u.MemoryBytes != nil {
		held += "; uses " + accounting.FormatSize(*u.MemoryBytes) + " memory now"
	}
	if u := st.GPUMemUsedBytes; u != nil && *u >= 0 {
		held += "; its processes hold " + accounting.FormatSize(*u) + " of card memory now"
		if p := st.GPUMemPeakBytes; p != nil && *p > *u {
			held += " (" + accounting.FormatSize(*p) + " at most)"
		}
	}
	return held
}

// resourcesText is what the job asks, in the words of its file, resolved
// through its flavor: `cpus 8, gpus 2, ram 32G (flavor "gpu-large")`.
func resourcesText(def supervisor.JobDefinition) string {
	r := def.Resources
	cpus := strconv.Itoa(r.CPUs)
	if r.CPUs == 0 {
		cpus += " (unaccounted: holds nothing, never waits)"
	}
	ram := "not asked"
	if r.RAMBytes > 0 {
		ram = accounting.FormatSize(r.RAMBytes)
	}
	s := fmt.Sprintf("cpus %s, gpus %d, ram %s", cpus, r.GPUs, ram)
	if r.GPUMemBytes > 0 {
		s = fmt.Sprintf("cpus %s, gpu_mem %s (a share of one card), ram %s", cpus, accounting.FormatSize(r.GPUMemBytes), ram)
	}
	if def.Flavor != "" {
		s += fmt.Sprintf(" (flavor %q)", def.Flavor)
	}
	return s
}

func hasKey(m map[string]string, k string) bool {
	_, ok := m[k]
	return ok
}

// derivedVar tells the variables berth sets from a grant (DESIGN.md, "The
// environment a job is started with").
func derivedVar(key string) bool {
	return slices.Contains(accounting.ThreadVars, key) || slices.Contains(accounting.ShareVars, key) ||
		slices.Contains(accounting.CardVars, key) || slices.Contains(accounting.RunVars, key)
}

// loginVar tells the variables a job with a user gets from its passwd
// entry, as login sets them.
func loginVar(key string) bool {
	return key == "HOME" || key == "USER" || key == "LOGNAME" || key == "SHELL"
}

// msgLogsInJournal says where berth show's logs are where journald keeps
// them: berth logs reads what the job's runs wrote, where journalctl -t
// would show lines anyone may write under its name (trial AK).
const msgLogsInJournal = "from journald, only what its runs wrote"

// quoteArgv writes a command line the way a shell would read it back.
func quoteArgv(argv []string) string {
	quoted := make([]string, len(argv))
	for i, a := range argv {
		quoted[i] = quoteArg(a)
	}
	return strings.Join(quoted, " ")
}

// quoteArg writes one word the way a shell reads it back.
var quoteArg = supervisor.QuoteArg
