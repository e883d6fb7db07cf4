package supervisor

import (
	"container/heap"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/berthd/berth/luaapi"
	"github.com/berthd/berth/supervisor/store"
)

// An array (array = N) is one job per index, named NAME[INDEX]: each has
// its own life, placement, runs and record, as any job, so that once per
// definition, a restart's adoption and the logs hold per index. In front
// of the placer the array has a gate of its own, behind the dependency
// gate: at most max_parallel of its indices hold a place (wait in the
// placer's queue, start or run), and only one of them waits in the
// placer's queue at a time. The array thus takes one job's place in the
// queue: its next index queues behind the jobs that came meanwhile, the
// reservation and backfill see one waiter, and 10 000 indices cost the
// placer what one job does. Indices are let in lowest first.

// memberName is the name of index i of array name.
func memberName(name string, i int) string {
	return name + "[" + strconv.Itoa(i) + "]"
}

// splitMember takes NAME[INDEX] apart; ok is false for a name that is not
// an index of an array (a job name never holds a bracket).
func splitMember(name string) (array string, index int, ok bool) {
	open := strings.IndexByte(name, '[')
	if open < 0 || !strings.HasSuffix(name, "]") {
		return "", 0, false
	}
	i, err := strconv.Atoi(name[open+1 : len(name)-1])
	if err != nil {
		return "", 0, false
	}
	return name[:open], i, true
}

// array is one array's indices and its gate.
type array struct {
	name string

	mu  sync.Mutex // guards everything below
	def *luaapi.Job
	// members are the index jobs, by index.
	members map[int]*job
	// states are the members' states as they last published them, and
	// counts the same, by state: what status shows without a look at
	// each member.
	states map[int]store.State
	counts map[store.State]int
	// records are the members' done records as they last published
	// them, unrecorded how many are "", and record the array's, made of
	// them (doneRecord) once recordFresh: kept, as dependants look at it
	// each time an index publishes, which thousands may do at once.
	records     map[int]string
	unrecorded  int
	record      string
	span        luaapi.Range // the indices record is made of (doneSpan)
	recordFresh bool
	since       time.Time
	// last is how the index that last came to rest failed, and the one
	// that last came to rest stopped, ended.
	last restEnds
	// was is the array's state as a whole when since was set.
	was store.State
	// redefs are its indices' (job.redefs), together: while any is on
	// its way, the array is about to run anew. settled counts the times
	// they came back to 0 (job.settled).
	redefs  int
	settled uint64

	// The gate. slots are the indices that hold a place; queued, when
	// hasQueued, the one in the placer's queue. asking are those that wait
	// for the gate, lowest first through order (which keeps indices no
	// longer asking until they are popped). pending are those let in
	// whose word of it is still in their mailbox.
	slots     map[int]bool
	queued    int
	hasQueued bool
	asking    map[int]bool
	order     indexHeap
	pending   map[int]bool
	// leaving are indices the range lost while they held a place: their
	// jobs keep it until they have stopped (sync), so that the indices
	// let in meanwhile never make more than max_parallel.
	leaving map[*job]bool

	// tellMu serialises tell, from looking at the array to noting what
	// the dependants were told (told): two indices publishing at once
	// must not leave an older picture noted.
	tellMu sync.Mutex
	told   toldKey
	// upstreamNew is job.upstreamNew of the array as a whole, under
	// tellMu: its dependants are told once when it changes, not once by
	// each index (the review: an array after an array was told N×M times).
	upstreamNew string
}

func newArray(def *luaapi.Job) *array {
	return &array{
		name: def.Name, def: def,
		members: map[int]*job{}, states: map[int]store.State{}, counts: map[store.State]int{}, records: map[int]string{},
		slots: map[int]bool{}, asking: map[int]bool{}, pending: map[int]bool{}, leaving: map[*job]bool{},
	}
}

// indexHeap is a min-heap of indices.
type indexHeap []int

func (h indexHeap) Len() int           { return len(h) }
func (h indexHeap) Less(a, b int) bool { return h[a] < h[b] }
func (h indexHeap) Swap(a, b int)      { h[a], h[b] = h[b], h[a] }
func (h *indexHeap) Push(x any)        { *h = append(*h, x.(int)) }
func (h *indexHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// ask puts index i in line for the gate. The caller holds a.mu.
func (a *array) ask(i int) {
	if !a.asking[i] {
		a.asking[i] = true
		heap.Push(&a.order, i)
	}
}

// firstAsking is the lowest index in line, dropping those no longer in
// it. The caller holds a.mu.
func (a *array) firstAsking() (int, bool) {
	for a.order.Len() > 0 {
		if i := a.order[0]; a.asking[i] {
			return i, true
		}
		heap.Pop(&a.order)
	}
	return 0, false
}

// room says whether one more index may take a place. The caller holds
// a.mu.
func (a *array) room() bool {
	return !a.hasQueued && (a.def.MaxParallel == 0 || a.held() < a.def.MaxParallel)
}

// held is how many places are held, by indices and by those leaving. The
// caller holds a.mu.
func (a *array) held() int { return len(a.slots) + len(a.leaving) }

// expect puts index i in line before its goroutine starts, so that the
// indices of a new array are let in lowest first rather than in the
// order their goroutines happen to run.
func (a *array) expect(i int) {
	a.mu.Lock()
	a.ask(i)
	a.mu.Unlock()
}

// post hands m to every index, lowest first. Those for which wants says
// m makes them wait are put in line first, so that the gate lets them in
// lowest first rather than in the order their goroutines read m.
func (a *array) post(m jobMessage, wants func(jobView) bool) {
	for _, j := range a.jobs() {
		if wants(j.view()) {
			a.expect(j.index)
		}
		j.in.post(m)
	}
}

// request is index i's wait meeting the gate: true lets it into the
// placer's queue (it then holds a place); false leaves it in line, to be
// told (admit) when its turn comes.
func (a *array) request(i int) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.members[i] == nil {
		return false // forgotten (the range lost it): it is stopping
	}
	delete(a.pending, i)
	if a.slots[i] && (!a.hasQueued || a.queued == i) {
		// Let in already (its word still on its way), or queueing again
		// from its place in the queue (its request changed).
		a.queued, a.hasQueued = i, true
		delete(a.asking, i)
		return true
	}
	if first, ok := a.firstAsking(); ok && first < i || !a.room() {
		a.ask(i)
		a.admitNext()
		return false
	}
	delete(a.asking, i)
	a.slots[i] = true
	a.queued, a.hasQueued = i, true
	return true
}

// admitNext lets the lowest index in line in, when there is room. The
// caller holds a.mu.
func (a *array) admitNext() {
	for a.room() {
		i, ok := a.firstAsking()
		if !ok {
			return
		}
		heap.Pop(&a.order)
		delete(a.asking, i)
		m := a.members[i]
		if m == nil {
			continue
		}
		a.slots[i] = true
		a.queued, a.hasQueued = i, true
		a.pending[i] = true
		m.in.post(jobMessage{admit: true})
	}
}

// sync is what index j published: its state, whether it waits for the
// gate (inLine), whether it waits in the placer's queue (inQueue), and how
// many new definitions it took since it last published (redefsTaken). A
// place is held while it waits in the queue, starts, runs or stops; one it
// no longer needs goes to the next in line.
func (a *array) sync(j *job, st store.State, since time.Time, end lastEnd, doneFP string, inLine, inQueue bool, redefsTaken int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.redefs -= redefsTaken
	if redefsTaken > 0 && a.redefs == 0 {
		a.settled++ // its dependants look again (tell), whatever it shows
	}
	i := j.index
	if a.members[i] != j {
		// Forgotten (the range lost it), or replaced: not counted; its
		// place, if it kept one, goes once it no longer holds it.
		if a.leaving[j] && !inQueue && !holdsPlace(st) {
			delete(a.leaving, j)
			a.admitNext()
		}
		return
	}
	if old, ok := a.states[i]; !ok || old != st {
		if ok {
			a.counts[old]--
		}
		a.states[i] = st
		a.counts[st]++
		switch {
		case !end.known:
		case st == store.StateFailed:
			a.last.failed = end
		case st == store.StateStopped:
			a.last.stopped = end
		}
		if whole := a.countsLocked().state(); whole != a.was {
			// Since is when the array as a whole came to its state,
			// not when an index last moved.
			a.was, a.since = whole, since
		}
	}
	a.setRecord(i, doneFP)
	if !inLine {
		delete(a.asking, i)
	}
	if a.pending[i] {
		if inLine {
			return // let in, and not yet told
		}
		delete(a.pending, i)
	}
	if inQueue || holdsPlace(st) {
		a.slots[i] = true
	} else {
		delete(a.slots, i)
	}
	if a.hasQueued && a.queued == i && !inQueue {
		a.hasQueued = false
	}
	a.admitNext()
}

// placed says index i left the placer's queue with a grant: it keeps its
// place, and the next in line may queue.
func (a *array) placed(i int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.members[i] == nil {
		return
	}
	if a.hasQueued && a.queued == i {
		a.hasQueued = false
	}
	a.admitNext()
}

// holdsPlace says whether an index in state s holds one of the array's
// places, besides waiting in the placer's queue.
func holdsPlace(s store.State) bool {
	return s == store.StateStarting || s == store.StateRunning || s == store.StateStopping
}

// join makes j index i of the array. The caller holds d.mu.
func (a *array) join(i int, j *job) {
	record := j.arrayRecord() // before a.mu: it looks at the parents
	a.mu.Lock()
	a.members[i] = j
	// Counted as it starts (new, or as it was left), before it first
	// publishes: the array is not done while an index has yet to run.
	st := j.life.state
	a.states[i] = st
	a.counts[st]++
	a.setRecord(i, record)
	if since := j.life.since; !since.IsZero() {
		// Restored as the last daemon left it: the array came to its
		// state when the last of its indices in that state did.
		if whole := a.countsLocked().state(); whole != a.was || st == whole && since.After(a.since) {
			a.was, a.since = whole, since
		}
	}
	a.mu.Unlock()
	j.arr, j.index = a, i
}

// forget takes index i out of the array (the range no longer has it): it
// counts no more, and the place it held goes to the next in line once its
// job, which stops as a removed job does, has stopped. The caller holds
// d.mu.
func (a *array) forget(i int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if j := a.members[i]; j != nil && a.slots[i] {
		// Queued, placed or running: its place goes once sync hears
		// it holds none.
		a.leaving[j] = true
	}
	delete(a.members, i)
	if st, ok := a.states[i]; ok {
		a.counts[st]--
		delete(a.states, i)
	}
	if r, ok := a.records[i]; ok {
		if r == "" {
			a.unrecorded--
		}
		delete(a.records, i)
		a.recordFresh = false
	}
	delete(a.asking, i)
	delete(a.pending, i)
	delete(a.slots, i)
	if a.hasQueued && a.queued == i {
		a.hasQueued = false
	}
	a.admitNext()
}

// redefine takes the array's new definition (its max_parallel may have
// grown). The caller holds d.mu.
func (a *array) redefine(def *luaapi.Job) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.def = def
	a.admitNext()
}

// jobs are the members, lowest index first.
func (a *array) jobs() []*job {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make([]*job, 0, len(a.members))
	for _, i := range slices.Sorted(maps.Keys(a.members)) {
		out = append(out, a.members[i])
	}
	return out
}

// restEnds are how the indices that last came to rest badly ended.
type restEnds struct{ failed, stopped lastEnd }

// gateWhy is why index i waits at the array's gate rather than in the
// machine's queue: every place max_parallel gives is taken, or another
// index is the array's one in the queue. "" where i is not at the gate.
func (a *array) gateWhy(i int) string {
	a.mu.Lock()
	defer a.mu.Unlock()
	switch {
	case !a.asking[i]:
		return ""
	case a.def.MaxParallel > 0 && a.held() >= a.def.MaxParallel:
		return msgIndexGated(a.def.MaxParallel)
	case a.hasQueued:
		return msgIndexBehind(memberName(a.name, a.queued))
	}
	return ""
}

// arrayCounts is how an array's indices stand.
type arrayCounts struct {
	size     int
	byState  map[store.State]int
	slots    int
	inLine   int
	since    time.Time
	last     restEnds
	def      *luaapi.Job
	queued   int
	isQueued bool
	// redefining: a new definition is on its way to an index; settled,
	// array.settled.
	redefining bool
	settled    uint64
}

func (a *array) snapshot() arrayCounts {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.countsLocked()
}

// countsLocked is snapshot for a caller that holds a.mu.
func (a *array) countsLocked() arrayCounts {
	c := arrayCounts{size: len(a.members), byState: make(map[store.State]int, len(a.counts)), slots: a.held(),
		inLine: len(a.asking), since: a.since, last: a.last, def: a.def, queued: a.queued, isQueued: a.hasQueued, redefining: a.redefs > 0, settled: a.settled}
	for s, n := range a.counts {
		if n > 0 {
			c.byState[s] = n
		}
	}
	return c
}

// state is the array's state as one job's: running while an index starts,
// runs or stops; waiting while one waits (or waits out a restart's delay);
// done once every index is; otherwise the worst way its indices rest.
func (c arrayCounts) state() store.State {
	n := c.byState
	switch {
	case n[store.StateRunning]+n[store.StateStarting] > 0:
		return store.StateRunning
	case n[store.StateStopping] > 0:
		return store.StateStopping
	case n[store.StateWaiting]+n[store.StateBackoff]+n[0] > 0:
		return store.StateWaiting
	case n[store.StateDone] == c.size:
		return store.StateDone
	}
	for _, s := range []store.State{store.StateFailed, store.StateUnplaceable, store.StateInvalid, store.StateStopped, store.StateDisabled} {
		if n[s] > 0 {
			return s
		}
	}
	return store.StateWaiting // no index at all: not done
}

// view is the array as a dependant sees a parent: one job, done when every
// index is done, with a done record that changes when any index's does.
// As a job's, the record stays while indices run again: a restart of the
// same definition changes nothing for the dependants, where the record
// of indices that ran a new one, once all are done, does.
func (a *array) view() jobView {
	c := a.snapshot()
	st := c.state()
	// How it ended is its indices': all exited 0 when it is done; else
	// how the last to come to its state (failed, stopped) ended, not an
	// index since run again or left out of the range.
	var last lastEnd
	switch st {
	case store.StateDone:
		last = lastEnd{known: true, reason: store.ReasonExited}
	case store.StateFailed:
		last = c.last.failed
	case store.StateStopped:
		last = c.last.stopped
	}
	return jobView{Def: c.def, State: st, Since: c.since, LastEnd: last, DoneFP: a.doneRecord(), Redefining: c.redefining, settled: c.settled}
}

// redefining counts a definition handed to an index and not yet taken
// (job.redefining); the index's sync counts it off, with the state it
// brought.
func (a *array) redefining() {
	a.mu.Lock()
	a.redefs++
	a.mu.Unlock()
}

// arrayRecord is the done record index j gives its array: its own, where
// it ran its definition to done; "" where it has yet to (trial BB: an
// index brought back by a range grown, done under an older definition,
// and those running a new one, made the array's record another, and its
// dependants ran again before the array had run anything to done).
// Nor one whose parents ran something new to done since (the review: the
// indices done again after a parent's new definition, beside those yet
// to, made a record of their own, and the array's dependant waited).
func (j *job) arrayRecord() string {
	if recordFP(j.doneFP) != j.defFP {
		return ""
	}
	if j.def == nil || len(j.def.After) == 0 {
		return j.doneFP
	}
	if parents, known := j.parentRecords(); known && parentsMoved(j.doneFP, parents) {
		return ""
	}
	return j.doneFP
}

// setRecord notes index i's done record. The caller holds a.mu.
func (a *array) setRecord(i int, r string) {
	old, ok := a.records[i]
	if ok && old == r {
		return
	}
	if ok && old == "" {
		a.unrecorded--
	}
	if r == "" {
		a.unrecorded++
	}
	a.records[i] = r
	a.recordFresh = false
}

// doneRecord is the done record of an array (arrayRecord): "" until every
// index has one. It is made again only once an index's has changed.
func (a *array) doneRecord() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.doneRecordLocked()
}

// doneSpan is the done record of the array, and the range of indices it
// is made of: those that joined it (a grown array's new indices join
// after its definition says the range; deps.spanned).
func (a *array) doneSpan() (string, luaapi.Range) {
	a.mu.Lock()
	defer a.mu.Unlock()
	record := a.doneRecordLocked()
	if record == "" {
		return "", luaapi.Range{}
	}
	return record, a.span
}

// doneRecordLocked is doneRecord, a.mu held.
func (a *array) doneRecordLocked() string {
	if a.unrecorded > 0 || len(a.records) == 0 {
		return ""
	}
	if !a.recordFresh {
		// Made again only once an index's has changed: a dependant's
		// every publish looks at it.
		indices := slices.Sorted(maps.Keys(a.records))
		records := make([]string, 0, len(indices))
		for _, i := range indices {
			records = append(records, a.records[i])
		}
		a.record, a.recordFresh = arrayRecord(records), true
		a.span = luaapi.Range{From: indices[0], To: indices[len(indices)-1]}
	}
	return a.record
}

// arrayRecord is the done record of an array whose indices' records are
// records, lowest index first: theirs when they agree (they ran one
// definition after the same parents), else a digest of them all, which
// changes with any of them.
func arrayRecord(records []string) string {
	if len(records) == 0 {
		return ""
	}
	same := true
	var all strings.Builder
	for _, r := range records {
		same = same && r == records[0]
		all.WriteString(r)
		all.WriteByte('\n')
	}
	if same {
		return records[0]
	}
	return "array:" + digest(all.String())
}

// retell says whether what runs anew upstream of the array (r, as
// depGraph.renewing finds it) changed since its dependants were last told,
// and notes that they are.
func (a *array) retell(r string) bool {
	a.tellMu.Lock()
	defer a.tellMu.Unlock()
	if r == a.upstreamNew {
		return false
	}
	a.upstreamNew = r
	return true
}

// tell says whether the array changed for its dependants since they were
// last told (its state or its done record), and notes that they are.
func (a *array) tell() bool {
	a.tellMu.Lock()
	defer a.tellMu.Unlock()
	v := a.view()
	now := toldKey{state: v.State, doneFP: v.DoneFP, redefining: v.Redefining, settled: v.settled}
	if now == a.told {
		return false
	}
	a.told = now
	return true
}
