package runner

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Spec is one spawn.
type Spec struct {
	// Argv is the command and its arguments. An Argv[0] without a slash is
	// looked up in the PATH of Env, never in the daemon's. The program
	// receives Argv unchanged, Argv[0] included, as from a shell.
	Argv []string
	// Dir is the working directory; empty means the daemon's own.
	Dir string
	// Env is the whole environment, "KEY=value". Nil is an empty
	// environment, not the daemon's. Where a key repeats, the last wins.
	Env []string
	// Credential, when set, is who the process runs as; its Groups are the
	// complete supplementary list (empty clears the daemon's). Leave
	// NoSetGroups false, or the job keeps the daemon's groups. Switching
	// needs a root daemon. Nil runs the job as the daemon's own user.
	Credential *syscall.Credential
	// Stdout receives both the process's stdout and its stderr; nil is
	// /dev/null. Start does not close it: close the daemon's copy once
	// Start returns, so that whoever reads the other end sees EOF when the
	// job's last writer is gone.
	Stdout *os.File
	// OOMScoreAdj is the oom_score_adj, -1000 to 1000, the process has
	// from before it executes, and so everything it forks unless it
	// changes it. The zero value is the kernel's default, never the
	// daemon's own: see the package doc for how, and what it costs.
	OOMScoreAdj int
	// LeftGroup, where set, finds the processes of the run that left its
	// process group, group (setsid, a daemonising fork), which the
	// group's signals do not reach: Stop asks it once the group has
	// ended, sends them the stop's signal, and waits for them up to the
	// stop's deadline, SIGKILLing what is left then.
	LeftGroup func(group int) []Tagged
}

// Process is one started process and, through it, its process group.
type Process struct {
	pid int
	// pidfd is the process's pidfd from its clone, -1 where the kernel
	// gives none; the reaper closes it.
	pidfd  int
	oomErr error

	// done is closed by reap once exit is written; exit is read only
	// after done is closed.
	done chan struct{}
	exit Exit

	// mu guards reaped, ticks and ticksRead, and is held across every
	// signal sent by PID and every read of the process's /proc entry:
	// while it is held and reaped is false, the leader is alive or a
	// zombie, so its PID, which is also the group's ID, cannot have been
	// handed to another process.
	mu     sync.Mutex
	reaped bool
	// stopping: Stop was called, and waits for the group itself; the
	// leader's end does not SIGKILL what is left of it.
	stopping bool
	// ticks is StartTicks's answer once read (ticksRead).
	ticks     uint64
	ticksRead bool
	// onExit are OnExit's calls still to make, until done is closed.
	onExit []func()

	// kill is when Stop sends its SIGKILL.
	kill KillTimer
	// leftGroup is Spec.LeftGroup.
	leftGroup func(group int) []Tagged
}

// Exit is how a process ended.
type Exit struct {
	// Code is the exit status when Signal is 0, and -1 otherwise.
	Code int
	// Signal is the signal that killed the process, 0 if it exited.
	Signal syscall.Signal
	// Err is set when the process could not be waited for; Code is then
	// -1 and nothing is known about how it ended.
	Err error
	// OutOfMemory: the kernel's OOM killer ended it for going over its
	// cgroup's memory limit. TimedOut: its unit's RuntimeMaxSec ended it.
	// StoppedOutside: systemd stopped its unit, asked by someone else than
	// the daemon. Only runs as systemd units (package units) know these.
	OutOfMemory, TimedOut, StoppedOutside bool
	// MachineStopping: StoppedOutside by the machine's shutdown, which
	// stops every unit.
	MachineStopping bool
	// Unknown: StoppedOutside as far as can be told, its unit gone before
	// the daemon took it back, which a failed unit also is once its
	// result is cleared (systemctl reset-failed): how it ended is not
	// known.
	Unknown bool
	// At is when it ended, where the runner knows it apart from when the
	// end was seen (a unit's exit timestamp: a run that ended while no
	// daemon watched); zero otherwise.
	At time.Time
}

// EndedAt is when the run that started at start ended, as best known at
// now: At where it lies between the two, else now.
func (e Exit) EndedAt(start, now time.Time) time.Time {
	if e.At.IsZero() || e.At.Before(start) || e.At.After(now) {
		return now
	}
	return e.At
}

// Success reports whether the process exited with status 0.
func (e Exit) Success() bool { return e.Err == nil && e.Signal == 0 && e.Code == 0 }

func (e Exit) String() string {
	switch {
	case e.Err != nil:
		return "unknown: " + e.Err.Error()
	case e.Signal != 0:
		return "signal: " + e.Signal.String()
	default:
		return fmt.Sprintf("exit status %d", e.Code)
	}
}

// Start spawns spec in a process group of its own, with stdin from
// /dev/null and no descriptors but 0, 1 and 2, and returns once the
// program has been executed. The process has spec.OOMScoreAdj from before
// it executes (see the package doc). A start that fails says why with a
// *DirError, a *ProgramError or an *OOMScoreAdjError. The shared reaper
// (reaper_linux.go) waits for its exit; Wait and Done report the end.
//
// The process gets SIGKILL if the daemon dies (Pdeathsig), so a crashed
// daemon does not leave jobs running unaccounted. The kernel ties that
// signal to the OS thread that forked, not to the daemon: never call Start
// from a goroutine that has called runtime.LockOSThread and may exit
// without unlocking, or the thread's end kills the job. The signal reaches
// the leader only, and executing a set-user-ID program clears it; what it
// misses is for KillLeftover and, beyond that, the daemon unit's cgroup.
//
// It forks with syscall.ForkExec rather than os.StartProcess: the clone's
// own pidfd is the reaper's, instead of one for os.Process and another
// opened for the reaper, and stdin is a /dev/null kept open.
func Start(spec Spec) (*Process, error) {
	if len(spec.Argv) == 0 {
		return nil, fmt.Errorf("start: %w", ErrNoCommand)
	}
	if spec.OOMScoreAdj < -1000 || spec.OOMScoreAdj > 1000 {
		return nil, fmt.Errorf("start: oom_score_adj %d: %w", spec.OOMScoreAdj, ErrBadOOMScoreAdj)
	}
	env := dedupEnv(spec.Env)
	pathEnv, ok := envValue(env, "PATH")
	if !ok {
		pathEnv = defaultPath
	}
	path, err := lookPath(spec.Argv[0], pathEnv, spec.Dir, identityOf(spec.Credential))
	if err != nil {
		return nil, err
	}

	null, err := devNull()
	if err != nil {
		return nil, fmt.Errorf("start %s: open %s: %w", path, os.DevNull, err)
	}
	out := uintptr(null)
	if spec.Stdout != nil {
		// Fd puts a descriptor in Go's poller back into blocking mode, as
		// a child expects its output to be; it stays open until the fork
		// is done.
		out = spec.Stdout.Fd()
		defer runtime.KeepAlive(spec.Stdout)
	}

	markCloseOnExec()
	pidfd := -1
	attr := &syscall.ProcAttr{
		Dir:   spec.Dir,
		Env:   env,
		Files: []uintptr{uintptr(null), out, out},
		Sys: &syscall.SysProcAttr{
			Setpgid:    true,
			Pdeathsig:  syscall.SIGKILL,
			Credential: spec.Credential,
			PidFD:      &pidfd,
		},
	}
	var pid int
	var startErr error
	restoreErr, err := startAtScore(spec.OOMScoreAdj, func() {
		pid, startErr = syscall.ForkExec(path, spec.Argv, attr)
	})
	var scoreErr *OOMScoreAdjError
	switch {
	case errors.As(err, &scoreErr):
		return nil, err
	case err != nil:
		return nil, fmt.Errorf("start %s: %w", path, err)
	case startErr != nil && restoreErr != nil:
		// No Process carries the daemon's lost protection; the error must.
		return nil, errors.Join(explain(spec, path, startErr), restoreErr)
	case startErr != nil:
		return nil, explain(spec, path, startErr)
	}
	p := &Process{pid: pid, pidfd: pidfd, done: make(chan struct{}), oomErr: restoreErr, leftGroup: spec.LeftGroup}
	if r := sharedReaper(); r == nil || !r.watch(p) {
		if p.pidfd >= 0 {
			unix.Close(p.pidfd)
			p.pidfd = -1
		}
		go p.reap()
	}
	return p, nil
}

// devNull is /dev/null, open for reading and writing for the daemon's
// life: every job's stdin, and its output where it has none.
var devNull = sync.OnceValues(func() (int, error) {
	return unix.Open(os.DevNull, unix.O_RDWR|unix.O_CLOEXEC, 0)
})

// markCloseOnExec makes every descriptor above 2 close-on-exec. Go opens
// its own descriptors that way, but not those the daemon inherited or a C
// library opened, and those would otherwise reach every job. It runs on
// every Start because such a descriptor can appear at any time.
func markCloseOnExec() {
	if unix.CloseRange(3, ^uint(0), unix.CLOSE_RANGE_CLOEXEC) == nil {
		return
	}
	// Before Linux 5.11 there is no CLOSE_RANGE_CLOEXEC: one fcntl each.
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return
	}
	for _, e := range entries {
		if fd, err := strconv.Atoi(e.Name()); err == nil && fd > 2 {
			unix.FcntlInt(uintptr(fd), unix.F_SETFD, unix.FD_CLOEXEC)
		}
	}
}

// reap waits for the leader in two steps so that the rest of the group can
// be killed while the leader is still a zombie: as long as it is one, its
// PID cannot be reused, so kill(-pid) cannot reach a stranger's group. A
// grandchild that outlived the leader would otherwise run on, unsupervised
// and holding its share of the machine after the books gave it back.
//
// The first step is the shared reaper's (reaper_linux.go), which waits for
// every child at once; reap is the fallback where it cannot, a thread
// blocked in waitid for each child.
func (p *Process) reap() {
	var info unix.Siginfo
	p.exited(ignoringEINTR(func() error {
		return unix.Waitid(unix.P_PID, p.pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
	}))
}

// exited is the second step, once the leader is a zombie (err nil) or could
// not be waited for.
func (p *Process) exited(err error) {
	p.mu.Lock()
	var exit Exit
	if err == nil {
		// ESRCH: nothing left. EPERM: what is left changed credentials,
		// and no signal of ours reaches it. Under a Stop, what is left
		// has the rest of its time (awaitGroup).
		if !p.stopping {
			_ = unix.Kill(-p.pid, unix.SIGKILL)
		}
		var ws syscall.WaitStatus
		_, werr := ignoringEINTRPid(func() (int, error) { return syscall.Wait4(p.pid, &ws, 0, nil) })
		exit = exitOf(p.pid, ws, werr)
	} else {
		// ECHILD: something else reaped it (SIGCHLD ignored by the daemon
		// makes the kernel do so), and the group may no longer be ours.
		exit = Exit{Code: -1, Err: fmt.Errorf("wait for pid %d: %w", p.pid, err)}
	}
	p.reaped = true
	p.mu.Unlock()

	p.exit = exit
	close(p.done)
	p.mu.Lock()
	calls := p.onExit
	p.onExit = nil
	p.mu.Unlock()
	for _, f := range calls {
		f()
	}
}

// OnExit has f called once the process has been reaped and Done is
// closed: on the goroutine that reaped it, or at once on the caller's if
// that was before. f must not block: the reaper waits for every child.
func (p *Process) OnExit(f func()) {
	p.mu.Lock()
	select {
	case <-p.done:
		p.mu.Unlock()
		f()
	default:
		// exited takes the calls under mu after closing done: this one
		// is among them.
		p.onExit = append(p.onExit, f)
		p.mu.Unlock()
	}
}

func ignoringEINTRPid(fn func() (int, error)) (int, error) {
	for {
		if n, err := fn(); err != unix.EINTR {
			return n, err
		}
	}
}

func exitOf(pid int, ws syscall.WaitStatus, err error) Exit {
	switch {
	case err != nil:
		return Exit{Code: -1, Err: fmt.Errorf("wait for pid %d: %w", pid, err)}
	case ws.Signaled():
		return Exit{Code: -1, Signal: ws.Signal()}
	default:
		return Exit{Code: ws.ExitStatus()}
	}
}

// DaemonOOMScoreAdjErr is nil unless Start, having given the daemon the
// job's oom_score_adj for the fork, could not give it its own back: the
// daemon then runs on at the job's value, without the protection it was
// given, until something sets it again. The error is an *OOMScoreAdjError
// with Restore true. The process itself started with the value its Spec
// asked for either way.
func (p *Process) DaemonOOMScoreAdjErr() error { return p.oomErr }

// PID is the process's ID, which is also its process group's ID.
func (p *Process) PID() int { return p.pid }

// StartTicks is field 22 of /proc/PID/stat, the process's start time in
// clock ticks since boot. With the PID it recognises the process after a
// daemon restart (KillLeftover); the PID alone may have been reused. It
// is read when first asked for, which a run that ends at once never is,
// and only while the process is alive or a zombie: once reaped its PID is
// no longer its own, and the answer is an error.
func (p *Process) StartTicks() (uint64, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ticksRead {
		return p.ticks, nil
	}
	if p.reaped {
		// The usual case for a short run, asked once it is shown: an
		// error made for every one of them was a percent of the daemon's
		// CPU in a stream of short runs.
		return 0, errReaped
	}
	st, err := readStat(p.pid)
	if err != nil {
		return 0, fmt.Errorf("start ticks of pid %d: %w", p.pid, err)
	}
	p.ticks, p.ticksRead = st.startTicks, true
	return p.ticks, nil
}

// Wait blocks until the process has been reaped, and the rest of its
// group sent SIGKILL, and returns how it ended. Any number of goroutines
// may wait.
func (p *Process) Wait() Exit {
	<-p.done
	return p.exit
}

// Done is closed once the process has been reaped; Wait then returns at
// once.
func (p *Process) Done() <-chan struct{} { return p.done }

// errReaped is returned by signal once the leader has been reaped: its PID
// is no longer ours to signal.
var errReaped = errors.New("process already reaped")

// Stop sends sig to the whole process group, waits up to timeout for the
// group to end (or until MoveKill's deadline, where it is called), then
// sends SIGKILL to the group. It returns only once the
// leader has been reaped and nothing is left of the group, nor of what
// Spec.LeftGroup finds once the group has ended; killed reports
// whether SIGKILL had to be sent. Calling it again, concurrently, or after
// the process ended is safe; the deadline is the first call's (or
// MoveKill's).
//
// The leader may end first: a launcher (torchrun, a shell) that exits on
// sig while its workers, which got sig too, still save their work. They
// get the rest of timeout, as under systemd, whose stop waits for the
// unit's whole cgroup; so do the processes that left the group, which get
// sig once the group has ended.
//
// Which signal and how long to wait are the caller's policy; a timeout of
// zero or less means SIGKILL straight after sig. A sig of 0 sends none (it
// was sent before): only the wait and the SIGKILL are left.
func (p *Process) Stop(sig syscall.Signal, timeout time.Duration) (killed bool) {
	select {
	case <-p.done:
		return false
	default:
	}
	p.mu.Lock()
	p.stopping = true
	p.mu.Unlock()
	if sig != 0 && p.signal(sig) == nil && sig != unix.SIGKILL && sig != unix.SIGCONT {
		// A stopped process cannot act on sig until it is continued;
		// systemd follows its stop signal with SIGCONT for the same reason.
		_ = p.signal(unix.SIGCONT)
	}
	kill := p.kill.Start(timeout)
	defer p.kill.Stop()
	select {
	case <-p.done:
		killed = p.awaitGroup(kill)
	case <-kill:
		killed = p.signal(unix.SIGKILL) == nil
		<-p.done
		p.awaitGroup(expired) // SIGKILLed with its leader: only its end is left
	}
	if p.leftGroup != nil {
		// What they start meanwhile (an upload their handler begins)
		// carries the run too, and is waited for as a unit's cgroup is:
		// looked for again once those found are gone, until none is
		// left; the signal is theirs alone, and SIGKILL comes at the
		// deadline, after which one more look is enough (trial AV: a
		// child started so outlived the run, its cores given away).
		for past := false; ; sig = 0 {
			k, waited := awaitLeft(p.leftGroup(p.pid), sig, kill)
			killed = killed || k
			if !waited || past {
				break
			}
			select {
			case <-kill:
				past = true
			default:
			}
		}
	}
	return killed
}

// awaitLeft sends sig (none where 0) to procs, the processes of a run that
// left its group, then waits until none is left, SIGKILLing those left
// when deadline comes, and reports whether it had to, and whether any of
// procs was left to wait for. A process is told from a later one of its
// PID by its start time.
func awaitLeft(procs []Tagged, sig syscall.Signal, deadline <-chan struct{}) (killed, waited bool) {
	live := func(t Tagged) bool {
		st, err := readStat(t.PID)
		return err == nil && st.startTicks == t.StartTicks && st.state != 'Z' && st.state != 'X'
	}
	signal := func(sig syscall.Signal) (sent bool) {
		for _, t := range procs {
			if live(t) && unix.Kill(t.PID, sig) == nil {
				sent = true
			}
		}
		return sent
	}
	procs = slices.DeleteFunc(slices.Clone(procs), func(t Tagged) bool { return t.StartTicks == 0 || !live(t) })
	if len(procs) == 0 {
		return false, false
	}
	select {
	case <-deadline:
	default:
		if sig != 0 && signal(sig) && sig != unix.SIGKILL && sig != unix.SIGCONT {
			signal(unix.SIGCONT)
		}
	}
	tick := time.NewTicker(groupPoll)
	defer tick.Stop()
	var bound <-chan time.Time
	for slices.ContainsFunc(procs, live) {
		select {
		case <-deadline:
			killed = signal(unix.SIGKILL)
			deadline, bound = nil, time.After(killedGroupWait)
		case <-bound:
			return killed, true
		case <-tick.C:
		}
	}
	return killed, true
}

// MoveKill puts the SIGKILL of the stop under way left from now: its
// stop_timeout was edited.
func (p *Process) MoveKill(left time.Duration) { p.kill.Move(left) }

// expired is a deadline that has passed.
var expired = func() <-chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}()

// groupPoll is how often Stop looks whether the rest of a group has ended
// once its leader has: no event says so.
const groupPoll = 50 * time.Millisecond

// awaitGroup waits until nothing live is left of the process group whose
// leader has been reaped, SIGKILLing it when deadline comes, and reports
// whether it had to. The group's ID is not reused while the group has a
// member, and once it has none, nothing is signalled.
func (p *Process) awaitGroup(deadline <-chan struct{}) (killed bool) {
	tick := time.NewTicker(groupPoll)
	defer tick.Stop()
	// Once SIGKILLed, a process stuck in the kernel is not waited for long.
	var bound <-chan time.Time
	for groupLive(p.pid) {
		select {
		case <-deadline:
			killed = unix.Kill(-p.pid, unix.SIGKILL) == nil
			deadline, bound = nil, time.After(killedGroupWait)
		case <-bound:
			return killed
		case <-tick.C:
		}
	}
	return killed
}

// killedGroupWait bounds the wait for a SIGKILLed group's end.
const killedGroupWait = time.Second

// signal sends sig to the process group, or to the leader alone if it has
// left its group (setpgid), so that Stop can always end the leader.
func (p *Process) signal(sig syscall.Signal) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.reaped {
		return errReaped
	}
	err := unix.Kill(-p.pid, sig)
	if err == unix.ESRCH {
		err = unix.Kill(p.pid, sig)
	}
	if err != nil {
		return fmt.Errorf("signal pid %d: %w", p.pid, err)
	}
	return nil
}

func ignoringEINTR(fn func() error) error {
	for {
		if err := fn(); err != unix.EINTR {
			return err
		}
	}
}
