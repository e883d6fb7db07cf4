package luaapi

import (
	"slices"
	"strconv"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/berthd/berth/accounting"
)

// Machine is what a job file may know about the machine it is loaded on, as
// the read-only `machine` table: machine.cpus, machine.gpus, machine.ram
// (bytes, or nil when RAMKnown is false) and machine.hostname.
type Machine struct {
	CPUs     int
	GPUs     int
	RAMBytes int64
	RAMKnown bool
	Hostname string
}

// Options tune one evaluation.
type Options struct {
	Machine Machine
	// Budget is the CPU time one file may use; zero means DefaultBudget.
	// CPU time, not wall time, so that a file's fate does not depend on how
	// busy the machine is. It is the process's CPU time: evaluate where
	// nothing else runs (the evaluating child) for it to be the file's.
	Budget time.Duration
	// Logger receives print() at info, with the key "file"; nil discards it.
	Logger hclog.Logger
	// Owner is the person whose directory the file is in; "" for a file of
	// the administrators' (the jobs directory). A person's file declares
	// that person's jobs, named OWNER/NAME and run as them; it may not set
	// user or group, nor declare flavors or quotas.
	Owner string

	// Tests shrink these to make the guards fire quickly; zero means the
	// defaults (grace, heapLimit).
	grace          time.Duration
	heapLimitBytes int64
	// hold, when set, is a global function "hold" that blocks until the
	// channel is closed: a builtin that cannot be interrupted, on demand.
	hold <-chan struct{}
}

// DefaultBudget is the time a file may run when Options.Budget is zero.
const DefaultBudget = time.Second

// Pos is where something was declared. File is the path as the caller gave
// it; Line is 0 when unknown.
type Pos struct {
	File string
	Line int
}

// Quota bounds what the jobs of one person hold together: Name is their
// user name, or "*" for everyone not named.
type Quota struct {
	Name   string
	Pos    Pos
	Limits accounting.Quota
}

// Unsized reports whether job's flavor is one no accepted file declares:
// its size is not known (Set.Problems says why), and nothing is to be
// judged of it, a quota's bounds or a machine's.
func (s *Set) Unsized(job string) bool {
	return slices.ContainsFunc(s.Problems, func(e *Error) bool { return e.Problem == UnknownFlavor && e.Name == job })
}

// QuotaLimits is the set's quotas as the placer takes them
// (accounting.Placer.SetQuotas): each named person's, and the "*" one for
// everyone else (accounting.NoQuota where there is none).
func (s *Set) QuotaLimits() (byOwner map[string]accounting.Quota, others accounting.Quota) {
	byOwner, others = map[string]accounting.Quota{}, accounting.NoQuota
	for _, q := range s.Quotas {
		if q.Name == "*" {
			others = q.Limits
		} else {
			byOwner[q.Name] = q.Limits
		}
	}
	return byOwner, others
}

// Flavor is a named size that jobs refer to.
type Flavor struct {
	Name      string
	Pos       Pos
	Resources accounting.Resources
}

// Restart says when a job's process is started again after it ends.
type Restart uint8

// Restart policies. The numbers may be stored: never renumber.
const (
	RestartNo        Restart = 1 // never (the default)
	RestartOnFailure Restart = 2 // after a non-zero exit or a signal
	RestartAlways    Restart = 3 // after any exit
)

func (r Restart) String() string {
	switch r {
	case RestartNo:
		return "no"
	case RestartOnFailure:
		return "on-failure"
	case RestartAlways:
		return "always"
	}
	return "restart(" + strconv.Itoa(int(r)) + ")"
}

// OnChange says what an edit of what a process is does to a running run.
type OnChange uint8

// On-change policies. The numbers may be stored: never renumber.
const (
	OnChangeRestart OnChange = 1 // stop the run and start the new definition (the default)
	OnChangeFinish  OnChange = 2 // let the run finish; the next run uses the new definition
)

func (o OnChange) String() string {
	switch o {
	case OnChangeRestart:
		return "restart"
	case OnChangeFinish:
		return "finish"
	}
	return "on_change(" + strconv.Itoa(int(o)) + ")"
}

// Job is one declared job, decoded and validated, with every default filled
// in. It holds no Lua values.
type Job struct {
	// Name is the job's name, OWNER/NAME for a person's job.
	Name string
	// Owner is the person whose job it is, "" for an administrator's.
	Owner string
	Pos   Pos
	// Lines are where the fields that later checks may find wrong were
	// written, where its table was written at its declaration.
	Lines FieldLines `json:",omitzero"`
	// Order is the job's place among its file's declarations, from 0
	// (Combine sets it): jobs that a loop declares share a line.
	Order int

	// What makes the process what it is; a change restarts a running run
	// (see ProcessFingerprint).
	Cmd    []string          // argv; a string cmd is {"/bin/sh", "-c", s}
	Dir    string            // absolute; "/" by default
	Env    map[string]string // the declared env only, never a BERTH_ name; nil when none
	User   string            // "" runs as the daemon's user
	Group  string            // "" uses the user's primary group
	Flavor string            // "" when resources are given directly
	// Resources are as declared (cpus 1, gpus 0, ram 0 by default) when
	// Flavor is "". When Flavor is set, Eval leaves them zero and Combine
	// fills them in from the flavor; a job whose flavor does not exist keeps
	// them zero and is listed in Set.Problems.
	Resources accounting.Resources
	// SwapBytes is the swap a run may use beside its memory, where the
	// grant is enforced (runs as systemd units): -1, the default, is none
	// for a job granted memory (what it holds is real memory) and no bound
	// for one that is not.
	SwapBytes int64

	// Policy; a change applies in place (see PolicyFingerprint).
	Restart     Restart
	MaxRestarts int // -1: unlimited (the default)
	Timeout     time.Duration
	StopSignal  syscall.Signal
	StopTimeout time.Duration
	Priority    int
	OnChange    OnChange
	Enabled     bool
	Description string
	// After and AfterAny name the jobs whose runs this one's waits for:
	// each named job's latest run of its current definition ended done
	// (After), or ended at all (AfterAny); a service (restart = "always")
	// counts once it runs. As written in the file after Eval; full job
	// names (OWNER/NAME for a person's) after Combine. Policy: an edit
	// applies in place.
	After    []string
	AfterAny []string

	// Array, when set, makes the job an array: one run of the job per
	// index, each placed on its own and told its index. MaxParallel
	// bounds how many of its indices run at once (0: no bound). Policy:
	// an edit applies in place, and a changed range adds or removes
	// indices, leaving the others alone.
	Array       *Range
	MaxParallel int
}

// Range is an array's indices, From to To, both included.
type Range struct {
	From int
	To   int
}

// Size is the number of indices.
func (r Range) Size() int { return r.To - r.From + 1 }

// The defaults a job declaration starts from.
const (
	defaultDir         = "/"
	defaultStopTimeout = 10 * time.Second
	defaultStopSignal  = syscall.SIGTERM
	unlimitedRestarts  = -1
)

func newJob(name string, pos Pos) Job {
	return Job{
		Name:        name,
		Pos:         pos,
		Dir:         defaultDir,
		Resources:   accounting.Resources{CPUs: 1},
		SwapBytes:   -1,
		Restart:     RestartNo,
		MaxRestarts: unlimitedRestarts,
		StopSignal:  defaultStopSignal,
		StopTimeout: defaultStopTimeout,
		OnChange:    OnChangeRestart,
		Enabled:     true,
	}
}

// clone copies j so that the copy shares no slice or map with it.
func (j Job) clone() Job {
	if j.Cmd != nil {
		j.Cmd = append([]string(nil), j.Cmd...)
	}
	if j.Env != nil {
		env := make(map[string]string, len(j.Env))
		for k, v := range j.Env {
			env[k] = v
		}
		j.Env = env
	}
	if j.After != nil {
		j.After = append([]string(nil), j.After...)
	}
	if j.AfterAny != nil {
		j.AfterAny = append([]string(nil), j.AfterAny...)
	}
	if j.Array != nil {
		r := *j.Array
		j.Array = &r
	}
	return j
}

// HasDeps reports whether the job waits for other jobs.
func (j *Job) HasDeps() bool { return len(j.After)+len(j.AfterAny) > 0 }

// File is the result of evaluating one job file.
// FieldLines are the lines of a job's fields that the checks after its
// file ran may find wrong (a parent or flavor not declared, a user not
// there, a size past the machine): each said on its line, by the place of
// its name in lineFields. 0 where not known: the job's own line is said
// then. Kept small, as every job in force keeps it.
type FieldLines [len(lineFields)]int32

// lineFields are the fields whose lines a job keeps.
var lineFields = [...]string{"after", "after_any", "flavor", "user", "group", "cpus", "gpus", "ram", "gpu_mem"}

// fieldLinesOf keeps of a table's field lines those a job keeps.
func fieldLinesOf(m map[string]int) FieldLines {
	var l FieldLines
	for i, field := range lineFields {
		l[i] = int32(m[field])
	}
	return l
}

// of is the line of field, 0 where not known.
func (l FieldLines) of(field string) int {
	if i := slices.Index(lineFields[:], field); i >= 0 {
		return int(l[i])
	}
	return 0
}

// FieldLine is where field of j was written: its line, or the job's.
func (j *Job) FieldLine(field string) int {
	if line := j.Lines.of(field); line > 0 {
		return line
	}
	return j.Pos.Line
}

// subject is j as an error names it, each of its fields on its line.
func (j *Job) subject() subject {
	return subject{pos: j.Pos, kind: "job", name: j.Name, lines: j.Lines}
}

type File struct {
	Path    string
	Hash    string   // sha256 of the source, hex
	Flavors []Flavor // in declaration order
	Jobs    []Job    // in declaration order
	Quotas  []Quota  // in declaration order
	// Errors, when not empty, reject the file whole: Flavors and Jobs are
	// then nil.
	Errors []*Error
	// Partial, for a file with Errors that ran to its end, is what had no
	// error of its own. It is never in force: berth check reads it to say
	// in one run what else is wrong (a flavor or parent not declared, a
	// job no machine fits), where it would otherwise be said once the
	// first mistakes are fixed.
	Partial *Partial `json:",omitempty"`
}

// Partial is the declarations of a file with errors that had none of
// their own, and the names of those that had (Broken, "job NAME" or
// "flavor NAME"): a job that names one of them names something the file
// does declare.
type Partial struct {
	Flavors []Flavor `json:",omitempty"`
	Jobs    []Job    `json:",omitempty"`
	Broken  []string `json:",omitempty"`
}

// Lenient is f's Partial as a file with no errors, to be checked beside
// others for what else is wrong with f; nil where f has none (no errors,
// or it did not run to its end).
func (f *File) Lenient() *File {
	if len(f.Errors) == 0 || f.Partial == nil {
		return nil
	}
	return &File{Path: f.Path, Hash: f.Hash, Flavors: f.Partial.Flavors, Jobs: f.Partial.Jobs}
}

// LenientFiles is files with each refused one that ran to its end in
// place of its Lenient file, and the partials of those, by path.
func LenientFiles(files []*File) ([]*File, map[string]*Partial) {
	out := slices.Clone(files)
	partials := map[string]*Partial{}
	for i, f := range files {
		if lenient := f.Lenient(); lenient != nil {
			out[i], partials[f.Path] = lenient, f.Partial
		}
	}
	return out, partials
}

// Excuses says whether e, a problem found with the Lenient file of f beside
// others, names a job or flavor f declares with a mistake of its own: a
// parent or flavor that does exist, whose mistake f's errors say.
func (p *Partial) Excuses(e *Error) bool {
	switch {
	case p == nil:
		return false
	case e.Problem == UnknownJob:
		return slices.Contains(p.Broken, "job "+e.Other)
	case e.Problem == UnknownFlavor:
		return slices.Contains(p.Broken, "flavor "+e.Other)
	}
	return false
}

// Moved is f as the file it was renamed to, path, declares it: the same
// declarations, at path.
func (f *File) Moved(path string) *File {
	m := &File{Path: path, Hash: f.Hash, Errors: f.Errors}
	m.Flavors = slices.Clone(f.Flavors)
	for i := range m.Flavors {
		m.Flavors[i].Pos.File = path
	}
	m.Jobs = slices.Clone(f.Jobs)
	for i := range m.Jobs {
		m.Jobs[i].Pos.File = path
	}
	m.Quotas = slices.Clone(f.Quotas)
	for i := range m.Quotas {
		m.Quotas[i].Pos.File = path
	}
	return m
}

// ArgsBytes is what the job's cmd and env come to as a process is given
// them, each string with its NUL and its pointer.
func (j *Job) ArgsBytes() int { return argsBytes(j.Cmd, j.Env) }

// HeldBytes is about what the job's strings cost the daemon that holds
// its definition: each string's bytes, and for those in a list or a map
// what Go keeps beside them (its header, its allocation's rounding, the
// map's entry), which for short strings is most of it.
func (j *Job) HeldBytes() int {
	const perString = 48
	n := len(j.Dir) + len(j.User) + len(j.Group) + len(j.Flavor) + len(j.Description)
	for _, list := range [][]string{j.Cmd, j.After, j.AfterAny} {
		for _, a := range list {
			n += len(a) + perString
		}
	}
	for k, v := range j.Env {
		n += len(k) + len(v) + 2*perString
	}
	return n
}

// Set is what a directory of job files declares, once the rules that span
// files have been applied.
type Set struct {
	Files   []*File  // in lexical order of path; a file rejected by Combine is a copy carrying its errors
	Flavors []Flavor // from accepted files, sorted by name
	Jobs    []Job    // from accepted files, sorted by name, resources resolved through flavors
	Quotas  []Quota  // from accepted files, sorted by name
	// Errors lists every error of every file in file order, then the errors
	// found across files, in file order.
	Errors []*Error
	// Problems are job-level mistakes that do not reject a file: a job whose
	// flavor no accepted file declares. The daemon marks such a job invalid
	// and looks again when flavors change; `berth check` counts them as
	// errors. The job is still in Jobs, with its Resources unresolved.
	Problems []*Error
}
