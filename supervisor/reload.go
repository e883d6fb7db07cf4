package supervisor

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"time"

	"golang.org/x/sys/unix"

	"github.com/berthd/berth/luaapi"
	"github.com/berthd/berth/supervisor/watch"
)

// ReloadResult is what one reload did, for the log and `berth reload`.
type ReloadResult struct {
	Files    int      `json:"files"`
	Added    []string `json:"added"`
	Changed  []string `json:"changed"`
	Removed  []string `json:"removed"`
	Errors   []string `json:"errors"`
	Duration string   `json:"duration"`
}

// reload rescans the jobs directory, evaluates the files that changed, and
// applies the difference to the running jobs. Runs on the loop. A file that
// fails keeps its previous version in force; its error stays shown until the
// file is fixed or removed.
func (d *Daemon) reload(first bool) ReloadResult {
	return d.reloadWhen(first, true)
}

// reloadWhen is reload; asked is false when the watcher (an event, or its
// periodic safety rescan) prompted it rather than a person or systemd. Such
// a reload that finds nothing new does nothing at all: no RELOADING=1, no
// log line, no diff of every job.
func (d *Daemon) reloadWhen(first, asked bool) ReloadResult {
	began := d.now()
	scan, err := d.scanner.Scan()
	if !first && !asked && err == nil && d.nothingNew(scan) {
		return ReloadResult{}
	}
	if !first {
		d.notify(reloadingMessage())
		defer d.notify("READY=1")
	}
	if err != nil {
		d.log.Error("cannot scan the jobs directory", "dir", d.cfg.JobsDir, "error", err)
	}
	opts := luaapi.Options{Machine: luaMachine(d.cfg), Budget: d.cfg.LoadBudget, Logger: d.log.Named("lua")}
	for path, src := range scan.Changed {
		d.latest[path] = luaapi.Eval(path, src, opts)
		delete(d.refused, path)
	}
	for _, path := range scan.Removed {
		// A file that became refused, or a refused directory, is not a
		// removal: what was in force stays in force until it is fixed.
		if _, refused := scan.Refused[path]; refused || scan.DirRefused != nil {
			continue
		}
		d.forget(path)
	}
	if err == nil && scan.DirRefused == nil {
		// A refused file the scan no longer mentions is gone (the scanner
		// reported its removal when it was first refused).
		for path := range d.refused {
			if _, still := scan.Refused[path]; !still {
				if _, back := scan.Changed[path]; !back {
					d.forget(path)
				}
			}
		}
	}
	for path, err := range scan.Refused {
		d.refused[path] = err.Error()
	}
	set := d.inForce()
	res := d.apply(set, first)
	res.Files = len(set.Files)
	res.Duration = d.now().Sub(began).Round(time.Microsecond).String()

	d.mu.Lock()
	d.errs = d.errs[:0]
	for _, path := range slices.Sorted(maps.Keys(d.fileErrs)) {
		d.errs = append(d.errs, d.fileErrs[path]...)
	}
	if scan.DirRefused != nil {
		d.errs = append(d.errs, scan.DirRefused.Error())
	}
	res.Errors = append([]string{}, d.errs...)
	d.mu.Unlock()
	for _, e := range res.Errors {
		d.log.Error("configuration error", "error", e)
	}
	if !first {
		d.log.Info("reloaded", "files", res.Files, "added", len(res.Added), "changed", len(res.Changed),
			"removed", len(res.Removed), "errors", len(res.Errors), "duration_ms", d.now().Sub(began).Milliseconds())
	}
	d.changed.raise()
	d.settle.Reset(settleAfter)
	return res
}

// nothingNew reports whether a scan changes nothing the daemon knows: no
// file changed or went, and the same files are refused for the same reasons.
func (d *Daemon) nothingNew(scan watch.Scan) bool {
	if len(scan.Changed) > 0 || len(scan.Removed) > 0 || scan.DirRefused != nil || len(scan.Refused) != len(d.refused) {
		return false
	}
	for path, err := range scan.Refused {
		if d.refused[path] != err.Error() {
			return false
		}
	}
	return true
}

// forget drops everything known of a file that is gone.
func (d *Daemon) forget(path string) {
	delete(d.latest, path)
	delete(d.good, path)
	delete(d.refused, path)
}

// inForce decides which version of each file is in force, and why any
// latest version is not: a file that fails keeps its previous version in
// force, and so does one refused by the cross-file rules (a name another
// file declares) — the file that changed is the one refused, never the one
// already running. A file whose latest version is not in force is tried
// again at every reload, so fixing the other file is enough.
func (d *Daemon) inForce() *luaapi.Set {
	fileErrs := map[string][]string{}
	candidates := map[string]*luaapi.File{}
	var changed []string
	for path, refusal := range d.refused {
		// Refused from the start, a file has no evaluated version; its
		// refusal is shown all the same.
		if _, evaluated := d.latest[path]; !evaluated {
			fileErrs[path] = []string{refusal}
			if g := d.good[path]; g != nil {
				candidates[path] = g
			}
		}
	}
	for path, f := range d.latest {
		var why []string
		if refusal, ok := d.refused[path]; ok {
			why = []string{refusal}
		} else if len(f.Errors) > 0 {
			why = errorLines(f.Errors)
		}
		if why != nil {
			fileErrs[path] = why
			if g := d.good[path]; g != nil {
				candidates[path] = g
			}
			continue
		}
		candidates[path] = f
		if d.good[path] != f {
			changed = append(changed, path)
		}
	}
	set := luaapi.Combine(slices.Collect(maps.Values(candidates)))
	if len(rejectedFiles(set)) > 0 {
		// Admit what was in force, then each changed file in order.
		admitted := maps.Clone(candidates)
		for _, path := range changed {
			delete(admitted, path)
		}
		slices.Sort(changed)
		for _, path := range changed {
			why := d.admit(admitted, path, d.latest[path])
			if why == nil {
				continue
			}
			fileErrs[path] = why
			if g := d.good[path]; g != nil && d.admit(admitted, path, g) == nil {
				continue
			}
			delete(admitted, path)
		}
		candidates = admitted
		set = luaapi.Combine(slices.Collect(maps.Values(candidates)))
	}
	d.good = candidates
	d.fileErrs = fileErrs
	return set
}

// admit adds f to the admitted files unless the cross-file rules refuse it;
// it returns why they do, as sentences about f: Combine blames the file that
// sorts later, which may be the one already in force.
func (d *Daemon) admit(admitted map[string]*luaapi.File, path string, f *luaapi.File) []string {
	admitted[path] = f
	set := luaapi.Combine(slices.Collect(maps.Values(admitted)))
	var why []string
	for _, rf := range set.Files {
		for _, e := range rf.Errors {
			if rf.Path == path {
				why = append(why, e.Error())
				continue
			}
			// The other file is blamed for a name f declares too.
			why = append(why, fmt.Sprintf("%s%s %q is already declared in %s, which is in force; this file is not loaded until one of them is renamed",
				posPrefix(declaredAt(f, e)), kindOf(e), e.Name, posString(e.Pos)))
		}
	}
	if why != nil {
		delete(admitted, path)
	}
	return why
}

// declaredAt is where f declares the name an error is about.
func declaredAt(f *luaapi.File, e *luaapi.Error) luaapi.Pos {
	for _, j := range f.Jobs {
		if j.Name == e.Name {
			return j.Pos
		}
	}
	for _, fl := range f.Flavors {
		if fl.Name == e.Name {
			return fl.Pos
		}
	}
	return luaapi.Pos{File: f.Path}
}

func kindOf(e *luaapi.Error) string {
	if e.Kind == "" {
		return "name"
	}
	return e.Kind
}

func posString(p luaapi.Pos) string {
	if p.Line > 0 {
		return p.File + ":" + strconv.Itoa(p.Line)
	}
	return p.File
}

// rejectedFiles are the files Combine refused whole, with their errors.
func rejectedFiles(set *luaapi.Set) map[string][]string {
	out := map[string][]string{}
	for _, f := range set.Files {
		if len(f.Errors) > 0 {
			out[f.Path] = errorLines(f.Errors)
		}
	}
	return out
}

func errorLines(errs []*luaapi.Error) []string {
	out := make([]string, len(errs))
	for i, e := range errs {
		out[i] = e.Error()
	}
	return out
}

// apply makes the jobs match a newly combined set: new jobs start, changed
// ones are told what changed, removed ones stop. Unchanged jobs are not
// touched.
func (d *Daemon) apply(set *luaapi.Set, first bool) ReloadResult {
	res := ReloadResult{Added: []string{}, Changed: []string{}, Removed: []string{}, Errors: []string{}}
	problems := map[string]string{}
	for _, p := range set.Problems {
		problems[p.Name] = p.Error()
	}
	var unaccounted int64
	seen := map[string]bool{}

	d.mu.Lock()
	defer d.mu.Unlock()
	for i := range set.Jobs {
		def := &set.Jobs[i]
		seen[def.Name] = true
		if def.Resources.Unaccounted() {
			unaccounted++
		}
		invalid := problems[def.Name]
		if invalid == "" && (def.User != "" || def.Group != "") {
			if _, err := LookupCredentials(def.User, def.Group); err != nil {
				invalid = posPrefix(def.Pos) + "job \"" + def.Name + "\": " + err.Error()
			}
		}
		j, ok := d.jobs[def.Name]
		if !ok {
			initial, doneFP := d.remembered(def)
			j = d.newJob(def, invalid, initial, doneFP)
			d.jobs[def.Name] = j
			d.jobsWG.Go(func() { j.loop(d.jobsCtx) })
			j.in.post(jobMessage{def: def, invalid: invalid})
			if !first {
				res.Added = append(res.Added, def.Name)
			}
			continue
		}
		old := j.seenDef
		processChanged := old.ProcessFingerprint() != def.ProcessFingerprint()
		if processChanged || old.PolicyFingerprint() != def.PolicyFingerprint() ||
			old.Resources != def.Resources || old.Pos != def.Pos || invalid != j.seenInvalid {
			j.seenDef, j.seenInvalid = def, invalid
			requeue := old.Resources != def.Resources || old.Priority != def.Priority ||
				old.Timeout != def.Timeout || old.StopTimeout != def.StopTimeout
			j.in.post(jobMessage{def: def, invalid: invalid, processChanged: processChanged, requeue: requeue})
			if processChanged || old.PolicyFingerprint() != def.PolicyFingerprint() || old.Resources != def.Resources {
				res.Changed = append(res.Changed, def.Name)
			}
		}
	}
	for name, j := range d.jobs {
		if !seen[name] {
			j.in.post(jobMessage{remove: true})
			delete(d.jobs, name)
			res.Removed = append(res.Removed, name)
		}
	}
	d.unaccounted.Store(unaccounted)
	d.set = set
	slices.Sort(res.Added)
	slices.Sort(res.Changed)
	slices.Sort(res.Removed)
	return res
}

// remembered is where a job starts its life in this daemon: a batch job
// whose last run of this very definition ended done stays done (a job runs
// to completion once per definition), and so does one a person stopped or
// that failed for good; anything else runs.
func (d *Daemon) remembered(def *luaapi.Job) (initial life, doneFingerprint string) {
	rec, ok, err := d.store.Job(def.Name)
	if err != nil || !ok {
		return life{}, ""
	}
	fp := def.ProcessFingerprint()
	switch {
	case rec.DoneFingerprint == fp && rec.State == StateDone:
		return life{state: StateDone, since: rec.Changed}, rec.DoneFingerprint
	case rec.Fingerprint == fp && (rec.State == StateFailed || rec.State == StateStopped):
		return life{state: rec.State, since: rec.Changed, restarts: rec.Restarts}, rec.DoneFingerprint
	}
	return life{}, rec.DoneFingerprint
}

// reloadingMessage carries MONOTONIC_USEC in the same message as
// RELOADING=1: without it, systemctl reload can hang on newer systemd.
func reloadingMessage() string {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return "RELOADING=1\nMONOTONIC_USEC=" + strconv.FormatInt(ts.Nano()/1000, 10)
}

func luaMachine(cfg Config) luaapi.Machine {
	return luaapi.Machine{CPUs: cfg.Machine.CPUs, GPUs: len(cfg.Machine.GPUs), RAMBytes: cfg.Machine.RAM.Bytes,
		RAMKnown: cfg.Machine.RAM.Known, Hostname: cfg.Machine.Hostname}
}

func posPrefix(p luaapi.Pos) string { return posString(p) + ": " }
