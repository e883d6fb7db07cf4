package supervisor

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/berthd/berth/accounting"
	"github.com/berthd/berth/luaapi"
	"github.com/berthd/berth/supervisor/runner"
	"github.com/berthd/berth/supervisor/store"
	"github.com/berthd/berth/supervisor/units"
)

// Runs as systemd units: starting one, and taking back at start the ones
// a previous daemon left.

// adoptedRun is a run a previous daemon started as a unit, taken back.
type adoptedRun struct {
	rec  store.RunRecord
	run  *units.Run
	book *accounting.Book
	// grant is what it holds in the books again; zero when it could not be
	// restored (the machine's capacity changed meanwhile).
	grant accounting.Grant
}

// unitEnvDir is where a run's environment is written for its unit to read
// (units.Spec.EnvDir): the state directory's env, root's alone, made at
// the first start, and emptied then of what a daemon killed between a
// write and its removal left.
func (d *Daemon) unitEnvDir() (string, error) {
	d.envDirOnce.Do(func() {
		dir := filepath.Join(d.cfg.StateDir, "env")
		if err := os.MkdirAll(dir, 0o700); err != nil {
			d.envDirErr = fmt.Errorf("the directory for the runs' environments: %w", err)
			return
		}
		if err := os.Chmod(dir, 0o700); err != nil {
			d.envDirErr = fmt.Errorf("the directory for the runs' environments: %w", err)
			return
		}
		left, _ := filepath.Glob(filepath.Join(dir, "*.env"))
		for _, f := range left {
			os.Remove(f)
		}
		d.envDir = dir
	})
	return d.envDir, d.envDirErr
}

// startUnit starts a run of j as a transient unit: its grant enforced by
// the unit's cgroup, its output its own journal stream.
func (d *Daemon) startUnit(j *job, run uint64, login map[string]string, cred *syscall.Credential) (process, func(), error) {
	def := j.def
	env := d.runEnv(j.name, def, j.index, login, strconv.FormatUint(run, 10), j.grant)
	path, err := runner.Program(def.Cmd[0], env, def.Dir, cred)
	if err != nil {
		return nil, nil, err
	}
	envDir, err := d.unitEnvDir()
	if err != nil {
		return nil, nil, err
	}
	spec := units.Spec{
		Job: j.name, Run: run, Owner: def.Owner,
		Path: path, Argv: def.Cmd, Dir: def.Dir, Env: env, EnvDir: envDir,
		User: def.User, Group: def.Group,
		MemoryMax:   j.grant.RAMBytes,
		StopSignal:  def.StopSignal,
		StopTimeout: def.StopTimeout,
	}
	if def.SwapBytes >= 0 {
		swap := def.SwapBytes
		spec.SwapMax = &swap
	}
	if !def.Resources.Unaccounted() {
		// Pinned to the granted cores that exist: past a --cpus above the
		// machine's count, a grant of virtual cores alone pins nothing.
		if real := d.cfg.Machine.Pinnable(j.grant.CPUIDs); len(real) > 0 {
			spec.CPUs = real
		}
	}
	spec.Devices = d.cardNodes(j.grant.GPUs)
	spec.RuntimeMax = unitRuntimeMax(def)
	proc, err := d.cfg.Units.Start(context.Background(), spec)
	if err != nil {
		return nil, nil, err
	}
	return proc, nil, nil
}

// cardControlNodes are what a program needs beside its cards' own nodes to
// use them.
var cardControlNodes = []string{"/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools", "/dev/nvidia-modeset"}

// cardNodes are the device nodes a run granted cards may open: each card's
// /dev/nvidiaN, N its minor as the driver says it (probes' topology) or,
// where the driver says nothing, the card's index. nil (no device rule)
// on a machine without cards, or where a card is a MIG instance or a UUID
// the driver does not describe (then every card stays open to every job:
// the rule would be a guess).
func (d *Daemon) cardNodes(granted []int) []string {
	if len(d.cfg.Machine.GPUs) == 0 {
		return nil
	}
	nodes := slices.Clone(cardControlNodes)
	for _, i := range granted {
		name := d.cfg.Machine.GPUs[i]
		if _, mig := d.cfg.Machine.Topology.MIG[name]; mig {
			return nil
		}
		if card, ok := d.cfg.Machine.Topology.CardNamed(name); ok && card.Minor >= 0 {
			nodes = append(nodes, "/dev/nvidia"+strconv.Itoa(card.Minor))
			continue
		}
		if _, err := strconv.Atoi(name); err != nil {
			return nil
		}
		nodes = append(nodes, "/dev/nvidia"+name)
	}
	return nodes
}

// unitRuntimeMax is the bound of a run's unit (zero: none). The daemon's
// own timer ends the run at its timeout; the unit's bound is for while the
// daemon is away, and comes later so that the two never race.
func unitRuntimeMax(def *luaapi.Job) time.Duration {
	if def.Timeout <= 0 {
		return 0
	}
	return def.Timeout + def.StopTimeout + time.Minute
}

// adopt takes back the open runs whose units are still there, their grants
// into the books before anything is placed, and stops the units of berth's
// that no open run accounts for. It returns the open runs it could not
// take back (lost).
func (d *Daemon) adopt(open []store.RunRecord) ([]store.RunRecord, error) {
	found, err := d.cfg.Units.List(context.Background())
	if err != nil {
		return nil, err
	}
	byRun := map[uint64]units.Found{}
	for _, f := range found {
		byRun[f.Run] = f
	}
	d.adopted = map[string]adoptedRun{}
	var lost []store.RunRecord
	for _, rec := range open {
		f, ok := byRun[rec.ID]
		if ok && f.Job != rec.Job {
			lost = append(lost, rec)
			continue
		}
		if !ok {
			// A unit keeps its result until berth stops it, so a unit
			// that is gone was stopped by someone else while no daemon
			// watched (systemctl stop of it or of berth.slice): its run
			// ends stopped, as it would have with a daemon there. A run
			// begun before this boot went down with the machine: lost,
			// and run again (its systemd's: a container's own boot); so
			// did one the last daemon, stopping with the machine's
			// shutdown, said would (markShutdownLost).
			if booted := d.unitsBooted(); booted.IsZero() || !rec.Start.After(booted) || rec.Stopping == store.ReasonLost {
				lost = append(lost, rec)
				continue
			}
			f.Unit = units.Name(rec.Job, rec.ID)
		}
		delete(byRun, rec.ID)
		run, err := d.cfg.Units.Adopt(f.Unit)
		if err != nil {
			d.jobLog(rec.Job).Warn("cannot take a run's unit back", "run", rec.ID, "unit", f.Unit, "error", err)
			lost = append(lost, rec)
			continue
		}
		a := adoptedRun{rec: rec, run: run}
		if g, err := d.book.Restore(accounting.Grant{Holder: rec.Job, Owner: ownerOf(rec.Job), CPUIDs: rec.CPUIDs, GPUs: d.cardIndices(rec.GPUs), RAMBytes: rec.RAMBytes, GPUMemBytes: rec.GPUMemBytes}); err == nil {
			a.book, a.grant = d.book, g
		} else {
			d.jobLog(rec.Job).Warn("a run taken back holds what the books cannot grant it again; it runs on, unaccounted", "run", rec.ID, "error", err)
		}
		if prev, ok := d.adopted[rec.Job]; ok {
			// Two open runs of one job (the second began while the first
			// was still being stopped, or its end could not be recorded):
			// the job takes back the newer, and the older is stopped.
			if prev.rec.ID > rec.ID {
				prev, a = a, prev
			}
			d.jobLog(rec.Job).Warn("two runs of one job outlived the previous daemon: stopping the older", "run", prev.rec.ID, "newer", a.rec.ID)
			d.stopAdopted(prev, "a newer run of its job outlived the previous daemon too")
		}
		d.adopted[rec.Job] = a
		select {
		case <-run.Done():
			d.jobLog(rec.Job).Info("found the end of a run that ended while no daemon watched", "run", rec.ID, "unit", f.Unit)
		default:
			d.jobLog(rec.Job).Info("took back a run that outlived the previous daemon", "run", rec.ID, "unit", f.Unit, "pid", run.PID())
		}
	}
	for _, f := range byRun {
		// Not berth's record of a run in progress: a unit of a run already
		// recorded as over, or of another state file. Stopped, as a run
		// nobody accounts for must not hold the machine.
		d.jobLog(f.Job).Warn("stopping a unit no run on record accounts for", "unit", f.Unit, "run", f.Run)
		d.cfg.Units.Discard(f.Unit)
	}
	return lost, nil
}

// cardIndices maps card names, as a run recorded them, to the books'
// indices.
func (d *Daemon) cardIndices(names []string) []int {
	out := make([]int, 0, len(names))
	for _, name := range names {
		if i := slices.Index(d.cfg.Machine.GPUs, name); i >= 0 {
			out = append(out, i)
		} else if n, err := strconv.Atoi(name); err == nil {
			out = append(out, n)
		} else {
			out = append(out, -1) // Restore refuses it
		}
	}
	return out
}

// takeAdopted hands job j the run a previous daemon left for it, before
// its goroutine starts: it is running, and its end arrives as any run's.
func (j *job) takeAdopted(a adoptedRun) {
	j.run = runState{id: a.rec.ID, fp: a.rec.Fingerprint, proc: a.run, gpus: a.rec.GPUs, ram: a.rec.RAMBytes, start: a.rec.Start,
		cpus: len(a.rec.CPUIDs), shown: true} // shown: on record before its unit began
	j.book, j.grant = a.book, a.grant
	// The restarts in a row so far (remembered) go on.
	j.life = life{state: store.StateRunning, since: a.rec.Start, started: a.rec.Start, restarts: j.life.restarts, delay: j.life.delay}
	if j.def.HasDeps() {
		// What it was run after, as its daemon recorded it: its end is
		// done for that, not for the parents as they are now.
		j.runMark = cmp.Or(a.rec.Mark, a.rec.Fingerprint)
	}
	j.exitC = a.run.Done()
	if j.def.Timeout > 0 {
		j.timeout = j.d.clock.NewTimer(max(0, a.rec.Start.Add(j.def.Timeout).Sub(j.d.now())))
	}
	j.publish()
}

// resumedStop is a stop that the last daemon began on a run this one took
// back: when it began, whether its signal was sent, and why.
type resumedStop struct {
	began     time.Time
	signalled bool
	cause     string
}

// resumeStop goes on, before the job's goroutine starts, with the stop of
// the run it just took back (takeAdopted) that the last daemon began, as
// the event kind began it: a person's stop (evStop), after which the job
// rests stopped, or a restart, an edit or a disable (evRestart: run again,
// unless the definition read now puts it to rest). The job is shown
// stopping, holding what the run holds, its history saying why it was
// stopped. The stop_signal is sent again only where the last daemon may
// not have sent it (its run's record does not say it was being stopped),
// and SIGKILL follows once the stop_timeout, from when the stop began, is
// over (trial AE: a fixed SIGTERM, and SIGKILL 10 s later, cut a 60 s
// checkpoint short).
func (j *job) resumeStop(rec store.RunRecord, began time.Time, kind eventKind) {
	j.run.resumed = &resumedStop{began: began, signalled: rec.Stopping != 0, cause: rec.Cause}
	j.apply(event{kind: kind})
	// Stopping since it began, on record too: a daemon that goes away
	// again does not make the stop longer.
	j.life.since = began
	j.persist()
}

// resumeTimeout goes on with the stop of a run that outlived its timeout,
// which the last daemon began: once it ends, the restart policy judges it
// as the last daemon would have. That one recorded where the job goes then
// (life.recorded: settled), having counted the restart it leads to; where
// that count goes on here (counted), it is taken back to what it was
// before, or the policy would count that restart twice.
func (j *job) resumeTimeout(rec store.RunRecord, began time.Time, counted bool) {
	switch {
	case counted && j.life.restarts > 0:
		j.life.restarts--
		j.life.delay = delayAfter(j.life.restarts)
	case j.life.delay == 0 && j.life.restarts > 0:
		// Resting failed for max_restarts (the record keeps no delay):
		// the count goes on, or the policy would take the run for a
		// first failure and restart it (the review).
		j.life.delay = delayAfter(j.life.restarts)
	}
	j.resumeStop(rec, began, evTimeout)
}

// orphans sorts the runs taken back that no job claimed (their files
// went away while the daemon was down) into those to stop, returned, and
// those kept (orphansSaid): kept while a file that may declare its job is
// not in force as written (refused, or its directory unreadable or
// settling). An administrators' job is declared only in the jobs
// directory, a person's only in theirs, so another's broken file keeps
// none (trial AW: any problem anywhere, a person's refused file among
// them, kept every such run running, unseen, for good).
func (d *Daemon) orphans(r *reloadRun) (stop []string) {
	unsure := map[string]bool{} // owners, "" for the administrators
	mark := func(dir string) {
		if owner, ok := d.ownerOfDir(dir); ok {
			unsure[owner] = true
		}
	}
	for dir := range r.refusedDirs(d.cfg.JobsDir) {
		mark(dir)
	}
	for dir := range r.settling {
		mark(dir)
	}
	for path := range d.fileErrs {
		mark(filepath.Dir(path))
	}
	said := d.orphansSaid
	d.orphansSaid = map[string]bool{}
	for _, name := range slices.Sorted(maps.Keys(d.adopted)) {
		ended := false
		select {
		case <-d.adopted[name].run.Done():
			ended = true // nothing left to keep: recorded at once
		default:
		}
		if ended || !unsure[ownerOf(name)] {
			stop = append(stop, name)
			continue
		}
		d.orphansSaid[name] = true
		if said[name] {
			continue
		}
		a := d.adopted[name]
		d.jobLog(name).Warn("keeping a run taken back whose job no file in force declares: a file that may declare it has errors", "run", a.rec.ID)
		// Its own end is recorded, and gives back what it held. (Made
		// on the loop: before Run waits for bg, once the loop is done.)
		d.bg.Go(func() {
			select {
			case <-a.run.Done():
				_, _ = d.call(context.Background(), func() any { return d.stopOrphan(name, a.run, "") })
			case <-d.loopDone:
			}
		})
	}
	return stop
}

// keptOrphans are the problems that show the runs orphans keeps.
func (d *Daemon) keptOrphans() []Problem {
	var kept []Problem
	for _, name := range slices.Sorted(maps.Keys(d.orphansSaid)) {
		if a, ok := d.adopted[name]; ok {
			kept = append(kept, Problem{Code: ProblemOrphanKept, Kind: "job", Job: name, Text: msgOrphanKept(name, a.rec.ID)})
		}
	}
	return kept
}

// ownerOfDir is whose jobs the files in dir declare: "" for the jobs
// directory's, a person's name for their directory's; false for neither.
func (d *Daemon) ownerOfDir(dir string) (string, bool) {
	dir = filepath.Clean(dir)
	if d.cfg.JobsDir != "" && dir == filepath.Clean(d.cfg.JobsDir) {
		return "", true
	}
	if d.cfg.UserJobs == "" {
		return "", false
	}
	rel, err := filepath.Rel(d.cfg.UserJobs, dir)
	if err != nil || rel == "." || strings.HasPrefix(rel, "..") || strings.Contains(rel, "/") {
		return "", false
	}
	return rel, true
}

// stopOrphans stops the runs taken back of names, which no job claimed.
func (d *Daemon) stopOrphans(names []string) {
	for _, name := range names {
		a := d.adopted[name]
		delete(d.adopted, name)
		delete(d.orphansSaid, name)
		why := "no job file declares it any more"
		// Their files are not read: they left while no daemon ran (trial
		// AY: said as if the file had gone).
		if notRead := d.ownerNotRead(ownerOf(name)); notRead != "" {
			why = notRead
		}
		d.jobLog(name).Info("stopping a run taken back whose job is no longer declared", "run", a.rec.ID, "why", why)
		d.stopAdopted(a, why)
	}
}

// stopOrphan stops the run taken back of name, run, kept while a file
// that may declare its job has errors (orphans): on a person's request,
// why, or once it has ended by itself; false where it is not kept (any
// more).
func (d *Daemon) stopOrphan(name string, run *units.Run, why string) bool {
	a, ok := d.adopted[name]
	if !ok || !d.orphansSaid[name] || run != nil && a.run != run {
		return false
	}
	delete(d.adopted, name)
	delete(d.orphansSaid, name)
	d.mu.Lock()
	d.problems = slices.DeleteFunc(d.problems, func(p Problem) bool { return p.Code == ProblemOrphanKept && p.Job == name })
	d.mu.Unlock()
	if why != "" {
		d.jobLog(name).Info("stopping a run taken back whose job is no longer declared", "run", a.rec.ID, "why", why)
	}
	d.stopAdopted(a, why)
	d.changed.raise()
	return true
}

// stopAdopted stops a run taken back that no job runs (why says why),
// records how it ended, lets go of its unit and gives back what it held. A shutdown waits
// for it (jobsWG), so that it is recorded before the state closes; should
// the connection to systemd go meanwhile, it is left to the next daemon,
// which finds it as this one did.
func (d *Daemon) stopAdopted(a adoptedRun, why string) {
	d.jobsWG.Go(func() {
		ended := false
		select {
		case <-a.run.Done():
			ended = true // while no daemon watched: its own end
		default:
		}
		killed := a.run.Stop(syscall.SIGTERM, 10*time.Second)
		select {
		case <-a.run.Done():
		case <-d.cfg.Units.Lost():
			return
		}
		exit := a.run.Wait()
		reason, cause := store.ReasonStopped, why
		switch {
		case ended && (a.rec.Stopping == store.ReasonStopped || a.rec.Stopping == store.ReasonTimedOut) && !exit.OutOfMemory:
			// A stop its last daemon began, and left to systemd's SIGKILL
			// at its stop_timeout, came to its end: recorded as that stop
			// (trial AY: "failed (SIGKILL)" of a person's berth stop).
			reason, cause = a.rec.Stopping, a.rec.Cause
			if exit.Signal == syscall.SIGKILL {
				reason = store.ReasonKilled
			}
		case ended && exit.OutOfMemory:
			reason, cause = store.ReasonOOM, ""
		case ended && exit.Success():
			reason, cause = store.ReasonExited, ""
		case ended && !exit.StoppedOutside:
			reason, cause = store.ReasonFailed, ""
		case ended && exit.Unknown:
			cause = msgGoneWhileAway(a.run.Unit())
		case ended:
			cause = msgStoppedOutside
		case killed:
			reason = store.ReasonKilled
		}
		d.meters.ended(reason)
		sig := ""
		if exit.Signal != 0 {
			sig = signalName(exit.Signal)
		}
		log := d.jobLog(a.rec.Job)
		kv := []any{"run", a.rec.ID, "reason", reason.String()}
		switch {
		case exit.Signal != 0:
			kv = append(kv, "signal", sig)
		case exit.Err == nil && !exit.StoppedOutside:
			kv = append(kv, "exit_code", exit.Code)
		}
		if cause != "" {
			kv = append(kv, "why", cause)
		}
		// As a job's own run's end is logged (trial AY: the journal said
		// nothing of these).
		log.Info("exited", kv...)
		if err := d.store.EndRun(a.rec.ID, exit.EndedAt(a.rec.Start, d.now()), exit.Code, sig, reason, cause); err != nil {
			d.notRecorded(log, "cannot record the run's end; its unit keeps it for the next daemon", "run", a.rec.ID, "error", err)
		} else {
			d.cfg.Units.Release(a.run)
			// Its last daemon may have left the SIGKILL of a stop under
			// way to a unit of its own (HandOffKill).
			a.run.CancelKill()
		}
		// Its processes have ended: what it held is free either way.
		if a.book != nil {
			_ = a.book.Give(a.grant)
		}
	})
}

// unitsBooted is when the systemd that runs the jobs' units started, as
// the machine or the container berth runs in booted: no unit outlives it,
// so a run begun before it ended with it. Where PID 1's start cannot be
// read, the kernel's boot.
func (d *Daemon) unitsBooted() time.Time {
	if m := d.cfg.Machine; !m.InitStarted.IsZero() {
		return m.InitStarted
	}
	return d.cfg.Machine.Booted
}

// withOwner is kv, a log line's keys and values, with the owner of the
// job its "job" names, where a person's: the journal keeps it as
// BERTH_OWNER, as it does of the job's own lines (trial AY: the lines
// about a person's runs taken back, refused or misdeclared had none).
func withOwner(kv []any) []any {
	name := ""
	for i := 0; i+1 < len(kv); i += 2 {
		switch k, _ := kv[i].(string); k {
		case "owner":
			return kv
		case "job":
			name, _ = kv[i+1].(string)
		}
	}
	if owner := ownerOf(name); owner != "" {
		return append(kv, "owner", owner)
	}
	return kv
}

// ownerOf is the person a job belongs to, from its name (OWNER/NAME); ""
// for a job the administrators declared.
func ownerOf(name string) string {
	owner, _, ok := strings.Cut(name, "/")
	if !ok {
		return ""
	}
	return owner
}
