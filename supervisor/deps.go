package supervisor

import (
	"crypto/sha256"
	"encoding/hex"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/berthd/berth/luaapi"
	"github.com/berthd/berth/supervisor/store"
)

// Dependencies between jobs (after, after_any) are a gate in front of the
// placer: a job whose parents are not satisfied stays waiting, outside the
// placer's queue, and holds nothing. It is looked at again whenever one of
// its parents changes state. A job without dependencies never meets the
// gate: its waits go straight to the placer, as before.

// Dependency kinds, as the JSON says them.
const (
	depAfter    = "after"
	depAfterAny = "after_any"
)

// Dependency is one edge of the graph, as facts: a parent of a job (in
// `after` of its status while it waits, and in `parents` of berth show),
// or a dependant (in `dependants` of berth show).
type Dependency struct {
	Job   string    `json:"job"`
	Kind  string    `json:"kind"` // "after" or "after_any"
	State string    `json:"state"`
	Since time.Time `json:"since,omitzero"`
	// Service: the parent is restart = "always"; it satisfies the edge
	// while it runs.
	Service bool `json:"service,omitempty"`
	// Array: the parent is an array; its state is its indices' together.
	Array bool `json:"array,omitempty"`
	// ExitCode, Signal and Reason are how the parent's last run ended,
	// where it has ended and that is known.
	ExitCode *int   `json:"exit_code,omitempty"`
	Signal   string `json:"signal,omitempty"`
	Reason   string `json:"reason,omitempty"`
	// Behind, for an after parent that is done, names the job (the
	// parent itself or one upstream of it, through after) whose done
	// record no longer matches its own parents', or the job upstream that
	// runs, waits to run or rests short of done with a new definition: the
	// parent is to run again, and its output is not yet up to date. The
	// parent does not satisfy the edge meanwhile.
	Behind string `json:"behind,omitempty"`
	// Upstream, for a parent that waits for its own parents, is the
	// first job upstream of it that holds it and will not run by itself:
	// one that failed, was stopped, cannot run or is not declared.
	Upstream *Dependency `json:"upstream,omitempty"`
	// Satisfied: the parent lets the dependant run.
	Satisfied bool `json:"satisfied"`
}

// satisfied is the gate's rule for one parent. For after, its latest run
// of its current definition ended done (its state is done: any edit of
// what it runs takes it out of done); for after_any, that run ended in any
// way. A service parent satisfies either while it runs, and after_any
// once it rests too: stopped, or given up on (max_restarts).
func satisfied(kind string, parent store.State, service bool) bool {
	if service {
		return parent == store.StateRunning ||
			kind == depAfterAny && (parent == store.StateDone || parent == store.StateFailed || parent == store.StateStopped)
	}
	switch parent {
	case store.StateDone:
		return true
	case store.StateFailed, store.StateStopped:
		return kind == depAfterAny
	}
	return false
}

// lastEnd is how a job's last run ended, for its dependants' reasons.
type lastEnd struct {
	known  bool
	code   int
	signal string
	reason store.Reason
	// timeout, for a run that timed out in this daemon, is the timeout it
	// outlived, which an edit since does not change (trial AP); 0 where
	// not known: the definition's.
	timeout time.Duration
}

// depGraph is the graph of the set in force, rebuilt at each reload that
// has dependencies in it, and read without a lock (Daemon.deps). Never
// written once published.
type depGraph struct {
	jobs       map[string]*job     // every job, by name (an array's indices too)
	arrays     map[string]*array   // every array, by name
	dependants map[string][]string // parent → the jobs that name it, sorted
}

// view is what the jobs that name job or array name see of it; false when
// the graph has no such name.
func (g *depGraph) view(name string) (jobView, bool) {
	if g == nil {
		return jobView{}, false
	}
	if j := g.jobs[name]; j != nil {
		return j.view(), true
	}
	if a := g.arrays[name]; a != nil {
		return a.view(), true
	}
	return jobView{}, false
}

// isJob reports whether name is a job of the graph, not an array.
func (g *depGraph) isJob(name string) bool { return g.jobs[name] != nil }

// post hands m to job name, or to every index of array name.
func (g *depGraph) post(name string, m jobMessage) {
	if j := g.jobs[name]; j != nil {
		j.in.post(m)
		return
	}
	if a := g.arrays[name]; a != nil {
		// The indices held at the dependency gate pass it together, and
		// those done that run again after a parent's new definition
		// wait together: lowest first, either way.
		a.post(m, func(v jobView) bool {
			return v.State == store.StateWaiting && v.After != nil || v.State == store.StateDone && g.runsAgain(v)
		})
	}
}

// record is parentRecords's lookup in the graph: a job's done record (an
// array's with its range, spanned), whether it is a service, and whether
// the graph has it.
func (g *depGraph) record(name string) (record string, service, known bool) {
	v, ok := g.view(name)
	record = v.DoneFP
	if g != nil && g.arrays[name] != nil {
		// The indices it is made of, not the range its definition says:
		// grown, it has the old ones alone until the new ones join (the
		// review: a dependant ran again at once).
		record = spanned(g.arrays[name].doneSpan())
	}
	return record, ok && v.Def != nil && v.Def.Restart == luaapi.RestartAlways, ok
}

// runsAgain says whether a job done, in view v, runs again after its
// parents as they are now: one of them ran a new definition to done since
// its run (as the job itself finds, depsChanged).
func (g *depGraph) runsAgain(v jobView) bool {
	if v.Def == nil || len(v.Def.After) == 0 {
		return false
	}
	parents, known := parentRecords(v.Def, g.record)
	if !known {
		return false
	}
	still, _ := stillDone(v.DoneFP, v.Def.ProcessFingerprint(), parents)
	return !still
}

// buildDeps makes the graph of a set; nil when no job has dependencies.
// The caller holds d.mu.
func (d *Daemon) buildDeps(set *luaapi.Set) *depGraph {
	var g *depGraph
	for i := range set.Jobs {
		def := &set.Jobs[i]
		if !def.HasDeps() {
			continue
		}
		if g == nil {
			g = &depGraph{jobs: make(map[string]*job, len(d.jobs)), dependants: map[string][]string{}}
		}
		for _, p := range slices.Concat(def.After, def.AfterAny) {
			if !slices.Contains(g.dependants[p], def.Name) {
				g.dependants[p] = append(g.dependants[p], def.Name)
			}
		}
	}
	if g == nil {
		return nil
	}
	for name, j := range d.jobs {
		g.jobs[name] = j
	}
	g.arrays = maps.Clone(d.arrays)
	for _, kids := range g.dependants {
		slices.Sort(kids)
	}
	return g
}

// factOf is what a dependant knows of parent name, seen in v.
func factOf(name, kind string, v jobView) Dependency {
	f := Dependency{Job: name, Kind: kind, State: v.State.String(), Since: v.Since}
	if v.Def != nil {
		f.Service = v.Def.Restart == luaapi.RestartAlways
		f.Array = v.Def.Array != nil
	}
	if e := v.LastEnd; e.known && (v.State == store.StateFailed || v.State == store.StateStopped || v.State == store.StateDone) {
		f.Reason = e.reason.String()
		if e.signal != "" {
			f.Signal = e.signal
		} else if e.reason == store.ReasonExited || e.reason == store.ReasonFailed {
			code := e.code
			f.ExitCode = &code
		}
	}
	// A batch parent about to take a new definition is about to run it:
	// its state is the old one's a moment more.
	f.Satisfied = satisfied(kind, v.State, f.Service) && (f.Service || !v.Redefining)
	return f
}

// outdated says whether job name, in view v, rests done but runs again
// after a parent that runs, or is to run, a new definition (renewing, as
// berth status's runs_again_after says): a person's stop holds it
// stopped, where it leaves a job at rest otherwise.
func (d *Daemon) outdated(name string, v jobView) bool {
	if v.State != store.StateDone || v.Def == nil || len(v.Def.After) == 0 {
		return false
	}
	g := d.deps.Load()
	// To run again after a parent, or already due to (a parent ran its
	// new definition to done, and the job has not looked yet).
	return g.renewing(name, map[string]string{}) != "" || g.runsAgain(v)
}

// withUpstream is facts, each parent that waits for its own parents with
// what holds it upstream (Dependency.Upstream), as the graph is now.
func (g *depGraph) withUpstream(facts []Dependency) []Dependency {
	out := slices.Clone(facts)
	for i, f := range out {
		if !f.Satisfied && f.State == store.StateWaiting.String() {
			out[i].Upstream = g.upstream(f.Job, map[string]bool{f.Job: true})
		}
	}
	return out
}

// upstream is the first job upstream of name, through after and
// after_any, that holds it and will not run by itself; nil where none
// does (its parents run, or wait their turn). seen keeps a diamond's
// jobs from being looked at twice.
func (g *depGraph) upstream(name string, seen map[string]bool) *Dependency {
	v, ok := g.view(name)
	if !ok || v.Def == nil || !v.Def.HasDeps() {
		return nil
	}
	for _, f := range parentsOf(g, v.Def) {
		if f.Satisfied || seen[f.Job] {
			continue
		}
		seen[f.Job] = true
		switch f.State {
		case "unknown", store.StateFailed.String(), store.StateStopped.String(), store.StateInvalid.String(),
			store.StateUnplaceable.String(), store.StateDisabled.String():
			return &f
		case store.StateWaiting.String():
			if u := g.upstream(f.Job, seen); u != nil {
				return u
			}
		}
	}
	return nil
}

// parentsOf are the facts about each parent that def names, in the order
// it names them. A parent not in the graph (yet) is "unknown". An after
// parent that is done satisfies the edge only while it is up to date with
// its own parents, all the way up: none of them ran a new definition to
// done since (behind), nor runs, waits to run or rests short of done with
// one (renewing). In a diamond, the dependant of prep and train must not
// run after prep's new run and train's old one; in a chain, the job after
// train must not run on train's old run that ended while prep ran its new
// definition (trial AH).
func parentsOf(g *depGraph, def *luaapi.Job) []Dependency {
	var out []Dependency
	var memo, renewing map[string]string
	for _, e := range []struct {
		kind  string
		names []string
	}{{depAfter, def.After}, {depAfterAny, def.AfterAny}} {
		for _, n := range e.names {
			v, ok := g.view(n)
			if !ok {
				out = append(out, Dependency{Job: n, Kind: e.kind, State: "unknown"})
				continue
			}
			f := factOf(n, e.kind, v)
			if f.Satisfied && e.kind == depAfter && !f.Service {
				if memo == nil {
					memo = map[string]string{}
				}
				if f.Behind = g.behind(n, memo); f.Behind != "" {
					f.Satisfied = false
				} else {
					if renewing == nil {
						renewing = map[string]string{}
					}
					if f.Behind = g.renewing(n, renewing); f.Behind != "" {
						f.Satisfied = false
					}
				}
			}
			out = append(out, f)
		}
	}
	return out
}

// behind is the job at or upstream of name, through after, that is to run
// again because a parent of its ran a new definition to done since its
// own run; "" when name is up to date. Upstream is looked at first: the
// job named is the first of the chain to run again. memo keeps what was
// found for each name (the graph is acyclic: cycles are refused).
func (g *depGraph) behind(name string, memo map[string]string) string {
	return g.walkAfter(name, memo, func(child, p string, pv jobView, declared bool, was string, named bool) (string, bool) {
		if !declared {
			return "", false // renewing's to say
		}
		if r, _, _ := g.record(p); named && parentMoved(was, r) {
			return child, true
		}
		return "", true
	})
}

// renewing is, for a job done, the job at or upstream of its after parents
// that runs, waits to run, or rests short of done with, a definition other
// than the one name's done run followed ("" where none): once that one has
// run to done, name runs again. A parent done is looked through, and so
// is one that runs, waits or rests with what name's run followed. An
// array's record is its indices' (arrayRecord), which is the definition's
// when they ran one after the same parents. A parent no file declares
// is found where the run followed no done run of it (berth start
// --ignore-deps while it failed): it holds the job as one that has not run
// does, and what follows the job (trial AU: removing the file of such a
// parent let the job's dependant run); one the run followed done is taken
// as up to date. memo keeps what was found for each name.
func (g *depGraph) renewing(name string, memo map[string]string) string {
	return g.walkAfter(name, memo, func(_, p string, pv jobView, declared bool, was string, named bool) (string, bool) {
		if !declared {
			if named && was == digest("") {
				return p, false
			}
			return "", false
		}
		if pv.Def == nil {
			return "", false
		}
		if pv.Redefining {
			return p, false // a new definition on its way: it runs that
		}
		if _, span, ok := strings.Cut(was, "@"); ok && pv.Def.Array != nil && grew(span, *pv.Def.Array) {
			// An array grown: its new indices run to done first (trial
			// BA: its dependant went back to waiting meanwhile).
			return p, false
		}
		if pv.State == store.StateDone {
			return "", true
		}
		// Running it, waiting to, or resting short of done (failed,
		// stopped): once it has run to done, name runs again.
		parents, known := parentRecords(pv.Def, g.record)
		if wasDigest, _, _ := strings.Cut(was, "@"); known && named && wasDigest != digest(doneMark(pv.Def.ProcessFingerprint(), parents)) {
			return p, false
		}
		// The definition name's run followed, after the same parents: a
		// job upstream of it may still have another (trial AO: a parent
		// started again, waiting for its own parent's new definition,
		// left its child shown up to date, which then ran again).
		return "", true
	})
}

// walkAfter walks the batch parents in name's after (a service is never
// behind), each as at says: what it finds at parent p of child (declared
// whether a file declares p, was what child's done record holds of p,
// named whether it names p), and whether the walk goes on up through p
// first. The first found is the answer, kept in memo for name as for each
// name it walked through.
func (g *depGraph) walkAfter(name string, memo map[string]string, at func(child, p string, pv jobView, declared bool, was string, named bool) (found string, up bool)) string {
	if b, ok := memo[name]; ok {
		return b
	}
	memo[name] = ""
	v, ok := g.view(name)
	if !ok || v.Def == nil || len(v.Def.After) == 0 {
		return ""
	}
	for _, p := range v.Def.After {
		pv, declared := g.view(p)
		if declared && pv.Def != nil && pv.Def.Restart == luaapi.RestartAlways {
			continue
		}
		r, named := recordParent(v.DoneFP, p)
		found, up := at(name, p, pv, declared, r, named)
		if up {
			if b := g.walkAfter(p, memo, at); b != "" {
				memo[name] = b
				return b
			}
		}
		if found != "" {
			memo[name] = found
			return found
		}
	}
	return ""
}

// releasedAt is when parents that let a job run did so: the last of them
// to come where it is, but not before the job began to wait (waiting),
// and now at the latest. A job its parents let run takes its place in
// line then (as Slurm's eligible time), and the jobs one parent's end lets
// run arrive together, in the order they are declared (trial AH: dep and
// dep2, after one parent, queued in the order their goroutines happened
// to look; the review: a parent done long ago, its file back, put one
// ahead of older waiters).
func releasedAt(facts []Dependency, waiting, now time.Time) time.Time {
	at := waiting
	for _, f := range facts {
		if f.Since.After(at) {
			at = f.Since
		}
	}
	if at.IsZero() || at.After(now) {
		return now
	}
	return at
}

// gate says whether a job of definition def may enter the placer, and the
// facts about its parents.
func gate(facts []Dependency) bool {
	for _, f := range facts {
		if !f.Satisfied {
			return false
		}
	}
	return true
}

// The record of what a batch job was run after. A job is done once per
// definition; for a dependant, the definition includes, for each batch
// parent in `after`, the definition of that parent whose run it followed:
// a parent that runs a changed definition to done makes its dependants
// run again after it. The record is the process fingerprint, then
// "|name=record" for each such parent, sorted; with none it is the process
// fingerprint alone, as it was before dependencies.

// doneMark is the record for process fingerprint fp run after parents
// (name → the parent's own done record).
func doneMark(fp string, parents map[string]string) string {
	return markOf(fp, parents, func(_, r string) string { return parentDigest(r) })
}

// markOf is the record for process fingerprint fp run after parents, each
// parent written as what(name, its done record) says.
func markOf(fp string, parents map[string]string, what func(name, record string) string) string {
	if len(parents) == 0 {
		return fp
	}
	var b strings.Builder
	b.WriteString(fp)
	for _, n := range slices.Sorted(maps.Keys(parents)) {
		b.WriteString("|")
		b.WriteString(n)
		b.WriteString("=")
		b.WriteString(what(n, parents[n]))
	}
	return b.String()
}

// An array's done record is its indices' (arrayRecord): the definition's
// where they agree, the same however many there are. As a parent, it is
// looked up with the range of indices it is made of, spanned
// (RECORD#FROM-TO), and a dependant's record keeps that range beside the
// record's digest (DIGEST@FROM-TO, parentDigest): an array whose new
// indices ran to done ran something new (trial BA). A record holds no
// "#" but spanned's, and a dependant's record no "@" but after a digest.

// spanned is an array's done record with the range of indices it is made
// of; "" stays "": not every index has run to done.
func spanned(record string, span luaapi.Range) string {
	if record == "" {
		return ""
	}
	return record + "#" + strconv.Itoa(span.From) + "-" + strconv.Itoa(span.To)
}

// parentDigest is a parent's done record (an array's spanned) as a
// dependant's record holds it: its digest, and an array's range.
func parentDigest(r string) string {
	base, span, ok := strings.Cut(r, "#")
	if !ok {
		return digest(r)
	}
	return digest(base) + "@" + span
}

// parentMoved reports whether a parent of which a dependant's record
// holds was (parentDigest) ran something new to done since, its done
// record r now: another definition, or an array indices beyond the range
// was says. An array grown, with no done record until its new indices
// have run, has not yet: a dependant done stays done meanwhile, and one
// its record says nothing of the range of (written before ranges were
// kept) runs again after it, as it did.
func parentMoved(was, r string) bool {
	wasDigest, wasSpan, spanKnown := strings.Cut(was, "@")
	if r == "" {
		return !spanKnown && was != ""
	}
	base, span, isArray := strings.Cut(r, "#")
	if wasDigest != digest(base) {
		return true
	}
	if !isArray || !spanKnown {
		return false
	}
	now, ok := parseSpan(span)
	return !ok || grew(wasSpan, now)
}

// grew reports whether range now has indices the range span (FROM-TO)
// lacks; true where span cannot be read.
func grew(span string, now luaapi.Range) bool {
	was, ok := parseSpan(span)
	return !ok || now.From < was.From || now.To > was.To
}

// parseSpan reads a range written FROM-TO.
func parseSpan(s string) (luaapi.Range, bool) {
	from, to, ok := strings.Cut(s, "-")
	f, err1 := strconv.Atoi(from)
	t, err2 := strconv.Atoi(to)
	return luaapi.Range{From: f, To: t}, ok && err1 == nil && err2 == nil
}

// stillDone reports whether a job done as recorded is still done for
// process fingerprint fp and parents as they are now (name → the parent's
// done record), and the record to keep. A parent the record names with
// another record ran a new definition since: not done. A parent it does
// not name was added to after since the run, and a parent no longer named
// was removed: after is policy, an edit applies in place, so the job stays
// done, and the record follows the parents now named, keeping what it
// holds of those it named (an array shrunk, or grown with its new indices
// still to run, is as the run followed it).
func stillDone(recorded, fp string, parents map[string]string) (bool, string) {
	if recordFP(recorded) != fp || parentsMoved(recorded, parents) {
		return false, recorded
	}
	return true, markOf(fp, parents, func(n, r string) string {
		if was, ok := recordParent(recorded, n); ok && (r == "" || strings.Contains(was, "@") || !strings.Contains(r, "#")) {
			return was
		}
		// New to the record; or an array's, written before its range
		// was kept, which now says it (the range the run followed is
		// that one: the array is as it was).
		return parentDigest(r)
	})
}

// parentsMoved reports whether a parent that record names ran something
// new to done since (parents: name → its done record now; parentMoved).
func parentsMoved(record string, parents map[string]string) bool {
	for n, r := range parents {
		if was, ok := recordParent(record, n); ok && parentMoved(was, r) {
			return true
		}
	}
	return false
}

// recordFP is the process fingerprint in a done record.
func recordFP(record string) string {
	fp, _, _ := strings.Cut(record, "|")
	return fp
}

// recordParent is the digest of parent name's done record that a done
// record holds, the one its run followed, and whether it names name at
// all. Read in place: a status walks every done job's record.
func recordParent(record, name string) (string, bool) {
	_, rest, _ := strings.Cut(record, "|")
	for rest != "" {
		var part string
		part, rest, _ = strings.Cut(rest, "|")
		if n, r, _ := strings.Cut(part, "="); n == name {
			return r, true
		}
	}
	return "", false
}

// digest is a parent's done record as a dependant's record holds it: a
// hash, so that records do not nest (a parent's own record names its
// parents).
func digest(record string) string {
	if record == "" {
		return ""
	}
	sum := sha256.Sum256([]byte(record))
	return hex.EncodeToString(sum[:16])
}

// parentRecords are the done records of the batch parents in def's after,
// by name (a service never ends done: it is not in the record). lookup
// says, for a parent, its done record, whether it is a service, and
// whether it is known at all; known is false when one of them is not.
func parentRecords(def *luaapi.Job, lookup func(name string) (record string, service, known bool)) (map[string]string, bool) {
	if len(def.After) == 0 {
		return nil, true
	}
	parents := make(map[string]string, len(def.After))
	for _, n := range def.After {
		record, service, known := lookup(n)
		if !known {
			return nil, false
		}
		if !service {
			parents[n] = record
		}
	}
	return parents, true
}

// relatives are the parents of job name (of definition def) and its
// dependants, for berth show. For a dependant, Kind is how it names this
// job and Satisfied whether this job lets it run.
func (d *Daemon) relatives(name string, def *luaapi.Job) (parents, dependants []Dependency) {
	g := d.deps.Load()
	parents, dependants = parentsOf(g, def), []Dependency{}
	if parents == nil {
		parents = []Dependency{}
	}
	if g == nil {
		return parents, dependants
	}
	me, _ := g.view(name)
	for _, k := range g.dependants[name] {
		v, ok := g.view(k)
		if !ok {
			continue
		}
		kind := depAfter
		if v.Def != nil && !slices.Contains(v.Def.After, name) {
			kind = depAfterAny
		}
		f := factOf(k, kind, v)
		f.Satisfied = me.Def != nil && factOf(name, kind, me).Satisfied
		f.ExitCode, f.Signal, f.Reason = nil, "", ""
		dependants = append(dependants, f)
	}
	return parents, dependants
}
