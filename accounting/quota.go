package accounting

// A quota bounds what the jobs of one owner — a person who shares the
// machine — may hold at once. A job that would take its owner past it
// waits, as it would for a busy card; one that asks more than the quota
// allows at all can never start, and is unplaceable.

// Quota is the most one owner's jobs may hold together; a negative field
// is no bound on that resource. (Memory is bounded only where the machine
// knows its own.)
type Quota struct {
	CPUs     int
	GPUs     int
	RAMBytes int64
	// GPUMemBytes bounds the card memory of the owner's shares together
	// (a share is no whole card: GPUs does not count it).
	GPUMemBytes int64
}

// NoQuota bounds nothing.
var NoQuota = Quota{CPUs: -1, GPUs: -1, RAMBytes: -1, GPUMemBytes: -1}

// allows reports whether an owner holding held may also take r.
func (q Quota) allows(held, r Resources) bool {
	return q.within(held.Plus(r))
}

// within reports whether holding r stays inside the quota.
func (q Quota) within(r Resources) bool {
	return (q.CPUs < 0 || r.CPUs <= q.CPUs) && (q.GPUs < 0 || r.GPUs <= q.GPUs) &&
		(q.RAMBytes < 0 || r.RAMBytes <= q.RAMBytes) && (q.GPUMemBytes < 0 || r.GPUMemBytes <= q.GPUMemBytes)
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
