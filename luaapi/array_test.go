package luaapi

import "testing"

func TestArrayDecoded(t *testing.T) {
	f := evalString(t, `
job "sweep" { cmd = "./train", array = 100, max_parallel = 4 }
job "zero" { cmd = "./train", array = { from = 0, to = 99 } }
job "plain" { cmd = "./train" }
`)
	if len(f.Errors) > 0 {
		t.Fatal(f.Errors)
	}
	byName := map[string]Job{}
	for _, j := range f.Jobs {
		byName[j.Name] = j
	}
	if a := byName["sweep"].Array; a == nil || *a != (Range{From: 1, To: 100}) || a.Size() != 100 || byName["sweep"].MaxParallel != 4 {
		t.Errorf("sweep: array %+v, max_parallel %d; want 1..100, 4", a, byName["sweep"].MaxParallel)
	}
	if a := byName["zero"].Array; a == nil || *a != (Range{From: 0, To: 99}) || a.Size() != 100 || byName["zero"].MaxParallel != 0 {
		t.Errorf("zero: array %+v, max_parallel %d; want 0..99, no bound", a, byName["zero"].MaxParallel)
	}
	if byName["plain"].Array != nil {
		t.Errorf("plain is an array: %+v", byName["plain"].Array)
	}
}

// The range and max_parallel are policy: an edit adds or removes indices
// and leaves the runs of the others alone. A job that is not an array
// keeps the fingerprint it had before arrays existed.
func TestArrayFingerprints(t *testing.T) {
	plain := newJob("sweep", Pos{})
	plain.Cmd = []string{"./train"}
	a := plain.clone()
	a.Array = &Range{From: 1, To: 10}
	b := a.clone()
	b.Array.To = 20
	c := a.clone()
	c.MaxParallel = 2
	if a.ProcessFingerprint() != plain.ProcessFingerprint() || b.ProcessFingerprint() != a.ProcessFingerprint() || c.ProcessFingerprint() != a.ProcessFingerprint() {
		t.Error("the range or max_parallel changed the process fingerprint")
	}
	pols := map[string]string{"plain": plain.PolicyFingerprint(), "a": a.PolicyFingerprint(), "b": b.PolicyFingerprint(), "c": c.PolicyFingerprint()}
	seen := map[string]string{}
	for name, fp := range pols {
		if other, dup := seen[fp]; dup {
			t.Errorf("%s and %s have one policy fingerprint", name, other)
		}
		seen[fp] = name
	}
	if a.Array == b.Array {
		t.Error("clone shares the range")
	}
}
