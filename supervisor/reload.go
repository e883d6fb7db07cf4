package supervisor

import (
	"maps"
	"slices"
	"strconv"
	"time"

	"golang.org/x/sys/unix"

	"github.com/berthd/berth/luaapi"
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
	began := d.now()
	if !first {
		d.notify(reloadingMessage())
		defer d.notify("READY=1")
	}
	scan, err := d.scanner.Scan()
	if err != nil {
		d.log.Error("cannot scan the jobs directory", "dir", d.cfg.JobsDir, "error", err)
	}
	opts := luaapi.Options{Machine: luaMachine(d.cfg), Budget: d.cfg.LoadBudget, Logger: d.log.Named("lua")}
	previous := maps.Clone(d.good)
	for path, src := range scan.Changed {
		f := luaapi.Eval(path, src, opts)
		if len(f.Errors) > 0 {
			d.fileErrs[path] = errorLines(f.Errors)
			continue
		}
		d.good[path] = f
		delete(d.fileErrs, path)
	}
	for _, path := range scan.Removed {
		delete(d.good, path)
		delete(d.fileErrs, path)
	}
	for path, err := range scan.Refused {
		d.fileErrs[path] = []string{err.Error()}
	}

	set := luaapi.Combine(slices.Collect(maps.Values(d.good)))
	// A changed file refused by the cross-file rules (a name another file
	// declares) fails like any other: its previous version stays in force.
	if rejected := rejectedFiles(set); len(rejected) > 0 {
		for path, errs := range rejected {
			d.fileErrs[path] = errs
			if prev, ok := previous[path]; ok && prev != d.good[path] {
				d.good[path] = prev
			} else if !ok {
				delete(d.good, path)
			}
		}
		set = luaapi.Combine(slices.Collect(maps.Values(d.good)))
		for path, errs := range rejectedFiles(set) {
			d.fileErrs[path] = errs
		}
	}
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
	res.Errors = slices.Clone(d.errs)
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
	var res ReloadResult
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
			j.in.post(jobMessage{def: def, invalid: invalid, processChanged: processChanged})
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

func posPrefix(p luaapi.Pos) string {
	if p.Line > 0 {
		return p.File + ":" + strconv.Itoa(p.Line) + ": "
	}
	return p.File + ": "
}
