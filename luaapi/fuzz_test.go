package luaapi

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// FuzzEval feeds arbitrary sources to Eval: it must never panic, must come
// back (the fuzzing engine reports an input that hangs), and must report
// every mistake as an *Error about the file it was given.
func FuzzEval(f *testing.F) {
	paths, err := filepath.Glob("testdata/*/*.lua")
	if err != nil {
		f.Fatal(err)
	}
	examples, err := filepath.Glob("../examples/*/*.lua")
	if err != nil || len(examples) == 0 {
		f.Fatalf("no examples to seed from: %v", err)
	}
	paths = append(paths, examples...)
	for _, p := range paths {
		src, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(src)
	}
	opts := Options{
		Machine:        testMachine,
		Budget:         100 * time.Millisecond,
		heapLimitBytes: 64 << 20,
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		file := Eval("fuzz.lua", src, opts)
		if len(file.Errors) > 0 && (file.Jobs != nil || file.Flavors != nil) {
			t.Errorf("a rejected file has declarations")
		}
		for _, e := range file.Errors {
			var target *Error
			if !errors.As(error(e), &target) || target == nil {
				t.Fatalf("%v is not an *Error", e)
			}
			if e.Pos.File != "fuzz.lua" || e.Problem == 0 || e.Detail == "" || strings.ContainsAny(e.Error(), "\n\r") {
				t.Errorf("bad error %+v", e)
			}
		}
		if len(file.Errors) > 0 && file.Quotas != nil {
			t.Errorf("a rejected file has quotas")
		}
		// The same file as a person's: only jobs, all theirs.
		owned := opts
		owned.Owner = "alice"
		if mine := Eval("fuzz.lua", src, owned); len(mine.Errors) == 0 {
			if len(mine.Flavors) > 0 || len(mine.Quotas) > 0 {
				t.Errorf("a person's file declared flavors or quotas")
			}
			for _, j := range mine.Jobs {
				if j.Owner != "alice" || j.User != "alice" || j.Group != "" || !strings.HasPrefix(j.Name, "alice/") {
					t.Errorf("a person's job %q: owner %q, user %q, group %q", j.Name, j.Owner, j.User, j.Group)
				}
			}
		}
		set := Combine([]*File{file})
		names := map[string]bool{}
		for _, j := range set.Jobs {
			names[j.Name] = true
		}
		troubled := map[string]bool{}
		for _, p := range set.Problems {
			if p.Pos.File != "fuzz.lua" || p.Name == "" || p.Detail == "" {
				t.Errorf("bad problem %+v", p)
			}
			troubled[p.Name] = true
		}
		for _, j := range set.Jobs {
			// Every dependency is a job of the set, or the job is a
			// problem (an unknown name, itself, a cycle).
			for _, n := range append(append([]string(nil), j.After...), j.AfterAny...) {
				if (!names[n] || n == j.Name) && !troubled[j.Name] {
					t.Errorf("job %s waits for %q, which is no other job, and is no problem", j.Name, n)
				}
			}
			if len(j.Cmd) == 0 || j.Dir == "" || j.ProcessFingerprint() == j.PolicyFingerprint() {
				t.Errorf("bad job %+v", j)
			}
			for k := range j.Env {
				if strings.HasPrefix(k, "BERTH_") {
					t.Errorf("job %s was accepted with env %s, which is berth's", j.Name, k)
				}
			}
		}
	})
}
