package luaapi

import (
	"testing"
	"time"

	"github.com/berthd/berth/accounting"
)

// testMachine is the machine every test file sees.
var testMachine = Machine{CPUs: 32, GPUs: 4, RAMBytes: 256 * accounting.GiB, RAMKnown: true, Hostname: "gpu01"}

// testOptions make the heap guard quick to fire and the grace long, so that
// a file stopped by the interpreter is always reported with its line (the
// abandonment path, which has no line, is tested on its own). The budget is
// generous so that a slow machine under -race reaches the heap bound, not
// the budget, in the files that test the heap guard; tests of the budget
// shorten it.
func testOptions() Options {
	return Options{
		Machine:        testMachine,
		Budget:         2 * time.Second,
		grace:          5 * time.Second,
		heapLimitBytes: 32 << 20,
	}
}

func evalString(t *testing.T, src string) *File {
	t.Helper()
	return Eval("test.lua", []byte(src), testOptions())
}

// mustEval evaluates src and fails the test on any error.
func mustEval(t *testing.T, src string) *File {
	t.Helper()
	f := evalString(t, src)
	for _, e := range f.Errors {
		t.Errorf("unexpected error: %v", e)
	}
	return f
}

// problems lists the Problem of each error.
func problems(errs []*Error) []Problem {
	var ps []Problem
	for _, e := range errs {
		ps = append(ps, e.Problem)
	}
	return ps
}
