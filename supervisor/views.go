package supervisor

import (
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/berthd/berth/accounting"
	"github.com/berthd/berth/luaapi"
	"github.com/berthd/berth/supervisor/store"
)

// These are the control socket's answers, as JSON. Their keys are part of
// berth's interface (the client and people's scripts read them): add keys,
// never rename or remove one.

// Size is an amount of resources.
type Size struct {
	CPUs     int   `json:"cpus"`
	GPUs     int   `json:"gpus"`
	RAMBytes int64 `json:"ram_bytes"`
	// GPUMemBytes is a share of one card's memory (gpu_mem), asked
	// instead of whole cards.
	GPUMemBytes int64 `json:"gpu_mem_bytes"`
}

func sizeOf(r accounting.Resources) Size {
	return Size{CPUs: r.CPUs, GPUs: r.GPUs, RAMBytes: r.RAMBytes, GPUMemBytes: r.GPUMemBytes}
}

// quotaSize is a quota as a Size, -1 where it bounds nothing.
func quotaSize(q accounting.Quota) Size {
	return Size{CPUs: q.CPUs, GPUs: q.GPUs, RAMBytes: q.RAMBytes, GPUMemBytes: q.GPUMemBytes}
}

// JobDefinition is a job as its file declares it, resources resolved.
type JobDefinition struct {
	Name        string            `json:"name"`
	File        string            `json:"file"`
	Line        int               `json:"line"`
	Cmd         []string          `json:"cmd"`
	Dir         string            `json:"dir"`
	Flavor      string            `json:"flavor,omitempty"`
	Resources   Size              `json:"resources"`
	SwapBytes   *int64            `json:"swap_bytes,omitempty"` // absent: none beside granted memory
	Env         map[string]string `json:"env"`
	User        string            `json:"user,omitempty"`
	Group       string            `json:"group,omitempty"`
	Restart     string            `json:"restart"`
	MaxRestarts *int              `json:"max_restarts"` // null: unlimited
	Timeout     string            `json:"timeout,omitempty"`
	StopSignal  string            `json:"stop_signal"`
	StopTimeout string            `json:"stop_timeout"`
	Priority    int               `json:"priority"`
	OnChange    string            `json:"on_change"`
	Enabled     bool              `json:"enabled"`
	Description string            `json:"description,omitempty"`
	// After and AfterAny are the jobs it waits for, by full name.
	After    []string `json:"after,omitempty"`
	AfterAny []string `json:"after_any,omitempty"`
	// Array, for an array, is its range of indices, and MaxParallel how
	// many of them hold a place at once (absent: no bound).
	Array       *ArrayRange `json:"array,omitempty"`
	MaxParallel int         `json:"max_parallel,omitempty"`
}

// ArrayRange is an array's indices, from and to included.
type ArrayRange struct {
	From int `json:"from"`
	To   int `json:"to"`
}

// DefinitionOf turns a loaded job into its JSON view.
func DefinitionOf(j *luaapi.Job) JobDefinition {
	out := JobDefinition{
		Name: j.Name, File: j.Pos.File, Line: j.Pos.Line,
		Cmd: j.Cmd, Dir: j.Dir, Flavor: j.Flavor, Resources: sizeOf(j.Resources),
		Env: j.Env, User: j.User, Group: j.Group,
		Restart: j.Restart.String(), StopSignal: signalName(j.StopSignal),
		StopTimeout: accounting.FormatDuration(j.StopTimeout),
		Priority:    j.Priority, OnChange: j.OnChange.String(), Enabled: j.Enabled, Description: j.Description,
		After: j.After, AfterAny: j.AfterAny,
	}
	if out.Env == nil {
		out.Env = map[string]string{}
	}
	if j.MaxRestarts >= 0 {
		n := j.MaxRestarts
		out.MaxRestarts = &n
	}
	if j.Timeout > 0 {
		out.Timeout = accounting.FormatDuration(j.Timeout)
	}
	if j.SwapBytes >= 0 {
		n := j.SwapBytes
		out.SwapBytes = &n
	}
	if j.Array != nil {
		out.Array = &ArrayRange{From: j.Array.From, To: j.Array.To}
		out.MaxParallel = j.MaxParallel
	}
	return out
}

// FlavorView is a flavor as its file declares it.
type FlavorView struct {
	Name      string   `json:"name"`
	File      string   `json:"file"`
	Line      int      `json:"line"`
	Resources Size     `json:"resources"`
	UsedBy    []string `json:"used_by"`
}

// FlavorOf turns a loaded flavor into its JSON view; usedBy are the jobs
// that name it.
func FlavorOf(f luaapi.Flavor, usedBy []string) FlavorView {
	if usedBy == nil {
		usedBy = []string{}
	}
	return FlavorView{Name: f.Name, File: f.Pos.File, Line: f.Pos.Line, Resources: sizeOf(f.Resources), UsedBy: usedBy}
}

// RunView is one run, as history shows it.
type RunView struct {
	ID       uint64     `json:"id"`
	Job      string     `json:"job"`
	Start    time.Time  `json:"start"`
	End      *time.Time `json:"end,omitempty"` // absent while running
	PID      int        `json:"pid,omitempty"`
	CPUs     int        `json:"cpus"`
	GPUs     []string   `json:"gpus"`
	RAMBytes int64      `json:"ram_bytes"`
	// GPUMemBytes is the share of its card it was given (gpu_mem), 0 for
	// whole cards or none; GPUMemPeakBytes the most card memory its
	// processes were seen to hold (NVML), absent where never seen.
	GPUMemBytes     int64  `json:"gpu_mem_bytes"`
	GPUMemPeakBytes *int64 `json:"gpu_mem_peak_bytes,omitempty"`
	ExitCode        *int   `json:"exit_code,omitempty"`
	Signal          string `json:"signal,omitempty"`
	Reason          string `json:"reason,omitempty"` // absent while running
	// Cause is why a run that ended "spawn error" could not be started,
	// why berth stopped one (stopped, timed out, killed), or how one
	// ended that no daemon saw end.
	Cause string `json:"cause,omitempty"`
}

func runViewOf(r store.RunRecord) RunView {
	v := RunView{ID: r.ID, Job: r.Job, Start: r.Start, PID: r.PID, CPUs: len(r.CPUIDs), GPUs: r.GPUs,
		RAMBytes: r.RAMBytes, GPUMemBytes: r.GPUMemBytes, Signal: r.Signal, Reason: r.Reason.String(), Cause: r.Cause}
	if r.GPUMemPeakBytes > 0 {
		peak := r.GPUMemPeakBytes
		v.GPUMemPeakBytes = &peak
	}
	if v.GPUs == nil {
		v.GPUs = []string{}
	}
	if !r.End.IsZero() {
		end := r.End
		v.End = &end
		// A run stopped or timed out has the code it exited with too
		// (it may have caught the signal); a lost run, one that never
		// started, one whose stop the next daemon finished and one whose
		// unit went with its status (-1: no code is known) have none.
		if r.Signal == "" && r.ExitCode >= 0 && !strings.HasSuffix(r.Cause, finishedStopCause) && r.Reason != store.ReasonLost && r.Reason != store.ReasonSpawnError {
			code := r.ExitCode
			v.ExitCode = &code
		}
	}
	return v
}

// JobDetail is `berth show JOB`: the definition, the environment its next
// run would get, and its last runs.
type JobDetail struct {
	Status     JobStatus     `json:"status"`
	Definition JobDefinition `json:"definition"`
	// NextEnv is the environment of the next run, for a grant of exactly
	// what the job asks (the cards named as the first free ones would be;
	// previewEnv).
	NextEnv []string  `json:"next_env"`
	Runs    []RunView `json:"runs"`
	// Logs says where the job's output is: "journal" (journalctl -t JOB)
	// or the path of its log file.
	Logs string `json:"logs"`
	// Hidden, when set, says why the definition's command, environment
	// and description, and the next run's environment, are left out: the
	// caller may not read the job's file.
	Hidden string `json:"hidden,omitempty"`
	// Outdated: the run in progress started from an earlier definition
	// than the one shown (an edit with on_change = "finish"), which
	// applies from the next run. Not said of an array's indices.
	Outdated bool `json:"outdated,omitempty"`
	// EnvHidden, when set, says why the environments are left out: they
	// are the job's owner's (and the admins') to see.
	EnvHidden string `json:"env_hidden,omitempty"`
	// Parents are the jobs it waits for (after, after_any) and
	// Dependants those that wait for it, each with its state now.
	Parents    []Dependency `json:"parents"`
	Dependants []Dependency `json:"dependants"`
	// Indices, for an array, are its indices by state, as ranges
	// ("1-37,40"); each index is a job of its own, named NAME[INDEX].
	Indices map[string]string `json:"indices,omitempty"`
	// FileRefused: the latest version of the job's file is refused (its
	// errors are the status's): what is shown is the version before it,
	// which stays in force.
	FileRefused bool `json:"file_refused,omitempty"`
	// Removed: no job file declares the job any more; it is shown while
	// its run is being stopped, and has no next run.
	Removed bool `json:"removed,omitempty"`
}

// ControlAnswer is the answer to start, stop and restart.
type ControlAnswer struct {
	Job       string `json:"job"`
	Requested string `json:"requested"`
	// HeldBy, for a start of a job that waits for its parents, is what it
	// knows of them: the start changes nothing until they let it run (or
	// it is started with ignore_deps). File is where the job is declared.
	HeldBy []Dependency `json:"held_by,omitempty"`
	File   string       `json:"file,omitempty"`
	// Gated: the request was taken (a job at rest runs again), and the
	// job now waits for its parents, HeldBy.
	Gated bool `json:"gated,omitempty"`
	// Array says the job is an array, and Indices how many of its
	// indices the request was taken for: those it changes something for
	// (a stop, those that run or wait; a start, those at rest).
	Array   bool `json:"array,omitempty"`
	Indices int  `json:"indices,omitempty"`
	// Already is the state of a job the request finds as it asks
	// already ("running" for a start, "stopped", "done"… for a stop): it
	// changes nothing.
	Already string `json:"already,omitempty"`
	// HeldFromRerun: a stop of a job done that was to run again after a
	// parent's new definition; it rests stopped, and runs once started.
	HeldFromRerun bool `json:"held_from_rerun,omitempty"`
	// RestsStoppedOnce, for a stop of a job that cannot run now, says
	// what lets it run again, after which it rests stopped: "enabled" (its
	// file disables it) or "fixed" (its declaration cannot run). The stop
	// is kept (trial AM: a stop of a disabled job said "requested", and
	// the job stayed stopped once enabled).
	RestsStoppedOnce string `json:"rests_stopped_once,omitempty"`
}

// previewEnv is the environment a run of job name (of definition def;
// index, for an index of an array; st, its status or its array's) would
// start with if granted what it asks now: the lowest cores, and the
// lowest cards free now (no job holds or shares them), then the lowest
// others; a share on the lowest card with room for it. A job that can
// never run has none: its grant would name cores and cards the machine
// does not have.
func (d *Daemon) previewEnv(st JobStatus, name string, def *luaapi.Job, index int) []string {
	if st.State == store.StateUnplaceable.String() {
		return []string{}
	}
	grant := accounting.Grant{RAMBytes: def.Resources.RAMBytes, GPUMemBytes: def.Resources.GPUMemBytes}
	for i := 0; i < def.Resources.CPUs && i < len(d.cfg.Machine.CPUIDs); i++ {
		grant.CPUIDs = append(grant.CPUIDs, d.cfg.Machine.CPUIDs[i])
	}
	if def.Resources.GPUs > 0 || def.Resources.Shares() {
		snap := d.book.Snapshot()
		free := func(i int) bool { return snap.CardHolders[i] == "" && snap.CardBooked[i] == 0 && !snap.CardsOff[i] }
		var cards []int
		for _, wanted := range []bool{true, false} {
			for i := range snap.CardHolders {
				if free(i) == wanted {
					cards = append(cards, i)
				}
			}
		}
		grant.GPUs = slices.Sorted(slices.Values(cards[:min(def.Resources.GPUs, len(cards))]))
		if def.Resources.Shares() {
			grant.GPUs = []int{0}
			for i := range snap.CardHolders {
				if snap.CardHolders[i] == "" && !snap.CardsOff[i] && snap.CardRoom[i] >= def.Resources.GPUMemBytes {
					grant.GPUs = []int{i}
					break
				}
			}
		}
	}
	_, login, _ := jobCredentials(def.User, def.Group) // a job that cannot run as asked is invalid, and says so
	return d.runEnv(name, def, index, login, "next", grant)
}

// logsOf says where a job's output goes.
func (d *Daemon) logsOf(name string) string {
	if d.cfg.JournalSocket != "" {
		return "journal"
	}
	return d.logPath(name)
}

func (d *Daemon) logPath(name string) string {
	return filepath.Join(d.cfg.StateDir, "logs", name+".log")
}
