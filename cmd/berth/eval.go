package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"os/user"
	"strconv"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
	"golang.org/x/sys/unix"

	"github.com/berthd/berth/accounting"
	"github.com/berthd/berth/luaapi"
	"github.com/berthd/berth/supervisor"
)

// evalCommand is the hidden command that evaluates job files for the daemon
// and for berth check: a short-lived child that reads the files' bytes on
// stdin and answers what they declare on stdout (luaapi.Serve). It is not
// in berth help: a person never runs it.
const evalCommand = "__eval"

// evalCommandArgv is how the daemon and berth check start it: this very
// binary (through /proc/self/exe, so that an upgrade that replaced the file
// on disk does not mix versions).
func evalCommandArgv() []string { return []string{"/proc/self/exe", evalCommand} }

// evalUser is who the evaluating child becomes when berth runs as root: a
// job file in the admin directory is root's, but its Lua need not be.
const evalUser = "nobody"

// budgetFlag is --file-budget: the CPU time one job file may use.
type budgetFlag struct{ d time.Duration }

func (b *budgetFlag) String() string { return accounting.FormatDuration(b.d) }

func (b *budgetFlag) Set(s string) error {
	d, err := accounting.ParseDuration(s)
	if err != nil {
		return err
	}
	if d <= 0 || d > maxFileBudget {
		return fmt.Errorf("%s is not a budget berth gives a job file: give one above 0 and at most %s", s, accounting.FormatDuration(maxFileBudget))
	}
	b.d = d
	return nil
}

// maxFileBudget keeps a reload of a few files within the Evaluator's
// deadline.
const maxFileBudget = 10 * time.Second

func (b *budgetFlag) register(fs *flag.FlagSet) {
	b.d = luaapi.DefaultBudget
	fs.Var(b, "file-budget", "the CPU time one job file may use to evaluate, e.g. 500ms")
}

// newEvaluator is the Evaluator of the daemon and of berth check.
func newEvaluator(log hclog.Logger, budget time.Duration) *supervisor.Evaluator {
	e := &supervisor.Evaluator{Command: evalCommandArgv(), UID: -1, GID: -1, Log: log, Budget: budget}
	if os.Geteuid() == 0 {
		// Without the user the child stays root, still bounded by its
		// limits and no_new_privs; a root-owned job file is trusted that
		// far by its owner already.
		if u, err := user.Lookup(evalUser); err == nil {
			e.UID, _ = strconv.Atoi(u.Uid)
			e.GID, _ = strconv.Atoi(u.Gid)
		} else {
			log.Warn("evaluating job files as root: no user to evaluate them as", "user", evalUser, "error", err)
		}
	}
	return e
}

// runEval sets the limits the kernel will hold it to, then serves. The
// limits are set before a byte of Lua is read, by code that trusts none
// of it: a file cannot lift them.
func runEval(c *cli, args []string) int {
	fs := flag.NewFlagSet(evalCommand, flag.ContinueOnError)
	fs.SetOutput(c.stderr)
	memory := fs.Int64("memory", supervisor.DefaultEvalMemory, "bytes of data the process may have (RLIMIT_DATA)")
	cpu := fs.Uint64("cpu-seconds", 0, "CPU seconds the process may use (RLIMIT_CPU); 0: what the request says (cpu_seconds), or 60")
	uid := fs.Int("uid", -1, "user to become before reading a file, when root; -1 stays")
	gid := fs.Int("gid", -1, "group to become before reading a file, when root; -1 stays")
	parent := fs.Int("parent", 0, "the pid of the process that started it: it ends if that one is gone")
	if err := fs.Parse(args); err != nil {
		return exitUsage
	}
	if err := confine(*memory, *cpu, *uid, *gid, *parent); err != nil {
		fmt.Fprintln(c.stderr, "berth "+evalCommand+": "+err.Error())
		return exitFailed
	}
	logger := hclog.New(&hclog.LoggerOptions{JSONFormat: true, Output: c.stderr, Level: hclog.Info})
	err := luaapi.Serve(os.Stdin, c.stdout, logger, func(req luaapi.EvalRequest) error {
		// A child may be started before the daemon knows what it will
		// evaluate (Evaluator.Prestart): the request brings the CPU
		// limit for its files, set before the first of them.
		n := req.CPUSeconds
		if n == 0 && *cpu == 0 {
			n = defaultEvalCPUSeconds
		}
		if n == 0 {
			return nil
		}
		return limitCPU(n)
	})
	switch {
	case errors.Is(err, luaapi.ErrAbandoned):
		return supervisor.EvalExitAbandoned
	case err != nil:
		fmt.Fprintln(c.stderr, "berth "+evalCommand+": "+err.Error())
		return exitFailed
	}
	return exitOK
}

// defaultEvalCPUSeconds bounds a child's CPU time where neither its
// command line nor its request says.
const defaultEvalCPUSeconds = 60

// limitCPU bounds this process's CPU time. At the soft limit the kernel
// sends SIGXCPU, which the Go runtime ignores; SIGKILL follows at the hard
// limit, a second later. Lowering needs no privilege, so a child that
// became another user may still set it.
func limitCPU(seconds uint64) error {
	if err := unix.Setrlimit(unix.RLIMIT_CPU, &unix.Rlimit{Cur: seconds, Max: seconds + 1}); err != nil {
		return fmt.Errorf("set the cpu limit: %w", err)
	}
	return nil
}

// confine applies the evaluating child's limits to this process; the CPU
// limit only where cpu is not 0 (else limitCPU follows the request).
func confine(memory int64, cpu uint64, uid, gid, parent int) error {
	limits := []struct {
		name     string
		resource int
		cur, max uint64
	}{
		// Data, not address space: the Go runtime reserves address space
		// it never touches, and RLIMIT_DATA counts what it maps writable.
		{"data", unix.RLIMIT_DATA, uint64(memory), uint64(memory)},
		{"file size", unix.RLIMIT_FSIZE, 0, 0},
		{"core", unix.RLIMIT_CORE, 0, 0},
	}
	for _, l := range limits {
		if err := unix.Setrlimit(l.resource, &unix.Rlimit{Cur: l.cur, Max: l.max}); err != nil {
			return fmt.Errorf("set the %s limit: %w", l.name, err)
		}
	}
	if cpu > 0 {
		if err := limitCPU(cpu); err != nil {
			return err
		}
	}
	// Under memory pressure the kernel takes this process first: it
	// inherits the daemon's low score (OOMScoreAdjust=-900). Raising the
	// score needs no privilege; where /proc is not there it stays.
	_ = os.WriteFile("/proc/self/oom_score_adj", []byte("1000"), 0)
	if os.Geteuid() == 0 && uid >= 0 {
		// Groups first: once the uid is dropped they cannot be changed.
		// The syscall package's, which applies to every thread of the
		// process (x/sys/unix's empty Setgroups changes only the caller's).
		if err := syscall.Setgroups([]int{}); err != nil {
			return fmt.Errorf("drop supplementary groups: %w", err)
		}
		if gid >= 0 {
			if err := unix.Setresgid(gid, gid, gid); err != nil {
				return fmt.Errorf("become group %d: %w", gid, err)
			}
		}
		if err := unix.Setresuid(uid, uid, uid); err != nil {
			return fmt.Errorf("become user %d: %w", uid, err)
		}
	}
	// The parent-death signal the daemon asked for is cleared by the
	// kernel when the credentials change: ask for it again, then make
	// sure the parent did not die in between.
	if err := unix.Prctl(unix.PR_SET_PDEATHSIG, uintptr(unix.SIGKILL), 0, 0, 0); err != nil {
		return fmt.Errorf("set the parent-death signal: %w", err)
	}
	if parent > 0 && os.Getppid() != parent {
		return fmt.Errorf("its parent %d is gone", parent)
	}
	// Nothing it runs may gain privileges (it runs nothing; this holds
	// even if a bug let it try).
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("set no_new_privs: %w", err)
	}
	return nil
}
