package accounting

import (
	"cmp"
	"container/heap"
	"context"
	"slices"
	"sync"
	"time"
)

// Clock tells the Placer the time; time.Now in production.
type Clock func() time.Time

// Placer holds the books of every machine and is where requests wait.
//
// The policy, in full:
//   - A request that no machine could grant even when idle fails at once with
//     an *UnplaceableError: a silent wait for a card that does not exist is
//     the failure this package exists to prevent.
//   - Waiters are ordered by priority (higher first), then by arrival
//     (Request.Arrived, where a request is queued again). A
//     person's jobs (Request.Owner) are at priority 0 among everyone's, and
//     their own priorities order them among themselves; between the jobs of
//     different owners at equal priority, the owner holding least (cards,
//     then cores, then memory) goes first: fair share.
//   - An owner's quota bounds what their jobs hold together: a job that would
//     take its owner past it waits, and holds nothing back for itself; one
//     larger than the quota fails at once, as one larger than any machine,
//     and so does one that would escape it by asking for none of what it
//     bounds (no cores: unaccounted; no memory, where memory is bounded).
//   - The head of the queue holds back, on the machine where it can start
//     soonest, the free part of what it asked for. Everyone behind it may only
//     use what remains, so a stream of 1-card jobs cannot starve a 4-card one.
//   - EASY backfill: where running grants have an Until, the head's earliest
//     start is known; a waiter whose own Limit ends it by then may also use
//     what the head holds back, since it will be gone before the head can
//     start. Unbounded requests never backfill.
//
// A decision looks at waiters grouped by shape (same resources and Limit):
// when one of a shape does not fit, none behind it will in the same pass, so
// the cost of a decision grows with the number of distinct shapes, not the
// length of the queue.
type Placer struct {
	now Clock

	// mu guards everything below. Lock order: mu first, then a Book's mutex.
	// A Book calls back into the Placer (onRelease) only after releasing its
	// own mutex, so the order is never reversed.
	mu     sync.Mutex
	books  []*Book
	shapes map[shape]*shapeQueue
	queue  shapeHeap // the non-empty shape queues, by their first waiter
	seq    uint64
	count  int
	head   headPlan // what the last decision worked out for the head
	// holds counts the Holds not yet released: while any is, nothing is
	// placed.
	holds int
	// quotas bound each owner's jobs; others have fallback. The
	// administrators' jobs (owner "") have none.
	quotas   map[string]Quota
	fallback Quota
	// held is what each owner holds over every book, as a decision sees
	// it: taken at its start, kept up by its own grants. Only while
	// owners wait (ownedShapes > 0): without them nothing orders by it.
	held map[string]Resources
	// ownedShapes counts the shape queues of owners' waiters.
	ownedShapes int
	// cardMem is the memory of the largest card of every machine, 0
	// where none is known: a card's worth of shares, for quotas and fair
	// share.
	cardMem int64
	// planned and played are a decision's scratch (planAround), kept so
	// that deciding allocates nothing.
	planned plan
	played  []cardPlan
	kept    []int
}

// fairShare reports whether owners' jobs wait, so that what each owner
// holds orders the queue and their quotas hold them back. The caller
// holds p.mu.
func (p *Placer) fairShare() bool { return p.ownedShapes > 0 }

// NewPlacer returns a Placer with no machines; add them with AddMachine.
func NewPlacer(clock Clock) *Placer {
	p := &Placer{now: clock, shapes: make(map[shape]*shapeQueue), fallback: NoQuota, held: map[string]Resources{}}
	p.queue.p = p
	return p
}

// SetQuotas sets the quota of each owner named, and the one of every other
// owner (NoQuota for none), then lets the queue move: a quota raised may
// let waiters start. A waiter that a quota lowered past what it asks is
// not failed here: it waits, and its owner's caller submits it again to
// learn that it is unplaceable.
func (p *Placer) SetQuotas(byOwner map[string]Quota, fallback Quota) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.quotas, p.fallback = byOwner, fallback
	p.dispatch()
}

// quotaOf is owner's quota. The caller holds p.mu.
func (p *Placer) quotaOf(owner string) Quota {
	if owner == "" {
		return NoQuota
	}
	if q, ok := p.quotas[owner]; ok {
		return q
	}
	return p.fallback
}

// QuotaOf is owner's quota.
func (p *Placer) QuotaOf(owner string) Quota {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.quotaOf(owner)
}

// CardMem is the memory a card counts as where a quota's gpus bound
// shares of cards: the largest card's; 0 where no card's is known.
func (p *Placer) CardMem() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cardMem
}

// QuotaHeld is owner's quota, and what their jobs hold now.
func (p *Placer) QuotaHeld(owner string) (Quota, Resources) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.quotaOf(owner), p.heldOver(owner)
}

// QuotaWait says, for a request that would take its owner past their quota
// now, what the owner holds and the quota; false when the quota allows it.
func (p *Placer) QuotaWait(req Request) (QuotaWait, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	q := p.quotaOf(req.Owner)
	held := p.heldOver(req.Owner)
	if q.allows(held, req.Resources, p.cardMem) {
		return QuotaWait{}, false
	}
	return QuotaWait{Owner: req.Owner, Held: held, Quota: q}, true
}

// heldOver is what owner holds over every book. The caller holds p.mu.
func (p *Placer) heldOver(owner string) Resources {
	var r Resources
	for _, b := range p.books {
		r = r.Plus(b.Held(owner))
	}
	return r
}

// refreshHeld takes what every owner holds, for a decision. The caller
// holds p.mu.
func (p *Placer) refreshHeld() {
	clear(p.held)
	for _, b := range p.books {
		b.mu.Lock()
		for owner, r := range b.byOwner {
			p.held[owner] = p.held[owner].Plus(r)
		}
		b.mu.Unlock()
	}
}

// AddMachine opens a Book for a machine and offers it to the waiters at once.
// Give grants back to the Book that granted them.
func (p *Placer) AddMachine(c Capacity) *Book {
	b := NewBook(c, p.released)
	p.mu.Lock()
	defer p.mu.Unlock()
	p.books = append(p.books, b)
	p.cardMem = max(p.cardMem, c.LargestCardMem())
	p.dispatch()
	return b
}

// Wait blocks until req is granted, and returns the Book that granted it; the
// caller gives the grant back to that Book when the run has ended.
//
// Outcomes:
//   - (book, grant, nil): granted.
//   - (nil, _, *UnplaceableError): no machine could ever grant it; returned
//     at once, without waiting.
//   - (nil, _, ctx.Err()): cancelled while waiting. Nothing is held: a grant
//     that arrived as the context ended is given back before returning.
func (p *Placer) Wait(ctx context.Context, req Request) (*Book, Grant, error) {
	if err := ctx.Err(); err != nil {
		return nil, Grant{}, err
	}
	ch := make(chan placed, 1)
	t, err := p.Submit(req, func(b *Book, g Grant) { ch <- placed{b, g} })
	if err != nil {
		return nil, Grant{}, err
	}
	return t.await(ctx, ch)
}

type placed struct {
	book  *Book
	grant Grant
}

// await is the waiting half of Wait.
func (t *Ticket) await(ctx context.Context, ch <-chan placed) (*Book, Grant, error) {
	select {
	case r := <-ch:
		return r.book, r.grant, nil
	case <-ctx.Done():
	}
	if t.Cancel() {
		return nil, Grant{}, ctx.Err()
	}
	// Granted in the instant the context ended. The caller is gone, so the
	// grant goes back.
	r := <-ch
	_ = r.book.Give(r.grant)
	return nil, Grant{}, ctx.Err()
}

// Ticket is a request waiting in the Placer, as Submit returns it.
type Ticket struct {
	p *Placer
	w *waiter
}

// Submit queues req and returns at once, without a goroutine waiting on it:
// a daemon with ten thousand waiting jobs holds ten thousand small records,
// not ten thousand stacks. granted is called exactly once, when the request
// is granted — possibly before Submit returns — with the Placer's lock held:
// it must not block and must not call the Placer or a Book (hand the grant
// to another goroutine instead).
//
// An *UnplaceableError is returned at once when no machine could ever grant
// req; granted is then never called.
func (p *Placer) Submit(req Request, granted func(*Book, Grant)) (*Ticket, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.admissible(req); err != nil {
		return nil, err
	}
	return &Ticket{p: p, w: p.enqueue(req, granted)}, nil
}

// Placeable returns the *UnplaceableError Submit would return for req, or
// nil: whether it could ever be granted, on these machines and under its
// owner's quota. It queues nothing.
func (p *Placer) Placeable(req Request) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.admissible(req)
}

// admissible is Placeable; the caller holds p.mu.
func (p *Placer) admissible(req Request) error {
	if err := p.placeable(req.Resources); err != nil {
		return err
	}
	if q := p.quotaOf(req.Owner); !q.within(req.Resources, p.cardMem) || q.escapedBy(req.Resources) {
		return &UnplaceableError{Asked: req.Resources, Largest: p.largest(), Owner: req.Owner, Quota: &q}
	}
	return nil
}

// Cancel withdraws the request. It reports true when the request was still
// waiting and nothing was granted; false when it had been granted already
// (granted was called, and the grant is the caller's to give back).
func (t *Ticket) Cancel() bool {
	p := t.p
	p.mu.Lock()
	defer p.mu.Unlock()
	if t.w.done {
		return false
	}
	wasHead := p.head.w == t.w
	p.remove(t.w)
	t.w.done = true
	if wasHead {
		// Only the head holds anything back; once it leaves, what it held
		// may let others start. Any other waiter's leaving frees nothing.
		p.dispatch()
	}
	return true
}

// placeable returns an *UnplaceableError when no machine could ever grant r.
// The caller holds p.mu.
func (p *Placer) placeable(r Resources) error {
	for _, b := range p.books {
		if b.Fits(r) {
			return nil
		}
	}
	return &UnplaceableError{Asked: r, Largest: p.largest()}
}

// largest is the machine that comes closest to any request. The caller
// holds p.mu.
func (p *Placer) largest() Capacity {
	var largest Capacity
	for i, b := range p.books {
		if i == 0 || larger(b.capacity, largest) {
			largest = b.capacity
		}
	}
	return largest
}

// larger orders machines for messages: cards first, then cores, then memory.
func larger(a, b Capacity) bool {
	if a.GPUs != b.GPUs {
		return a.GPUs > b.GPUs
	}
	if a.CPUs() != b.CPUs() {
		return a.CPUs() > b.CPUs()
	}
	return !a.RAMKnown && b.RAMKnown || a.RAMBytes > b.RAMBytes
}

// released is every Book's release callback.
func (p *Placer) released() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.dispatch()
}

// Waiter is one waiting request, as Waiting reports it.
type Waiter struct {
	Request
	// Position is 0 for the head of the queue.
	Position int
	Since    time.Time
	// For the head only: the machine where it will start, and its earliest
	// start when the running grants' limits tell it (zero otherwise).
	Machine       string
	ExpectedStart time.Time
	// For the head only, what it keeps there of what is free: the cards
	// it asks whole, and for a share, KeptShareBytes of card
	// KeptShareCard. A later job takes them only where it is certain to
	// end before the head starts.
	KeptCards      []int
	KeptShareCard  int
	KeptShareBytes int64
}

// Waiting returns the queue in order, head first.
func (p *Placer) Waiting() []Waiter {
	p.mu.Lock()
	defer p.mu.Unlock()
	all := make([]*waiter, 0, p.count)
	for _, q := range p.shapes {
		all = append(all, q.waiters...)
	}
	p.refreshHeld()
	slices.SortFunc(all, func(a, b *waiter) int {
		if p.before(a, b) {
			return -1
		}
		return 1
	})
	out := make([]Waiter, len(all))
	for i, w := range all {
		out[i] = p.view(w)
		out[i].Position = i
	}
	return out
}

// Positions is each waiter's place in the machine's queue, by holder, 1
// for the first: Waiting's order, without a view of each. A waiter its
// owner's quota holds back has none: it waits for their own jobs to end,
// not for its turn, and the queue passes it by (trial AR: the head was
// told it was 2nd in line, behind such a job, and the job after it that
// the head was first).
func (p *Placer) Positions() map[string]int {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.refreshHeld()
	all := make([]*waiter, 0, p.count)
	for _, q := range p.shapes {
		for _, w := range q.waiters {
			if p.quotaAllows(w) {
				all = append(all, w)
			}
		}
	}
	if len(all) == 0 {
		return nil
	}
	slices.SortFunc(all, func(a, b *waiter) int {
		if p.before(a, b) {
			return -1
		}
		return 1
	})
	out := make(map[string]int, len(all))
	for i, w := range all {
		out[w.req.Holder] = i + 1
	}
	return out
}

// view is w as Waiting and Head show it, the head's plan included. The
// caller holds p.mu.
func (p *Placer) view(w *waiter) Waiter {
	out := Waiter{Request: w.req, Since: w.since}
	if w != p.head.w {
		return out
	}
	out.Machine = p.head.book.capacity.Name
	if p.head.known {
		out.ExpectedStart = p.head.at
	}
	keep := p.head.keep
	out.KeptCards = slices.Clone(keep.Cards)
	if keep.GPUMemBytes > 0 {
		out.KeptShareCard, out.KeptShareBytes = keep.Card, keep.GPUMemBytes
	}
	return out
}

// Head returns the head of the queue, with its machine and its earliest
// start where the running grants' limits tell it; false when nothing waits.
// It is Waiting()[0] without sorting the whole queue.
func (p *Placer) Head() (Waiter, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	w := p.head.w
	if w == nil {
		if p.queue.Len() == 0 {
			return Waiter{}, false
		}
		w = p.queue.qs[0].waiters[0]
	}
	return p.view(w), true
}

// shape is what makes two requests interchangeable to the Placer: the
// same resources and limit, and the same owner (whose quota and share are
// one for all their waiters).
type shape struct {
	Resources
	Limit time.Duration
	Owner string
}

type waiter struct {
	req   Request
	seq   uint64
	since time.Time
	// granted is told of the grant, under Placer.mu; done is set then, or
	// when the waiter was cancelled.
	granted func(*Book, Grant)
	done    bool
	grant   Grant
	book    *Book

	q     *shapeQueue
	index int // in q.waiters
}

// before orders the waiters of one owner: higher priority first, then
// earlier arrival.
func (w *waiter) before(o *waiter) bool {
	if w.req.Priority != o.req.Priority {
		return w.req.Priority > o.req.Priority
	}
	return w.arrivedBefore(o)
}

// arrivedBefore says whether w arrived before o: by when each began to
// wait, then, for two at one instant, by their Order, then by the order the
// Placer took them.
func (w *waiter) arrivedBefore(o *waiter) bool {
	if !w.since.Equal(o.since) {
		return w.since.Before(o.since)
	}
	if w.req.Order != o.req.Order {
		return w.req.Order < o.req.Order
	}
	return w.seq < o.seq
}

// globalPriority is w's priority among everyone's: an administrator's job
// has its own, a person's job 0.
func (w *waiter) globalPriority() int {
	if w.req.Owner != "" {
		return 0
	}
	return w.req.Priority
}

// before orders any two waiters: by priority among everyone's, then (of
// two owners) the one holding least first, then as their owner orders them
// (of one owner), then by arrival. The caller holds p.mu, with p.held up
// to date.
func (p *Placer) before(a, b *waiter) bool {
	if ga, gb := a.globalPriority(), b.globalPriority(); ga != gb {
		return ga > gb
	}
	if a.req.Owner != b.req.Owner {
		if c := compareHeld(p.held[a.req.Owner], p.held[b.req.Owner], p.cardMem); c != 0 {
			return c < 0
		}
		return a.arrivedBefore(b)
	}
	return a.before(b)
}

// compareHeld orders holdings for fair share: fewer cards, a share
// counting as its part of a card of cardMem bytes (the largest card's;
// where it is unknown, cards and then card memory), then fewer cores,
// then less memory.
func compareHeld(a, b Resources, cardMem int64) int {
	if cardMem > 0 {
		if c := cmp.Compare(int64(a.GPUs)*cardMem+a.GPUMemBytes, int64(b.GPUs)*cardMem+b.GPUMemBytes); c != 0 {
			return c
		}
	} else {
		if a.GPUs != b.GPUs {
			return a.GPUs - b.GPUs
		}
		if c := cmp.Compare(a.GPUMemBytes, b.GPUMemBytes); c != 0 {
			return c
		}
	}
	if a.CPUs != b.CPUs {
		return a.CPUs - b.CPUs
	}
	return cmp.Compare(a.RAMBytes, b.RAMBytes)
}

// quotaAllows says whether w's owner may take what it asks now. The
// caller holds p.mu, with p.held up to date.
func (p *Placer) quotaAllows(w *waiter) bool {
	return p.quotaOf(w.req.Owner).allows(p.held[w.req.Owner], w.req.Resources, p.cardMem)
}

// headPlan is the head's reservation as the last decision made it.
type headPlan struct {
	w     *waiter
	book  *Book     // where the head will start
	keep  holdBack  // what it holds back there
	at    time.Time // its earliest start, when known
	known bool
}

// enqueue adds a waiter and lets the queue move. The caller holds p.mu.
func (p *Placer) enqueue(req Request, granted func(*Book, Grant)) *waiter {
	p.seq++
	w := &waiter{req: req, seq: p.seq, since: req.Arrived, granted: granted}
	if w.since.IsZero() {
		w.since = p.now()
	}
	key := shape{Resources: req.Resources, Limit: req.Limit, Owner: req.Owner}
	q := p.shapes[key]
	if q == nil {
		q = &shapeQueue{key: key, index: -1}
		p.shapes[key] = q
		if key.Owner != "" {
			p.ownedShapes++
		}
	}
	w.q = q
	heap.Push((*waiterHeap)(&q.waiters), w)
	if p.fairShare() {
		p.refreshHeld()
	}
	if q.index < 0 {
		heap.Push(&p.queue, q)
	} else {
		heap.Fix(&p.queue, q.index)
	}
	p.count++
	p.dispatch()
	return w
}

// remove takes w out of the queue. The caller holds p.mu.
func (p *Placer) remove(w *waiter) {
	q := w.q
	heap.Remove((*waiterHeap)(&q.waiters), w.index)
	w.q = nil
	p.count--
	switch {
	case len(q.waiters) == 0:
		if q.index >= 0 {
			heap.Remove(&p.queue, q.index)
		}
		delete(p.shapes, q.key)
		if q.key.Owner != "" {
			p.ownedShapes--
		}
	case q.index >= 0:
		heap.Fix(&p.queue, q.index)
	}
	if p.head.w == w {
		p.head = headPlan{}
	}
}

// deliver hands w its grant and wakes it. The caller holds p.mu.
func (p *Placer) deliver(w *waiter, b *Book, g Grant) {
	p.remove(w)
	w.book, w.grant, w.done = b, g, true
	if w.granted != nil {
		w.granted(b, g)
	}
	if p.fairShare() {
		// What the owner holds orders the owners' queues: they move.
		p.held[w.req.Owner] = p.held[w.req.Owner].Plus(g.Resources())
		heap.Init(&p.queue)
	}
}

// Hold stops the placing of anyone until the returned release is called
// (once; later calls do nothing): requests that arrive together, each from
// its own goroutine, are placed in the queue's order (priority, then
// arrival) rather than in the order they happened to reach the Placer.
func (p *Placer) Hold() (release func()) {
	p.mu.Lock()
	p.holds++
	p.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			p.mu.Lock()
			defer p.mu.Unlock()
			if p.holds--; p.holds == 0 {
				p.dispatch()
			}
		})
	}
}

// dispatch starts whoever can start now, in order. The caller holds p.mu.
func (p *Placer) dispatch() {
	if p.holds > 0 {
		return // Hold: the release decides
	}
	p.head = headPlan{}
	if len(p.books) == 0 {
		return
	}
	if p.fairShare() {
		// Holdings moved since the last decision: so does the order.
		p.refreshHeld()
		heap.Init(&p.queue)
	}
	now := p.now()
	// Owners at their quota wait without holding anything back: the head
	// is the first waiter that may start once there is room.
	var blocked []*shapeQueue
	defer func() {
		for _, q := range blocked {
			heap.Push(&p.queue, q)
		}
	}()
	for p.queue.Len() > 0 {
		head := p.queue.qs[0].waiters[0]
		if !p.quotaAllows(head) {
			blocked = append(blocked, heap.Pop(&p.queue).(*shapeQueue))
			continue
		}
		if !p.grantAround(head, now, headPlan{}) {
			p.planAround(head, now)
			return
		}
	}
}

// planAround sets the head's reservation, then offers what is left to the
// rest of the queue in order. The caller holds p.mu.
func (p *Placer) planAround(head *waiter, now time.Time) {
	plan := headPlan{w: head}
	for _, b := range p.books {
		if !b.Fits(head.req.Resources) {
			continue
		}
		st := &p.planned
		b.planningState(st)
		p.played = append(p.played[:0], st.cards...)
		start := st.earliestStart(head.req.Resources, now, b.capacity.RAMKnown, p.played)
		if plan.book == nil || start.known && (!plan.known || start.at.Before(plan.at)) {
			// One machine's plan at a time: the names are kept in a
			// buffer of the placer's, the last chosen one's.
			keep := st.heldBack(head.req.Resources, start, p.played, p.kept)
			p.kept = keep.Cards
			plan = headPlan{w: head, book: b, keep: keep, at: start.at, known: start.known}
		}
	}
	p.head = plan

	// Shapes are set aside as soon as one of their waiters does not fit: the
	// free resources only shrink during a pass, and an owner's holdings only
	// grow. The head's own shape goes first: nothing of it fits anywhere now.
	aside := []*shapeQueue{heap.Pop(&p.queue).(*shapeQueue)}
	for p.queue.Len() > 0 {
		q := p.queue.qs[0]
		if !p.quotaAllows(q.waiters[0]) || !p.grantAround(q.waiters[0], now, plan) {
			aside = append(aside, heap.Pop(&p.queue).(*shapeQueue))
		}
	}
	for _, q := range aside {
		heap.Push(&p.queue, q)
	}
}

// grantAround tries each machine in order and delivers the first grant. On
// the head's machine, w may only use what the head does not hold back,
// unless w is certain to end before the head can start. The caller holds p.mu.
func (p *Placer) grantAround(w *waiter, now time.Time, plan headPlan) bool {
	backfill := plan.known && w.req.Limit > 0 && !now.Add(w.req.Limit).After(plan.at)
	for _, b := range p.books {
		var keep holdBack
		if b == plan.book && !backfill {
			keep = plan.keep
		}
		if g, ok := b.takeKeeping(w.req, now, keep); ok {
			p.deliver(w, b, g)
			return true
		}
	}
	return false
}

// start is when the head could start, as a plan works it out.
type start struct {
	at    time.Time
	known bool
	// card, for a share, is the card it would start on; -1 otherwise.
	card int
}

// earliestStart is when r could start, if every bounded grant ends at its
// Until and no unbounded one ends at all. The grants' ends are played card
// by card, on cards (a copy of st.cards, which it leaves as they are at
// that start): a card held whole is free for a share once its holder
// ends, and free whole once the last share on it has.
func (st *plan) earliestStart(r Resources, now time.Time, countRAM bool, cards []cardPlan) start {
	avail := st.free
	whole := 0 // the cards whole, kept up as the ends free them
	for _, cp := range cards {
		if cp.whole() {
			whole++
		}
	}
	for _, e := range st.ends {
		avail.CPUs += e.r.CPUs
		avail.RAMBytes += e.r.RAMBytes
		for _, c := range e.cards {
			was := cards[c].whole()
			if e.r.GPUMemBytes > 0 {
				cards[c].booked -= e.r.GPUMemBytes
			} else {
				cards[c].held = false
			}
			if !was && cards[c].whole() {
				whole++
			}
		}
		if r.CPUs > avail.CPUs || countRAM && r.RAMBytes > avail.RAMBytes {
			continue
		}
		at := later(now, time.Unix(0, e.until))
		if r.Shares() {
			if c := bestRoom(r.GPUMemBytes, cards); c >= 0 {
				return start{at: at, known: true, card: c}
			}
			continue
		}
		if r.GPUs <= whole {
			return start{at: at, known: true, card: -1}
		}
	}
	return start{card: -1}
}

// whole says the card is free to be granted whole.
func (cp cardPlan) whole() bool { return !cp.held && cp.booked == 0 && !cp.off }

// room is what a card has for a share.
func (cp cardPlan) room() int64 {
	if cp.held || cp.mem <= 0 {
		return 0
	}
	return cp.mem - cp.booked - cp.outside
}

// bestRoom is the card with the most room for a share, if it has at
// least n; else -1.
func bestRoom(n int64, cards []cardPlan) int {
	best := -1
	for c, cp := range cards {
		if room := cp.room(); room >= n && (best < 0 || room > cards[best].room()) {
			best = c
		}
	}
	return best
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// heldBack is what the head keeps of what is free: of cores and memory,
// as much of its request as is free now; for whole cards, cards by name
// (pickCards); for a share, the room now on the card where it will start
// (when its start is known), or on the card with the most room. played
// is the cards as earliestStart left them; buf is reused for the names.
func (st *plan) heldBack(r Resources, s start, played []cardPlan, buf []int) holdBack {
	free := st.free
	keep := holdBack{Resources: Resources{
		CPUs:     max(0, min(r.CPUs, free.CPUs)),
		RAMBytes: max(0, min(r.RAMBytes, free.RAMBytes)),
	}}
	switch {
	case r.GPUs > 0:
		keep.Cards = st.pickCards(r.GPUs, s, played, buf[:0])
	case r.Shares():
		card := s.card
		if card < 0 {
			card = bestRoom(1, st.cards)
		}
		if card >= 0 {
			keep.Card = card
			keep.GPUMemBytes = max(0, min(r.GPUMemBytes, st.cards[card].room()))
		}
	}
	return keep
}

// pickCards names the n cards a head that asks whole cards keeps: the
// cards whole now, lowest first; then, where its start is known, the
// shared ones that are whole by then (played), as many as it needs beside
// those and the ones held whole now (which stay held until they are given
// back, when the head goes first); where it is not, the cards off now and
// then the shared ones, least booked first, so that shares that keep
// coming cannot keep a card from it for ever.
func (st *plan) pickCards(n int, s start, played []cardPlan, out []int) []int {
	for c, cp := range st.cards {
		if len(out) < n && cp.whole() {
			out = append(out, c)
		}
	}
	if s.known {
		need := n - len(out)
		for c, cp := range st.cards {
			if cp.held && played[c].whole() {
				need-- // freed by then, and held till then
			}
		}
		for c, cp := range st.cards {
			if need > 0 && cp.booked > 0 && played[c].whole() {
				out = append(out, c)
				need--
			}
		}
		return out
	}
	for c, cp := range st.cards {
		if len(out) < n && !cp.held && cp.booked == 0 && cp.off {
			out = append(out, c)
		}
	}
	for len(out) < n {
		least := -1
		for c, cp := range st.cards {
			if !cp.held && cp.booked > 0 && !slices.Contains(out, c) && (least < 0 || cp.booked < st.cards[least].booked) {
				least = c
			}
		}
		if least < 0 {
			break
		}
		out = append(out, least)
	}
	return out
}

// shapeQueue holds the waiters of one shape, best first.
type shapeQueue struct {
	key     shape
	waiters []*waiter // a heap by waiter.before
	index   int       // in Placer.queue, -1 when not in it
}

type waiterHeap []*waiter

func (h waiterHeap) Len() int           { return len(h) }
func (h waiterHeap) Less(i, j int) bool { return h[i].before(h[j]) }
func (h waiterHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index, h[j].index = i, j
}
func (h *waiterHeap) Push(x any) {
	w := x.(*waiter)
	w.index = len(*h)
	*h = append(*h, w)
}
func (h *waiterHeap) Pop() any {
	old := *h
	w := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	w.index = -1
	return w
}

// shapeHeap orders the shape queues by their first waiters, as the Placer
// orders waiters (Placer.before, which reads what owners hold).
type shapeHeap struct {
	qs []*shapeQueue
	p  *Placer
}

func (h *shapeHeap) Len() int           { return len(h.qs) }
func (h *shapeHeap) Less(i, j int) bool { return h.p.before(h.qs[i].waiters[0], h.qs[j].waiters[0]) }
func (h *shapeHeap) Swap(i, j int) {
	h.qs[i], h.qs[j] = h.qs[j], h.qs[i]
	h.qs[i].index, h.qs[j].index = i, j
}
func (h *shapeHeap) Push(x any) {
	q := x.(*shapeQueue)
	q.index = len(h.qs)
	h.qs = append(h.qs, q)
}
func (h *shapeHeap) Pop() any {
	old := h.qs
	q := old[len(old)-1]
	old[len(old)-1] = nil
	h.qs = old[:len(old)-1]
	q.index = -1
	return q
}
