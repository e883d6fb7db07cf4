package luaapi

import (
	"cmp"
	"slices"
	"sort"
	"strings"

	"github.com/berthd/berth/accounting"
)

// Combine applies the rules that span files to files already evaluated. The
// daemon re-evaluates only the files that changed and passes the previous
// good version of a file that now fails, so Combine works on any mix of
// results and never modifies them.
//
// Files are taken in lexical order of path. A job or flavor name declared in
// two files is an error on the later file, which is then rejected whole: a
// file applies entirely or not at all. A job whose flavor no accepted file
// declares is a Problem, not an error: its file stands, and the job waits to
// be looked at again when flavors change.
func Combine(files []*File) *Set {
	sorted := make([]*File, 0, len(files))
	for _, f := range files {
		if f != nil {
			sorted = append(sorted, f)
		}
	}
	sort.SliceStable(sorted, func(i, j int) bool { return sorted[i].Path < sorted[j].Path })

	set := &Set{Files: make([]*File, 0, len(sorted))}
	var crossErrors []*Error
	flavorAt := make(map[string]Pos)
	jobAt := make(map[string]Pos)
	quotaAt := make(map[string]Pos)
	var accepted []*File
	for _, f := range sorted {
		if len(f.Errors) > 0 {
			set.Files = append(set.Files, f)
			set.Errors = append(set.Errors, f.Errors...)
			continue
		}
		var errs []*Error
		for _, fl := range f.Flavors {
			if first, dup := flavorAt[fl.Name]; dup {
				errs = append(errs, errDuplicateAcross(subject{pos: fl.Pos, kind: "flavor", name: fl.Name}, first))
			}
		}
		for _, j := range f.Jobs {
			if first, dup := jobAt[j.Name]; dup {
				errs = append(errs, errDuplicateAcross(subject{pos: j.Pos, kind: "job", name: j.Name}, first))
			}
		}
		for _, q := range f.Quotas {
			if first, dup := quotaAt[q.Name]; dup {
				errs = append(errs, errDuplicateAcross(subject{pos: q.Pos, kind: "quota", name: q.Name}, first))
			}
		}
		if len(errs) > 0 {
			set.Files = append(set.Files, &File{Path: f.Path, Hash: f.Hash, Errors: errs})
			crossErrors = append(crossErrors, errs...)
			continue
		}
		for _, fl := range f.Flavors {
			flavorAt[fl.Name] = fl.Pos
		}
		for _, j := range f.Jobs {
			jobAt[j.Name] = j.Pos
		}
		for _, q := range f.Quotas {
			quotaAt[q.Name] = q.Pos
		}
		set.Files = append(set.Files, f)
		accepted = append(accepted, f)
	}
	set.Errors = append(set.Errors, crossErrors...)

	flavors := make(map[string]Flavor, len(flavorAt))
	for _, f := range accepted {
		for _, fl := range f.Flavors {
			flavors[fl.Name] = fl
			set.Flavors = append(set.Flavors, fl)
		}
	}
	names := make([]string, 0, len(flavors))
	for n := range flavors {
		names = append(names, n)
	}
	sort.Strings(names)
	sort.Slice(set.Flavors, func(i, j int) bool { return set.Flavors[i].Name < set.Flavors[j].Name })

	// Sized at once: the daemon keeps the set for as long as it is in force,
	// and appending would leave a fifth to a half of it unused.
	n := 0
	for _, f := range accepted {
		n += len(f.Jobs)
	}
	if n > 0 {
		set.Jobs = make([]Job, 0, n)
	}
	for _, f := range accepted {
		for i, j := range f.Jobs {
			j = j.clone()
			j.Order = i
			if j.Flavor != "" {
				if fl, ok := flavors[j.Flavor]; ok {
					j.Resources = fl.Resources
				} else {
					j.Resources = accounting.Resources{}
					set.Problems = append(set.Problems, errUnknownFlavor(j.subject(), j.Flavor, names, len(accepted) < len(set.Files)))
				}
			}
			set.Jobs = append(set.Jobs, j)
		}
	}
	sort.Slice(set.Jobs, func(i, j int) bool { return set.Jobs[i].Name < set.Jobs[j].Name })
	set.Problems = append(set.Problems, resolveDeps(set.Jobs)...)
	for _, f := range accepted {
		set.Quotas = append(set.Quotas, f.Quotas...)
	}
	sort.Slice(set.Quotas, func(i, j int) bool { return set.Quotas[i].Name < set.Quotas[j].Name })
	return set
}

// resolveDeps turns the names in each job's after and after_any into full
// job names, and reports what makes a job wait forever: a name no job has,
// the job itself, or a cycle. Each such job is a Problem, as a job whose
// flavor does not exist is: its file stands, the job cannot run. jobs are
// sorted by name, so the problems come in a stable order.
//
// A bare name in a person's file means their own job of that name, and
// only that: were it to fall back to an administrator's job of the name,
// removing their own would silently make them wait for another job.
// OWNER/NAME in a person's file may name only their own jobs: another
// person's edits must never re-run theirs. In an administrator's file a
// bare name is an administrator's job and OWNER/NAME a person's.
func resolveDeps(jobs []Job) []*Error {
	names := make([]string, len(jobs))
	byName := make(map[string]*Job, len(jobs))
	for i := range jobs {
		names[i] = jobs[i].Name
		byName[jobs[i].Name] = &jobs[i]
	}
	var problems []*Error
	bad := map[string]bool{}
	for i := range jobs {
		j := &jobs[i]
		if !j.HasDeps() {
			continue
		}
		s := j.subject()
		resolve := func(field string, given []string) []string {
			out := make([]string, 0, len(given))
			for _, n := range given {
				full := n
				if !strings.Contains(n, "/") && j.Owner != "" {
					full = j.Owner + "/" + n
				}
				owner, _, person := strings.Cut(full, "/")
				switch _, known := byName[full]; {
				case j.Owner != "" && person && owner != j.Owner:
					if !bad[j.Name] {
						problems = append(problems, errAfterOthers(s, field, n, owner))
					}
					bad[j.Name] = true
				case full == j.Name:
					if !bad[j.Name] {
						problems = append(problems, errAfterSelf(s, field))
					}
					bad[j.Name] = true
				case !known && byName[n] != nil && j.Owner != "":
					// A bare name is the person's own job: the
					// administrators' job of that name is not theirs.
					if !bad[j.Name] {
						problems = append(problems, errAfterAdmins(s, field, n, j.Owner))
					}
					bad[j.Name] = true
				case !known:
					// Each such name is said (a job declared in a file not
					// checked is known to berth check elsewhere).
					others := slices.DeleteFunc(slices.Clone(names), func(o string) bool { return o == j.Name })
					problems = append(problems, errUnknownJob(s, field, n, full, asWritten(others, j.Owner)))
					bad[j.Name] = true
				}
				if !slices.Contains(out, full) {
					out = append(out, full)
				}
			}
			return out
		}
		j.After = resolve("after", j.After)
		j.AfterAny = resolve("after_any", j.AfterAny)
		for _, n := range j.AfterAny {
			if slices.Contains(j.After, n) && !bad[j.Name] {
				problems = append(problems, errAfterBoth(s, n))
				bad[j.Name] = true
			}
		}
	}
	problems = append(problems, cycles(jobs, byName, bad)...)
	// In the order a person reads the files.
	slices.SortStableFunc(problems, func(a, b *Error) int {
		return cmp.Or(strings.Compare(a.Pos.File, b.Pos.File), cmp.Compare(a.Pos.Line, b.Pos.Line))
	})
	return problems
}

// cycles finds the jobs that wait for themselves through others, and
// reports each with the cycle that starts and ends at it. Jobs already
// reported (skip) are left out: they never run anyway.
func cycles(jobs []Job, byName map[string]*Job, skip map[string]bool) []*Error {
	// field is the field of from that names to.
	field := func(from *Job, to string) string {
		if slices.Contains(from.After, to) {
			return "after"
		}
		return "after_any"
	}
	next := func(j *Job) []string {
		var out []string
		for _, n := range slices.Concat(j.After, j.AfterAny) {
			if _, ok := byName[n]; ok && !skip[n] && !slices.Contains(out, n) {
				out = append(out, n)
			}
		}
		sort.Strings(out)
		return out
	}
	var problems []*Error
	for i := range jobs {
		start := &jobs[i]
		if skip[start.Name] || !start.HasDeps() {
			continue
		}
		// The shortest way back to start, breadth first: the cycle a
		// person reads is as short as it can be.
		from := map[string]string{}
		queue := []string{start.Name}
		found := false
		for len(queue) > 0 && !found {
			n := queue[0]
			queue = queue[1:]
			for _, m := range next(byName[n]) {
				if m == start.Name {
					from[start.Name] = n
					found = true
					break
				}
				if _, seen := from[m]; !seen {
					from[m] = n
					queue = append(queue, m)
				}
			}
		}
		if !found {
			continue
		}
		path := []string{start.Name}
		for n := from[start.Name]; n != start.Name; n = from[n] {
			path = append(path, n)
		}
		// Collected backwards from start: the waiting order is reversed.
		slices.Reverse(path[1:])
		path = append(path, start.Name)
		s := start.subject()
		var fields []string
		for k := 0; k+1 < len(path); k++ {
			if f := field(byName[path[k]], path[k+1]); !slices.Contains(fields, f) {
				fields = append(fields, f)
			}
		}
		problems = append(problems, errCycle(s, field(start, path[1]), fields, path))
	}
	return problems
}

// asWritten is how a file of owner's ("" for the administrators') would
// write each of the names it may name: a person's own jobs, bare.
func asWritten(names []string, owner string) []string {
	if owner == "" {
		return names
	}
	var out []string
	for _, n := range names {
		if own, ok := strings.CutPrefix(n, owner+"/"); ok {
			out = append(out, own)
		}
	}
	return out
}
