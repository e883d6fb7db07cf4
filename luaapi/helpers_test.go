package luaapi

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/berthd/berth/accounting"
	"github.com/berthd/berth/supervisor/testkit"
)

// testMachine is the machine every test file sees.
var testMachine = Machine{CPUs: 32, GPUs: 4, RAMBytes: 256 * accounting.GiB, RAMKnown: true, Hostname: "gpu01"}

// testOptions make the heap guard quick to fire and the grace long, so that
// a file stopped by the interpreter is always reported with its line (the
// abandonment path, which has no line, is tested on its own). The budget is
// generous so that a slow machine under -race reaches the heap bound, not
// the budget, in the files that test the heap guard: it is the process's CPU
// time, and the collector's work under the race detector counts in it.
// Tests of the budget shorten it.
func testOptions() Options {
	return Options{
		Machine:        testMachine,
		Budget:         10 * time.Second,
		grace:          5 * time.Second,
		heapLimitBytes: 32 << 20,
	}
}

// settle waits until no evaluation abandoned by an earlier test is still
// running: the heap guard measures the whole process, so one still growing
// the heap would be blamed on the next file.
func settle(t *testing.T) {
	t.Helper()
	testkit.WaitFor(t, 30*time.Second, "no abandoned evaluation to be running", func() bool { return running.Load() == 0 })
}

func evalString(t *testing.T, src string) *File {
	t.Helper()
	settle(t)
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

// loadDir evaluates every job file of dir, in lexical order, and combines
// them: what the daemon does with a directory, without its child.
func loadDir(tb testing.TB, dir string, opts Options) *Set {
	tb.Helper()
	paths, err := filepath.Glob(filepath.Join(dir, "*.lua"))
	if err != nil {
		tb.Fatal(err)
	}
	files := make([]*File, 0, len(paths))
	for _, path := range paths { // Glob sorts them
		src, err := os.ReadFile(path)
		if err != nil {
			tb.Fatal(err)
		}
		files = append(files, Eval(path, src, opts))
	}
	return Combine(files)
}
