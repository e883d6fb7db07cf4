package accounting

import (
	"cmp"
	"fmt"
	"slices"
	"sync"
	"time"
)

// Book is the ledger of one machine: what it has, what is free, and which
// grant holds what. It never blocks and never waits; waiting is the Placer's.
//
// Lock order: a Placer's mutex may be held while calling into a Book (the
// Book's mutex is then taken inside it); a Book never calls out while holding
// its own mutex. The release callback therefore runs after Give has unlocked,
// and is free to take the Placer's mutex.
type Book struct {
	capacity  Capacity
	onRelease func()

	mu sync.Mutex // guards everything below
	// cpuFree[i] says whether capacity.CPUIDs[i] is free; lowest first.
	cpuFree  []bool
	freeCPUs int
	// gpuHolder[i] is the ID of the grant holding card i, 0 when free.
	gpuHolder []uint64
	freeGPUs  int
	// gpuOff[i] says card i may not be granted now (a process berth did
	// not start uses it): a free card that is off does not count as free.
	gpuOff  []bool
	freeRAM int64
	grants  map[uint64]Grant
	nextID  uint64
	// byOwner is what each owner's grants hold together; "" is the
	// administrators' jobs. An owner holding nothing has no entry.
	byOwner map[string]Resources
}

// NewBook opens the books for a machine of the given capacity. onRelease, if
// not nil, is called after every Give, outside the Book's lock.
func NewBook(c Capacity, onRelease func()) *Book {
	c.CPUIDs = append([]int(nil), c.CPUIDs...)
	c.CPUNodes = slices.Clone(c.CPUNodes)
	c.GPUNodes = slices.Clone(c.GPUNodes)
	b := &Book{
		capacity:  c,
		onRelease: onRelease,
		cpuFree:   make([]bool, len(c.CPUIDs)),
		freeCPUs:  len(c.CPUIDs),
		gpuHolder: make([]uint64, c.GPUs),
		gpuOff:    make([]bool, c.GPUs),
		freeGPUs:  c.GPUs,
		freeRAM:   c.RAMBytes,
		grants:    make(map[uint64]Grant),
		byOwner:   make(map[string]Resources),
	}
	for i := range b.cpuFree {
		b.cpuFree[i] = true
	}
	return b
}

// Capacity is what the machine has, busy or not.
func (b *Book) Capacity() Capacity { return b.capacity }

// Fits reports whether this machine could ever grant r, were it idle. It is
// the question to ask before waiting: waiting for a card that is busy is
// queueing; waiting for one the machine does not have is a hang.
func (b *Book) Fits(r Resources) bool { return b.capacity.holds(r) }

// TryTake grants req now if it is free, or reports false. now is when the
// grant starts; with a Limit it fixes the grant's Until. Cores and cards are
// chosen lowest free first, so grants are predictable and easy to read.
func (b *Book) TryTake(req Request, now time.Time) (Grant, bool) {
	return b.takeKeeping(req, now, Resources{})
}

// takeKeeping grants req if it fits in what is free less keep, the part held
// back for the head of the Placer's queue.
func (b *Book) takeKeeping(req Request, now time.Time, keep Resources) (Grant, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	avail := b.free()
	// What the head keeps is never more than is free: a card turned off
	// since the placer planned must not refuse jobs that ask for none.
	avail.CPUs -= min(keep.CPUs, avail.CPUs)
	avail.GPUs -= min(keep.GPUs, avail.GPUs)
	avail.RAMBytes -= min(keep.RAMBytes, max(avail.RAMBytes, 0))
	if !req.fitsIn(avail, b.capacity.RAMKnown) {
		return Grant{}, false
	}
	b.nextID++
	g := Grant{
		ID:       b.nextID,
		Machine:  b.capacity.Name,
		Holder:   req.Holder,
		Owner:    req.Owner,
		RAMBytes: req.RAMBytes,
	}
	if req.Limit > 0 {
		g.Until = now.Add(req.Limit)
	}
	// Cards first: the cores follow them to their nodes.
	var near []int
	if req.GPUs > 0 {
		g.GPUs = b.chooseCards(req.GPUs)
		for _, i := range g.GPUs {
			b.gpuHolder[i] = g.ID
			if n := b.gpuNode(i); n >= 0 && !slices.Contains(near, n) {
				near = append(near, n)
			}
		}
		b.freeGPUs -= req.GPUs
	}
	if req.CPUs > 0 {
		// The cores on the cards' nodes, lowest first, then any; the
		// grant lists them in the books' order, which Give walks.
		slots := make([]int, 0, req.CPUs)
		for pass := range 2 {
			for i := 0; i < len(b.cpuFree) && len(slots) < req.CPUs; i++ {
				if b.cpuFree[i] && (pass == 1 || len(near) == 0 || slices.Contains(near, b.cpuNode(i))) {
					b.cpuFree[i] = false
					slots = append(slots, i)
				}
			}
			if len(near) == 0 {
				break
			}
		}
		slices.Sort(slots)
		g.CPUIDs = make([]int, len(slots))
		for k, i := range slots {
			g.CPUIDs[k] = b.capacity.CPUIDs[i]
		}
		b.freeCPUs -= req.CPUs
	}
	if b.capacity.RAMKnown {
		b.freeRAM -= req.RAMBytes
	}
	b.hold(g)
	return g, true
}

// chooseCards picks n free cards, lowest first; where the topology is
// known, all on one node if any node has n free, the node with the most
// free cores of those (the lowest on a tie). The caller holds b.mu and has
// checked that n are free.
func (b *Book) chooseCards(n int) []int {
	node := -1
	if b.capacity.GPUNodes != nil {
		freeCards, freeCores := map[int]int{}, map[int]int{}
		for i, holder := range b.gpuHolder {
			if holder == 0 && !b.gpuOff[i] && b.gpuNode(i) >= 0 {
				freeCards[b.gpuNode(i)]++
			}
		}
		for i, free := range b.cpuFree {
			if free {
				freeCores[b.cpuNode(i)]++
			}
		}
		for nd, cards := range freeCards {
			if cards >= n && (node < 0 || freeCores[nd] > freeCores[node] || freeCores[nd] == freeCores[node] && nd < node) {
				node = nd
			}
		}
	}
	out := make([]int, 0, n)
	for i := 0; i < len(b.gpuHolder) && len(out) < n; i++ {
		if b.gpuHolder[i] == 0 && !b.gpuOff[i] && (node < 0 || b.gpuNode(i) == node) {
			out = append(out, i)
		}
	}
	return out
}

// cpuNode and gpuNode are the node of the core at place i of CPUIDs and of
// card i; -1 when unknown.
func (b *Book) cpuNode(i int) int {
	if i < len(b.capacity.CPUNodes) {
		return b.capacity.CPUNodes[i]
	}
	return -1
}

func (b *Book) gpuNode(i int) int {
	if i < len(b.capacity.GPUNodes) {
		return b.capacity.GPUNodes[i]
	}
	return -1
}

// hold records g as outstanding. The caller holds b.mu.
func (b *Book) hold(g Grant) {
	b.grants[g.ID] = g
	b.byOwner[g.Owner] = b.byOwner[g.Owner].plus(g.Resources())
}

// Held is what owner's grants hold on this machine now.
func (b *Book) Held(owner string) Resources {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.byOwner[owner]
}

// Restore takes back exactly what a run that outlived a previous daemon
// holds: those cores, those cards and that memory, for holder (of owner),
// ending by until (zero when unbounded). It is for the daemon's start,
// before anything is placed; a part that is not free or not on this
// machine (its capacity was changed meanwhile) fails the whole call and
// takes nothing.
func (b *Book) Restore(holder, owner string, cpuIDs, gpus []int, ramBytes int64, until time.Time) (Grant, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	want := make(map[int]bool, len(cpuIDs))
	for _, id := range cpuIDs {
		want[id] = true
	}
	var slots []int
	for i, id := range b.capacity.CPUIDs {
		if want[id] {
			if !b.cpuFree[i] {
				return Grant{}, fmt.Errorf("restore %s's grant: core %d is held by another grant", holder, id)
			}
			slots = append(slots, i)
		}
	}
	if len(slots) != len(want) {
		return Grant{}, fmt.Errorf("restore %s's grant: cores %v are not all among this machine's %v", holder, cpuIDs, b.capacity.CPUIDs)
	}
	for _, card := range gpus {
		if card < 0 || card >= len(b.gpuHolder) {
			return Grant{}, fmt.Errorf("restore %s's grant: card %d is not on this machine (it has %d)", holder, card, len(b.gpuHolder))
		}
		if b.gpuHolder[card] != 0 {
			return Grant{}, fmt.Errorf("restore %s's grant: card %d is held by another grant", holder, card)
		}
	}
	if b.capacity.RAMKnown && ramBytes > b.freeRAM {
		return Grant{}, fmt.Errorf("restore %s's grant: %s of memory asked, %s free", holder, FormatSize(ramBytes), FormatSize(b.freeRAM))
	}
	b.nextID++
	g := Grant{ID: b.nextID, Machine: b.capacity.Name, Holder: holder, Owner: owner, RAMBytes: ramBytes, Until: until}
	for _, i := range slots {
		b.cpuFree[i] = false
		g.CPUIDs = append(g.CPUIDs, b.capacity.CPUIDs[i])
	}
	b.freeCPUs -= len(slots)
	for _, card := range gpus {
		b.gpuHolder[card] = g.ID
	}
	g.GPUs = append([]int(nil), gpus...)
	b.freeGPUs -= len(gpus)
	if b.capacity.RAMKnown {
		b.freeRAM -= ramBytes
	}
	b.hold(g)
	return g, nil
}

// Give returns what a grant held, whatever ended the run. Giving back a grant
// twice, or one from another book, returns ErrUnknownGrant and changes nothing.
func (b *Book) Give(g Grant) error {
	b.mu.Lock()
	held, ok := b.grants[g.ID]
	if !ok {
		b.mu.Unlock()
		return ErrUnknownGrant
	}
	delete(b.grants, g.ID)
	left := b.byOwner[held.Owner]
	left.CPUs -= len(held.CPUIDs)
	left.GPUs -= len(held.GPUs)
	left.RAMBytes -= held.RAMBytes
	if left == (Resources{}) {
		delete(b.byOwner, held.Owner)
	} else {
		b.byOwner[held.Owner] = left
	}
	cpu := 0
	for i, id := range b.capacity.CPUIDs {
		if cpu < len(held.CPUIDs) && held.CPUIDs[cpu] == id {
			b.cpuFree[i] = true
			cpu++
		}
	}
	b.freeCPUs += len(held.CPUIDs)
	for _, card := range held.GPUs {
		b.gpuHolder[card] = 0
	}
	b.freeGPUs += len(held.GPUs)
	if b.capacity.RAMKnown {
		b.freeRAM += held.RAMBytes
	}
	b.mu.Unlock()

	if b.onRelease != nil {
		b.onRelease()
	}
	return nil
}

// free is what may be granted now: not granted, and no card that is off.
// The caller holds b.mu.
func (b *Book) free() Resources {
	gpus := b.freeGPUs
	for i, off := range b.gpuOff {
		if off && b.gpuHolder[i] == 0 {
			gpus--
		}
	}
	return Resources{CPUs: b.freeCPUs, GPUs: gpus, RAMBytes: b.freeRAM}
}

// SetOff says which cards may not be granted now, whatever the books hold:
// those a process berth did not start uses. A card held by a grant stays
// held. When a card comes back on, what waits is placed again (as after a
// Give).
func (b *Book) SetOff(cards []int) {
	b.mu.Lock()
	back := false
	for i := range b.gpuOff {
		off := slices.Contains(cards, i)
		back = back || b.gpuOff[i] && !off
		b.gpuOff[i] = off
	}
	b.mu.Unlock()
	if back && b.onRelease != nil {
		b.onRelease()
	}
}

// Snapshot is a consistent picture of a Book at one moment.
type Snapshot struct {
	Capacity Capacity
	Free     Resources
	// CardHolders[i] is the holder of card i, "" when free.
	CardHolders []string
	// CardsOff[i] says card i may not be granted now (SetOff).
	CardsOff []bool
	// Grants are the outstanding grants, by ID.
	Grants []Grant
}

// Snapshot returns what the machine has, what is free, and who holds what.
func (b *Book) Snapshot() Snapshot {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := Snapshot{
		Capacity:    b.capacity,
		Free:        b.free(),
		CardHolders: make([]string, len(b.gpuHolder)),
		CardsOff:    slices.Clone(b.gpuOff),
		Grants:      make([]Grant, 0, len(b.grants)),
	}
	for i, id := range b.gpuHolder {
		if id != 0 {
			s.CardHolders[i] = b.grants[id].Holder
		}
	}
	for _, g := range b.grants {
		s.Grants = append(s.Grants, g)
	}
	slices.SortFunc(s.Grants, func(a, b Grant) int { return cmp.Compare(a.ID, b.ID) })
	return s
}

// bound is a running grant that will certainly have ended by until (Unix
// nanoseconds): what the Placer needs to know of it to plan, and no more.
// Kept free of pointers, since a plan is made at every release.
type bound struct {
	until int64
	r     Resources
}

// planningState returns what is free now and the bounded grants, soonest end
// first: what the Placer needs to work out when the head of its queue can
// start. The caller holds the Placer's mutex; this takes the Book's.
func (b *Book) planningState() (Resources, []bound) {
	b.mu.Lock()
	defer b.mu.Unlock()
	var ends []bound
	for _, g := range b.grants {
		if !g.Until.IsZero() {
			ends = append(ends, bound{until: g.Until.UnixNano(), r: g.Resources()})
		}
	}
	slices.SortFunc(ends, func(a, b bound) int { return cmp.Compare(a.until, b.until) })
	return b.free(), ends
}
