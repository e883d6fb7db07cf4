package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/berthd/berth/luaapi"
	"github.com/berthd/berth/probes"
	"github.com/berthd/berth/supervisor"
	"github.com/berthd/berth/supervisor/testkit"
)

func TestCheckExamples(t *testing.T) {
	dirs, err := filepath.Glob("../../examples/*")
	if err != nil || len(dirs) == 0 {
		t.Fatalf("no examples: %v", err)
	}
	for _, dir := range dirs {
		t.Run(filepath.Base(dir), func(t *testing.T) {
			// A box big enough for every example: they must all be valid.
			out, errOut, code := berth(t, nil, "check", dir, "--cpus", "24", "--gpus", "4", "--ram", "256G", "--gpu-mem", "80G")
			if code != exitOK {
				t.Fatalf("exit %d:\n%s%s", code, out, errOut)
			}
			if !strings.Contains(out, ", 0 errors") {
				t.Errorf("summary: %s", out)
			}
		})
	}
}

func TestCheckReportsEveryMistake(t *testing.T) {
	out, _, code := berth(t, nil, "check", "testdata/check", "--cpus", "4", "--gpus", "2")
	if code != exitFailed {
		t.Errorf("exit %d, want %d", code, exitFailed)
	}
	testkit.Golden(t, "testdata/check.golden", []byte(out))
}

func TestCheckJSON(t *testing.T) {
	out, _, code := berth(t, nil, "check", "../../examples/quickstart", "--json")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, out)
	}
	var report checkJSON
	if err := json.Unmarshal([]byte(out), &report); err != nil {
		t.Fatal(err)
	}
	if len(report.Files) != 3 || len(report.Flavors) != 2 || len(report.Errors) != 0 {
		t.Fatalf("report: %d files, %d flavors, %d errors", len(report.Files), len(report.Flavors), len(report.Errors))
	}
	var hello *supervisor.JobDefinition
	for i := range report.Jobs {
		if report.Jobs[i].Name == "hello" {
			hello = &report.Jobs[i]
		}
	}
	if hello == nil || hello.Flavor != "small" || hello.Resources.CPUs != 1 || hello.Resources.RAMBytes != 256<<20 || hello.Cmd[0] != "/bin/sh" || hello.StopSignal != "SIGTERM" {
		t.Errorf("hello as loaded: %+v", hello)
	}
}

func TestCheckMissingPath(t *testing.T) {
	out, _, code := berth(t, nil, "check", "testdata/nowhere")
	if code != exitFailed {
		t.Errorf("exit %d", code)
	}
	want := "testdata/nowhere: no such file or directory; name a job file or a directory of them (berth check FILE|DIR...)\n0 files, 0 jobs, 0 flavors, 1 error\n"
	if out != want {
		t.Errorf("got\n%s\nwant\n%s", out, want)
	}
}

// TestCheckRefusedFileWhole: a file refused for one job's mistake still
// has its other jobs checked, so that one run says every mistake: a flavor
// or parent not declared, a user not there, a size no machine has. A job
// naming one declared with a mistake of its own is not said again.
func TestCheckRefusedFileWhole(t *testing.T) {
	file := filepath.Join(t.TempDir(), "all.lua")
	src := `job "a" { cmd = "true", gpu = 1 }
job "b" { cmd = "true", flavor = "nope" }
job "c" { cmd = "true", after = "nosuch" }
job "d" { cmd = "true", user = "no-such-user-berth" }
job "e" { cmd = "true", cpus = 99 }
job "f" { cmd = "true", after = "a" }
flavor "fl" { cpus = "x" }
job "g" { cmd = "true", flavor = "fl" }
`
	if err := os.WriteFile(file, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	out, _, code := berth(t, nil, "check", file, "--cpus", "4")
	lines := placesIn(out, file+":")
	if code != exitFailed || !slices.Equal(lines, []string{"1", "2", "3", "4", "5", "7"}) || !strings.Contains(out, "1 file, 0 jobs, 0 flavors, 6 errors") {
		t.Errorf("exit %d, mistakes on lines %v, want 1 to 5 and 7, the file refused:\n%s", code, lines, out)
	}
}

// TestCheckRefusedFileBesideOthers: the other files of a directory are
// checked without a refused file's declarations, as the daemon loads them
// (a flavor or parent only it declares does not exist for them; a name it
// declares too is no clash), while its own jobs are checked beside them.
func TestCheckRefusedFileBesideOthers(t *testing.T) {
	dir := t.TempDir()
	for name, src := range map[string]string{
		"a.lua": "flavor \"f\" { cpus = 1 }\njob \"x\" { cmd = \"true\" }\njob \"y\" { cmd = \"true\" }\njob \"bad\" { cmd = \"true\", gpu = 1 }\njob \"late\" { cmd = \"true\", after = \"nope\" }\n",
		"b.lua": "job \"uses\" { cmd = \"true\", flavor = \"f\", after = \"x\" }\njob \"y\" { cmd = \"true\" }\n",
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	out, _, code := berth(t, nil, "check", dir, "--cpus", "4")
	got := placesIn(out, dir+"/")
	// a.lua: its own mistake and its late's unknown parent; b.lua: the
	// flavor and the parent that only a.lua declares, twice on line 1.
	if want := []string{"a.lua:4", "a.lua:5", "b.lua:1", "b.lua:1"}; code != exitFailed || !slices.Equal(got, want) {
		t.Errorf("exit %d, problems at %v, want %v:\n%s", code, got, want, out)
	}
}

// TestCheckHoldsToTheDaemonsUser: beside a daemon not running as root, a
// job to run as another user or group is a problem, as that daemon finds
// it; beside root's, and without a daemon, a user that exists passes.
func TestCheckHoldsToTheDaemonsUser(t *testing.T) {
	set := &luaapi.Set{Jobs: []luaapi.Job{
		{Name: "other", User: "root", Pos: luaapi.Pos{File: "u.lua", Line: 1}},
		{Name: "othergrp", Group: "root", Pos: luaapi.Pos{File: "u.lua", Line: 2}},
	}}
	person := &supervisor.Status{Daemon: supervisor.DaemonStatus{UID: 65534, GID: 65534}}
	root := &supervisor.Status{}
	for _, c := range []struct {
		name   string
		daemon *supervisor.Status
		want   int
	}{{"a person's daemon", person, 2}, {"root's daemon", root, 0}, {"no daemon", nil, 0}} {
		got := feasibility(set, probes.Inventory{CPUs: 2, CPUIDs: []int{0, 1}}, supervisor.DefaultGroup, c.daemon)
		n := 0
		for _, p := range got {
			if p.Code == supervisor.ProblemCredentials && strings.Contains(p.Text, "only a daemon running as root may run a job") {
				n++
			}
		}
		if n != c.want || len(got) != c.want {
			t.Errorf("%s: problems %+v, want %d saying only root's daemon may", c.name, got, c.want)
		}
	}
}

// TestCheckNameTheDaemonIgnores: a file the daemon would not read for its
// name is checked all the same, and the name is an error: passed, it was
// dropped in and never ran, without a word.
func TestCheckNameTheDaemonIgnores(t *testing.T) {
	dir := t.TempDir()
	for name, better := range map[string]string{"x.txt": "x.lua", "ed.lua~": "ed.lua", ".hid.lua": "hid.lua", "UP.LUA": "UP.lua", "x.lua.bak": "x.lua", "ok.lua": ""} {
		file := filepath.Join(dir, name)
		if err := os.WriteFile(file, []byte(`job "j" { cmd = "true", cpus = 0, gpu = 1 }`), 0o644); err != nil {
			t.Fatal(err)
		}
		out, _, code := berth(t, nil, "check", file, "--cpus", "2")
		ignored := file + ": the daemon does not read a file of this name: it reads only files ending in .lua that do not start with a dot (rename it to " + better + "; checked all the same)"
		if code != exitFailed || strings.Contains(out, ignored) != (better != "") || !strings.Contains(out, `unknown field "gpu"`) {
			t.Errorf("berth check %s: exit %d\n%s", name, code, out)
		}
	}
}

// A quota that names no account is an error: the person it was meant for
// would be left unbounded, and nothing else would say so.
func TestCheckQuotaOfNoAccount(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "quotas.lua")
	if err := os.WriteFile(file, []byte("quota \"root\" { cpus = 1 }\nquota \"nobody-here\" { cpus = 1 }\nquota \"*\" { cpus = 1 }\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, _, code := berth(t, nil, "check", file)
	if want := file + `:2: quota "nobody-here" names no account`; code != exitFailed || !strings.Contains(out, want) || strings.Contains(out, `quota "root"`) {
		t.Errorf("exit %d, want %d and %q alone:\n%s", code, exitFailed, want, out)
	}
}

// A file checked on its own may name a flavor the jobs directory declares,
// as it may once it is dropped there; one it declares itself is its own.
// TestCheckKnowsParentsElsewhere: a file checked on its own may wait for
// a job the jobs directory declares in another file, as the daemon loads
// them together; a parent no file declares is said, each of them.
func TestCheckKnowsParentsElsewhere(t *testing.T) {
	dir := t.TempDir()
	jobs := filepath.Join(dir, "jobs.d")
	if err := os.MkdirAll(jobs, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, src := range map[string]string{
		"parent.lua": `job "sysparent" { cmd = "true", cpus = 0 }`,
		"child.lua":  `job "syschild" { cmd = "true", cpus = 0, after = "sysparent" }`,
		"orphan.lua": `job "orphan" { cmd = "true", cpus = 0, after = { "nope1", "sysparent", "nope2" } }`,
	} {
		if err := os.WriteFile(filepath.Join(jobs, name), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	environ := map[string]string{"BERTH_JOBS": jobs}
	if out, _, code := berth(t, environ, "check", filepath.Join(jobs, "child.lua")); code != exitOK {
		t.Errorf("a file whose parent another file declares: exit %d\n%s", code, out)
	}
	out, _, code := berth(t, environ, "check", filepath.Join(jobs, "orphan.lua"))
	if code != exitFailed || !strings.Contains(out, `job "nope1" does not exist`) || !strings.Contains(out, `job "nope2" does not exist`) ||
		strings.Contains(out, `"sysparent" does not exist`) {
		t.Errorf("a file with two parents no file declares: exit %d\n%s", code, out)
	}
	// A new version of parent.lua, edited elsewhere, that closes a cycle
	// through another file's job: said, on the checked file's job alone;
	// the jobs of the others are not counted.
	draft := filepath.Join(dir, "parent.lua")
	if err := os.WriteFile(draft, []byte(`job "sysparent" { cmd = "true", cpus = 0, after = "syschild" }`), 0o644); err != nil {
		t.Fatal(err)
	}
	out, _, code = berth(t, environ, "check", draft)
	if code != exitFailed || !strings.Contains(out, draft+`:1: job "sysparent"`) || !strings.Contains(out, "cycle") ||
		strings.Contains(out, "child.lua:") || !strings.Contains(out, "1 file, 1 job, 0 flavors, 1 error") {
		t.Errorf("a file closing a cycle through another: exit %d\n%s", code, out)
	}
	// So is one named as the daemon would read it as parent.lua (the
	// review: parent.lua.new was refused for the names it redeclares).
	renamed := filepath.Join(dir, "parent.lua.new")
	if err := os.Rename(draft, renamed); err != nil {
		t.Fatal(err)
	}
	out, _, code = berth(t, environ, "check", renamed)
	if code != exitFailed || !strings.Contains(out, "cycle") || strings.Contains(out, "already declared") {
		t.Errorf("a new version of parent.lua named parent.lua.new: exit %d\n%s", code, out)
	}
	// Another file that declares a job of the directory's again is
	// refused, as the daemon would refuse it (trial AM: it passed).
	other := filepath.Join(dir, "other.lua")
	if err := os.WriteFile(other, []byte(`job "sysparent" { cmd = "true", cpus = 0 }`), 0o644); err != nil {
		t.Fatal(err)
	}
	out, _, code = berth(t, environ, "check", other)
	if code != exitFailed || !strings.HasPrefix(out, other+`:1: job "sysparent`) || !strings.Contains(out, "already declared") ||
		!strings.Contains(out, filepath.Join(jobs, "parent.lua")+":1") || !strings.HasSuffix(out, "1 file, 0 jobs, 0 flavors, 1 error\n") {
		t.Errorf("a file that declares a job of another file again: exit %d\n%s", code, out)
	}
}

// Nothing of the directory's files is reported or counted.
func TestCheckBorrowsTheJobsDirsFlavors(t *testing.T) {
	dir := t.TempDir()
	jobs, home := filepath.Join(dir, "jobs.d"), filepath.Join(dir, "home")
	for path, src := range map[string]string{
		filepath.Join(jobs, "flavors.lua"): `flavor "zf" { cpus = 1 }`,
		filepath.Join(jobs, "broken.lua"):  `job "b" {`,
		filepath.Join(home, "mine.lua"):    `job "mine" { cmd = "true", flavor = "zf" }`,
		filepath.Join(home, "own.lua"):     `flavor "zown" { cpus = 64 }` + "\n" + `job "own" { cmd = "true", flavor = "zown" }`,
		filepath.Join(home, "again.lua"):   `flavor "zf" { cpus = 2 }`,
	} {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	environ := map[string]string{"BERTH_JOBS": jobs}
	if out, _, code := berth(t, environ, "check", filepath.Join(home, "mine.lua")); code != exitOK || out != "1 file, 1 job, 0 flavors, 0 errors\n" {
		t.Errorf("a file naming the directory's flavor: exit %d\n%s", code, out)
	}
	out, _, code := berth(t, environ, "check", filepath.Join(home, "own.lua"))
	if code != exitFailed || !strings.Contains(out, `job "own", by its flavor "zown", asks for 64 cores`) || !strings.HasSuffix(out, "1 file, 1 job, 1 flavor, 1 error\n") {
		t.Errorf("a file with a flavor of its own: exit %d\n%s", code, out)
	}
	// The flavor is the file's own, which no daemon lists: where it is
	// declared is said (trial AJ: "berth flavors shows where").
	if want := "zown is declared at " + filepath.Join(home, "own.lua") + ":1)"; !strings.Contains(out, want) || strings.Contains(out, "berth flavors") {
		t.Errorf("a file with a flavor of its own that fits no machine: %s\nwant %q", out, want)
	}
	// A flavor of the directory's declared again: refused, as the daemon
	// would refuse the file; the flavor is not counted as the file's.
	out, _, code = berth(t, environ, "check", filepath.Join(home, "again.lua"))
	taken := filepath.Join(home, "again.lua") + `:1: flavor "zf" is already declared in ` + filepath.Join(jobs, "flavors.lua") + ":1"
	if code != exitFailed || !strings.HasPrefix(out, taken) || !strings.HasSuffix(out, "1 file, 0 jobs, 0 flavors, 1 error\n") {
		t.Errorf("a file that declares the directory's flavor again: exit %d\n%s\nwant %s…", code, out, taken)
	}
	// A directory checked is checked alone.
	if out, _, code := berth(t, environ, "check", home, "--cpus", "64"); code != exitOK || out != "3 files, 2 jobs, 2 flavors, 0 errors\n" {
		t.Errorf("the directory: exit %d\n%s", code, out)
	}

	// A person with no jobs directory of their own borrows the system
	// daemon's, which their submitted files load beside; one with their
	// own, theirs.
	asPerson := func() (string, int) {
		var out bytes.Buffer
		c := &cli{stdout: &out, stderr: io.Discard, root: "testdata/box", adminJobs: jobs,
			env: env{lookup: func(string) (string, bool) { return "", false }, uid: 1000, home: home}}
		code := c.main([]string{"check", filepath.Join(home, "mine.lua")})
		return out.String(), code
	}
	if out, code := asPerson(); code != exitOK || out != "1 file, 1 job, 0 flavors, 0 errors\n" {
		t.Errorf("a person with no jobs directory: exit %d\n%s", code, out)
	}
	if err := os.MkdirAll(filepath.Join(home, ".config", "berth", "jobs.d"), 0o755); err != nil {
		t.Fatal(err)
	}
	// With no daemon to list the flavors, where they were looked for is
	// said (trial AQ: "berth flavors lists them", which needs a daemon).
	own := filepath.Join(home, ".config", "berth", "jobs.d")
	if out, code := asPerson(); code != exitFailed || !strings.Contains(out, `flavor "zf" does not exist (no daemon answers to list them: looked for in the files checked and `+own+`; berth check DIR FILE`) {
		t.Errorf("a person with a jobs directory of their own that has no flavor zf: exit %d\n%s", code, out)
	}
}

// TestCheckBareChecksTheDaemonsDir: berth check with no file checks the
// jobs directory of the daemon that answers, wherever its --jobs is, and
// says so (trial AQ: it checked /etc/berth/jobs.d).
func TestCheckBareChecksTheDaemonsDir(t *testing.T) {
	t.Parallel()
	d := newTestDaemon(t, map[string]string{"jobs.lua": `job "a" { cmd = "true", cpus = 1 }`})
	d.start(daemonOptions{args: []string{"--cpus", "2"}})
	d.waitState("a", "done")
	out, errOut, code := d.cli("check")
	if code != exitOK || out != "1 file, 1 job, 0 flavors, 0 errors\n" || !strings.HasPrefix(errOut, "checking "+d.jobs+" (") {
		t.Errorf("berth check beside a daemon of --jobs %s: exit %d\n%s%s", d.jobs, code, out, errOut)
	}
	d.stop()
}

// TestCheckAppliesTheDaemonsRules: berth check refuses what the daemon
// would refuse (owner and mode, regular file, size), in the daemon's
// words, whether it is given a directory or a file; it never waits for a
// writer on a FIFO nor reads a device without end.
func TestCheckAppliesTheDaemonsRules(t *testing.T) {
	base := t.TempDir()
	dir := filepath.Join(base, "jobs.d")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	write := func(name, content string, mode os.FileMode) {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
	}
	write("ok.lua", `flavor "small" { cpus = 1 }`, 0o644)
	write("open.lua", `flavor "open" { cpus = 1 }`, 0o666)
	write("big.lua", "--"+strings.Repeat("x", 1<<20), 0o644)
	if err := syscall.Mkfifo(filepath.Join(dir, "pipe.lua"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/dev/zero", filepath.Join(dir, "zero.lua")); err != nil {
		t.Fatal(err)
	}

	var got strings.Builder
	for _, args := range [][]string{
		{dir},
		{filepath.Join(dir, "ok.lua")},
		{filepath.Join(dir, "open.lua")},
		{filepath.Join(dir, "big.lua")},
		{filepath.Join(dir, "pipe.lua")},
		{filepath.Join(dir, "zero.lua")},
		{"/dev/zero"},
	} {
		out, code := checkWithin(t, 10*time.Second, args...)
		fmt.Fprintf(&got, "$ berth check %s\n%s(exit %d)\n\n", strings.Join(args, " "), out, code)
	}
	testkit.Golden(t, "testdata/check-rules.golden", []byte(strings.ReplaceAll(got.String(), base, "$TMP")))
}

// TestCheckLinkToSecret: berth check shows nothing of a file that the
// daemon would refuse to follow a link to, as root's /etc/shadow; before,
// the syntax error quoted a token of it.
func TestCheckLinkToSecret(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root: a person's own files are theirs to see")
	}
	// Every directory on the way open to everyone (t.TempDir's parent is
	// not): what refuses the link is the secret's own mode.
	base, err := os.MkdirTemp(os.TempDir(), "berth-link-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	if err := os.Chmod(base, 0o755); err != nil {
		t.Fatal(err)
	}
	secret := filepath.Join(base, "shadow")
	if err := os.WriteFile(secret, []byte("password hunter2secret\n"), 0o640); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(base, "jobs.d")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "x.lua")
	if err := os.Symlink(secret, link); err != nil {
		t.Fatal(err)
	}
	for _, target := range []string{dir, link} {
		out, code := checkWithin(t, 10*time.Second, target)
		if code != exitFailed || strings.Contains(out, "hunter2") || !strings.Contains(out, "mode 0640") {
			t.Errorf("berth check %s: exit %d, want it refused for the secret's mode 0640, and never shown:\n%s", target, code, out)
		}
	}
}

// checkWithin runs berth check, failing the test if it has not returned
// within the timeout (it would hang on a FIFO, or read /dev/zero for ever).
func checkWithin(t *testing.T, timeout time.Duration, args ...string) (string, int) {
	t.Helper()
	type result struct {
		out  string
		code int
	}
	done := make(chan result, 1)
	go func() {
		var out, errOut bytes.Buffer
		c := &cli{stdout: &out, stderr: &errOut, env: env{lookup: func(string) (string, bool) { return "", false }, uid: 1000, home: "/home/someone"}, root: "testdata/box"}
		code := c.main(append([]string{"check", "--cpus", "4"}, args...))
		done <- result{out.String() + errOut.String(), code}
	}()
	select {
	case r := <-done:
		return r.out, r.code
	case <-time.After(timeout):
		t.Fatalf("berth check %s has not returned after %v", strings.Join(args, " "), timeout)
		return "", 0
	}
}

// TestCheckJSONErrors: each mistake travels as facts (code, file, line,
// job, field) beside its sentence.
func TestCheckJSONErrors(t *testing.T) {
	out, _, code := berth(t, nil, "check", "testdata/check", "--cpus", "4", "--gpus", "2", "--json")
	if code != exitFailed {
		t.Errorf("exit %d, want %d", code, exitFailed)
	}
	var report checkJSON
	if err := json.Unmarshal([]byte(out), &report); err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, e := range report.Errors {
		fmt.Fprintf(&b, "%s %s:%d job=%q field=%q\n", e.Code, e.File, e.Line, e.Job, e.Field)
		if e.Code == "" || e.Message == "" {
			t.Errorf("an error without its code or sentence: %+v", e)
		}
	}
	testkit.Golden(t, "testdata/check-errors.golden", []byte(b.String()))
}

// TestCheckShowsPrint: what a file prints, which the daemon logs, berth
// check writes on stderr, with the file and line.
func TestCheckShowsPrint(t *testing.T) {
	file := filepath.Join(t.TempDir(), "p.lua")
	if err := os.WriteFile(file, []byte("print(\"hello from p\", machine.cpus > 0)\njob \"x\" { cmd = \"true\" }\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// The jobs directory lends its flavors: what its files print is not
	// said (trial AM).
	jobs := t.TempDir()
	if err := os.WriteFile(filepath.Join(jobs, "lender.lua"), []byte("print(\"from the jobs directory\")\nflavor \"f\" { cpus = 1 }\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, errOut, code := berth(t, map[string]string{"BERTH_JOBS": jobs}, "check", "--socket", filepath.Join(t.TempDir(), "none.sock"), file)
	if code != exitOK || !strings.Contains(errOut, "print: file="+file+" line=1") || !strings.Contains(errOut, "hello from p") ||
		strings.Contains(errOut, "from the jobs directory") {
		t.Errorf("check of a file that prints: exit %d\n%s%s", code, out, errOut)
	}
}

// placesIn are the places berth check's lines that start with prefix name
// after it, up to the ": " that ends them: "3" for "FILE:3: …" with
// prefix "FILE:", "a.lua:3" with prefix "DIR/".
func placesIn(out, prefix string) []string {
	var places []string
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if rest, ok := strings.CutPrefix(l, prefix); ok {
			if i := strings.Index(rest, ": "); i >= 0 {
				places = append(places, rest[:i])
			}
		}
	}
	return places
}
