package accounting

// A quota bounds what the jobs of one owner — a person who shares the
// machine — may hold at once. A job that would take its owner past it
// waits, as it would for a busy card; one that asks more than the quota
// allows at all can never start, and is unplaceable.

// Quota is the most one owner's jobs may hold together; a negative field
// is no bound on that resource. (Memory is bounded only where the machine
// knows its own.)
//
// GPUs bounds cards: those held whole, and where GPUMemBytes does not say
// otherwise, the card memory of shares too, a card's worth of memory (the
// largest card's) counting as a card: quota "*" { gpus = 1 } is one card,
// whole or in shares. GPUMemBytes, where it is set, bounds the shares'
// memory on its own instead.
type Quota struct {
	CPUs        int
	GPUs        int
	RAMBytes    int64
	GPUMemBytes int64
}

// NoQuota bounds nothing.
var NoQuota = Quota{CPUs: -1, GPUs: -1, RAMBytes: -1, GPUMemBytes: -1}

// allows reports whether an owner holding held may also take r, on
// machines whose largest card has cardMem bytes (0 where unknown).
func (q Quota) allows(held, r Resources, cardMem int64) bool {
	return q.within(held.Plus(r), cardMem)
}

// within reports whether holding r stays inside the quota.
func (q Quota) within(r Resources, cardMem int64) bool {
	if q.CPUs >= 0 && r.CPUs > q.CPUs || q.GPUs >= 0 && r.GPUs > q.GPUs || q.RAMBytes >= 0 && r.RAMBytes > q.RAMBytes {
		return false
	}
	if q.GPUMemBytes >= 0 {
		return r.GPUMemBytes <= q.GPUMemBytes
	}
	return q.GPUs < 0 || r.GPUMemBytes == 0 || cardMem > 0 && int64(r.GPUs)*cardMem+r.GPUMemBytes <= int64(q.GPUs)*cardMem
}

// escapedBy reports whether r would escape the quota by asking for none of
// what it bounds: an unaccounted request (no cores) holds no cores, one
// that asks no memory holds none of it, and either may then use as much
// as it likes. Such a request is refused, not let through. (Cards it
// cannot escape: a job that holds none is shown none, and under systemd
// may open none.)
func (q Quota) escapedBy(r Resources) bool {
	return q.CPUs >= 0 && r.Unaccounted() || q.RAMBytes >= 0 && r.RAMBytes == 0
}

// Bounded reports whether the quota bounds anything.
func (q Quota) Bounded() bool {
	return q.CPUs >= 0 || q.GPUs >= 0 || q.RAMBytes >= 0 || q.GPUMemBytes >= 0
}

// QuotaWait says what keeps a waiting request of an owner back: what the
// owner's jobs hold now, and the quota that the request would take them
// past.
type QuotaWait struct {
	Owner string
	Held  Resources
	Quota Quota
}
