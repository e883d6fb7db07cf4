package supervisor

import (
	"cmp"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/berthd/berth/accounting"
	"github.com/berthd/berth/luaapi"
	"github.com/berthd/berth/supervisor/store"
	"github.com/berthd/berth/supervisor/units"
)

// Status is a consistent-enough picture of the daemon for `berth status`
// and systemd's status line. Each job's part is taken under that job's lock.
type Status struct {
	Host    string        `json:"host"`
	Machine MachineStatus `json:"machine"`
	Jobs    []JobStatus   `json:"jobs"`
	// Errors are the sentences of Problems, for those who only print.
	Errors []string `json:"errors"`
	// Problems are the configuration problems in force, as facts.
	Problems []Problem      `json:"problems"`
	Counts   map[string]int `json:"counts"`
	// Logs is "journal" when jobs' output goes to journald, else "files".
	Logs string `json:"logs"`
	// Runner is "units" when each run is a systemd unit (its grant
	// enforced, outliving the daemon), "direct" when runs are the
	// daemon's own children.
	Runner string `json:"runner"`
	// CoresByAffinity, with units, says that a run's cores are its
	// processes' CPU affinity alone, which they may widen: the machine's
	// cgroups give systemd no cpuset to enforce them with (cgroup v1).
	CoresByAffinity bool `json:"cores_by_affinity,omitempty"`
	// Now is the daemon's clock when the picture was taken.
	Now time.Time `json:"now"`
	// Daemon is the daemon itself.
	Daemon DaemonStatus `json:"daemon"`
}

// DaemonStatus is the daemon's own process.
type DaemonStatus struct {
	Version string    `json:"version"`
	PID     int       `json:"pid"`
	Started time.Time `json:"started"`
	// Binary is the executable it was started from; BinaryReplaced is
	// true once that path names another file (an upgrade) or none: the
	// daemon runs the old one until it is restarted.
	Binary         string `json:"binary"`
	BinaryReplaced bool   `json:"binary_replaced"`
	// PersonJobs is how many jobs one person's files may declare in all
	// (berth daemon --person-jobs), which berth check holds them to, and
	// UserJobs the directory of the people's job directories ("" for
	// none), whose files berth check reads as their owners'.
	PersonJobs int    `json:"person_jobs"`
	UserJobs   string `json:"user_jobs"`
	// JobsDir is the administrators' jobs directory (--jobs), whose
	// flavors a file checked on its own may name.
	JobsDir string `json:"jobs_dir"`
	// UID and GID are who the daemon runs as: only root's may run a job
	// as another user or group, which berth check holds files to.
	UID int `json:"uid"`
	GID int `json:"gid"`
	// Stopping: the daemon is shutting down, stopping every job; it takes
	// no start, stop, restart or reload now.
	Stopping bool `json:"stopping,omitempty"`
	// Loading: the daemon is reading its job files at start: no job is
	// known yet, and those it will take back are not listed.
	Loading bool `json:"loading,omitempty"`
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
	// Owner is the person whose job holds the card; "" when an
	// administrator's does, or none.
	Owner string `json:"owner"`
	// MemoryTotalBytes and MemoryUsedBytes are the card's memory as the
	// driver last said (NVML); absent without it.
	MemoryTotalBytes *int64 `json:"memory_total_bytes,omitempty"`
	MemoryUsedBytes  *int64 `json:"memory_used_bytes,omitempty"`
	// ShareOfBytes is the memory the books give the card for shares
	// (gpu_mem): NVML's total, or --gpu-mem; absent where unknown (no
	// share fits it then).
	ShareOfBytes *int64 `json:"share_of_bytes,omitempty"`
	// Foreign are the processes on it that berth did not start; Off says
	// one of them holds more than the foreign limit (1 GiB unless
	// --foreign-limit says), and no job is given the card whole
	// meanwhile.
	Foreign []ForeignUse `json:"foreign,omitempty"`
	Off     bool         `json:"off,omitempty"`
	// Shares are the jobs sharing the card by memory (gpu_mem), and
	// RoomBytes what one more share could be given of it now (its memory
	// less what its shares booked and what is in use outside them);
	// absent where the card's memory is unknown or it is held whole.
	Shares    []CardShare `json:"shares,omitempty"`
	RoomBytes *int64      `json:"room_bytes,omitempty"`
	// KeptFor is the head of the queue where it keeps the card, or room
	// on it for its share, from the jobs behind it (RoomBytes is then
	// what is left beside that): they take it only where they are
	// certain to end before it starts.
	KeptFor string `json:"kept_for,omitempty"`
}

// CardShare is one job's share of a card.
type CardShare struct {
	Holder string `json:"holder"`
	Owner  string `json:"owner"`
	Bytes  int64  `json:"bytes"`
}

// QuotaView is what a person's jobs hold and their quota.
type QuotaView struct {
	Held  Size `json:"held"`
	Quota Size `json:"quota"`
	// CardBytes is the memory a card counts as where Quota.GPUs bounds
	// shares of cards (the largest card's); 0 where unknown.
	CardBytes int64 `json:"card_bytes,omitempty"`
}

// JobStatus is one line of `berth status`.
type JobStatus struct {
	Name string `json:"name"`
	// Owner is the person whose job it is (Name is then OWNER/NAME); ""
	// for an administrator's.
	Owner string    `json:"owner"`
	State string    `json:"state"`
	Since time.Time `json:"since"`
	Why   string    `json:"why,omitempty"`
	Run   uint64    `json:"run,omitempty"`
	PID   int       `json:"pid,omitempty"`
	CPUs  int       `json:"cpus"`
	// CPUIDs are the cores granted: the books grant particular ones, and
	// a run as a systemd unit is pinned to them.
	CPUIDs   []int    `json:"cpu_ids"`
	GPUs     []string `json:"gpus"`
	RAMBytes int64    `json:"ram_bytes"`
	// GPUMemBytes is the share of its card the run was given (gpu_mem),
	// 0 for whole cards or none. GPUMemUsedBytes is what its processes
	// hold on its cards as the driver last said (NVML; absent without
	// it, -1 where the driver cannot say), and GPUMemPeakBytes the most
	// seen since it started: a share's run over its share is told by
	// them.
	GPUMemBytes     int64  `json:"gpu_mem_bytes"`
	GPUMemUsedBytes *int64 `json:"gpu_mem_used_bytes,omitempty"`
	GPUMemPeakBytes *int64 `json:"gpu_mem_peak_bytes,omitempty"`
	Restarts        int    `json:"restarts"`
	// GaveUp: failed where its restart policy would have restarted it,
	// but for max_restarts (Restarts in a row were made).
	GaveUp bool   `json:"gave_up,omitempty"`
	File   string `json:"file"`
	Line   int    `json:"line"`
	// Asked is what the definition asks (a waiting job holds nothing yet).
	Asked  Size   `json:"asked"`
	Flavor string `json:"flavor,omitempty"`
	// ExpectedStart is set for the head of the queue when it can be known.
	ExpectedStart *time.Time `json:"expected_start,omitempty"`
	// QueuePosition is its place in the machine's queue, 1 for the head
	// (the placer's order: priority, then how long it has waited); an
	// array's, that of its index in the queue. Absent outside the queue.
	QueuePosition int `json:"queue_position,omitempty"`
	// RetryAt, for a job in backoff, is when it runs again; an array's,
	// when the first of its indices in backoff does.
	RetryAt *time.Time `json:"retry_at,omitempty"`
	// KillAt, for a job stopping, is when the stop's SIGKILL comes (its
	// stop_timeout after the stop_signal); past, once it has been sent.
	// An array's: the last of its indices being stopped.
	KillAt *time.Time `json:"kill_at,omitempty"`
	// RunsAgainAfter, for a job done, is the job at or upstream of its
	// after parents that runs, waits to run, or rests failed or stopped
	// with, a definition other than the one this job's done run followed:
	// once that has run to done, this job runs again (its output is stale
	// until then).
	RunsAgainAfter string `json:"runs_again_after,omitempty"`
	// Unrecorded: its latest state is not on disk yet (the state
	// directory cannot be written, berth status says why); should the
	// daemon stop before it is, the next one takes the job as it was
	// recorded last (a job shown done runs again).
	Unrecorded bool `json:"unrecorded,omitempty"`
	// Short is what a waiting job lacks now: how much more of each
	// resource it asks than is free (all zero: it waits its turn). An
	// array's is its waiting indices', whatever its state (its running
	// ones decide that).
	Short *Size `json:"short,omitempty"`
	// Quota, for a person's waiting job, is what keeps it back when their
	// quota does: what their jobs hold, and the quota (-1: unbounded).
	Quota *QuotaView `json:"quota,omitempty"`
	// Used is what its run really uses, read from its unit's cgroup; nil
	// where runs are not systemd units.
	Used *Usage `json:"used,omitempty"`
	// After, for a job that waits for other jobs (after, after_any)
	// rather than for the machine, is what it knows of each: it is then
	// outside the placer's queue, and Short is absent. An array's is its
	// waiting indices', whatever its state (some may run meanwhile).
	After []Dependency `json:"after,omitempty"`
	// AfterLeftOut is how many more jobs it runs after than After lists:
	// the status lists at most afterShown, those that hold it first
	// (berth show lists them all).
	AfterLeftOut int `json:"after_left_out,omitempty"`
	// Array, for an array, is how its indices stand. The entry is the
	// whole array: State is running while an index runs, waiting while
	// one waits, done once all are, else how they rest (failed first);
	// what it holds is what its indices hold together; Restarts are
	// theirs together; Why, Short and ExpectedStart are about the index
	// it has in the queue, or about its max_parallel.
	Array *ArrayStatus `json:"array,omitempty"`
}

// ArrayStatus is how an array's indices stand.
type ArrayStatus struct {
	From int `json:"from"`
	To   int `json:"to"`
	Size int `json:"size"`
	// MaxParallel bounds how many indices hold a place at once (wait in
	// the placer's queue, start, run or stop); 0: no bound.
	MaxParallel int `json:"max_parallel"`
	// Counts are its indices by state (those with at least one).
	Counts map[string]int `json:"counts"`
	// Queued is the index waiting in the placer's queue, if any: an array
	// queues one index at a time.
	Queued *int `json:"queued,omitempty"`
}

// Usage is what a run uses: its memory now, and the CPU time it has spent
// since it started (over its age, the cores it kept busy on average).
type Usage struct {
	MemoryBytes *int64   `json:"memory_bytes,omitempty"`
	CPUSeconds  *float64 `json:"cpu_seconds,omitempty"`
}

// Problem is one configuration problem: a mistake in a job file, a file or
// directory refused, a state that cannot be written. Code is stable (luaapi's
// problem names with underscores, or a Problem* constant); Text is the whole
// sentence.
type Problem struct {
	Code  string `json:"code"`
	File  string `json:"file,omitempty"`
	Line  int    `json:"line,omitempty"`
	Kind  string `json:"kind,omitempty"` // what Job names: "job", "flavor" or "quota"
	Job   string `json:"job,omitempty"`  // the name of the job, flavor or quota it is about
	Field string `json:"field,omitempty"`
	Text  string `json:"text"`
}

// SortProblems puts ps in the order a person fixes them: file by file, top
// to bottom; problems of one line stay in the order they were found.
func SortProblems(ps []Problem) {
	slices.SortStableFunc(ps, func(a, b Problem) int {
		return cmp.Or(strings.Compare(a.File, b.File), cmp.Compare(a.Line, b.Line))
	})
}

// InAJobFile reports whether p is about a job file (its own errors, its
// jobs', its quotas'), not about the state or the jobs directory.
func (p Problem) InAJobFile() bool {
	switch p.Code {
	case ProblemNotRecording, ProblemStateGone, ProblemDirMissing, ProblemDirRefused, ProblemLogsUnwritable:
		return false
	}
	return p.File != ""
}

// afterShown is how many of a waiting job's parents its status lists.
const afterShown = 8

// Status takes the picture. An array is one entry; its indices are not
// listed.
func (d *Daemon) Status() Status { return d.status(false) }

// status takes the picture; members adds an entry for each index of each
// array, after the others.
func (d *Daemon) status(members bool) Status {
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
	s.Daemon = DaemonStatus{Version: d.cfg.Version, PID: os.Getpid(), Started: d.started, PersonJobs: d.personJobs(), UserJobs: d.cfg.UserJobs, JobsDir: d.cfg.JobsDir,
		UID: os.Geteuid(), GID: os.Getegid()}
	select {
	case <-d.loopDone:
		s.Daemon.Stopping = true
	default:
	}
	s.Daemon.Loading = !d.isLoaded()
	if d.bin != nil {
		s.Daemon.Binary, s.Daemon.BinaryReplaced = d.bin.path, d.bin.replaced.Load()
	}
	if d.cfg.JournalSocket != "" {
		s.Logs = "journal"
	}
	s.Runner = "direct"
	if d.cfg.Units != nil {
		s.Runner, s.Logs, s.CoresByAffinity = "units", "journal", d.coresByAffinity
	}
	if snap.Capacity.RAMKnown {
		total, free := snap.Capacity.RAMBytes, snap.Free.RAMBytes
		s.Machine.RAMBytes, s.Machine.RAMFreeBytes = &total, &free
	}
	// Only the head of the queue has an expected start, and keeps what
	// is free for itself.
	head, waits := d.placer.Head()
	var inLine map[string]int // each waiting job's place in the queue, 1 the head's
	if waits {
		inLine = d.placer.Positions()
	}
	cards := d.cards.Load()
	for i, holder := range snap.CardHolders {
		cs := CardStatus{Name: d.cfg.Machine.GPUs[i], Holder: holder, Owner: ownerOf(holder)}
		if cards != nil && i < len(*cards) {
			st := (*cards)[i]
			if st.MemoryTotal > 0 {
				cs.MemoryTotalBytes, cs.MemoryUsedBytes = &st.MemoryTotal, &st.MemoryUsed
			}
			cs.Foreign, cs.Off = st.Foreign, st.Off
		}
		if holder == "" && waits && slices.Contains(head.KeptCards, i) {
			cs.KeptFor = head.Holder // whole, whatever its memory
		}
		if i < len(snap.Capacity.GPUMem) && snap.Capacity.GPUMem[i] > 0 {
			shareOf := snap.Capacity.GPUMem[i] // a copy: the book may set its cards' memory again
			cs.ShareOfBytes = &shareOf
			if holder == "" {
				room := snap.CardRoom[i]
				switch {
				case cs.KeptFor != "":
					room = 0 // kept whole, above
				case !waits:
				case head.KeptShareBytes > 0 && head.KeptShareCard == i:
					room, cs.KeptFor = max(0, room-head.KeptShareBytes), head.Holder
				}
				cs.RoomBytes = &room
			}
		}
		s.Machine.Cards = append(s.Machine.Cards, cs)
	}
	for _, g := range snap.Grants {
		if g.GPUMemBytes > 0 {
			c := &s.Machine.Cards[g.GPUs[0]]
			c.Shares = append(c.Shares, CardShare{Holder: g.Holder, Owner: g.Owner, Bytes: g.GPUMemBytes})
		}
	}
	runCards := d.runCards.Load()
	off := d.offCards()
	var expected time.Time
	var expectedOf, first string
	if waits {
		first = head.Holder
		if !head.ExpectedStart.IsZero() {
			expected, expectedOf = head.ExpectedStart, head.Holder
		}
	}
	d.mu.Lock()
	jobs := make([]*job, 0, len(d.jobs))
	for _, j := range d.jobs {
		jobs = append(jobs, j)
	}
	var removed []*job
	for name := range d.draining {
		if j := d.removedLocked(name); j != nil {
			removed = append(removed, j)
		}
	}
	arrays := make(map[*array][]JobStatus, len(d.arrays))
	for _, a := range d.arrays {
		arrays[a] = nil
	}
	s.Problems = slices.Clone(d.problems)
	d.mu.Unlock()
	for _, j := range removed {
		// Removed, its run still being stopped: shown until it has
		// ended, as what holds its grant.
		if Holds(j.view().State) {
			jobs = append(jobs, j)
		}
	}
	declared := func(job string) bool {
		d.mu.Lock()
		defer d.mu.Unlock()
		_, ok := d.jobs[job]
		return ok
	}
	if p, ok := d.outputCutProblem(declared); ok {
		s.Problems = append([]Problem{p}, s.Problems...)
	}
	if t := d.logTrouble.Load(); t != nil {
		s.Problems = append([]Problem{{Code: ProblemLogsUnwritable, File: t.dir, Text: msgLogsUnwritable(t.dir, t.err)}}, s.Problems...)
	}
	if err := d.store.Failing(); err != nil {
		s.Problems = append([]Problem{{Code: ProblemNotRecording, File: d.cfg.StateDir,
			Text: MsgNotRecording(d.cfg.StateDir, err)}}, s.Problems...)
	}
	if g := d.store.Gone(); g != nil {
		s.Problems = append([]Problem{{Code: ProblemStateGone, File: g.Path, Text: MsgStateGone(g, os.Getpid())}}, s.Problems...)
	}
	s.Errors = make([]string, len(s.Problems))
	for i, p := range s.Problems {
		s.Errors[i] = p.Text
	}

	// Sorted here, as pointers: sorting the built entries moved large
	// structs and was half of Status's own time with 1 000 jobs (pprof).
	slices.SortFunc(jobs, func(a, b *job) int { return strings.Compare(a.name, b.name) })
	s.Jobs = make([]JobStatus, 0, len(jobs))
	free := snap.Free
	// Many waiting jobs ask alike: each sentence is written once.
	whys := map[[2]Size]string{}
	// The waiting jobs' shortfalls, allocated a block at a time, not one
	// each (1 000 waiting jobs: 1 000 allocations a status).
	var shorts []Size
	// The jobs done whose parents run a new definition, walked once
	// each, and only where a job done has parents.
	var graph *depGraph
	var renewing map[string]string
	kept := d.store.Kept()
	for _, j := range jobs {
		v := j.view()
		js := JobStatus{
			Name: j.name, Owner: v.Def.Owner, State: v.State.String(), Since: v.Since, Why: v.Why, Run: v.Run, PID: v.PID,
			CPUs: len(v.Grant.CPUIDs), CPUIDs: d.cfg.Machine.Pinnable(v.Grant.CPUIDs), GPUs: v.GPUs, RAMBytes: v.Grant.RAMBytes, Restarts: v.Restarts, GaveUp: v.GaveUp,
			File: v.Def.Pos.File, Line: v.Def.Pos.Line, Asked: sizeOf(v.Def.Resources), Flavor: v.Def.Flavor,
			GPUMemBytes: v.Grant.GPUMemBytes,
		}
		if v.State == store.StateDisabled && v.Def != nil {
			// What a start of it would say: where, and how to enable it.
			js.Why = msgDisabledAt(v.Def.Pos, v.Def.Name, v.Def.Owner != "")
		}
		if runCards != nil && v.Run != 0 && len(v.Grant.GPUs) > 0 {
			if use, ok := (*runCards)[v.Run]; ok {
				js.GPUMemUsedBytes, js.GPUMemPeakBytes = &use.UsedBytes, &use.PeakBytes
			}
		}
		// A grant's lists are never written once made: shared, not copied.
		// Empty ones are [] in the JSON, never null.
		if js.GPUs == nil {
			js.GPUs = noCards
		}
		if js.CPUIDs == nil {
			js.CPUIDs = noCores
		}
		if v.unit != nil {
			js.Used = usageOf(v.unit)
		}
		switch {
		case v.State == store.StateRunning && cmp.Or(v.Invalid, v.Unfit) != "":
			js.Why = msgRunsOn(cmp.Or(v.Invalid, v.Unfit))
		case v.State == store.StateRunning && v.Outdated && j.arr == nil:
			js.Why = msgRunsEarlierDefinition(j.name, v.Def.Restart == luaapi.RestartAlways)
		}
		if v.State == store.StateDone && v.Def != nil && len(v.Def.After) > 0 {
			if renewing == nil {
				graph, renewing = d.deps.Load(), map[string]string{}
			}
			if js.RunsAgainAfter = graph.renewing(j.name, renewing); js.RunsAgainAfter != "" {
				up, declared := graph.view(js.RunsAgainAfter)
				js.Why = msgRunsAgainAfter(js.RunsAgainAfter, up.State, declared)
			}
		}
		if kept[j.name] {
			js.Unrecorded = true
			if v.State == store.StateDone {
				js.Why = msgDoneUnrecorded
			}
		}
		if v.State == store.StateBackoff && !v.RetryAt.IsZero() {
			at := v.RetryAt
			js.RetryAt = &at
		}
		if v.State == store.StateStopping && !v.KillAt.IsZero() {
			at := v.KillAt
			js.KillAt = &at
		}
		if v.State == store.StateWaiting && v.After != nil {
			// Its parents first: the client words the facts.
			facts := v.After
			if len(facts) > afterShown {
				facts = slices.Clone(facts)
				slices.SortStableFunc(facts, func(a, b Dependency) int {
					switch {
					case a.Satisfied == b.Satisfied:
						return 0
					case !a.Satisfied:
						return -1
					}
					return 1
				})
				facts, js.AfterLeftOut = facts[:afterShown], len(facts)-afterShown
			}
			js.After, js.Why = d.deps.Load().withUpstream(facts), ""
		} else if v.State == store.StateWaiting && !v.AfterRemoved && d.shutdownHeld.Load() {
			js.Why = msgHeldForShutdown
		} else if v.State == store.StateWaiting && !v.AfterRemoved {
			if len(shorts) == cap(shorts) {
				shorts = make([]Size, 0, 256)
			}
			shorts = append(shorts, shortfall(v.Def.Resources, free, snap.Capacity.RAMKnown))
			short := shorts[len(shorts)-1]
			js.Short = &shorts[len(shorts)-1]
			key := [2]Size{js.Asked, short}
			why, ok := whys[key]
			if !ok {
				why = MsgShort(js.Asked, short)
				whys[key] = why
			}
			js.Why = why
			switch {
			case short == (Size{}) && first != "" && first != j.name:
				// It would fit, but the first in line holds its place.
				js.Why += "; " + msgFirstInLine(first)
			case short.GPUs > 0 && len(off) > 0:
				// Cards are short because some are in use outside berth:
				// which, and whose.
				js.Why += "; " + MsgCardsOff(d.cfg.Machine.GPUs, off, d.foreignLimit())
			case short.GPUMemBytes > 0:
				// A share is short of room where processes berth did not
				// start hold what it would fit in: those, whatever their
				// size.
				if in := d.foreignInTheWay(snap, v.Def.Resources.GPUMemBytes); len(in) > 0 {
					js.Why += "; " + MsgCardsOff(d.cfg.Machine.GPUs, in, -1)
				}
			}
			if v.Def.Owner != "" {
				// Past the owner's quota, it waits for their own jobs,
				// whatever is free: that is its why.
				if qw, over := d.placer.QuotaWait(requestOf(j.name, v.Def)); over {
					q := QuotaView{Held: sizeOf(qw.Held), Quota: quotaSize(qw.Quota), CardBytes: d.placer.CardMem()}
					js.Quota = &q
					js.Why = MsgQuotaWait(v.Def.Owner, q, js.Asked)
				}
			}
			if j.name == expectedOf {
				at := expected
				js.ExpectedStart = &at
			}
			js.QueuePosition = inLine[j.name]
		}
		s.Counts[js.State]++
		if j.arr != nil {
			if v.State == store.StateWaiting && v.After == nil && members {
				// Shown on its own (berth show 'sweep[7]'): one held
				// at its array's gate says so, not that it queues.
				if why := j.arr.gateWhy(j.index); why != "" {
					js.Why = why
				}
			}
			if members, ok := arrays[j.arr]; ok {
				arrays[j.arr] = append(members, js)
			}
			continue
		}
		s.Jobs = append(s.Jobs, js)
	}
	if len(arrays) > 0 {
		lines := make([]JobStatus, 0, len(arrays))
		for a, members := range arrays {
			lines = append(lines, arrayStatus(a, members))
		}
		slices.SortFunc(lines, func(a, b JobStatus) int { return strings.Compare(a.Name, b.Name) })
		s.Jobs = mergeByName(s.Jobs, lines)
		if members {
			for _, m := range arrays {
				s.Jobs = append(s.Jobs, m...)
			}
		}
	}
	if s.Problems == nil {
		s.Problems = []Problem{}
	}
	return s
}

// arrayStatus is array a's line: its indices' lines (in name order) taken
// together.
func arrayStatus(a *array, members []JobStatus) JobStatus {
	c := a.snapshot()
	def := c.def
	out := JobStatus{
		Name: a.name, Owner: def.Owner, State: c.state().String(), Since: c.since,
		File: def.Pos.File, Line: def.Pos.Line, Asked: sizeOf(def.Resources), Flavor: def.Flavor,
		CPUIDs: []int{}, GPUs: []string{},
		Array: &ArrayStatus{From: def.Array.From, To: def.Array.To, Size: def.Array.Size(), MaxParallel: def.MaxParallel,
			Counts: make(map[string]int, len(c.byState))},
	}
	for st, n := range c.byState {
		out.Array.Counts[st.String()] = n
	}
	if c.isQueued {
		q := c.queued
		out.Array.Queued = &q
	}
	queued := memberName(a.name, c.queued)
	var runsAgainWhy string // an index's, done but out of date
	for _, m := range members {
		out.CPUs += m.CPUs
		out.CPUIDs = append(out.CPUIDs, m.CPUIDs...)
		out.GPUs = append(out.GPUs, m.GPUs...)
		out.RAMBytes += m.RAMBytes
		out.GPUMemBytes += m.GPUMemBytes
		out.Restarts += m.Restarts
		out.GaveUp = out.GaveUp || m.GaveUp
		switch {
		case c.isQueued && m.Name == queued:
			out.Why, out.Short, out.Quota, out.ExpectedStart, out.QueuePosition = m.Why, m.Short, m.Quota, m.ExpectedStart, m.QueuePosition
		case m.After != nil && out.After == nil:
			out.After, out.AfterLeftOut = m.After, m.AfterLeftOut
		}
		if out.RunsAgainAfter == "" && m.RunsAgainAfter != "" {
			out.RunsAgainAfter, runsAgainWhy = m.RunsAgainAfter, m.Why
		}
		if m.RetryAt != nil && (out.RetryAt == nil || m.RetryAt.Before(*out.RetryAt)) {
			out.RetryAt = m.RetryAt // the first of its indices in backoff to run again
		}
		if m.KillAt != nil && (out.KillAt == nil || m.KillAt.After(*out.KillAt)) {
			out.KillAt = m.KillAt // the last of its indices being stopped to be killed (trial AI)
		}
	}
	slices.Sort(out.CPUIDs)
	// In the machine's order, once each (two indices may share a card);
	// trial AJ: "3,2".
	slices.SortFunc(out.GPUs, compareCards)
	out.GPUs = slices.Compact(out.GPUs)
	if out.Why == "" && c.inLine > 0 && def.MaxParallel > 0 && c.slots >= def.MaxParallel {
		// Indices in line while as many as max_parallel allows hold a
		// place, the array running or not.
		out.Why = MsgArrayFull(def.MaxParallel, c.inLine)
	}
	switch out.State {
	case store.StateRunning.String():
		if out.Why != "" {
			break
		}
		// Its indices running say they will not run again; the array
		// says it too (trial AS: "3 running · 2 unplaceable", and why not).
		for _, m := range members {
			if why, ok := strings.CutPrefix(m.Why, runsOn); ok && m.State == out.State {
				out.Why = msgIndicesRunOn(why)
				break
			}
		}
	case store.StateDone.String():
		out.Why = runsAgainWhy
	case store.StateFailed.String():
		out.Why = MsgArrayFailed(c.byState[store.StateFailed], c.size, a.name)
	case store.StateInvalid.String(), store.StateUnplaceable.String():
		// Every index is as the definition makes it: the first one's why
		// is the array's (a flavor that does not exist, a size that fits
		// no machine).
		for _, m := range members {
			if m.State == out.State && m.Why != "" {
				out.Why = m.Why
				break
			}
		}
	}
	return out
}

// compareCards orders cards by name, an index by its number ("2" before
// "10"), before a "GPU-"/"MIG-" name.
func compareCards(a, b string) int {
	x, errA := strconv.Atoi(a)
	y, errB := strconv.Atoi(b)
	switch {
	case errA == nil && errB == nil:
		return cmp.Compare(x, y)
	case errA == nil:
		return -1
	case errB == nil:
		return 1
	}
	return strings.Compare(a, b)
}

// mergeByName merges two lists sorted by name.
func mergeByName(a, b []JobStatus) []JobStatus {
	out := make([]JobStatus, 0, len(a)+len(b))
	for len(a) > 0 && len(b) > 0 {
		if a[0].Name < b[0].Name {
			out, a = append(out, a[0]), a[1:]
		} else {
			out, b = append(out, b[0]), b[1:]
		}
	}
	return append(append(out, a...), b...)
}

// foreignInTheWay are the cards on which a share of n bytes would fit
// but for the memory processes berth did not start hold there, with
// their use; nil when there is none.
func (d *Daemon) foreignInTheWay(snap accounting.Snapshot, n int64) map[int]cardState {
	states := d.cards.Load()
	if states == nil {
		return nil
	}
	var out map[int]cardState
	for i, st := range *states {
		var foreign int64
		for _, f := range st.Foreign {
			foreign += max(0, f.MemoryBytes)
		}
		if i < len(snap.CardRoom) && snap.CardHolders[i] == "" && snap.CardRoom[i] < n && snap.CardRoom[i]+foreign >= n {
			if out == nil {
				out = map[int]cardState{}
			}
			out[i] = st
		}
	}
	return out
}

// noCards and noCores are the empty lists of every job that holds none;
// nothing writes to them.
var (
	noCards = []string{}
	noCores = []int{}
)

func usageOf(run *units.Run) *Usage {
	u, ok := run.Usage()
	if !ok {
		return nil
	}
	var out Usage
	if u.MemoryBytes >= 0 {
		out.MemoryBytes = &u.MemoryBytes
	}
	if u.CPUTime >= 0 {
		secs := u.CPUTime.Seconds()
		out.CPUSeconds = &secs
	}
	return &out
}

// shortfall is how much more of each resource a job asks than is free.
func shortfall(asked, free accounting.Resources, ramKnown bool) Size {
	var s Size
	s.CPUs = max(0, asked.CPUs-free.CPUs)
	s.GPUs = max(0, asked.GPUs-free.GPUs)
	s.GPUMemBytes = max(0, asked.GPUMemBytes-free.GPUMemBytes)
	if ramKnown {
		s.RAMBytes = max(0, asked.RAMBytes-max(0, free.RAMBytes))
	}
	return s
}

// jobStatus is one job's part of Status, or false when there is no such job.
func (d *Daemon) jobStatus(name string) (JobStatus, bool) {
	_, _, member := splitMember(name)
	for _, j := range d.status(member).Jobs {
		if j.Name == name {
			return j, true
		}
	}
	return JobStatus{}, false
}

// statusLine is systemd's one-line summary, e.g.
// "3 running, 2 waiting (2 for gpus), 1 failed; gpus 1/4 free; 1 file with errors".
func (d *Daemon) statusLine() string {
	s := d.Status()
	var parts []string
	for _, state := range StatesInOrder() {
		n := s.Counts[state.String()]
		if n == 0 {
			continue
		}
		part := fmt.Sprintf("%d %s", n, state)
		if state == store.StateWaiting {
			forGPUs := 0
			for _, j := range s.Jobs {
				if j.State == state.String() && j.Short != nil && (j.Short.GPUs > 0 || j.Short.GPUMemBytes > 0) {
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
			if c.Holder == "" && len(c.Shares) == 0 {
				free++
			}
		}
		line += fmt.Sprintf("; gpus %d/%d free", free, n)
	} else {
		line += fmt.Sprintf("; cpus %d/%d free", s.Machine.CPUsFree, s.Machine.CPUs)
	}
	if files := problemFiles(s.Problems); files > 0 {
		line += "; " + accounting.Count(files, "file") + " with errors"
	}
	for _, p := range s.Problems {
		switch p.Code {
		case ProblemDirMissing:
			line += "; no jobs directory"
		case ProblemDirRefused:
			line += "; jobs directory refused"
		case ProblemNotRecording:
			line += "; state not recorded"
		case ProblemLogsUnwritable:
			line += "; job output not kept"
		}
	}
	kept := 0
	for _, p := range s.Problems {
		if p.Code == ProblemOrphanKept {
			kept++
		}
	}
	if kept > 0 {
		line += "; " + MsgRunsKept(kept)
	}
	if g := d.store.Gone(); g != nil {
		line += "; " + msgStateGoneShort(g)
	}
	if s.Daemon.BinaryReplaced {
		line += "; " + msgBinaryReplacedShort(s.Runner)
	}
	return line
}

// StillStopping names, sorted, the jobs whose run the daemon's shutdown
// is still stopping (a job whose run has ended keeps its state for the
// next daemon: trial AX, a second SIGTERM listed it as stopping).
func (d *Daemon) StillStopping() []string {
	d.mu.Lock()
	jobs := make([]*job, 0, len(d.jobs)+len(d.draining))
	for _, j := range d.jobs {
		jobs = append(jobs, j)
	}
	for name := range d.draining {
		if j := d.removedLocked(name); j != nil {
			jobs = append(jobs, j)
		}
	}
	d.mu.Unlock()
	var names []string
	for _, j := range jobs {
		select {
		case <-j.done:
		default:
			if Holds(j.view().State) {
				names = append(names, j.name)
			}
		}
	}
	slices.Sort(names)
	return slices.Compact(names)
}

// problemFiles is how many job files the problems are about: a file's own
// errors, its jobs' and its quotas'; not the state's, nor the jobs
// directory's.
func problemFiles(problems []Problem) int {
	files := map[string]bool{}
	for _, p := range problems {
		if p.InAJobFile() {
			files[p.File] = true
		}
	}
	return len(files)
}
