package luaapi

import (
	"sort"

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

	for _, f := range accepted {
		for _, j := range f.Jobs {
			j = j.clone()
			if j.Flavor != "" {
				if fl, ok := flavors[j.Flavor]; ok {
					j.Resources = fl.Resources
				} else {
					j.Resources = accounting.Resources{}
					s := subject{pos: j.Pos, kind: "job", name: j.Name}
					set.Problems = append(set.Problems, errUnknownFlavor(s, j.Flavor, names))
				}
			}
			set.Jobs = append(set.Jobs, j)
		}
	}
	sort.Slice(set.Jobs, func(i, j int) bool { return set.Jobs[i].Name < set.Jobs[j].Name })
	for _, f := range accepted {
		set.Quotas = append(set.Quotas, f.Quotas...)
	}
	sort.Slice(set.Quotas, func(i, j int) bool { return set.Quotas[i].Name < set.Quotas[j].Name })
	return set
}
