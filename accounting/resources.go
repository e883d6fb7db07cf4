package accounting

import "time"

// Resources is what a job asks for. CPUs is a core count: zero means the job
// is unaccounted (it never waits and holds nothing). RAMBytes zero means memory
// was not asked for.
type Resources struct {
	CPUs     int
	GPUs     int
	RAMBytes int64
}

// Unaccounted reports whether the request bypasses the books altogether.
func (r Resources) Unaccounted() bool { return r.CPUs == 0 }

// fitsIn reports whether r fits in avail. Memory counts only where the
// machine knows its memory: unknown memory is not accounted.
func (r Resources) fitsIn(avail Resources, countRAM bool) bool {
	if r.CPUs > avail.CPUs || r.GPUs > avail.GPUs {
		return false
	}
	return !countRAM || r.RAMBytes <= avail.RAMBytes
}

func (r Resources) plus(o Resources) Resources {
	return Resources{CPUs: r.CPUs + o.CPUs, GPUs: r.GPUs + o.GPUs, RAMBytes: r.RAMBytes + o.RAMBytes}
}

// String writes "8 cpus, 1 gpu, 32G" for logs and messages.
func (r Resources) String() string {
	s := Count(r.CPUs, "cpu") + ", " + Count(r.GPUs, "gpu")
	if r.RAMBytes > 0 {
		s += ", " + FormatSize(r.RAMBytes)
	}
	return s
}

// Capacity is what one machine offers to the books.
type Capacity struct {
	// Name identifies the machine in grants and snapshots ("local" today).
	Name string
	// CPUIDs are the cores jobs may be given.
	CPUIDs []int
	// GPUs is the number of cards; the books name them by index 0..GPUs-1,
	// and the caller maps indices to device names.
	GPUs int
	// RAMBytes is meaningful only when RAMKnown. Unknown memory is not
	// accounted at all, which is different from a machine with none.
	RAMBytes int64
	RAMKnown bool
	// CPUNodes and GPUNodes are the NUMA node of each core (by its place
	// in CPUIDs) and of each card, -1 where unknown; nil when the machine's
	// topology is unknown. With them, a job's cards are chosen on one node
	// where they can be, and its cores on its cards' nodes.
	CPUNodes []int
	GPUNodes []int
}

// CPUs is the number of cores jobs may be given.
func (c Capacity) CPUs() int { return len(c.CPUIDs) }

// holds reports whether a machine of this capacity, idle, could grant r.
func (c Capacity) holds(r Resources) bool {
	return r.fitsIn(Resources{CPUs: c.CPUs(), GPUs: c.GPUs, RAMBytes: c.RAMBytes}, c.RAMKnown)
}

// Request is one ask for resources, as the Placer and the Book see it.
type Request struct {
	// Holder names who the grant is for; snapshots show it against each card.
	Holder string
	// Owner is the person whose job it is, "" for a job the machine's
	// administrators declared. Quotas bound an owner's jobs together, and
	// among waiters of equal priority the owner holding least goes first.
	Owner string
	Resources
	// Priority orders waiters, higher first: an administrator's job among
	// all, a person's job among that person's own (a person's jobs are all
	// at 0 among everyone's).
	Priority int
	// Limit is the longest a run can keep its grant once started (its time
	// limit plus the time it is given to stop), or zero when unbounded. Only
	// bounded requests can backfill ahead of the head of the queue.
	Limit time.Duration
}

// Grant is what a Book handed out: exactly which cores and cards, and how much
// memory. It is a value; give it back with the Book it came from.
type Grant struct {
	// ID is unique within its Book.
	ID      uint64
	Machine string
	Holder  string
	Owner   string
	CPUIDs  []int
	// GPUs are card indices into the machine's cards, lowest free first.
	GPUs     []int
	RAMBytes int64
	// Until is when the run will certainly have ended, or zero when unbounded.
	Until time.Time
}

// Resources is what the grant holds, as counts.
func (g Grant) Resources() Resources {
	return Resources{CPUs: len(g.CPUIDs), GPUs: len(g.GPUs), RAMBytes: g.RAMBytes}
}
