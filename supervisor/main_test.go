package supervisor

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"golang.org/x/sys/unix"

	"github.com/berthd/berth/accounting"
	"github.com/berthd/berth/luaapi"
	"github.com/berthd/berth/probes"
	"github.com/berthd/berth/supervisor/testkit"
)

// TestMain lets the test binary be the evaluating child, as berth's hidden
// eval command is the daemon's (without the limits, which cmd/berth sets
// and tests).
func TestMain(m *testing.M) {
	switch os.Getenv("BERTH_TEST_EVAL") {
	case "1":
		if err := luaapi.Serve(os.Stdin, os.Stdout, hclog.New(&hclog.LoggerOptions{JSONFormat: true, Output: os.Stderr}), nil); err != nil {
			os.Exit(EvalExitAbandoned)
		}
		os.Exit(0)
	case "script":
		scriptedChild()
	}
	code := m.Run()
	removeAccounts()
	os.Exit(code)
}

// scriptedChild is an evaluating child that misbehaves as a file's name
// says, and evaluates the other files as the real one does: it stands in
// for what the kernel or a broken child would do, which the parent must
// turn into the right refusal.
func scriptedChild() {
	var req luaapi.EvalRequest
	if err := json.NewDecoder(os.Stdin).Decode(&req); err != nil {
		os.Exit(1)
	}
	if len(req.Files) > 0 && req.Files[0].Owner == "breaks" {
		// Dies before its first file, as a child its owner killed would.
		fmt.Fprintln(os.Stderr, "killed before it began")
		os.Exit(1)
	}
	enc := json.NewEncoder(os.Stdout)
	for _, f := range req.Files {
		_ = enc.Encode(luaapi.EvalReply{Begin: f.Path})
		switch strings.TrimSuffix(filepath.Base(f.Path), ".lua") {
		case "hang": // past the wall bound: the parent kills it
			if mark := os.Getenv("BERTH_TEST_HANGING"); mark != "" {
				_ = writeFile(mark, nil, 0o600)
			}
			select {}
		case "oom": // the Go runtime refused memory by RLIMIT_DATA
			fmt.Fprintln(os.Stderr, "fatal error: out of memory")
			os.Exit(2)
		case "xcpu": // the kernel's CPU limit: the default action of SIGXCPU
			_ = syscall.Exec("/bin/sh", []string{"sh", "-c", "kill -XCPU $$"}, nil)
		case "killed": // by someone else
			_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
			select {}
		case "outofturn": // answers for another file
			_ = enc.Encode(luaapi.EvalReply{File: &luaapi.File{Path: "other.lua"}})
			select {}
		case "slow": // takes longer than a test's share, and is done
			time.Sleep(slowFile)
		case "crash": // a runtime crash: neither a limit nor a kill
			fmt.Fprintln(os.Stderr, "panic: something broke")
			os.Exit(2)
		}
		_ = enc.Encode(luaapi.EvalReply{File: luaapi.Eval(f.Path, f.Src, luaapi.Options{Machine: req.Machine, Budget: req.Budget, Owner: f.Owner})})
	}
	os.Exit(0)
}

// slowFile is how long the scripted child takes over a file named slow.
const slowFile = 300 * time.Millisecond

// testEvaluator evaluates in this test binary.
func testEvaluator() *Evaluator {
	return &Evaluator{Command: []string{os.Args[0]}, Env: append(os.Environ(), "BERTH_TEST_EVAL=1"), UID: -1, GID: -1}
}

// waitFiles waits for each of paths to be there: a job's script says so
// once it is as far as a test needs (its trap for SIGTERM set: a stop that
// came before it would end the run at once, without -race most of all).
func waitFiles(t testing.TB, paths ...string) {
	t.Helper()
	testkit.WaitFor(t, 20*time.Second, strings.Join(paths, ", ")+" to be there", func() bool {
		for _, p := range paths {
			if _, err := os.Stat(p); err != nil {
				return false
			}
		}
		return true
	})
}

// runDaemon runs a daemon in t's temporary directory over a jobs directory
// holding jobs.lua (none when jobs is ""), on a two-core machine; tune
// sets what a test needs (a clock, a socket). It is stopped at cleanup.
func runDaemon(t testing.TB, jobs string, tune func(cfg *Config)) (d *Daemon, jobsDir string) {
	t.Helper()
	d, jobsDir, stop := startDaemon(t, jobs, tune)
	t.Cleanup(func() {
		if err := stop(); err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	return d, jobsDir
}

// startDaemon is runDaemon for a test that stops the daemon itself: stop
// ends its Run and returns Run's error; it must be called, once.
func startDaemon(t testing.TB, jobs string, tune func(cfg *Config)) (d *Daemon, jobsDir string, stop func() error) {
	t.Helper()
	dir := t.TempDir()
	jobsDir, stateDir := filepath.Join(dir, "jobs.d"), filepath.Join(dir, "state")
	for _, p := range []string{jobsDir, stateDir} {
		if err := os.Mkdir(p, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if jobs != "" {
		if err := writeFile(filepath.Join(jobsDir, "jobs.lua"), []byte(jobs), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	cfg := Config{
		JobsDir: jobsDir, StateDir: stateDir, Evaluator: testEvaluator(),
		Machine: probes.Inventory{CPUs: 2, CPUIDs: []int{0, 1}, OnlineCPUs: 2,
			RAM: probes.Memory{Bytes: 4 * accounting.GiB, Known: true}},
		Environ: []string{"PATH=/usr/bin:/bin"},
		// The test process is shared: no test's daemon collects it or
		// unmaps its code but one that asks to.
		handBack: func() time.Duration { return 0 },
	}
	if tune != nil {
		tune(&cfg)
	}
	d, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	return d, jobsDir, func() error {
		cancel()
		return <-done
	}
}

// needLeases skips a test that needs the kernel to say whether a job file
// is open for writing (a read lease, watch.Scan.Writing) where the file
// system of dir gives none.
func needLeases(t *testing.T, dir string) {
	t.Helper()
	probe := filepath.Join(dir, ".lease-probe") // no job file's name
	if err := writeFile(probe, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	defer os.Remove(probe)
	f, err := os.Open(probe)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := unix.FcntlInt(f.Fd(), unix.F_SETLEASE, unix.F_RDLCK); err != nil {
		t.Skipf("the file system of %s gives no read lease: %v", dir, err)
	}
}

// writeFile is os.WriteFile with no fork between its open and its close.
// The daemon under test forks in this process: a child forked meanwhile
// holds the file open for writing until it executes, and the daemon's scan
// takes the file for one being saved and looks again later, a reload the
// test did not ask for, or a status read at once without the file's news.
func writeFile(name string, data []byte, perm os.FileMode) error {
	syscall.ForkLock.RLock()
	defer syscall.ForkLock.RUnlock()
	return os.WriteFile(name, data, perm)
}
