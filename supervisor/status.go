package supervisor

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/berthd/berth/accounting"
)

// Status is a consistent-enough picture of the daemon for `berth status`
// and systemd's status line. Each job's part is taken under that job's lock.
type Status struct {
	Host    string         `json:"host"`
	Machine MachineStatus  `json:"machine"`
	Jobs    []JobStatus    `json:"jobs"`
	Errors  []string       `json:"errors"`
	Counts  map[string]int `json:"counts"`
	// Logs is "journal" when jobs' output goes to journald, else "files".
	Logs string `json:"logs"`
	// Now is the daemon's clock when the picture was taken.
	Now time.Time `json:"now"`
}

// MachineStatus is what the machine has and who holds it.
type MachineStatus struct {
	CPUs         int          `json:"cpus"`
	CPUsFree     int          `json:"cpus_free"`
	RAMBytes     *int64       `json:"ram_bytes"`
	RAMFreeBytes *int64       `json:"ram_free_bytes"`
	Cards        []CardStatus `json:"cards"`
}

// CardStatus is one card and its holder ("" when free).
type CardStatus struct {
	Name   string `json:"name"`
	Holder string `json:"holder"`
}

// JobStatus is one line of `berth status`.
type JobStatus struct {
	Name     string    `json:"name"`
	State    string    `json:"state"`
	Since    time.Time `json:"since"`
	Why      string    `json:"why,omitempty"`
	Run      uint64    `json:"run,omitempty"`
	PID      int       `json:"pid,omitempty"`
	CPUs     int       `json:"cpus"`
	GPUs     []string  `json:"gpus"`
	RAMBytes int64     `json:"ram_bytes"`
	Restarts int       `json:"restarts"`
	File     string    `json:"file"`
	Line     int       `json:"line"`
	// Asked is what the definition asks (a waiting job holds nothing yet).
	Asked  Size   `json:"asked"`
	Flavor string `json:"flavor,omitempty"`
	// ExpectedStart is set for the head of the queue when it can be known.
	ExpectedStart *time.Time `json:"expected_start,omitempty"`
}

// Status takes the picture.
func (d *Daemon) Status() Status {
	snap := d.book.Snapshot()
	s := Status{
		Host:   d.cfg.Machine.Hostname,
		Counts: map[string]int{},
		Logs:   "files",
		Now:    d.now(),
		Machine: MachineStatus{
			CPUs:     snap.Capacity.CPUs(),
			CPUsFree: snap.Free.CPUs,
			Cards:    []CardStatus{},
		},
	}
	if d.cfg.JournalSocket != "" {
		s.Logs = "journal"
	}
	if snap.Capacity.RAMKnown {
		total, free := snap.Capacity.RAMBytes, snap.Free.RAMBytes
		s.Machine.RAMBytes, s.Machine.RAMFreeBytes = &total, &free
	}
	for i, holder := range snap.CardHolders {
		s.Machine.Cards = append(s.Machine.Cards, CardStatus{Name: d.cfg.Machine.GPUs[i], Holder: holder})
	}
	expected := map[string]time.Time{}
	for _, w := range d.placer.Waiting() {
		if !w.ExpectedStart.IsZero() {
			expected[w.Holder] = w.ExpectedStart
		}
	}
	d.mu.Lock()
	jobs := make([]*job, 0, len(d.jobs))
	for _, j := range d.jobs {
		jobs = append(jobs, j)
	}
	s.Errors = slices.Clone(d.errs)
	d.mu.Unlock()
	if err := d.store.Failing(); err != nil {
		s.Errors = append([]string{msgNotRecording(d.cfg.StateDir, err)}, s.Errors...)
	}

	// Sorted here, as pointers: sorting the built entries moved large
	// structs and was half of Status's own time with 1 000 jobs (pprof).
	slices.SortFunc(jobs, func(a, b *job) int { return strings.Compare(a.name, b.name) })
	s.Jobs = make([]JobStatus, 0, len(jobs))
	free := snap.Free
	for _, j := range jobs {
		v := j.view()
		js := JobStatus{
			Name: j.name, State: v.State.String(), Since: v.Since, Why: v.Why, Run: v.Run, PID: v.PID,
			CPUs: len(v.Grant.CPUIDs), GPUs: v.GPUs, RAMBytes: v.Grant.RAMBytes, Restarts: v.Restarts,
			File: v.Def.Pos.File, Line: v.Def.Pos.Line, Asked: sizeOf(v.Def.Resources), Flavor: v.Def.Flavor,
		}
		if js.GPUs == nil {
			js.GPUs = []string{}
		}
		if v.State == StateWaiting {
			js.Why = waitingWhy(v.Def.Resources, free, snap.Capacity.RAMKnown)
			if at, ok := expected[j.name]; ok {
				js.ExpectedStart = &at
				js.Why += "; expected start ~" + at.Local().Format("15:04")
			}
		}
		s.Counts[js.State]++
		s.Jobs = append(s.Jobs, js)
	}
	if s.Errors == nil {
		s.Errors = []string{}
	}
	return s
}

// jobStatus is one job's part of Status, or false when there is no such job.
func (d *Daemon) jobStatus(name string) (JobStatus, bool) {
	for _, j := range d.Status().Jobs {
		if j.Name == name {
			return j, true
		}
	}
	return JobStatus{}, false
}

// waitingWhy says what a waiting job is short of: "needs 2 gpus; 1 free".
func waitingWhy(asked, free accounting.Resources, ramKnown bool) string {
	var short []string
	if asked.GPUs > free.GPUs {
		short = append(short, fmt.Sprintf("needs %s; %d free", countOf(asked.GPUs, "gpu"), free.GPUs))
	}
	if asked.CPUs > free.CPUs {
		short = append(short, fmt.Sprintf("needs %s; %d free", countOf(asked.CPUs, "cpu"), free.CPUs))
	}
	if ramKnown && asked.RAMBytes > free.RAMBytes {
		short = append(short, fmt.Sprintf("needs %s memory; %s free", accounting.FormatSize(asked.RAMBytes), accounting.FormatSize(max(0, free.RAMBytes))))
	}
	if len(short) == 0 {
		return "queued behind a job ahead of it"
	}
	return strings.Join(short, ", ")
}

// countOf writes "1 gpu", "2 gpus".
func countOf(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// statusLine is systemd's one-line summary, e.g.
// "3 running, 2 waiting (2 for gpus), 1 failed; gpus 1/4 free; 1 file with errors".
func (d *Daemon) statusLine() string {
	s := d.Status()
	var parts []string
	order := []string{"running", "starting", "stopping", "waiting", "backoff", "failed", "unplaceable", "invalid", "done", "stopped", "disabled"}
	for _, state := range order {
		n := s.Counts[state]
		if n == 0 {
			continue
		}
		part := fmt.Sprintf("%d %s", n, state)
		if state == "waiting" {
			forGPUs := 0
			for _, j := range s.Jobs {
				if j.State == "waiting" && strings.Contains(j.Why, " gpu") {
					forGPUs++
				}
			}
			if forGPUs > 0 {
				part += fmt.Sprintf(" (%d for gpus)", forGPUs)
			}
		}
		parts = append(parts, part)
	}
	line := "no jobs"
	if len(parts) > 0 {
		line = strings.Join(parts, ", ")
	}
	if n := len(s.Machine.Cards); n > 0 {
		free := 0
		for _, c := range s.Machine.Cards {
			if c.Holder == "" {
				free++
			}
		}
		line += fmt.Sprintf("; gpus %d/%d free", free, n)
	} else {
		line += fmt.Sprintf("; cpus %d/%d free", s.Machine.CPUsFree, s.Machine.CPUs)
	}
	switch files := len(d.fileErrs); files { // on the loop, which owns fileErrs
	case 0:
	case 1:
		line += "; 1 file with errors"
	default:
		line += fmt.Sprintf("; %d files with errors", files)
	}
	return line
}

// msgNotRecording is the status's first error while the state cannot be
// written.
func msgNotRecording(dir string, err error) string {
	return fmt.Sprintf("cannot record the state (%v): jobs go on, but their runs and states are not kept until it can; free space under %s (df -h %s)", err, dir, dir)
}
