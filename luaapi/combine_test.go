package luaapi

import (
	"reflect"
	"strings"
	"testing"

	"github.com/berthd/berth/accounting"
)

func evalAt(t *testing.T, path, src string) *File {
	t.Helper()
	return Eval(path, []byte(src), testOptions())
}

func TestCombine(t *testing.T) {
	a := evalAt(t, "d/a.lua", `flavor "small" { cpus = 2 }
job "one" { cmd = "x", flavor = "small" }`)
	b := evalAt(t, "d/b.lua", `job "two" { cmd = "x" }
job "one" { cmd = "y" }`)
	c := evalAt(t, "d/c.lua", `job "three" { cmd = "x", flavor = "missing" }`)
	bad := evalAt(t, "d/0bad.lua", `job "x" { cmd = "x", gpu = 1 }`)
	inputs := []*File{c, b, bad, a} // any order
	before := deepCopyFiles(inputs)

	set := Combine(inputs)

	if !reflect.DeepEqual(inputs, before) {
		t.Errorf("Combine modified its inputs")
	}
	var paths []string
	for _, f := range set.Files {
		paths = append(paths, f.Path)
	}
	if want := []string{"d/0bad.lua", "d/a.lua", "d/b.lua", "d/c.lua"}; !reflect.DeepEqual(paths, want) {
		t.Errorf("files %q, want %q", paths, want)
	}
	// b.lua is rejected whole: "two" goes with it.
	if set.Files[2] == b || len(set.Files[2].Errors) != 1 || set.Files[2].Jobs != nil || set.Files[2].Hash != b.Hash {
		t.Errorf("b.lua in the set: %+v", set.Files[2])
	}
	var names []string
	for _, j := range set.Jobs {
		names = append(names, j.Name)
	}
	if want := []string{"one", "three"}; !reflect.DeepEqual(names, want) {
		t.Errorf("jobs %q, want %q", names, want)
	}
	if set.Jobs[0].Resources != (accounting.Resources{CPUs: 2}) {
		t.Errorf("one: %v", set.Jobs[0].Resources)
	}
	// Every file error first, then the cross-file ones.
	if got := problems(set.Errors); !reflect.DeepEqual(got, []Problem{UnknownField, NameTaken}) {
		t.Errorf("errors %v", set.Errors)
	}
	dup := set.Errors[1]
	if dup.Pos != (Pos{"d/b.lua", 2}) || dup.Name != "one" || dup.Kind != "job" {
		t.Errorf("duplicate: %+v", dup)
	}
	if len(set.Problems) != 1 || set.Problems[0].Problem != UnknownFlavor || set.Problems[0].Pos != (Pos{"d/c.lua", 1}) || set.Problems[0].Field != "flavor" {
		t.Errorf("problems: %v", set.Problems)
	}
	if set.Jobs[1].Resources != (accounting.Resources{}) {
		t.Errorf("an unknown flavor resolved to %v", set.Jobs[1].Resources)
	}

	// The Set shares nothing with the files: changing it changes no file.
	set.Jobs[0].Cmd[0] = "changed"
	if a.Jobs[0].Cmd[0] == "changed" {
		t.Errorf("the set aliases a file's cmd")
	}
}

func TestCombineDuplicateFlavorAcrossFiles(t *testing.T) {
	a := evalAt(t, "a.lua", `flavor "f" { cpus = 1 }`)
	b := evalAt(t, "b.lua", `flavor "f" { cpus = 2 }
job "j" { cmd = "x", flavor = "f" }`)
	set := Combine([]*File{b, a})
	if len(set.Errors) != 1 || set.Errors[0].Kind != "flavor" || set.Errors[0].Pos.File != "b.lua" {
		t.Errorf("%v", set.Errors)
	}
	if len(set.Jobs) != 0 || len(set.Flavors) != 1 || set.Flavors[0].Resources.CPUs != 1 {
		t.Errorf("jobs %v flavors %v", set.Jobs, set.Flavors)
	}
}

// TestCombineFlavorOfRefusedFile: a job whose flavor no file in force
// declares, beside a file refused for its errors, is not sent to berth
// flavors (which lists only those in force) alone.
func TestCombineFlavorOfRefusedFile(t *testing.T) {
	a := evalAt(t, "a.lua", `job "ua" { cmd = "true", flavor = "gpu-big" }`)
	z := evalAt(t, "z.lua", `flavor "gpu-big" { cpus = 2 }
flavor "oops" { cpu = 1 }`)
	set := Combine([]*File{a, z})
	if len(set.Problems) != 1 || !strings.Contains(set.Problems[0].Error(), "a file with errors declares none until it is fixed") {
		t.Errorf("problems %v", set.Problems)
	}
	if set = Combine([]*File{a}); len(set.Problems) != 1 || strings.Contains(set.Problems[0].Error(), "a file with errors") {
		t.Errorf("with no file refused, problems %v", set.Problems)
	}
}

func TestCombineEmpty(t *testing.T) {
	set := Combine(nil)
	if len(set.Files)+len(set.Jobs)+len(set.Flavors)+len(set.Errors)+len(set.Problems) != 0 {
		t.Errorf("%+v", set)
	}
}

func deepCopyFiles(files []*File) []*File {
	out := make([]*File, len(files))
	for i, f := range files {
		c := *f
		c.Jobs = nil
		for _, j := range f.Jobs {
			c.Jobs = append(c.Jobs, j.clone())
		}
		c.Flavors = append([]Flavor(nil), f.Flavors...)
		c.Errors = nil
		for _, e := range f.Errors {
			ec := *e
			c.Errors = append(c.Errors, &ec)
		}
		out[i] = &c
	}
	return out
}
