package luaapi

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/berthd/berth/supervisor/testkit"
)

// messages renders every error and problem of a set, one per line.
func messages(set *Set) []byte {
	var b bytes.Buffer
	for _, e := range append(append([]*Error(nil), set.Errors...), set.Problems...) {
		b.WriteString(e.Error())
		b.WriteByte('\n')
	}
	return b.Bytes()
}

// goldenBudgets shorten the budget of the files that run until it ends.
var goldenBudgets = map[string]time.Duration{
	"infinite_loop.lua":       100 * time.Millisecond,
	"infinite_loop_pcall.lua": 100 * time.Millisecond,
}

// TestGoldenInvalid pins every sentence a person reads about a bad file.
func TestGoldenInvalid(t *testing.T) {
	paths, err := filepath.Glob("testdata/invalid/*.lua")
	if err != nil {
		t.Fatal(err)
	}
	if len(paths) < 30 {
		t.Fatalf("only %d invalid files", len(paths))
	}
	for _, path := range paths {
		t.Run(filepath.Base(path), func(t *testing.T) {
			src, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			settle(t)
			opts := testOptions()
			if d, ok := goldenBudgets[filepath.Base(path)]; ok {
				opts.Budget = d
			}
			set := Combine([]*File{Eval(path, src, opts)})
			got := messages(set)
			if len(got) == 0 {
				t.Fatalf("%s gave no error", path)
			}
			for _, e := range append(set.Errors, set.Problems...) {
				checkError(t, e, path)
			}
			testkit.Golden(t, strings.TrimSuffix(path, ".lua")+".err", got)
		})
	}
}

// TestGoldenDuplicateAcrossFiles pins the cross-file messages.
func TestGoldenDuplicateAcrossFiles(t *testing.T) {
	set := loadDir(t, "testdata/dup", testOptions())
	testkit.Golden(t, "testdata/dup.err", messages(set))
}

// checkError holds for every error luaapi reports.
func checkError(t *testing.T, err error, path string) {
	t.Helper()
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("%v is a %T, not an *Error", err, err)
	}
	if e.Pos.File != path {
		t.Errorf("%v: file %q, want %q", e, e.Pos.File, path)
	}
	if e.Problem == 0 || e.Problem.String() == "" {
		t.Errorf("%v: no problem", e)
	}
	if e.Detail == "" || strings.ContainsAny(e.Error(), "\n\r") {
		t.Errorf("%q: empty, or not one line", e.Error())
	}
}
