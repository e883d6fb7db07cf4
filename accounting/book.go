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
	// gpuHolder[i] is the ID of the grant holding card i whole, 0 when
	// none does.
	gpuHolder []uint64
	// gpuBooked[i] is the card memory that shares (GPUMemBytes) booked on
	// card i: a card with any booked is not granted whole.
	gpuBooked []int64
	// wholeFree counts the cards neither held whole nor booked, off or
	// not.
	wholeFree int
	// gpuOff[i] says card i may not be granted whole now (a process berth
	// did not start uses it): a free card that is off does not count as
	// free. gpuOutside[i] is the memory in use on card i that no share
	// booked (processes berth did not start, runs beyond their share),
	// which a share may not be given. Both are the live view (SetCards).
	gpuOff     []bool
	gpuOutside []int64
	offCards   int // how many of gpuOff are set
	freeRAM    int64
	grants     map[uint64]Grant
	nextID     uint64
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
	c.GPUMem = slices.Clone(c.GPUMem)
	b := &Book{
		capacity:   c,
		onRelease:  onRelease,
		cpuFree:    make([]bool, len(c.CPUIDs)),
		freeCPUs:   len(c.CPUIDs),
		gpuHolder:  make([]uint64, c.GPUs),
		gpuBooked:  make([]int64, c.GPUs),
		wholeFree:  c.GPUs,
		gpuOff:     make([]bool, c.GPUs),
		gpuOutside: make([]int64, c.GPUs),
		freeRAM:    c.RAMBytes,
		grants:     make(map[uint64]Grant),
		byOwner:    make(map[string]Resources),
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
// chosen lowest free first, so grants are predictable and easy to read; a
// share goes to the card it fills best.
func (b *Book) TryTake(req Request, now time.Time) (Grant, bool) {
	return b.takeKeeping(req, now, holdBack{})
}

// holdBack is what the head of the Placer's queue keeps of what is free:
// cores and memory (Resources.CPUs, RAMBytes); for a head that asks whole
// cards, those cards by name (Cards); for a head that asks a share,
// GPUMemBytes of card Card (nothing of any card when GPUMemBytes is 0).
// Cards are named rather than counted: a card counted free and taken by a
// share certain to end in time is a shared card, which a share that is not
// could then take, and the head would wait past its start.
type holdBack struct {
	Resources
	Card  int
	Cards []int
}

// kept says whether card i is one a whole grant may not take: the head's
// cards, or the card a share at the head waits on.
func (k holdBack) kept(i int) bool {
	return k.GPUMemBytes > 0 && i == k.Card || slices.Contains(k.Cards, i)
}

// takeKeeping grants req if it fits in what is free less keep, the part held
// back for the head of the Placer's queue.
func (b *Book) takeKeeping(req Request, now time.Time, keep holdBack) (Grant, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	avail := b.free()
	// What the head keeps is never more than is free: a card turned off
	// since the placer planned must not refuse jobs that ask for none.
	avail.CPUs -= min(keep.CPUs, avail.CPUs)
	avail.RAMBytes -= min(keep.RAMBytes, max(avail.RAMBytes, 0))
	for _, i := range keep.Cards {
		if b.untouched(i) && !b.gpuOff[i] {
			avail.GPUs-- // counted free, and no one's whole
		}
	}
	if c := keep.Card; keep.GPUMemBytes > 0 && !slices.Contains(keep.Cards, c) && b.untouched(c) && !b.gpuOff[c] {
		avail.GPUs--
	}
	if !req.fitsIn(avail, b.capacity.RAMKnown) {
		return Grant{}, false
	}
	shareOn := -1
	if req.Shares() {
		if shareOn = b.chooseShare(req.GPUMemBytes, keep); shareOn < 0 {
			return Grant{}, false
		}
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
	switch {
	case req.GPUs > 0:
		g.GPUs = b.chooseCards(req.GPUs, func(i int) bool { return b.untouched(i) && !b.gpuOff[i] && !keep.kept(i) })
	case shareOn >= 0:
		g.GPUs, g.GPUMemBytes = []int{shareOn}, req.GPUMemBytes
	}
	var near []int
	for _, i := range g.GPUs {
		b.takeCard(g, i)
		if n := b.gpuNode(i); n >= 0 && !slices.Contains(near, n) {
			near = append(near, n)
		}
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

// untouched says card i is neither held whole nor booked by a share. The
// caller holds b.mu.
func (b *Book) untouched(i int) bool { return b.gpuHolder[i] == 0 && b.gpuBooked[i] == 0 }

// shareRoom is the memory card i has for a share now: its memory less
// what shares booked and what is in use outside them; 0 on a card held
// whole or whose memory is unknown. The caller holds b.mu.
func (b *Book) shareRoom(i int) int64 {
	mem := b.capacity.cardMem(i)
	if b.gpuHolder[i] != 0 || mem <= 0 {
		return 0
	}
	return max(0, mem-b.gpuBooked[i]-b.gpuOutside[i])
}

// chooseShare picks the card for a share of n bytes, or -1: of the cards
// already shared (or in use outside berth), the one it fills best, so that
// untouched cards stay whole for the jobs that ask whole cards; else an
// untouched one, as a one-card grant would be chosen. keep is the head's:
// its cards are no one's share, and on the card a share at the head waits
// on, only what it does not keep is room. The caller holds b.mu.
func (b *Book) chooseShare(n int64, keep holdBack) int {
	room := func(i int) int64 {
		r := b.shareRoom(i)
		if keep.GPUMemBytes > 0 && i == keep.Card {
			r -= keep.GPUMemBytes
		}
		return r
	}
	best := -1
	for i := range b.gpuHolder {
		if b.untouched(i) && !b.gpuOff[i] || slices.Contains(keep.Cards, i) {
			continue // for the second pass, or kept
		}
		if room(i) >= n && (best < 0 || room(i) < room(best)) {
			best = i
		}
	}
	if best >= 0 {
		return best
	}
	fresh := func(i int) bool {
		return b.untouched(i) && !b.gpuOff[i] && !slices.Contains(keep.Cards, i) && room(i) >= n
	}
	if cards := b.chooseCards(1, fresh); len(cards) == 1 {
		return cards[0]
	}
	return -1
}

// chooseCards picks n of the cards that may be given (eligible), lowest
// first; where the topology is known, all on one node if any node has n
// of them, the node with the most free cores of those (the lowest on a
// tie). Fewer than n when fewer are eligible. The caller holds b.mu.
func (b *Book) chooseCards(n int, eligible func(int) bool) []int {
	node := -1
	if b.capacity.GPUNodes != nil {
		freeCards, freeCores := map[int]int{}, map[int]int{}
		for i := range b.gpuHolder {
			if eligible(i) && b.gpuNode(i) >= 0 {
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
		if eligible(i) && (node < 0 || b.gpuNode(i) == node) {
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
	b.byOwner[g.Owner] = b.byOwner[g.Owner].Plus(g.Resources())
}

// Held is what owner's grants hold on this machine now.
func (b *Book) Held(owner string) Resources {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.byOwner[owner]
}

// Restore takes back exactly what a run that outlived a previous daemon
// holds: g's cores, cards (whole, or the share of its one card that
// g.GPUMemBytes says) and memory, for g.Holder of g.Owner, ending by
// g.Until (zero when unbounded); g's ID is not kept. It is for the
// daemon's start, before anything is placed; a part that is not free or not
// on this machine (its capacity was changed meanwhile) fails the whole call
// and takes nothing. A share on a card whose memory is not known now is
// taken back all the same: the run holds it, whatever the books know.
func (b *Book) Restore(g Grant) (Grant, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	holder := g.Holder
	want := make(map[int]bool, len(g.CPUIDs))
	for _, id := range g.CPUIDs {
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
		return Grant{}, fmt.Errorf("restore %s's grant: cores %v are not all among this machine's %v", holder, g.CPUIDs, b.capacity.CPUIDs)
	}
	share := g.GPUMemBytes > 0
	if share && len(g.GPUs) != 1 {
		return Grant{}, fmt.Errorf("restore %s's grant: a share of a card names %d cards", holder, len(g.GPUs))
	}
	for _, card := range g.GPUs {
		switch {
		case card < 0 || card >= len(b.gpuHolder):
			return Grant{}, fmt.Errorf("restore %s's grant: card %d is not on this machine (it has %d)", holder, card, len(b.gpuHolder))
		case b.gpuHolder[card] != 0:
			return Grant{}, fmt.Errorf("restore %s's grant: card %d is held by another grant", holder, card)
		case !share && b.gpuBooked[card] > 0:
			return Grant{}, fmt.Errorf("restore %s's grant: card %d is shared by other grants", holder, card)
		case share && b.capacity.cardMem(card) > 0 && b.gpuBooked[card]+g.GPUMemBytes > b.capacity.cardMem(card):
			return Grant{}, fmt.Errorf("restore %s's grant: %s of card %d asked, %s of its %s not booked", holder,
				FormatSize(g.GPUMemBytes), card, FormatSize(b.capacity.cardMem(card)-b.gpuBooked[card]), FormatSize(b.capacity.cardMem(card)))
		}
	}
	if b.capacity.RAMKnown && g.RAMBytes > b.freeRAM {
		return Grant{}, fmt.Errorf("restore %s's grant: %s of memory asked, %s free", holder, FormatSize(g.RAMBytes), FormatSize(b.freeRAM))
	}
	b.nextID++
	out := Grant{ID: b.nextID, Machine: b.capacity.Name, Holder: holder, Owner: g.Owner, RAMBytes: g.RAMBytes,
		GPUMemBytes: g.GPUMemBytes, Until: g.Until, GPUs: slices.Clone(g.GPUs)}
	for _, i := range slots {
		b.cpuFree[i] = false
		out.CPUIDs = append(out.CPUIDs, b.capacity.CPUIDs[i])
	}
	b.freeCPUs -= len(slots)
	for _, card := range out.GPUs {
		b.takeCard(out, card)
	}
	if b.capacity.RAMKnown {
		b.freeRAM -= out.RAMBytes
	}
	b.hold(out)
	return out, nil
}

// takeCard marks card as g's: held whole, or booked by g's share. The
// caller holds b.mu and has checked that it may.
func (b *Book) takeCard(g Grant, card int) {
	if b.untouched(card) {
		b.wholeFree--
	}
	if g.GPUMemBytes > 0 {
		b.gpuBooked[card] += g.GPUMemBytes
	} else {
		b.gpuHolder[card] = g.ID
	}
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
	if left := b.byOwner[held.Owner].minus(held.Resources()); left == (Resources{}) {
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
		if held.GPUMemBytes > 0 {
			b.gpuBooked[card] -= held.GPUMemBytes
		} else {
			b.gpuHolder[card] = 0
		}
		if b.untouched(card) {
			b.wholeFree++
		}
	}
	if b.capacity.RAMKnown {
		b.freeRAM += held.RAMBytes
	}
	b.mu.Unlock()

	if b.onRelease != nil {
		b.onRelease()
	}
	return nil
}

// Reschedule moves the end of outstanding grant g to until (zero: none):
// its run's limit was edited. The Placer plans the head's start on it
// again. A later end may delay the head behind what was backfilled on the
// earlier one: the edit's cost, which its author chose.
func (b *Book) Reschedule(g Grant, until time.Time) error {
	b.mu.Lock()
	held, ok := b.grants[g.ID]
	if !ok {
		b.mu.Unlock()
		return ErrUnknownGrant
	}
	held.Until = until
	b.grants[g.ID] = held
	b.mu.Unlock()
	if b.onRelease != nil {
		b.onRelease()
	}
	return nil
}

// free is what may be granted now: cores, memory, the whole cards neither
// held, booked nor off, and as GPUMemBytes the most one card has for a
// share. The caller holds b.mu.
func (b *Book) free() Resources {
	r := Resources{CPUs: b.freeCPUs, GPUs: b.wholeFree, RAMBytes: b.freeRAM}
	if b.offCards == 0 && b.capacity.GPUMem == nil {
		return r // nothing off, nothing shared: the counts say it all
	}
	for i, off := range b.gpuOff {
		if off && b.untouched(i) {
			r.GPUs--
		}
		r.GPUMemBytes = max(r.GPUMemBytes, b.shareRoom(i))
	}
	return r
}

// CardLive is what is on a card now that the books did not grant, as the
// driver last said.
type CardLive struct {
	// Off: a process berth did not start uses the card; it is not granted
	// whole meanwhile (one granted stays granted).
	Off bool
	// OutsideBytes is the card memory in use that no share booked: what
	// processes berth did not start hold, and what runs hold beyond their
	// share. A share is given only what is left beside it.
	OutsideBytes int64
}

// SetCards says what is on each card now beyond the books, by index (a
// card not in live has nothing). Whatever changed, what waits is placed
// again (as after a Give): a card back on or memory freed may let a job
// start, and a card gone off moves the head's expected start.
func (b *Book) SetCards(live []CardLive) {
	b.mu.Lock()
	changed := false
	for i := range b.gpuOff {
		var l CardLive
		if i < len(live) {
			l = live[i]
		}
		l.OutsideBytes = max(0, l.OutsideBytes)
		changed = changed || b.gpuOff[i] != l.Off || b.gpuOutside[i] != l.OutsideBytes
		switch {
		case l.Off && !b.gpuOff[i]:
			b.offCards++
		case !l.Off && b.gpuOff[i]:
			b.offCards--
		}
		b.gpuOff[i], b.gpuOutside[i] = l.Off, l.OutsideBytes
	}
	b.mu.Unlock()
	if changed && b.onRelease != nil {
		b.onRelease()
	}
}

// Snapshot is a consistent picture of a Book at one moment.
type Snapshot struct {
	Capacity Capacity
	Free     Resources
	// CardHolders[i] is the holder of card i whole, "" when none.
	CardHolders []string
	// CardsOff[i] says card i may not be granted whole now (SetCards).
	CardsOff []bool
	// CardBooked[i] is what shares booked of card i, and CardRoom[i] what
	// it has left for one (its memory less that, and less what is in use
	// outside the books).
	CardBooked []int64
	CardRoom   []int64
	// Grants are the outstanding grants, by ID; a share's name its card.
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
		CardBooked:  slices.Clone(b.gpuBooked),
		CardRoom:    make([]int64, len(b.gpuHolder)),
		Grants:      make([]Grant, 0, len(b.grants)),
	}
	for i, id := range b.gpuHolder {
		if id != 0 {
			s.CardHolders[i] = b.grants[id].Holder
		}
		s.CardRoom[i] = b.shareRoom(i)
	}
	for _, g := range b.grants {
		s.Grants = append(s.Grants, g)
	}
	slices.SortFunc(s.Grants, func(a, b Grant) int { return cmp.Compare(a.ID, b.ID) })
	return s
}

// bound is a running grant that will certainly have ended by until (Unix
// nanoseconds): what the Placer needs to know of it to plan, and no more.
type bound struct {
	until int64
	r     Resources
	// cards are the grant's cards (its own list, never written): which
	// cards its end frees, or whose memory.
	cards []int
}

// plan is a Book's state as the Placer plans the head's start: what is
// free now, each card's state, and the bounded grants, soonest end first.
type plan struct {
	free  Resources
	ends  []bound
	cards []cardPlan
}

// cardPlan is one card as a plan sees it.
type cardPlan struct {
	held, off bool  // held whole; off for whole grants
	booked    int64 // by shares
	outside   int64 // in use outside the books
	mem       int64 // its memory, 0 where unknown
}

// planningState fills st (reusing its lists, so that a decision allocates
// nothing) with what the Placer needs to work out when the head of its
// queue can start. The caller holds the Placer's mutex; this takes the
// Book's.
func (b *Book) planningState(st *plan) {
	b.mu.Lock()
	defer b.mu.Unlock()
	st.free = b.free()
	st.ends, st.cards = st.ends[:0], st.cards[:0]
	for i, id := range b.gpuHolder {
		st.cards = append(st.cards, cardPlan{held: id != 0, off: b.gpuOff[i], booked: b.gpuBooked[i],
			outside: b.gpuOutside[i], mem: b.capacity.cardMem(i)})
	}
	for _, g := range b.grants {
		if !g.Until.IsZero() {
			st.ends = append(st.ends, bound{until: g.Until.UnixNano(), r: g.Resources(), cards: g.GPUs})
		}
	}
	slices.SortFunc(st.ends, func(a, b bound) int { return cmp.Compare(a.until, b.until) })
}
