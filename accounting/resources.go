package accounting

import "time"

// Resources is what a job asks for. CPUs is a core count: zero means the job
// is unaccounted (it never waits and holds nothing). RAMBytes zero means memory
// was not asked for.
//
// GPUMemBytes asks for that much memory of one card, shared with other such
// jobs, instead of whole cards: GPUs is then 0 (a request with both can
// never be granted). Most jobs use a tenth of a card; counted in whole cards,
// three of them need three cards.
type Resources struct {
	CPUs        int
	GPUs        int
	RAMBytes    int64
	GPUMemBytes int64
}

// Unaccounted reports whether the request bypasses the books altogether.
func (r Resources) Unaccounted() bool { return r.CPUs == 0 }

// Shares reports whether the request is for a share of one card's memory.
func (r Resources) Shares() bool { return r.GPUMemBytes > 0 }

// fitsIn reports whether r's cores, whole cards and memory fit in avail.
// Memory counts only where the machine knows its memory: unknown memory is
// not accounted. A share of a card is the caller's to check, card by card.
func (r Resources) fitsIn(avail Resources, countRAM bool) bool {
	if r.CPUs > avail.CPUs || r.GPUs > avail.GPUs {
		return false
	}
	return !countRAM || r.RAMBytes <= avail.RAMBytes
}

// Plus is r and o together.
func (r Resources) Plus(o Resources) Resources {
	return Resources{CPUs: r.CPUs + o.CPUs, GPUs: r.GPUs + o.GPUs, RAMBytes: r.RAMBytes + o.RAMBytes,
		GPUMemBytes: r.GPUMemBytes + o.GPUMemBytes}
}

func (r Resources) minus(o Resources) Resources {
	return Resources{CPUs: r.CPUs - o.CPUs, GPUs: r.GPUs - o.GPUs, RAMBytes: r.RAMBytes - o.RAMBytes,
		GPUMemBytes: r.GPUMemBytes - o.GPUMemBytes}
}

// String writes "8 cpus, 1 gpu, 32G" (or "8 cpus, 20G of a gpu, 32G") for
// logs and messages.
func (r Resources) String() string {
	s := Count(r.CPUs, "cpu") + ", "
	if r.Shares() {
		s += FormatSize(r.GPUMemBytes) + " of a gpu"
	} else {
		s += Count(r.GPUs, "gpu")
	}
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
	// GPUMem is each card's memory in bytes, 0 where unknown; nil where
	// none is known. Only a card whose memory is known can be shared.
	GPUMem []int64
}

// CPUs is the number of cores jobs may be given.
func (c Capacity) CPUs() int { return len(c.CPUIDs) }

// cardMem is card i's memory, 0 when unknown.
func (c Capacity) cardMem(i int) int64 {
	if i < len(c.GPUMem) {
		return c.GPUMem[i]
	}
	return 0
}

// LargestCardMem is the memory of the machine's largest card, 0 when the
// memory of none is known: the most one share can ask.
func (c Capacity) LargestCardMem() int64 {
	var most int64
	for _, m := range c.GPUMem {
		most = max(most, m)
	}
	return most
}

// holds reports whether a machine of this capacity, idle, could grant r.
func (c Capacity) holds(r Resources) bool {
	if r.Shares() && (r.GPUs > 0 || r.GPUMemBytes > c.LargestCardMem()) {
		return false
	}
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
	// Arrived is when the request began to wait, for one queued again with
	// what its job now asks (the job was edited while it waited): it keeps
	// its place among waiters of its priority. Zero: it arrives now.
	Arrived time.Time
	// Order breaks a tie in Arrived, lower first: requests that arrive at
	// one instant on purpose (jobs declared together) wait in the order
	// they were declared, not the order they reached the Placer in.
	Order int
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
	// GPUs are card indices into the machine's cards, lowest free first;
	// for a share, its one card.
	GPUs     []int
	RAMBytes int64
	// GPUMemBytes, for a share of a card, is the memory booked on it; 0
	// for a grant of whole cards.
	GPUMemBytes int64
	// Until is when the run will certainly have ended, or zero when unbounded.
	Until time.Time
}

// Resources is what the grant holds, as counts: a share holds card memory,
// and no whole card.
func (g Grant) Resources() Resources {
	r := Resources{CPUs: len(g.CPUIDs), RAMBytes: g.RAMBytes, GPUMemBytes: g.GPUMemBytes}
	if g.GPUMemBytes == 0 {
		r.GPUs = len(g.GPUs)
	}
	return r
}
