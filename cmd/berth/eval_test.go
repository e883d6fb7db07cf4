package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/berthd/berth/luaapi"
	"github.com/berthd/berth/supervisor"
	"github.com/berthd/berth/supervisor/testkit"
)

// testEvaluator evaluates with berth's eval command, as the daemon does
// with its own binary.
func testEvaluator(t *testing.T) *supervisor.Evaluator {
	argv, env := evalBinary(t)
	return &supervisor.Evaluator{
		Command: argv, Env: env,
		UID: -1, GID: -1,
		Budget: 300 * time.Millisecond,
	}
}

var (
	plainBerthOnce sync.Once
	plainBerth     string
	plainBerthErr  error
)

// evalBinary is the eval command the tests run: this test binary, except
// under the race detector, whose shadow memory does not fit the child's
// memory limit: then berth built without it, once per test binary.
func evalBinary(t *testing.T) (argv, env []string) {
	t.Helper()
	if !raceEnabled {
		return []string{os.Args[0], evalCommand}, append(os.Environ(), "BERTH_TEST_BE_BERTH=1")
	}
	plainBerthOnce.Do(func() {
		dir, err := os.MkdirTemp("", "berth-eval-")
		if err != nil {
			plainBerthErr = err
			return
		}
		plainBerth = filepath.Join(dir, "berth")
		out, err := exec.Command("go", "build", "-o", plainBerth, ".").CombinedOutput()
		if err != nil {
			plainBerthErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if plainBerthErr != nil {
		t.Fatal(plainBerthErr)
	}
	return []string{plainBerth, evalCommand}, nil
}

// TestEvaluatorHostileFiles: each kind of file that once took the daemon
// down is refused with the limit it crossed, and the files after it are
// evaluated all the same.
func TestEvaluatorHostileFiles(t *testing.T) {
	good := luaapi.Source{Path: "good.lua", Src: []byte(`job "fine" { cmd = "true" }`)}
	hostile := []struct {
		name, src string
		problem   luaapi.Problem
	}{
		{"loop", `while true do end`, luaapi.Budget},
		// A backtracking pattern: a builtin that never looks at the budget.
		{"pattern", `string.find(string.rep("a", 200), ".-.-.-.-.-.-b")`, luaapi.Budget},
		{"gsub", `local s = string.rep("a", 1e5) string.gsub(s, s, string.rep("%0", 5e5))`, 0},
		{"gmatch", `for a in string.gmatch(string.rep("a", 1e6), ".-.-.-b") do break end`, 0},
		// Deep recursion in the matcher: a goroutine stack of hundreds of MiB.
		{"find", `string.find(string.rep("a", 999000), "a*b")`, 0},
	}
	var srcs []luaapi.Source
	for _, h := range hostile {
		srcs = append(srcs, luaapi.Source{Path: h.name + ".lua", Src: []byte(h.src)}, good)
	}
	files := testEvaluator(t).Evaluate(context.Background(), luaapi.Machine{CPUs: 4}, srcs)
	if len(files) != len(srcs) {
		t.Fatalf("%d files back for %d", len(files), len(srcs))
	}
	for i, h := range hostile {
		f, after := files[2*i], files[2*i+1]
		if f.Path != h.name+".lua" || len(f.Errors) == 0 {
			t.Errorf("%s: %+v, want it refused", h.name, f)
			continue
		}
		// The memory-hungry ones are stopped by the CPU budget or the
		// memory limit, whichever they reach first; never by surprise.
		switch p := f.Errors[0].Problem; {
		case h.problem != 0 && p != h.problem:
			t.Errorf("%s: %v, want a %v problem", h.name, f.Errors[0], h.problem)
		case p != luaapi.Budget && p != luaapi.Memory:
			t.Errorf("%s: %v, want the CPU budget or the memory limit", h.name, f.Errors[0])
		}
		t.Logf("%s: %v", h.name, f.Errors[0])
		if len(after.Errors) > 0 || len(after.Jobs) != 1 {
			t.Errorf("the file after %s: %+v", h.name, after)
		}
	}
}

// TestEvalConfines: the child takes its limits and its user before it reads
// a file, as the kernel shows them; the CPU limit comes with the request
// (a child may be started before the daemon knows its files), and is set
// after the user changed, before the first file.
func TestEvalConfines(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to become another user")
	}
	req, _ := json.Marshal(luaapi.EvalRequest{Budget: 30 * time.Second, CPUSeconds: 40,
		Files: []luaapi.Source{{Path: "spin.lua", Src: []byte(`while true do end`)}}})
	argv, env := evalBinary(t)
	cmd := exec.Command(argv[0], append(argv[1:], "--memory", strconv.Itoa(300<<20), "--uid", "65534", "--gid", "65534")...)
	cmd.Env = env
	cmd.Stdin = bytes.NewReader(req)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}()
	proc := "/proc/" + strconv.Itoa(cmd.Process.Pid)
	var status, limits string
	// NoNewPrivs is the last of the child's steps after the uid: until it
	// shows, the child may still be between the two.
	testkit.WaitFor(t, 10*time.Second, "the child to become uid 65534 with no new privileges", func() bool {
		b, _ := os.ReadFile(proc + "/status")
		status = string(b)
		return strings.Contains(status, "\nUid:\t65534\t65534\t65534\t65534") && strings.Contains(status, "\nNoNewPrivs:\t1\n")
	})
	for _, want := range []string{`\nGid:\t65534\t65534\t65534\t65534\n`, `\nGroups:\s*\n`, `\nNoNewPrivs:\t1\n`} {
		if !regexp.MustCompile(want).MatchString(status) {
			t.Errorf("%s lacks %s:\n%s", proc+"/status", want, status)
		}
	}
	if b, _ := os.ReadFile(proc + "/oom_score_adj"); strings.TrimSpace(string(b)) != "1000" {
		t.Errorf("oom_score_adj %q, want 1000: the evaluating child goes first", b)
	}
	testkit.WaitFor(t, 10*time.Second, "the child to take the request's CPU limit", func() bool {
		b, _ := os.ReadFile(proc + "/limits")
		limits = string(b)
		return strings.Contains(limits, "Max cpu time              40 ")
	})
	for _, want := range []string{"Max cpu time              40                   41", "Max data size             314572800            314572800", "Max file size             0"} {
		if !strings.Contains(limits, want) {
			t.Errorf("%s lacks %q:\n%s", proc+"/limits", want, limits)
		}
	}
}

// TestEvaluatorMemoryLimit: a file that grows the evaluating process past
// its data limit, before luaapi's own heap guard would stop it, is refused
// for the limit the kernel enforced, and the next file is evaluated in a
// new child.
func TestEvaluatorMemoryLimit(t *testing.T) {
	e := testEvaluator(t)
	// Below the heap guard's 256 MiB of growth, and above what a fresh
	// child maps for its threads (8 MiB of stack each, as cgo makes them):
	// at 96M the child after the one that failed could fail to start one.
	e.MemoryBytes = 192 << 20
	e.Budget = 10 * time.Second // to reach it: the limit is what stops the file
	files := e.Evaluate(context.Background(), luaapi.Machine{CPUs: 4}, []luaapi.Source{
		{Path: "grow.lua", Src: []byte(`local t = {} for i = 1, 1e9 do t[i] = i end`)},
		{Path: "good.lua", Src: []byte(`job "fine" { cmd = "true" }`)},
	})
	if len(files) != 2 {
		t.Fatalf("%d files back", len(files))
	}
	grow, good := files[0], files[1]
	if len(grow.Errors) != 1 || grow.Errors[0].Problem != luaapi.Memory ||
		!strings.Contains(grow.Errors[0].Error(), "reach its memory limit of 192M") {
		t.Errorf("grow.lua: %v, want it refused for the process's memory limit", grow.Errors)
	}
	if len(good.Errors) > 0 || len(good.Jobs) != 1 {
		t.Errorf("the file after it: %+v", good)
	}
}

// TestHasJobFiles: the daemon starts a child for the first job files only
// where there are some, by the rule the watcher reads them by.
func TestHasJobFiles(t *testing.T) {
	dir := t.TempDir()
	if hasJobFiles(filepath.Join(dir, "missing")) {
		t.Error("a missing directory has job files")
	}
	for _, name := range []string{"README", ".f.lua.tmp", "f.lua~", "notes.txt"} {
		if err := os.WriteFile(filepath.Join(dir, name), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if hasJobFiles(dir) {
		t.Error("a directory of leftovers and notes has job files")
	}
	if err := os.WriteFile(filepath.Join(dir, "train.lua"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if !hasJobFiles(dir) {
		t.Error("a directory with train.lua has no job files")
	}
}
