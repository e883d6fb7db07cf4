package luaapi

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
)

// TestDepsParse: after and after_any take a name or a list of names, kept
// once each, in order.
func TestDepsParse(t *testing.T) {
	f := mustEval(t, `
job "a" { cmd = "x" }
job "b" { cmd = "x" }
job "one" { cmd = "x", after = "a" }
job "list" { cmd = "x", after = { "a", "b", "a" }, after_any = { "b" } }
job "empty" { cmd = "x", after = {} }
job "person" { cmd = "x", after = "alice/train" }`)
	got := map[string][2][]string{}
	for _, j := range f.Jobs {
		got[j.Name] = [2][]string{j.After, j.AfterAny}
	}
	want := map[string][2][]string{
		"a": {nil, nil}, "b": {nil, nil},
		"one":    {{"a"}, nil},
		"list":   {{"a", "b"}, {"b"}},
		"empty":  {{}, nil},
		"person": {{"alice/train"}, nil},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %q\nwant %q", got, want)
	}
}

// TestDepsResolve: in a person's file a bare name is their own job, and
// OWNER/NAME may name only their own; an administrator's bare name is an
// administrator's job, and OWNER/NAME a person's.
func TestDepsResolve(t *testing.T) {
	settle(t)
	admin := Eval("/etc/berth/jobs.d/a.lua", []byte(`
job "fetch" { cmd = "x" }
job "prep" { cmd = "x" }
job "report" { cmd = "x", after = { "prep", "alice/train" } }`), testOptions())
	opts := testOptions()
	opts.Owner = "alice"
	alice := Eval("/var/spool/berth/alice/a.lua", []byte(`
job "prep" { cmd = "x" }
job "fetch" { cmd = "x" }
job "train" { cmd = "x", after = { "prep", "alice/fetch" }, after_any = "sort" }
job "sort" { cmd = "x" }`), opts)
	opts.Owner = "bob"
	bob := Eval("/var/spool/berth/bob/a.lua", []byte(`
job "prep" { cmd = "x" }
job "sweep" { cmd = "x", after = "prep" }`), opts)
	set := Combine([]*File{admin, alice, bob})
	if len(set.Errors)+len(set.Problems) > 0 {
		t.Fatalf("errors %v problems %v", set.Errors, set.Problems)
	}
	got := map[string][2][]string{}
	for _, j := range set.Jobs {
		if j.HasDeps() {
			got[j.Name] = [2][]string{j.After, j.AfterAny}
		}
	}
	want := map[string][2][]string{
		"report":      {{"prep", "alice/train"}, {}},
		"alice/train": {{"alice/prep", "alice/fetch"}, {"alice/sort"}},
		"bob/sweep":   {{"bob/prep"}, {}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %q\nwant %q", got, want)
	}
	// The files evaluated are left as they were.
	if alice.Jobs[2].After[0] != "prep" {
		t.Errorf("Combine changed a file's job: %q", alice.Jobs[2].After)
	}
}

// TestDepsNotOwn: a bare name in a person's file never falls back to an
// administrator's job of that name (their own gone, it is not theirs, and
// the problem says so), and a person's file cannot name another person's
// job.
func TestDepsNotOwn(t *testing.T) {
	settle(t)
	admin := Eval("/etc/berth/jobs.d/a.lua", []byte(`job "fetch" { cmd = "x" }`), testOptions())
	opts := testOptions()
	opts.Owner = "bob"
	bob := Eval("/var/spool/berth/bob/a.lua", []byte(`job "sweep" { cmd = "x" }`), opts)
	opts.Owner = "alice"
	alice := Eval("/var/spool/berth/alice/a.lua", []byte(`job "train" { cmd = "x", after = "fetch" }
job "eval" { cmd = "x", after_any = "bob/sweep" }`), opts)
	set := Combine([]*File{admin, bob, alice})
	var got []string
	for _, e := range set.Problems {
		got = append(got, fmt.Sprintf("%s %s %s: %s", e.Name, e.Problem, e.Field, e.Detail))
	}
	want := []string{
		`alice/train not own job after: field "after": alice has no job "fetch" (berth jobs lists them); the job "fetch" is an administrator's, and a person's job may wait only for their own jobs`,
		`alice/eval not own job after_any: field "after_any": job "bob/sweep" is bob's; a person's job may wait only for their own jobs, named bare (an administrator's file may name "bob/sweep")`,
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestDepsProblems: an unknown name (with a suggestion), the job itself,
// a name in both after and after_any, and each job of a 2- and a 3-cycle
// are problems on the job, with its file and line and the field, in line
// order; a cycle says the fields it is made of; a job downstream of a
// cycle is not one.
func TestDepsProblems(t *testing.T) {
	opts := testOptions()
	opts.Owner = "alice"
	settle(t)
	f := Eval("/var/spool/berth/alice/p.lua", []byte(`job "prep" { cmd = "x" }
job "train" { cmd = "x", after = "perp" }
job "me" { cmd = "x", after_any = "me" }
job "a" { cmd = "x", after = "b" }
job "b" { cmd = "x", after_any = "a" }
job "both" { cmd = "x", after = "prep", after_any = { "prep" } }
job "x" { cmd = "x", after = "y" }
job "y" { cmd = "x", after = "z" }
job "z" { cmd = "x", after = "x" }
job "down" { cmd = "x", after = "x" }
job "p" { cmd = "x", after_any = "q" }
job "q" { cmd = "x", after_any = "p" }
job "wxya" { cmd = "x", after = "wxyb" }`), opts)
	set := Combine([]*File{f})
	if len(set.Errors) > 0 {
		t.Fatal(set.Errors)
	}
	type row struct {
		job, field string
		line       int
		p          Problem
		text       string
	}
	var got []row
	for _, e := range set.Problems {
		got = append(got, row{e.Name, e.Field, e.Pos.Line, e.Problem, e.Detail})
	}
	want := []row{
		{"alice/train", "after", 2, UnknownJob, `field "after": job "perp" does not exist (did you mean "prep"? berth jobs lists them)`},
		{"alice/me", "after_any", 3, UnknownJob, `field "after_any" names the job itself; a job cannot wait for its own run`},
		{"alice/a", "after", 4, Cycle, "after and after_any make a cycle: alice/a → alice/b → alice/a; none of them could ever run, so remove one of the dependencies"},
		{"alice/b", "after_any", 5, Cycle, "after and after_any make a cycle: alice/b → alice/a → alice/b; none of them could ever run, so remove one of the dependencies"},
		{"alice/both", "after_any", 6, Conflict, `job "alice/prep" is in both after and after_any; name it in one: after waits for its success, after_any for its end`},
		{"alice/x", "after", 7, Cycle, "after makes a cycle: alice/x → alice/y → alice/z → alice/x; none of them could ever run, so remove one of the dependencies"},
		{"alice/y", "after", 8, Cycle, "after makes a cycle: alice/y → alice/z → alice/x → alice/y; none of them could ever run, so remove one of the dependencies"},
		{"alice/z", "after", 9, Cycle, "after makes a cycle: alice/z → alice/x → alice/y → alice/z; none of them could ever run, so remove one of the dependencies"},
		{"alice/p", "after_any", 11, Cycle, "after_any makes a cycle: alice/p → alice/q → alice/p; none of them could ever run, so remove one of the dependencies"},
		{"alice/q", "after_any", 12, Cycle, "after_any makes a cycle: alice/q → alice/p → alice/q; none of them could ever run, so remove one of the dependencies"},
		// Never the job itself as the one meant.
		{"alice/wxya", "after", 13, UnknownJob, `field "after": job "wxyb" does not exist (berth jobs lists them)`},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got\n%s\nwant\n%s", rows(got), rows(want))
	}
}

func rows[T any](xs []T) string {
	var b strings.Builder
	for _, x := range xs {
		b.WriteString(strings.TrimSpace(strings.ReplaceAll(strings.ReplaceAll(fmtAny(x), "\n", " "), "\t", " ")))
		b.WriteByte('\n')
	}
	return b.String()
}

// TestDepsPolicy: after is policy: it leaves the process fingerprint
// alone, changes the policy one, and a job without it keeps the policy
// fingerprint it had before after existed.
func TestDepsPolicy(t *testing.T) {
	plain := newJob("train", Pos{})
	plain.Cmd = []string{"x"}
	with := plain.clone()
	with.After = []string{"prep"}
	if plain.ProcessFingerprint() != with.ProcessFingerprint() {
		t.Error("after changed the process fingerprint")
	}
	if plain.PolicyFingerprint() == with.PolicyFingerprint() {
		t.Error("after left the policy fingerprint alone")
	}
	empty := plain.clone()
	empty.After = []string{}
	if plain.PolicyFingerprint() != empty.PolicyFingerprint() {
		t.Error("after = {} changed the policy fingerprint")
	}
}

func fmtAny(x any) string { return fmt.Sprintf("%+v", x) }
