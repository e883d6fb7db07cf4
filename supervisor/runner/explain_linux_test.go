package runner

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/berthd/berth/supervisor/testkit"
)

// openTree is a directory tree that every user may walk into, unlike
// t.TempDir (mode 0700), so that a job run as another user meets only the
// obstacles a test puts there. Its path is written TREE in messages.
func openTree(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "berth-runner-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	dir, err = filepath.EvalSymlinks(dir)
	if err != nil {
		t.Fatal(err)
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.WriteFile(filepath.Join(dir, "file"), []byte("not a directory\n"), 0o644))
	testkit.WriteExecutable(t, filepath.Join(dir, "plain.sh"), []byte("#!/bin/sh\nexit 0\n"), 0o644)
	testkit.WriteExecutable(t, filepath.Join(dir, "py4.sh"), []byte("#! /nonexistent/python4 -u\nprint(1)\n"), 0o755)
	must(os.Mkdir(filepath.Join(dir, "bin"), 0o755))
	must(os.Mkdir(filepath.Join(dir, "private"), 0o700))
	must(os.Mkdir(filepath.Join(dir, "private", "work"), 0o755))
	testkit.WriteExecutable(t, filepath.Join(dir, "private", "prog"), []byte("#!/bin/sh\nexit 0\n"), 0o755)
	testkit.WriteExecutable(t, filepath.Join(dir, "mine.sh"), []byte("#!/bin/sh\nexit 0\n"), 0o700)
	return dir
}

// startError starts spec and returns its error as a person reads it, with
// the tree's path written TREE.
func startError(t *testing.T, tree string, spec Spec) string {
	t.Helper()
	p, err := Start(spec)
	if err == nil {
		p.Stop(syscall.SIGKILL, 0)
		t.Fatalf("Start(%q in %q) started pid %d, want an error", spec.Argv, spec.Dir, p.PID())
	}
	var de *DirError
	var pe *ProgramError
	if !errors.As(err, &de) && !errors.As(err, &pe) {
		t.Errorf("Start(%q in %q) = %T %v, want a *DirError or a *ProgramError", spec.Argv, spec.Dir, err, err)
	}
	return strings.ReplaceAll(err.Error(), tree, "TREE")
}

// TestStartErrorsNameTheCause pins what a person reads when a job cannot
// start: the directory or the program at fault, and why, never the
// kernel's errno against /bin/sh.
func TestStartErrorsNameTheCause(t *testing.T) {
	t.Parallel()
	tree := openTree(t)
	sh := []string{"/bin/sh", "-c", "exit 0"}
	cases := []struct {
		name string
		spec Spec
	}{
		{"missing dir", Spec{Argv: sh, Dir: tree + "/missing"}},
		{"missing dir under a missing one", Spec{Argv: sh, Dir: tree + "/missing/deeper"}},
		{"dir is a file", Spec{Argv: sh, Dir: tree + "/file"}},
		{"dir under a file", Spec{Argv: sh, Dir: tree + "/file/sub"}},
		{"program not in PATH", Spec{Argv: []string{"no-such-program-berth"}, Env: []string{"PATH=" + tree + "/bin:/nonexistent"}}},
		{"program with an empty PATH", Spec{Argv: []string{"sh"}, Env: []string{"PATH="}}},
		{"program found through a relative PATH entry", Spec{Argv: []string{"mine.sh"}, Dir: tree, Env: []string{"PATH=/nonexistent:."}}},
		{"missing program", Spec{Argv: []string{tree + "/missing.sh"}}},
		{"missing program relative to dir", Spec{Argv: []string{"./missing.sh"}, Dir: tree}},
		{"program under a file", Spec{Argv: []string{tree + "/file/prog"}}},
		{"program is a directory", Spec{Argv: []string{tree + "/bin"}}},
		{"program not executable", Spec{Argv: []string{tree + "/plain.sh"}}},
		{"interpreter missing", Spec{Argv: []string{tree + "/py4.sh"}}},
		// More than MAX_ARG_STRLEN (128 KiB) in one string of the
		// environment: the kernel's "argument list too long".
		{"environment too large", Spec{Argv: sh, Env: []string{"BIG=" + strings.Repeat("x", 200<<10)}}},
	}
	var got strings.Builder
	for _, c := range cases {
		got.WriteString(c.name + ": " + startError(t, tree, c.spec) + "\n")
	}
	testkit.Golden(t, "testdata/start_errors.golden", []byte(got.String()))

	// What a caller branches on stays reachable under the sentence.
	for _, c := range []struct {
		spec Spec
		want error
	}{
		{cases[0].spec, fs.ErrNotExist},
		{cases[4].spec, ErrNotFound},
		{cases[6].spec, ErrRelativePath},
		{cases[7].spec, fs.ErrNotExist},
	} {
		if _, err := Start(c.spec); !errors.Is(err, c.want) {
			t.Errorf("Start(%q in %q) = %v, want it to be %v", c.spec.Argv, c.spec.Dir, err, c.want)
		}
	}
}

// TestStartErrorsAsAnotherUser is what a job run as another user meets: a
// directory on the way it may not enter, a program only its owner may run.
func TestStartErrorsAsAnotherUser(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("needs root, to run a job as uid 65534")
	}
	tree := openTree(t)
	nobody := &syscall.Credential{Uid: 65534, Gid: 65534, Groups: []uint32{}}
	cases := []struct {
		name string
		spec Spec
	}{
		{"dir it may not enter", Spec{Argv: []string{"/bin/sh", "-c", "exit 0"}, Dir: tree + "/private", Credential: nobody}},
		{"dir under one it may not enter", Spec{Argv: []string{"/bin/sh", "-c", "exit 0"}, Dir: tree + "/private/work", Credential: nobody}},
		{"program under a dir it may not enter", Spec{Argv: []string{tree + "/private/prog"}, Credential: nobody}},
		{"program only its owner may run", Spec{Argv: []string{tree + "/mine.sh"}, Credential: nobody}},
		// Looked up in PATH, a program in a directory it may not enter is
		// not found, in the same words as one that is not there: another
		// person's private directory says nothing of what it holds.
		{"program in PATH, in a dir it may not enter", Spec{Argv: []string{"prog"}, Env: []string{"PATH=" + tree + "/private:" + tree + "/bin"}, Credential: nobody}},
		{"program not in PATH, nor in a dir it may not enter", Spec{Argv: []string{"gorp"}, Env: []string{"PATH=" + tree + "/private:" + tree + "/bin"}, Credential: nobody}},
		// So too through a relative entry, from a dir it may not enter.
		{"program in a relative PATH entry it may not enter", Spec{Argv: []string{"prog"}, Dir: tree, Env: []string{"PATH=private"}, Credential: nobody}},
		{"program not in a relative PATH entry it may not enter", Spec{Argv: []string{"gorp"}, Dir: tree, Env: []string{"PATH=private"}, Credential: nobody}},
	}
	var got strings.Builder
	for _, c := range cases {
		got.WriteString(c.name + ": " + startError(t, tree, c.spec) + "\n")
	}
	testkit.Golden(t, "testdata/start_errors_as_another_user.golden", []byte(got.String()))
	for _, i := range []int{4, 6} {
		found := startError(t, tree, cases[i].spec)
		if missing := startError(t, tree, cases[i+1].spec); strings.ReplaceAll(missing, "gorp", "prog") != found {
			t.Errorf("a program in a directory the job may not enter reads otherwise than one that is not there:\n%s\n%s", found, missing)
		}
	}
	// One it may run, later in PATH, is found past the closed directory.
	testkit.WriteExecutable(t, filepath.Join(tree, "bin", "prog"), []byte("#!/bin/sh\nexit 0\n"), 0o755)
	p, err := Start(cases[4].spec)
	if err != nil {
		t.Fatalf("prog in PATH past a closed directory: %v", err)
	}
	p.Stop(syscall.SIGKILL, 0)
}

func TestParseShebang(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		head, want string
		ok         bool
	}{
		{"#!/bin/sh\nexit 0\n", "/bin/sh", true},
		{"#! /usr/bin/env python3\n", "/usr/bin/env", true},
		{"#!\t/usr/bin/python3 -u", "/usr/bin/python3", true},
		{"#!\n", "", false},
		{"#!   \n", "", false},
		{"echo hi\n", "", false},
		{"", "", false},
		{"#!/bin/\x00sh\n", "", false},
	} {
		got, ok := parseShebang([]byte(c.head))
		if got != c.want || ok != c.ok {
			t.Errorf("parseShebang(%q) = %q, %v; want %q, %v", c.head, got, ok, c.want, c.ok)
		}
	}
}

// FuzzParseShebang: a script's first bytes are the job author's, and
// parseShebang must read any of them without panicking, and name an
// interpreter only as a single word without blanks or NUL.
func FuzzParseShebang(f *testing.F) {
	for _, s := range []string{"#!/bin/sh\n", "#! /usr/bin/env python3 -u\n", "#!", "\x7fELF", "#!\t\t\n/x"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, head []byte) {
		got, ok := parseShebang(head)
		if !ok {
			if got != "" {
				t.Errorf("parseShebang(%q) = %q with ok false", head, got)
			}
			return
		}
		if got == "" || strings.ContainsAny(got, " \t\n\x00") || !strings.HasPrefix(string(head), "#!") {
			t.Errorf("parseShebang(%q) = %q", head, got)
		}
	})
}
