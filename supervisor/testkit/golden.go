package testkit

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// update is the one -update flag of every package's tests.
var update = flag.Bool("update", false, "rewrite golden files with what the tests got")

// contextLines is how many equal lines Golden shows before the first that
// differs.
const contextLines = 3

// Golden compares got with the golden file at path (relative to the test's
// package directory, as testdata/… is). With -update it writes got to path
// instead, creating its directory, and the test passes.
//
// A difference fails the test with the first line that differs, a few lines
// before it, and the command that rewrites the file; the file is the place
// to read the rest (git diff shows it once rewritten).
func Golden(t testing.TB, path string, got []byte) {
	t.Helper()
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote %s", path)
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (%s creates it)", err, rerun(t))
	}
	if bytes.Equal(got, want) {
		return
	}
	t.Errorf("%s differs from what the test got (%s rewrites it):\n%s", path, rerun(t), firstDiff(string(want), string(got)))
}

// rerun is the command that reruns t with -update.
func rerun(t testing.TB) string {
	test, _, _ := strings.Cut(t.Name(), "/")
	return fmt.Sprintf("go test %s -run '^%s$' -update", packageDir(), test)
}

// packageDir is the test's package directory as go test names it
// (./luaapi), found from the working directory, which go test sets to it.
func packageDir() string {
	wd, err := os.Getwd()
	if err != nil {
		return "."
	}
	for dir := wd; ; dir = filepath.Dir(dir) {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			rel, err := filepath.Rel(dir, wd)
			if err != nil || rel == "." {
				return "."
			}
			return "./" + filepath.ToSlash(rel)
		}
		if dir == filepath.Dir(dir) {
			return "."
		}
	}
}

// firstDiff shows the first line at which want and got differ, after up to
// contextLines equal lines, in the manner of a unified diff: "-" for the
// golden file's line, "+" for the test's.
func firstDiff(want, got string) string {
	wl, gl := strings.SplitAfter(want, "\n"), strings.SplitAfter(got, "\n")
	i := 0
	for i < len(wl) && i < len(gl) && wl[i] == gl[i] {
		i++
	}
	var b strings.Builder
	for j := max(0, i-contextLines); j < i; j++ {
		fmt.Fprintf(&b, "  %4d  %s", j+1, strings.TrimSuffix(wl[j], "\n")+"\n")
	}
	w, g := lineAt(wl, i), lineAt(gl, i)
	if strings.TrimSpace(w) == strings.TrimSpace(g) {
		// The difference is in blanks or the final newline: quote both
		// so that it shows.
		w, g = quoted(wl, i), quoted(gl, i)
	}
	fmt.Fprintf(&b, "- %4d  %s\n+ %4d  %s\n", i+1, w, i+1, g)
	fmt.Fprintf(&b, "(lines: %d in the golden file, %d got)", lines(want), lines(got))
	return b.String()
}

func lineAt(ls []string, i int) string {
	if i >= len(ls) || ls[i] == "" {
		return "(end of file)"
	}
	return strings.TrimSuffix(ls[i], "\n")
}

func quoted(ls []string, i int) string {
	if i >= len(ls) || ls[i] == "" {
		return "(end of file)"
	}
	return fmt.Sprintf("%q", ls[i])
}

func lines(s string) int {
	n := strings.Count(s, "\n")
	if s != "" && !strings.HasSuffix(s, "\n") {
		n++
	}
	return n
}
