package luaapi

import (
	"reflect"
	"strings"
	"testing"

	"github.com/berthd/berth/accounting"
	"github.com/berthd/berth/supervisor/testkit"
)

// TestOwnersFile: a person's file declares their jobs, named OWNER/NAME and
// run as them, and may use the administrators' flavors.
func TestOwnersFile(t *testing.T) {
	settle(t)
	opts := testOptions()
	opts.Owner = "alice"
	f := Eval("/var/spool/berth/alice/train.lua", []byte(`job "train" { cmd = "python3 train.py", flavor = "small" }
job "eval" { cmd = "python3 eval.py", cpus = 2 }`), opts)
	if len(f.Errors) > 0 {
		t.Fatalf("errors: %v", f.Errors)
	}
	admin := mustEval(t, `flavor "small" { cpus = 1, ram = "1G" }`)
	set := Combine([]*File{admin, f})
	if len(set.Jobs) != 2 {
		t.Fatalf("jobs %+v", set.Jobs)
	}
	for _, j := range set.Jobs {
		if j.Owner != "alice" || j.User != "alice" || !strings.HasPrefix(j.Name, "alice/") {
			t.Errorf("job %q: owner %q user %q", j.Name, j.Owner, j.User)
		}
	}
	if got := set.Jobs[1]; got.Name != "alice/train" || got.Resources != (accounting.Resources{CPUs: 1, RAMBytes: accounting.GiB}) {
		t.Errorf("train: %q with %+v, want alice/train with the flavor's size", got.Name, got.Resources)
	}
	// The same name in two people's files is two jobs.
	bob := Eval("/var/spool/berth/bob/train.lua", []byte(`job "train" { cmd = "x" }`), Options{Machine: testMachine, Owner: "bob"})
	if set := Combine([]*File{admin, f, bob}); len(set.Errors) > 0 || len(set.Jobs) != 3 {
		t.Errorf("alice/train and bob/train: %v, %d jobs", set.Errors, len(set.Jobs))
	}
}

// TestOwnersLimits: what a person's file may not do, each refused with the
// reason; pinned in testdata/owner.err.
func TestOwnersLimits(t *testing.T) {
	settle(t)
	opts := testOptions()
	opts.Owner = "alice"
	f := Eval("alice.lua", []byte(`job "as-root" { cmd = "id", user = "root" }
job "in-group" { cmd = "id", group = "video" }
flavor "huge" { cpus = 64 }
quota "alice" { gpus = 8 }
job "fine" { cmd = "true" }`), opts)
	var b strings.Builder
	for _, e := range f.Errors {
		b.WriteString(e.Problem.String() + "\t" + e.Error() + "\n")
	}
	if len(f.Jobs) != 0 {
		t.Errorf("a refused file has jobs: %+v", f.Jobs)
	}
	testkit.Golden(t, "testdata/owner.err", []byte(b.String()))
}

// TestQuotas: an administrator's file declares quotas, each field left out
// bounding nothing; a quota name is a user's or "*"; two files may not
// declare one name.
func TestQuotas(t *testing.T) {
	settle(t)
	f := Eval("a.lua", []byte(`quota "alice" { gpus = 2, cpus = 32, ram = "128G", gpu_mem = "40G" }
quota "*" { gpus = 1 }`), testOptions())
	want := []Quota{
		{Name: "alice", Pos: Pos{"a.lua", 1}, Limits: accounting.Quota{CPUs: 32, GPUs: 2, RAMBytes: 128 * accounting.GiB, GPUMemBytes: 40 * accounting.GiB}},
		{Name: "*", Pos: Pos{"a.lua", 2}, Limits: accounting.Quota{CPUs: -1, GPUs: 1, RAMBytes: -1, GPUMemBytes: -1}},
	}
	if !reflect.DeepEqual(f.Quotas, want) {
		t.Errorf("quotas %+v, want %+v", f.Quotas, want)
	}
	set := Combine([]*File{f, Eval("other.lua", []byte(`quota "alice" { gpus = 4 }`), testOptions())})
	if len(set.Errors) != 1 || set.Errors[0].Problem != NameTaken || len(set.Quotas) != 2 || set.Quotas[0].Name != "*" {
		t.Errorf("a quota declared twice: %v; quotas %+v", set.Errors, set.Quotas)
	} else if !strings.Contains(set.Errors[0].Error(), "a person has one quota, so this file is not loaded until one of them is removed") {
		t.Errorf("a quota declared in two files: %v", set.Errors[0])
	}
	// In one file: merge them.
	twice := Eval("a.lua", []byte("quota \"bob\" { gpus = 1 }\nquota \"bob\" { cpus = 4 }"), testOptions())
	if len(twice.Errors) != 1 || !strings.Contains(twice.Errors[0].Error(), "declared twice in this file (first at line 1); a person has one quota, so merge the two") {
		t.Errorf("a quota declared twice in a file: %v", twice.Errors)
	}
	byOwner, others := set.QuotaLimits()
	if !reflect.DeepEqual(byOwner, map[string]accounting.Quota{"alice": want[0].Limits}) || others != want[1].Limits {
		t.Errorf("QuotaLimits = %+v, %+v; want alice's and everyone's", byOwner, others)
	}
	if byOwner, others := (&Set{}).QuotaLimits(); len(byOwner) != 0 || others != accounting.NoQuota {
		t.Errorf("QuotaLimits of no quota = %+v, %+v; want none and NoQuota", byOwner, others)
	}
	for _, bad := range []string{`quota "Alice" { gpus = 1 }`, `quota "al ice" { gpus = 1 }`, `quota "alice" { gpu = 1 }`, `quota "alice" { gpus = -1 }`, `quota "alice" { ram = 5 }`} {
		if f := evalString(t, bad); len(f.Errors) == 0 {
			t.Errorf("%s: no error", bad)
		}
	}
}
