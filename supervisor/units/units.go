// Package units runs each of a job's runs as a transient systemd service,
// started over D-Bus, so that the kernel enforces its grant (MemoryMax,
// AllowedCPUs, DeviceAllow on the unit's cgroup), its output is its own in
// the journal, and it outlives the daemon: a unit keeps its result
// (RemainAfterExit) until berth has recorded it and stops it.
//
// Like package runner, it is mechanism only: the caller decides what to
// run, with which grant, and what a run's end means. A Run offers what a
// runner.Process does (PID, Done, Wait, Stop), so the daemon drives both
// alike.
//
// A run's end is learnt from systemd's PropertiesChanged signals for its
// unit, and, because systemd's signals can be dropped when a subscriber
// falls behind, also from a sweep over the runs in progress every
// resyncEvery.
package units

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	sd "github.com/coreos/go-systemd/v22/dbus"
	"github.com/godbus/dbus/v5"
	"golang.org/x/sys/unix"

	"github.com/berthd/berth/supervisor/runner"
)

// Manager is what Runner needs of systemd's manager: a subset of
// *dbus.Conn from go-systemd, so that tests can stand in for it.
type Manager interface {
	StartTransientUnitContext(ctx context.Context, name, mode string, props []sd.Property, ch chan<- string) (int, error)
	StopUnitContext(ctx context.Context, name, mode string, ch chan<- string) (int, error)
	KillUnitWithTarget(ctx context.Context, name string, target sd.Who, signal int32) error
	ResetFailedUnitContext(ctx context.Context, name string) error
	GetUnitTypePropertyContext(ctx context.Context, unit, unitType, propertyName string) (*sd.Property, error)
	SetUnitPropertiesContext(ctx context.Context, name string, runtime bool, properties ...sd.Property) error
	ListUnitsByPatternsContext(ctx context.Context, states, patterns []string) ([]sd.UnitStatus, error)
}

// Slice is the slice every run's unit is started in: `systemctl stop
// berth.slice` stops every job, and `systemd-cgls` shows them apart from
// the daemon.
const Slice = "berth.slice"

// unitPrefix starts the name of every unit of berth's.
const unitPrefix = "berth-"

// resyncEvery is how often the runs in progress are looked at, whatever
// the signals said.
const resyncEvery = 10 * time.Second

// callTimeout bounds one call to systemd.
const callTimeout = 30 * time.Second

// Spec is one run to start.
type Spec struct {
	Job string
	Run uint64
	// Owner is the person whose job it is, "" for an administrator's: the
	// journal's BERTH_OWNER= field.
	Owner string
	// Path is the program, Argv its arguments (Argv[0] included), Dir and
	// Env as for runner.Spec; Env is the whole environment.
	Path string
	Argv []string
	Dir  string
	Env  []string
	// EnvDir, where set, is a directory only root may read, where Start
	// writes Env for systemd to read as the unit starts (EnvironmentFile),
	// then removes it. Without it Env is the unit's Environment=, which
	// any local user may read (systemctl show): a job's tokens with it.
	EnvDir string
	// User and Group run it as someone else; systemd then sets HOME, USER,
	// LOGNAME and SHELL.
	User, Group string
	// MemoryMax caps the unit's memory; 0 leaves it uncapped.
	MemoryMax int64
	// SwapMax caps its swap; nil leaves it at none where MemoryMax is set
	// (the grant is real memory), uncapped otherwise.
	SwapMax *int64
	// CPUs are the cores the unit may run on; nil leaves it on all.
	CPUs []int
	// Devices, when not nil, are the only device nodes the unit may open
	// besides the pseudo-devices (/dev/null and friends).
	Devices []string
	// RuntimeMax ends the unit after that long, also while the daemon is
	// away; 0 for no bound.
	RuntimeMax time.Duration
	// StopSignal and StopTimeout are how systemd stops the unit when a
	// person stops it or its slice.
	StopSignal  syscall.Signal
	StopTimeout time.Duration
}

// Name is the unit's name for run of job: berth-JOB-RUN.service. What a
// unit name may not hold is escaped as \xNN, as systemd-escape does, but
// not the dash: a job's name is [a-z0-9_.-] already, and escaping its
// dashes (\x2d) could take a long one past systemd's 256 characters. The
// run is what follows the last dash.
func Name(job string, run uint64) string {
	var b strings.Builder
	b.WriteString(unitPrefix)
	for i := 0; i < len(job); i++ {
		c := job[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '_', c == '-', c == '.' && i > 0:
			b.WriteByte(c)
		default:
			fmt.Fprintf(&b, `\x%02x`, c)
		}
	}
	b.WriteString("-" + strconv.FormatUint(run, 10) + ".service")
	return b.String()
}

// parseName takes a unit's name apart; ok is false for a unit that is not
// a run of berth's.
func parseName(name string) (job string, run uint64, ok bool) {
	rest, ok := strings.CutPrefix(name, unitPrefix)
	if !ok {
		return "", 0, false
	}
	rest, ok = strings.CutSuffix(rest, ".service")
	if !ok {
		return "", 0, false
	}
	i := strings.LastIndexByte(rest, '-')
	if i <= 0 {
		return "", 0, false
	}
	run, err := strconv.ParseUint(rest[i+1:], 10, 64)
	if err != nil {
		return "", 0, false
	}
	return unescape(rest[:i]), run, true
}

// unescape undoes Name's escaping.
func unescape(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) && s[i+1] == 'x' {
			if n, err := strconv.ParseUint(s[i+2:i+4], 16, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// Runner starts and follows runs as units.
type Runner struct {
	m Manager

	mu   sync.Mutex
	runs map[string]*Run // by unit name, while in progress

	kick      chan struct{}
	quit      chan struct{}
	closeOnce sync.Once
	wg        sync.WaitGroup
	// lost is closed once the connection to systemd is found gone.
	lost     chan struct{}
	lostOnce sync.Once
}

// aliveEvery is how often the connection to systemd is looked at: a
// Manager that can tell (go-systemd's Conn) says whether it is still
// connected.
const aliveEvery = time.Second

// New follows units through m and the signals in ev (see Connect); with no
// signals, only the periodic sweep sees a run end. Close stops it.
func New(m Manager, ev Events) *Runner {
	r := &Runner{m: m, runs: map[string]*Run{}, kick: make(chan struct{}, 1), quit: make(chan struct{}), lost: make(chan struct{})}
	r.wg.Go(func() { r.follow(ev) })
	return r
}

// Lost is closed when the connection to systemd is gone (systemd was
// re-executed, or its bus went away): no end of a run can be learnt any
// more. The units go on; a daemon that starts again takes them back.
func (r *Runner) Lost() <-chan struct{} { return r.lost }

// alive checks the connection, and says when it is gone.
func (r *Runner) alive() {
	if c, ok := r.m.(interface{ Connected() bool }); ok && !c.Connected() {
		r.lostOnce.Do(func() { close(r.lost) })
	}
}

// Close stops following; the units themselves go on.
func (r *Runner) Close() {
	r.closeOnce.Do(func() { close(r.quit) })
	r.wg.Wait()
}

// Resync asks for every run in progress to be looked at now.
func (r *Runner) Resync() {
	select {
	case r.kick <- struct{}{}:
	default:
	}
}

func (r *Runner) follow(ev Events) {
	t := time.NewTicker(resyncEvery)
	defer t.Stop()
	alive := time.NewTicker(aliveEvery)
	defer alive.Stop()
	updates, errs := ev.Updates, ev.Errors
	for {
		select {
		case _, ok := <-errs:
			if !ok {
				errs = nil
				continue
			}
			// Signals were dropped: whichever ended is found by looking.
			r.checkAll()
		case u, ok := <-updates:
			if !ok {
				updates = nil
				continue
			}
			if !mayHaveEnded(u.Changed) {
				continue
			}
			r.mu.Lock()
			run := r.runs[u.UnitName]
			r.mu.Unlock()
			if run != nil {
				r.check(run)
			}
		case <-r.kick:
			r.checkAll()
		case <-t.C:
			r.checkAll()
		case <-alive.C:
			r.alive()
		case <-r.quit:
			return
		}
	}
}

// mayHaveEnded says whether a unit's changed properties may mean its run
// has ended: it went inactive or failed, or its main process exited. A
// unit starting (activating, then running) or on its way down
// (deactivating) needs no look: systemd signals every unit's every step,
// and a look is two calls to it.
func mayHaveEnded(changed map[string]dbus.Variant) bool {
	if v, ok := changed["ActiveState"]; ok {
		if s, _ := v.Value().(string); s == "inactive" || s == "failed" {
			return true
		}
	}
	if v, ok := changed["SubState"]; ok {
		if s, _ := v.Value().(string); s == "exited" || s == "failed" || s == "dead" {
			return true
		}
	}
	return false
}

func (r *Runner) checkAll() {
	r.mu.Lock()
	runs := make([]*Run, 0, len(r.runs))
	for _, run := range r.runs {
		runs = append(runs, run)
	}
	r.mu.Unlock()
	for _, run := range runs {
		r.check(run)
	}
}

// check ends run if its unit says its main process has ended.
func (r *Runner) check(run *Run) {
	st, err := r.state(run.name)
	if err != nil || !st.ended() {
		return
	}
	r.finish(run, st)
}

// track adds run to the runs in progress, and ends it at once if st says
// it has ended.
func (r *Runner) track(run *Run, st unitState) {
	run.pid, run.cgroup = st.pid, st.cgroup
	if !st.ended() {
		run.oom = watchOOM(cgroupRoot, st.cgroup)
	}
	r.mu.Lock()
	r.runs[run.name] = run
	r.mu.Unlock()
	if st.ended() {
		r.finish(run, st)
	}
}

// finish ends run as st says, and stops following it.
func (r *Runner) finish(run *Run, st unitState) {
	r.mu.Lock()
	delete(r.runs, run.name)
	r.mu.Unlock()
	e := st.exit()
	if e.StoppedOutside {
		// Stopped with every other unit as the machine shuts down: not a
		// person's stop, where the job would rest.
		down, err := r.ShuttingDown()
		e.MachineStopping = err == nil && down
	}
	if run.oom != nil {
		// Where the memory controller is cgroup v1's, systemd does not
		// see OOM kills: berth counted them itself.
		if run.oom.killed() {
			e.OutOfMemory = true
		}
		run.oom.close()
	}
	run.end(e)
}

// Start starts spec's unit and returns once its process has been executed
// (the unit is Type=exec: a program that cannot be run fails the start).
func (r *Runner) Start(ctx context.Context, spec Spec) (*Run, error) {
	if len(spec.Argv) == 0 {
		return nil, fmt.Errorf("start: %w", runner.ErrNoCommand)
	}
	name := Name(spec.Job, spec.Run)
	fail := func(err error) (*Run, error) {
		r.Discard(name)
		if down, derr := r.ShuttingDown(); derr == nil && down {
			// Refused, or its start job cancelled, by the shutdown.
			err = fmt.Errorf("%w: %w", ErrShuttingDown, err)
		}
		return nil, err
	}

	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	done := make(chan string, 1)
	envFile := ""
	if spec.EnvDir != "" {
		var err error
		// Named by the run alone: systemd reads C escapes in the path, and
		// a unit's name has them (\x2f for a person's job).
		if envFile, err = writeEnvFile(spec.EnvDir, "run-"+strconv.FormatUint(spec.Run, 10), spec.Env); err != nil {
			return nil, fmt.Errorf("start unit %s: %w", name, err)
		}
		// Read as the unit started (Type=exec: before its start job is
		// done), and of no use after.
		defer os.Remove(envFile)
	}
	if _, err := r.m.StartTransientUnitContext(ctx, name, "fail", properties(spec, envFile), done); err != nil {
		return fail(fmt.Errorf("start unit %s: %w", name, err))
	}
	select {
	case result := <-done:
		if result != "done" {
			if st, err := r.state(name); err == nil && st.ranAndEnded() {
				// It started and ended before its start job was done: a
				// run that failed fast, not one that could not start.
				run := newRun(r, name)
				r.track(run, st)
				return run, nil
			}
			return fail(r.startError(name, spec, result))
		}
	case <-ctx.Done():
		return fail(fmt.Errorf("start unit %s: %w", name, ctx.Err()))
	}
	// Followed once its start job is done, not before: until then systemd
	// shows the unit inactive, which would read as a run that ended. An
	// end signalled in between is seen by this look at its state.
	st, err := r.state(name)
	if err != nil {
		return fail(err)
	}
	run := newRun(r, name)
	r.track(run, st)
	return run, nil
}

// startError says why a unit's start job did not complete: with Type=exec
// a program that cannot be executed fails it, and ExecMainStatus then holds
// systemd's EXIT_* code for the step that failed.
func (r *Runner) startError(name string, spec Spec, result string) error {
	if st, err := r.state(name); err == nil && st.result != "" && st.result != "success" {
		return errors.New(msgStartFailed(name, spec, st.result, st.status))
	}
	return errors.New(msgStartJobEnded(name, result))
}

// Discard stops a unit, whatever state it is in, and forgets its result.
func (r *Runner) Discard(name string) {
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	done := make(chan string, 1)
	if _, err := r.m.StopUnitContext(ctx, name, "replace", done); err == nil {
		select {
		case <-done:
		case <-ctx.Done():
		}
	}
	_ = r.m.ResetFailedUnitContext(ctx, name)
}

// Release stops a run's unit once its end has been recorded: what is left
// of it in its cgroup is killed, and the unit and its result go.
func (r *Runner) Release(run *Run) { r.Discard(run.name) }

// Found is a unit of berth's that the manager has loaded.
type Found struct {
	Unit string
	Job  string
	Run  uint64
}

// List returns every unit of berth's that systemd knows, running or
// holding a result.
func (r *Runner) List(ctx context.Context) ([]Found, error) {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	units, err := r.m.ListUnitsByPatternsContext(ctx, nil, []string{unitPrefix + "*.service"})
	if err != nil {
		return nil, fmt.Errorf("list berth's units: %w", err)
	}
	var found []Found
	for _, u := range units {
		if job, run, ok := parseName(u.Name); ok && u.LoadState == "loaded" {
			found = append(found, Found{Unit: u.Name, Job: job, Run: run})
		}
	}
	return found, nil
}

// Adopt follows a unit a previous daemon started. The Run it returns may
// have ended already (Done is then closed); a unit that is no longer there
// was stopped from outside while no daemon watched it.
func (r *Runner) Adopt(name string) (*Run, error) {
	st, err := r.state(name)
	if err != nil {
		return nil, err
	}
	st.goneAtAdoption = !st.loaded
	run := newRun(r, name)
	r.track(run, st)
	return run, nil
}

// Usage is what a run's unit uses: its memory now and the CPU time it has
// spent, from its cgroup; -1 where the cgroup does not account it.
type Usage struct {
	MemoryBytes int64
	CPUTime     time.Duration
}

// cgroupRoot is where the cgroup hierarchies are mounted (a variable for
// tests).
var cgroupRoot = "/sys/fs/cgroup"

// Usage reads what the run's unit uses, from its cgroup's files: a read
// of two small files, cheap enough for every status. It reads the unified
// hierarchy's files, and where a machine still has the legacy memory and
// cpuacct hierarchies (systemd's "hybrid" mode), theirs.
func (run *Run) Usage() (Usage, bool) {
	if run.cgroup == "" {
		return Usage{}, false
	}
	u := Usage{MemoryBytes: -1, CPUTime: -1}
	if n, ok := readInt(cgroupRoot, run.cgroup, "memory.current"); ok {
		u.MemoryBytes = n
	} else if n, ok := readInt(cgroupRoot, "memory", run.cgroup, "memory.usage_in_bytes"); ok {
		u.MemoryBytes = n
	}
	if b, err := os.ReadFile(filepath.Join(cgroupRoot, run.cgroup, "cpu.stat")); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "usage_usec "); ok {
				if n, err := strconv.ParseInt(v, 10, 64); err == nil {
					u.CPUTime = time.Duration(n) * time.Microsecond
				}
			}
		}
	}
	if u.CPUTime < 0 {
		if n, ok := readInt(cgroupRoot, "cpuacct", run.cgroup, "cpuacct.usage"); ok {
			u.CPUTime = time.Duration(n) // nanoseconds
		}
	}
	return u, u.MemoryBytes >= 0 || u.CPUTime >= 0
}

// readInt reads a cgroup file that holds one integer.
func readInt(path ...string) (int64, bool) {
	b, err := os.ReadFile(filepath.Join(path...))
	if err != nil {
		return 0, false
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	return n, err == nil
}

// unitState is what berth reads of a unit.
type unitState struct {
	active, sub string
	result      string
	pid         int
	cgroup      string
	exited      bool   // the main process has ended
	exitTS      uint64 // when, on CLOCK_MONOTONIC in µs
	code        int32
	status      int32
	loaded      bool
	// stoppedFirst: the unit was on its way down before its main process
	// ended, a stop job's doing (systemctl stop), though the process's
	// answer to its signal failed the unit, or it outlived the stop's
	// timeout (Runner.stoppedFirst).
	stoppedFirst bool
	// goneAtAdoption: no unit of the name was there to take back.
	goneAtAdoption bool
}

// ranAndEnded reports whether the unit's program was executed and has
// ended: it exited with a status of its own, or a signal ended it. The
// statuses 200 to 243 are systemd's EXIT_* codes for a step before the
// program (its directory, its user, the exec itself).
func (st unitState) ranAndEnded() bool {
	if !st.exited || st.pid == 0 {
		return false
	}
	return st.code != cldExited || st.status < 200 || st.status > 243
}

// Codes of ExecMainCode (siginfo's si_code).
const (
	cldExited = 1
	cldKilled = 2
	cldDumped = 3
)

// unitProps and serviceProps are what state reads of a unit, one property
// a call: reading them all (GetAll) costs systemd and the daemon several
// times more, the Service interface having some 250 (measured under
// systemd 252: 1.6 ms for Service's all, 0.45 ms for these six).
var (
	unitProps    = []string{"LoadState", "ActiveState", "SubState"}
	serviceProps = []string{"Result", "ExecMainExitTimestampMonotonic", "ExecMainCode", "ExecMainStatus", "ExecMainPID", "ControlGroup"}
)

// state reads what berth needs of a unit. The unit's state is read again
// after the service's properties, and the lot taken only when the unit did
// not move in between, so that an exit is never paired with a state from
// before it (an OOM kill would read as a plain SIGKILL).
func (r *Runner) state(name string) (unitState, error) {
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	read := func(kind string, names []string) (map[string]any, error) { return r.props(ctx, name, kind, names...) }
	u, err := read("Unit", unitProps)
	if err != nil {
		return unitState{}, err
	}
	st := unitState{}
	load, _ := u["LoadState"].(string)
	st.loaded = load == "loaded"
	var s map[string]any
	for range 5 {
		if !st.loaded {
			break // gone: nothing more to read
		}
		if s, err = read("Service", serviceProps); err != nil {
			return unitState{}, err
		}
		again, err := read("Unit", unitProps[1:])
		if err != nil {
			return unitState{}, err
		}
		settled := again["ActiveState"] == u["ActiveState"] && again["SubState"] == u["SubState"]
		u["ActiveState"], u["SubState"] = again["ActiveState"], again["SubState"]
		if settled {
			break
		}
	}
	st.active, _ = u["ActiveState"].(string)
	st.sub, _ = u["SubState"].(string)
	st.result, _ = s["Result"].(string)
	st.cgroup, _ = s["ControlGroup"].(string)
	if pid, ok := s["ExecMainPID"].(uint32); ok {
		st.pid = int(pid)
	}
	st.exitTS, _ = s["ExecMainExitTimestampMonotonic"].(uint64)
	st.exited = st.exitTS != 0
	st.code, _ = s["ExecMainCode"].(int32)
	st.status, _ = s["ExecMainStatus"].(int32)
	if st.exited && st.active == "failed" {
		if st.stoppedFirst, err = r.stoppedFirst(ctx, name, st); err != nil {
			return unitState{}, err
		}
	}
	return st, nil
}

// props reads the properties names of unit name, of its kind's interface
// ("Unit", "Service"), one call each.
func (r *Runner) props(ctx context.Context, name, kind string, names ...string) (map[string]any, error) {
	out := make(map[string]any, len(names))
	for _, n := range names {
		p, err := r.m.GetUnitTypePropertyContext(ctx, name, kind, n)
		if err != nil {
			return nil, fmt.Errorf("read %s of unit %s: %w", n, name, err)
		}
		out[n] = p.Value.Value()
	}
	return out, nil
}

// stoppedFirst says whether the failed unit name was stopped before its
// main process ended, by a stop job (systemctl stop of it or of its
// slice) whose signal the process answered with a failing status, or
// outlived (the stop's own timeout, its result "timeout"). A stop takes
// the unit out of active before its main process ends; a process that
// fails takes it out after. Its own runtime bound (RuntimeMaxSec) stops
// it first too, but not before that bound. Read only of a failed unit:
// one that ends well stays active (RemainAfterExit), and only a stop
// makes it inactive.
func (r *Runner) stoppedFirst(ctx context.Context, name string, st unitState) (bool, error) {
	switch st.result {
	case "exit-code", "signal", "core-dump", "timeout":
	default:
		return false, nil // oom-kill, and what is no exit of the process
	}
	read := func(kind, prop string) (uint64, error) {
		p, err := r.props(ctx, name, kind, prop)
		v, _ := p[prop].(uint64)
		return v, err
	}
	left, err := read("Unit", "ActiveExitTimestampMonotonic")
	if err != nil || left == 0 || left >= st.exitTS {
		return false, err
	}
	if st.result != "timeout" {
		return true, nil
	}
	// Out of time: the stop's, or the unit's runtime bound's, which it
	// cannot have reached before then.
	entered, err := read("Unit", "ActiveEnterTimestampMonotonic")
	if err != nil {
		return false, err
	}
	bound, err := read("Service", "RuntimeMaxUSec")
	if err != nil {
		return false, err
	}
	return bound == 0 || bound == math.MaxUint64 || entered == 0 || left < entered+bound, nil
}

// ShuttingDown reports whether the machine is shutting down (a poweroff,
// a reboot): systemd's own test for its SystemState "stopping", that
// shutdown.target is active or has a job queued. Every unit is then
// stopped, the daemon's and its runs' at once. (The manager's SystemState
// itself is read by go-systemd with no bound on the call.)
func (r *Runner) ShuttingDown() (bool, error) {
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	p, err := r.props(ctx, shutdownTarget, "Unit", "ActiveState", "Job")
	if err != nil {
		return false, err
	}
	// Job is (id, path), id 0 where none is queued. A stop job of an
	// inactive unit is never queued: one there is a start.
	var id uint32
	if job, _ := p["Job"].([]any); len(job) == 2 {
		id, _ = job[0].(uint32)
	}
	active, _ := p["ActiveState"].(string)
	return id != 0 || active == "active" || active == "activating", nil
}

// ErrShuttingDown wraps a start that failed as the machine shuts down:
// systemd starts no unit then (each conflicts with shutdown.target).
var ErrShuttingDown = errors.New("the machine is shutting down")

// shutdownTarget is the unit every shutdown of the machine starts.
const shutdownTarget = "shutdown.target"

// wallOfMonotonic is the wall time of usec on CLOCK_MONOTONIC, the clock
// of systemd's *TimestampMonotonic properties (one clock for the whole
// machine); zero where usec is not a time past.
func wallOfMonotonic(usec uint64) time.Time {
	var ts unix.Timespec
	if usec == 0 || unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts) != nil {
		return time.Time{}
	}
	now := time.Now()
	ago := time.Duration(ts.Nano()) - time.Duration(usec)*time.Microsecond
	if ago < 0 {
		return time.Time{}
	}
	return now.Add(-ago)
}

// ended reports whether the run is over and its result settled: the main
// process has ended and the unit is no longer on its way down (an OOM kill
// is known only once it is), or the unit is gone. Only asked of a unit
// whose start job is done: before, a unit is inactive too.
func (st unitState) ended() bool {
	if !st.loaded {
		return true
	}
	if !st.exited {
		return st.active == "inactive" || st.active == "failed"
	}
	return st.active != "deactivating" && st.active != "activating"
}

func (st unitState) exit() runner.Exit {
	switch {
	case !st.loaded:
		// A transient unit is unloaded once it is inactive, and berth
		// only ever stops a run's unit after it has recorded the run: a
		// unit that went while followed was stopped by someone else
		// (systemctl stop of it or of berth.slice). One gone before a
		// daemon took it back may as well have failed, its result
		// cleared since (systemctl reset-failed).
		return runner.Exit{Code: -1, StoppedOutside: true, Unknown: st.goneAtAdoption}
	case !st.exited:
		return runner.Exit{Code: -1, Err: fmt.Errorf("its unit ended without a main process (%s)", st.result)}
	}
	// A main process that ends on its own leaves the unit active (exited)
	// or failed, RemainAfterExit keeping it; only a stop job makes it
	// inactive, or failed once on its way down (stoppedFirst), and berth
	// stops its runs by signalling them, never so.
	e := runner.Exit{Code: int(st.status), OutOfMemory: st.result == "oom-kill", TimedOut: st.result == "timeout" && !st.stoppedFirst,
		StoppedOutside: st.active == "inactive" || st.stoppedFirst, At: wallOfMonotonic(st.exitTS)}
	if st.code == cldKilled || st.code == cldDumped {
		e.Code, e.Signal = -1, syscall.Signal(st.status)
	}
	return e
}

// Run is one run's unit.
type Run struct {
	r      *Runner
	name   string
	pid    int
	cgroup string // its cgroup's path under the hierarchy's root

	// oom counts its OOM kills where systemd cannot (cgroup v1); nil
	// elsewhere. Read once, when the run ends.
	oom *oomWatch

	once sync.Once
	done chan struct{}
	exit runner.Exit

	// kill is when Stop sends its SIGKILL.
	kill runner.KillTimer
}

// MoveKill puts the SIGKILL of the stop under way left from now: its
// stop_timeout was edited.
func (run *Run) MoveKill(left time.Duration) { run.kill.Move(left) }

func newRun(r *Runner, name string) *Run { return &Run{r: r, name: name, done: make(chan struct{})} }

func (run *Run) end(e runner.Exit) {
	run.once.Do(func() {
		run.exit = e
		close(run.done)
	})
}

// Unit is the run's unit name.
func (run *Run) Unit() string { return run.name }

// PID is the unit's main process.
func (run *Run) PID() int { return run.pid }

// Done is closed once the main process has ended and its result is known.
func (run *Run) Done() <-chan struct{} { return run.done }

// Wait blocks until Done and returns how the run ended.
func (run *Run) Wait() runner.Exit {
	<-run.done
	return run.exit
}

// SetRuntimeMax moves the unit's own bound (Spec.RuntimeMax) to d from
// its start: its run's timeout was edited. Zero lifts it.
func (run *Run) SetRuntimeMax(d time.Duration) error {
	usec := uint64(math.MaxUint64) // infinity
	if d > 0 {
		usec = uint64(d.Microseconds())
	}
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	return run.r.m.SetUnitPropertiesContext(ctx, run.name, true, prop("RuntimeMaxUSec", usec))
}

// Stop sends sig to every process of the unit (none where sig is 0: it
// was sent before), waits up to timeout for the main process to end (or
// until MoveKill's deadline, where it is called), then sends SIGKILL to
// all of them; killed says whether that was needed. It
// returns once the run has ended, or once the runner is closed (its
// daemon left the SIGKILL to the next one, or to systemd).
func (run *Run) Stop(sig syscall.Signal, timeout time.Duration) (killed bool) {
	select {
	case <-run.done:
		return false
	default:
	}
	if sig != 0 {
		ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
		_ = run.r.m.KillUnitWithTarget(ctx, run.name, sd.All, int32(sig))
		if sig != syscall.SIGKILL && sig != syscall.SIGCONT {
			_ = run.r.m.KillUnitWithTarget(ctx, run.name, sd.All, int32(syscall.SIGCONT))
		}
		cancel()
	}
	kill := run.kill.Start(timeout)
	defer run.kill.Stop()
	select {
	case <-run.done:
		return false
	case <-run.r.quit:
		// Nobody follows the run any more: its daemon left the SIGKILL
		// to the next one, or to systemd (HandOffKill).
		return false
	case <-kill:
	}
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	killed = run.r.m.KillUnitWithTarget(ctx, run.name, sd.All, int32(syscall.SIGKILL)) == nil
	cancel()
	// The signals of a unit whose process ended may have been dropped:
	// look until it is seen ended, or until nobody follows it any more
	// (the runner closed, its connection lost: a next daemon takes the
	// unit back and records its end).
	for {
		run.r.Resync()
		select {
		case <-run.done:
			return killed
		case <-run.r.quit:
			return killed
		case <-run.r.lost:
			return killed
		case <-time.After(time.Second):
		}
	}
}

// killerName is the unit that sends run unit's SIGKILL when no daemon is
// there to (HandOffKill): berth-JOB-RUN-sigkill.service, which parseName
// does not take for a run.
func killerName(unit string) string {
	return strings.TrimSuffix(unit, ".service") + "-sigkill.service"
}

// HandOffKill leaves to systemd the SIGKILL that Stop would send in wait,
// for a daemon that goes away while the run is being stopped: a oneshot
// unit in berth's slice sleeps until then and kills every process left in
// the run's unit, so that the stop ends in time with no daemon there
// (systemctl stop berth), and a daemon need not wait for it. The daemon
// that takes the stop up again lets go of this unit at once (CancelKill)
// and sends the SIGKILL itself, where its stop_timeout, edited or not,
// puts it; should it go too, it hands the SIGKILL off afresh.
func (run *Run) HandOffKill(wait time.Duration) error {
	sleep, systemctl := toolPath("sleep"), toolPath("systemctl")
	// The manager that runs the unit: the user's own for a daemon not
	// run as root, as Connect chose.
	kill := []string{systemctl, "kill", "--signal=SIGKILL", run.name}
	if os.Getuid() != 0 {
		kill = []string{systemctl, "--user", "kill", "--signal=SIGKILL", run.name}
	}
	props := []sd.Property{
		sd.PropDescription(fmt.Sprintf("berth: SIGKILL for %s once its stop_timeout is over", run.name)),
		sd.PropType("oneshot"),
		prop("ExecStart", []execStart{
			{Path: sleep, Args: []string{sleep, strconv.FormatFloat(max(0, wait).Seconds(), 'f', 3, 64)}},
			// Its unit may be gone by then: no failure.
			{Path: systemctl, Args: kill, IgnoreFailure: true},
		}),
		sd.PropSlice(Slice),
		prop("TimeoutStartUSec", uint64(math.MaxUint64)), // a oneshot's start is its sleep
		prop("CollectMode", "inactive-or-failed"),
		prop("StandardOutput", "null"),
	}
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	// Not waited for: a oneshot's start job lasts until its end.
	_, err := run.r.m.StartTransientUnitContext(ctx, killerName(run.name), "fail", props, nil)
	var dbusErr dbus.Error
	if errors.As(err, &dbusErr) && dbusErr.Name == "org.freedesktop.systemd1.UnitExists" {
		return nil
	}
	return err
}

// toolPath is where the program name is on the daemon's PATH, as a job's
// is found (runner.Program), or in /usr/bin, where every systemd
// distribution has sleep and systemctl (systemd wants a transient unit's
// programs by their absolute paths).
func toolPath(name string) string {
	if p, err := runner.Program(name, os.Environ(), "/", nil); err == nil {
		return p
	}
	return "/usr/bin/" + name
}

// CancelKill stops the unit that HandOffKill started for run, if any: the
// run has ended, or a daemon took its stop up.
func (run *Run) CancelKill() { run.r.Discard(killerName(run.name)) }

// writeEnvFile writes env into dir/NAME.env, 0600, as systemd's
// EnvironmentFile= reads it: each value in double quotes, where a
// backslash keeps ", \, ` and $ as they are (and a newline is itself).
func writeEnvFile(dir, name string, env []string) (string, error) {
	var b []byte
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		b = append(b, k...)
		b = append(b, '=', '"')
		for i := 0; i < len(v); i++ {
			if strings.IndexByte("\"\\`$", v[i]) >= 0 {
				b = append(b, '\\')
			}
			b = append(b, v[i])
		}
		b = append(b, '"', '\n')
	}
	path := filepath.Join(dir, name+".env")
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return "", err
	}
	_, err = f.Write(b)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(path)
		return "", err
	}
	return path, nil
}

// envFileProp is one of EnvironmentFiles as D-Bus carries it: (sb), the
// boolean saying a missing file is no error.
type envFileProp struct {
	Path     string
	Optional bool
}

// properties is spec as a transient unit's properties; its environment
// is the file envFile where that is not "" (writeEnvFile).
func properties(spec Spec, envFile string) []sd.Property {
	props := []sd.Property{
		sd.PropDescription(fmt.Sprintf("berth job %s, run %d", spec.Job, spec.Run)),
		sd.PropType("exec"),
		prop("ExecStart", []execStart{{Path: spec.Path, Args: literalArgs(spec.Argv)}}),
		sd.PropRemainAfterExit(true),
		sd.PropSlice(Slice),
		prop("KillMode", "control-group"),
		prop("OOMPolicy", "stop"),
		prop("OOMScoreAdjust", int32(0)),
		prop("SyslogIdentifier", spec.Job),
		prop("LogExtraFields", logFields(spec)),
		prop("KillSignal", int32(spec.StopSignal)),
		prop("TimeoutStopUSec", uint64(spec.StopTimeout.Microseconds())),
		// Its own stdin is nothing; its output is its own journal stream.
		prop("StandardInput", "null"),
		prop("StandardOutput", "journal"),
		prop("StandardError", "journal"),
		// What berth status shows beside the grant.
		prop("MemoryAccounting", true),
		prop("CPUAccounting", true),
	}
	if envFile != "" {
		props = append(props, prop("EnvironmentFiles", []envFileProp{{Path: envFile}}))
	} else {
		props = append(props, prop("Environment", spec.Env))
	}
	if spec.Dir != "" {
		props = append(props, prop("WorkingDirectory", spec.Dir))
	}
	if spec.User != "" {
		props = append(props, prop("User", spec.User))
	}
	if spec.Group != "" {
		props = append(props, prop("Group", spec.Group))
	}
	if spec.MemoryMax > 0 {
		props = append(props, prop("MemoryMax", uint64(spec.MemoryMax)))
	}
	switch {
	case spec.SwapMax != nil:
		props = append(props, prop("MemorySwapMax", uint64(*spec.SwapMax)))
	case spec.MemoryMax > 0:
		props = append(props, prop("MemorySwapMax", uint64(0)))
	}
	if spec.CPUs != nil {
		// AllowedCPUs is the cgroup's cpuset, which the kernel enforces
		// (cgroup v2 only); CPUAffinity the processes' affinity, which
		// every hierarchy has and which a job could widen again alone.
		mask := cpuMask(spec.CPUs)
		props = append(props, prop("AllowedCPUs", mask), prop("CPUAffinity", mask))
	}
	if spec.Devices != nil {
		allow := make([]deviceAllow, len(spec.Devices))
		for i, d := range spec.Devices {
			allow[i] = deviceAllow{Path: d, Rights: "rw"}
		}
		props = append(props, prop("DevicePolicy", "closed"), prop("DeviceAllow", allow))
	}
	if spec.RuntimeMax > 0 {
		props = append(props, prop("RuntimeMaxUSec", uint64(spec.RuntimeMax.Microseconds())))
	}
	return props
}

// literalArgs escapes what systemd would expand in ExecStart's arguments:
// it replaces $VAR, ${VAR} and $$ there (transient units included), so a
// job's `echo $$` must reach it as `echo $$$$`. Specifiers (%n) are not
// expanded in a transient unit's properties.
func literalArgs(argv []string) []string {
	out := make([]string, len(argv))
	for i, a := range argv {
		out[i] = strings.ReplaceAll(a, "$", "$$")
	}
	return out
}

// execStart is one command of ExecStart, as D-Bus carries it: (sasb).
// The boolean is systemd's ignore_failure, the "-" of "ExecStart=-…" (its
// failure, a program missing included, is skipped as a success), which
// go-systemd names UncleanIsFailure: berth never sets it.
type execStart struct {
	Path          string
	Args          []string
	IgnoreFailure bool
}

type deviceAllow struct {
	Path   string
	Rights string
}

func prop(name string, v any) sd.Property { return sd.Property{Name: name, Value: dbus.MakeVariant(v)} }

// CoresByAffinityOnly reports whether a unit's AllowedCPUs cannot be
// enforced here: the unified hierarchy (cgroup v2) has no cpuset
// controller for systemd to use, as on a "hybrid" machine, so a run's
// cores are its CPUAffinity alone, which its processes may widen again
// (trial AW: taskset did, under "grants enforced").
func CoresByAffinityOnly() bool {
	for _, dir := range []string{cgroupRoot, filepath.Join(cgroupRoot, "unified")} {
		b, err := os.ReadFile(filepath.Join(dir, "cgroup.controllers"))
		if err != nil {
			continue
		}
		return !slices.Contains(strings.Fields(string(b)), "cpuset")
	}
	return true // no unified hierarchy at all: cgroup v1 alone
}

// cpuMask is AllowedCPUs' bitmask: bit i of byte i/8 for core i.
func cpuMask(cpus []int) []byte {
	n := 0
	for _, c := range cpus {
		n = max(n, c/8+1)
	}
	mask := make([]byte, n)
	for _, c := range cpus {
		if c >= 0 {
			mask[c/8] |= 1 << (c % 8)
		}
	}
	return mask
}

// Events are systemd's signals about units, as go-systemd delivers them.
type Events struct {
	Updates <-chan *sd.PropertiesUpdate
	// Errors says that updates were dropped (the channel was full).
	Errors <-chan error
}

// Connect opens the manager this process runs under: the system's, or
// with user the user's own. The system's is reached on systemd's own
// socket, so that no bus daemon is needed (see systemdConnection), and on
// the system bus where that socket cannot be used (not root).
func Connect(ctx context.Context, user bool) (*sd.Conn, Events, error) {
	var conn *sd.Conn
	var err error
	switch {
	case user:
		conn, err = sd.NewUserConnectionContext(ctx)
	default:
		if conn, err = systemdConnection(ctx); err != nil {
			conn, err = sd.NewSystemConnectionContext(ctx)
		}
	}
	if err != nil {
		return nil, Events{}, fmt.Errorf("connect to systemd: %w", err)
	}
	if err := conn.Subscribe(); err != nil {
		conn.Close()
		return nil, Events{}, fmt.Errorf("subscribe to systemd's signals: %w", err)
	}
	updates := make(chan *sd.PropertiesUpdate, 4096)
	errs := make(chan error, 1)
	conn.SetPropertiesSubscriber(updates, errs)
	return conn, Events{Updates: updates, Errors: errs}, nil
}

// systemdSocket is systemd's own socket, where it answers without a bus.
const systemdSocket = "unix:path=/run/systemd/private"

// systemdConnection connects to systemd's own socket, once. go-systemd
// would connect twice, for its calls and for its signals, and systemd
// sends every signal to every connection on that socket, asked for or
// not: each signal was read and decoded twice, once for nothing, where
// reading D-Bus messages was 57 % of the daemon's CPU with runs as units.
// So both of go-systemd's connections are this one. That suits how it
// uses them: it closes both together, says it is connected only while
// both are, and its signal handler gets signals without holding up
// replies (godbus hands on a signal from a goroutine of its own when the
// handler's channel is full).
func systemdConnection(ctx context.Context) (*sd.Conn, error) {
	var shared *dbus.Conn
	return sd.NewConnection(func() (*dbus.Conn, error) {
		if shared != nil {
			return shared, nil
		}
		conn, err := dbus.Dial(systemdSocket, dbus.WithContext(ctx))
		if err != nil {
			return nil, err
		}
		// EXTERNAL, by uid, as go-systemd does; no Hello, as there is no bus.
		if err := conn.Auth([]dbus.Auth{dbus.AuthExternal(strconv.Itoa(os.Getuid()))}); err != nil {
			conn.Close()
			return nil, err
		}
		shared = conn
		return conn, nil
	})
}

// logFields are the fields journald adds to each line of a run's output:
// BERTH_JOB=, BERTH_RUN= and, for a person's job, BERTH_OWNER=.
func logFields(spec Spec) [][]byte {
	fields := [][]byte{[]byte("BERTH_JOB=" + spec.Job), []byte("BERTH_RUN=" + strconv.FormatUint(spec.Run, 10))}
	if spec.Owner != "" {
		fields = append(fields, []byte("BERTH_OWNER="+spec.Owner))
	}
	return fields
}
