package accounting

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/berthd/berth/supervisor/testkit"
)

// fakeClock is a clock that moves only when told.
type fakeClock struct {
	mu  sync.Mutex // guards now
	now time.Time
}

func newFakeClock() *fakeClock { return &fakeClock{now: epoch} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t
}

// queueUp adds a waiter without blocking, as Submit does.
func queueUp(p *Placer, req Request) *waiter {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.enqueue(req, nil)
}

// granted reports whether w was granted. The tests that use it run the
// Placer from one goroutine.
func granted(w *waiter) bool { return w.done && w.book != nil }

func bounded(r Request, limit time.Duration) Request {
	r.Limit = limit
	return r
}

func TestPlacerUnplaceableFailsAtOnce(t *testing.T) {
	p := NewPlacer(time.Now)
	p.AddMachine(machine(8, 2, 32*GiB))
	tests := []struct {
		name    string
		r       Resources
		message string
	}{
		{"cards", Resources{CPUs: 1, GPUs: 4}, "asks for 4 GPUs; this machine has 2"},
		{"cores", Resources{CPUs: 12}, "asks for 12 cores; this machine has 8"},
		{"memory", Resources{CPUs: 1, RAMBytes: 48 * GiB}, "asks for 48G of memory; this machine has 32G"},
		{"all", Resources{CPUs: 9, GPUs: 3, RAMBytes: 33 * GiB}, "asks for 9 cores, 3 GPUs and 33G of memory; this machine has 8 cores, 2 GPUs and 32G of memory"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := p.Wait(context.Background(), Request{Holder: "big", Resources: tt.r})
			var ue *UnplaceableError
			if !errors.As(err, &ue) {
				t.Fatalf("Wait = %v, want *UnplaceableError", err)
			}
			if ue.Asked != tt.r || ue.Largest.GPUs != 2 || ue.Largest.CPUs() != 8 {
				t.Errorf("error carries asked %+v largest %+v", ue.Asked, ue.Largest)
			}
			if err.Error() != tt.message {
				t.Errorf("message %q, want %q", err, tt.message)
			}
		})
	}
	if n := len(p.Waiting()); n != 0 {
		t.Errorf("%d waiters left after refusals", n)
	}
}

func TestPlacerGrantsAtOnceWhenFree(t *testing.T) {
	p := NewPlacer(time.Now)
	b := p.AddMachine(machine(4, 1, 0))
	got, g, err := p.Wait(context.Background(), ask("a", 2, 1, 0))
	if err != nil {
		t.Fatal(err)
	}
	if got != b || len(g.CPUIDs) != 2 || len(g.GPUs) != 1 || g.Holder != "a" {
		t.Fatalf("grant %+v from %p, want 2 cores and a card from %p", g, got, b)
	}
	if err := b.Give(g); err != nil {
		t.Fatal(err)
	}
	checkBalanced(t, b)
}

func TestPlacerOrder(t *testing.T) {
	clock := newFakeClock()
	p := NewPlacer(clock.Now)
	b := p.AddMachine(machine(1, 0, 0))
	busy, _ := b.TryTake(ask("busy", 1, 0, 0), epoch)

	var ws []*waiter
	for _, r := range []struct {
		holder   string
		priority int
	}{{"old-low", 0}, {"high", 5}, {"new-low", 0}, {"higher", 9}, {"negative", -1}} {
		req := ask(r.holder, 1, 0, 0)
		req.Priority = r.priority
		ws = append(ws, queueUp(p, req))
	}
	want := []string{"higher", "high", "old-low", "new-low", "negative"}
	for i, w := range p.Waiting() {
		if w.Holder != want[i] || w.Position != i {
			t.Fatalf("queue position %d is %q, want %q", i, w.Holder, want[i])
		}
	}
	// Positions says the same, from 1, without a view of each.
	pos := p.Positions()
	for i, holder := range want {
		if pos[holder] != i+1 {
			t.Errorf("Positions()[%q] = %d, want %d", holder, pos[holder], i+1)
		}
	}
	running := busy
	for _, holder := range want {
		if err := b.Give(running); err != nil {
			t.Fatal(err)
		}
		var next *waiter
		for _, w := range ws {
			if granted(w) && w.grant.Holder == holder {
				next = w
			}
		}
		if next == nil {
			t.Fatalf("after a release, %q did not start", holder)
		}
		running = next.grant
	}
}

// TestPlacerRequeueKeepsPlace: a request queued again with what its job
// now asks (an edit while it waited), arriving when it first did, keeps
// its place among waiters of its priority, also in another shape; one
// with a new priority moves among the others of that priority by when it
// arrived.
func TestPlacerRequeueKeepsPlace(t *testing.T) {
	clock := newFakeClock()
	p := NewPlacer(clock.Now)
	b := p.AddMachine(machine(2, 0, 8*GiB))
	if _, ok := b.TryTake(ask("busy", 2, 0, 0), epoch); !ok {
		t.Fatal("the machine refused its first job")
	}
	arrived := map[string]time.Time{}
	for i, holder := range []string{"first", "second", "third"} {
		clock.Set(epoch.Add(time.Duration(i) * time.Second))
		arrived[holder] = clock.Now()
		queueUp(p, ask(holder, 1, 0, 0))
	}
	order := func() []string {
		var out []string
		for _, w := range p.Waiting() {
			out = append(out, w.Holder)
		}
		return out
	}
	requeue := func(holder string, req Request) {
		t.Helper()
		var found *waiter
		for _, q := range p.shapes {
			for _, w := range q.waiters {
				if w.req.Holder == holder {
					found = w
				}
			}
		}
		if found == nil || !(&Ticket{p: p, w: found}).Cancel() {
			t.Fatalf("%s could not be withdrawn", holder)
		}
		req.Arrived = arrived[holder]
		queueUp(p, req)
	}
	clock.Set(epoch.Add(time.Minute))
	requeue("first", ask("first", 1, 0, GiB)) // another shape now
	if got, want := fmt.Sprint(order()), "[first second third]"; got != want {
		t.Errorf("after first's edit, the queue is %s, want %s", got, want)
	}
	if w := p.Waiting()[0]; !w.Since.Equal(arrived["first"]) {
		t.Errorf("first waits since %v, want %v", w.Since, arrived["first"])
	}
	high := ask("third", 1, 0, 0)
	high.Priority = 1
	requeue("third", high)
	requeue("second", ask("second", 1, 0, 2*GiB))
	if got, want := fmt.Sprint(order()), "[third first second]"; got != want {
		t.Errorf("after third's priority and second's size, the queue is %s, want %s", got, want)
	}
	// Without Arrived, a request arrives now: last among its equals.
	queueUp(p, ask("fourth", 1, 0, 0))
	if got, want := fmt.Sprint(order()), "[third first second fourth]"; got != want {
		t.Errorf("after a new request, the queue is %s, want %s", got, want)
	}
}

func TestPlacerHeadIsNotStarved(t *testing.T) {
	clock := newFakeClock()
	p := NewPlacer(clock.Now)
	b := p.AddMachine(machine(8, 4, 0))
	held, _ := b.TryTake(ask("two-cards", 2, 2, 0), epoch) // unbounded: no backfill

	head := queueUp(p, ask("four-cards", 1, 4, 0))
	var small []*waiter
	for i := range 3 {
		small = append(small, queueUp(p, ask(fmt.Sprintf("one-card-%d", i), 1, 1, 0)))
	}
	cpuOnly := queueUp(p, ask("cpu-only", 4, 0, 0))
	for _, w := range small {
		if granted(w) {
			t.Fatalf("%s took a card the head holds back", w.req.Holder)
		}
	}
	if !granted(cpuOnly) {
		t.Fatal("a job that needs none of what the head holds back had to wait")
	}
	if got := p.Waiting()[0]; got.Holder != "four-cards" || !got.ExpectedStart.IsZero() {
		t.Fatalf("head %+v: with only unbounded runs, no expected start can be known", got)
	}
	// It keeps the two cards free now, and says so.
	if got, _ := p.Head(); !slices.Equal(got.KeptCards, []int{2, 3}) || got.KeptShareBytes != 0 {
		t.Errorf("the head keeps %v and %d bytes of a share, want cards 2 and 3", got.KeptCards, got.KeptShareBytes)
	}

	if err := b.Give(held); err != nil {
		t.Fatal(err)
	}
	if !granted(head) {
		t.Fatal("the head did not start when its cards came free")
	}
	for _, w := range small {
		if granted(w) {
			t.Fatalf("%s started while the head holds all four cards", w.req.Holder)
		}
	}
	if err := b.Give(head.grant); err != nil {
		t.Fatal(err)
	}
	for _, w := range small {
		if !granted(w) {
			t.Fatalf("%s did not start once the head was done", w.req.Holder)
		}
	}
}

func TestPlacerBackfill(t *testing.T) {
	clock := newFakeClock()
	p := NewPlacer(clock.Now)
	b := p.AddMachine(machine(8, 4, 0))
	if _, ok := b.TryTake(bounded(ask("running", 1, 2, 0), time.Hour), epoch); !ok {
		t.Fatal("setup refused")
	}
	head := queueUp(p, ask("four-cards", 1, 4, 0))
	short := queueUp(p, bounded(ask("short", 1, 1, 0), 30*time.Minute))
	exact := queueUp(p, bounded(ask("exact", 1, 1, 0), time.Hour))
	long := queueUp(p, bounded(ask("long", 1, 1, 0), 2*time.Hour))
	unbounded := queueUp(p, ask("unbounded", 1, 1, 0))

	if granted(head) {
		t.Fatal("head started with two of four cards")
	}
	for _, tt := range []struct {
		w    *waiter
		want bool
	}{{short, true}, {exact, true}, {long, false}, {unbounded, false}} {
		if granted(tt.w) != tt.want {
			t.Errorf("%s granted = %v, want %v", tt.w.req.Holder, granted(tt.w), tt.want)
		}
	}
	q := p.Waiting()
	if q[0].Holder != "four-cards" || !q[0].ExpectedStart.Equal(epoch.Add(time.Hour)) || q[0].Machine != "local" {
		t.Errorf("head %+v, want expected start %v on local", q[0], epoch.Add(time.Hour))
	}
	if !q[1].ExpectedStart.IsZero() {
		t.Errorf("only the head has an expected start; %s shows %v", q[1].Holder, q[1].ExpectedStart)
	}
	if head, ok := p.Head(); !ok || !reflect.DeepEqual(head, q[0]) {
		t.Errorf("Head() = %+v, %v; want the queue's first, %+v", head, ok, q[0])
	}
}

func TestPlacerBackfillTimeIsFromNow(t *testing.T) {
	clock := newFakeClock()
	p := NewPlacer(clock.Now)
	b := p.AddMachine(machine(8, 2, 0))
	b.TryTake(bounded(ask("running", 1, 1, 0), time.Hour), epoch)
	queueUp(p, ask("two-cards", 1, 2, 0))
	clock.Set(epoch.Add(45 * time.Minute))
	// 30 minutes from now is past the head's start in 15: it must wait.
	w := queueUp(p, bounded(ask("short", 1, 1, 0), 30*time.Minute))
	if granted(w) {
		t.Fatal("a run ending after the head's earliest start backfilled")
	}
}

func TestPlacerCancelWaiting(t *testing.T) {
	p := NewPlacer(time.Now)
	b := p.AddMachine(machine(1, 0, 0))
	g, _ := b.TryTake(ask("busy", 1, 0, 0), epoch)
	ctx, cancel := context.WithCancel(context.Background())
	result := make(chan error)
	go func() {
		_, _, err := p.Wait(ctx, ask("waiter", 1, 0, 0))
		result <- err
	}()
	testkit.WaitFor(t, 5*time.Second, "one waiter in the queue", func() bool { return len(p.Waiting()) == 1 })
	cancel()
	if err := <-result; !errors.Is(err, context.Canceled) {
		t.Fatalf("Wait = %v, want context.Canceled", err)
	}
	if n := len(p.Waiting()); n != 0 {
		t.Fatalf("%d waiters left", n)
	}
	if err := b.Give(g); err != nil {
		t.Fatal(err)
	}
	checkBalanced(t, b)
}

func TestPlacerCancelledHeadLetsOthersStart(t *testing.T) {
	p := NewPlacer(time.Now)
	b := p.AddMachine(machine(4, 2, 0))
	b.TryTake(ask("busy", 1, 1, 0), epoch)
	ctx, cancel := context.WithCancel(context.Background())
	result := make(chan error)
	go func() {
		_, _, err := p.Wait(ctx, ask("two-cards", 1, 2, 0))
		result <- err
	}()
	testkit.WaitFor(t, 5*time.Second, "one waiter in the queue", func() bool { return len(p.Waiting()) == 1 })
	behind := queueUp(p, ask("one-card", 1, 1, 0))
	if granted(behind) {
		t.Fatal("one-card started in the card the head holds back")
	}
	cancel()
	<-result
	if !granted(behind) {
		t.Fatal("the head left, yet the job behind it did not start")
	}
}

// TestPlacerGrantedAsCancelled drives the race the semaphore pattern must
// handle: the grant and the cancellation both ready. Either outcome is fine;
// a leak is not.
func TestPlacerGrantedAsCancelled(t *testing.T) {
	p := NewPlacer(time.Now)
	b := p.AddMachine(machine(1, 1, 0))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var won, lost int
	for range 200 {
		ch := make(chan placed, 1)
		tk, err := p.Submit(ask("racer", 1, 1, 0), func(b *Book, g Grant) { ch <- placed{b, g} })
		if err != nil || len(ch) != 1 {
			t.Fatal("an idle machine did not grant at once")
		}
		book, g, err := tk.await(ctx, ch)
		if err == nil {
			won++
			if err := book.Give(g); err != nil {
				t.Fatal(err)
			}
		} else {
			lost++
		}
		checkBalanced(t, b)
	}
	if won == 0 || lost == 0 {
		t.Logf("only one outcome seen (won %d, lost %d); the race path may be untested this run", won, lost)
	}
}

func TestTicketCancel(t *testing.T) {
	p := NewPlacer(time.Now)
	b := p.AddMachine(machine(1, 0, 0))
	var got []Grant
	first, _ := p.Submit(ask("first", 1, 0, 0), func(_ *Book, g Grant) { got = append(got, g) })
	second, _ := p.Submit(ask("second", 1, 0, 0), func(_ *Book, g Grant) { got = append(got, g) })
	if len(got) != 1 || got[0].Holder != "first" {
		t.Fatalf("granted %v, want first only", got)
	}
	if first.Cancel() {
		t.Error("Cancel of a granted ticket reported that it withdrew it")
	}
	if !second.Cancel() {
		t.Error("Cancel of a waiting ticket reported it was granted")
	}
	if second.Cancel() {
		t.Error("a second Cancel withdrew it again")
	}
	if err := b.Give(got[0]); err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 {
		t.Errorf("a cancelled ticket was granted: %v", got)
	}
	checkBalanced(t, b)
}

func TestPlacerAddMachineWakesWaiters(t *testing.T) {
	p := NewPlacer(time.Now)
	first := p.AddMachine(machine(2, 1, 0))
	first.TryTake(ask("busy", 1, 1, 0), epoch)
	w := queueUp(p, ask("card", 1, 1, 0))
	if granted(w) {
		t.Fatal("granted a busy card")
	}
	second := p.AddMachine(Capacity{Name: "second", CPUIDs: []int{0, 1}, GPUs: 1})
	if !granted(w) || w.book != second || w.grant.Machine != "second" {
		t.Fatal("a machine attaching did not wake the waiter")
	}
}

// TestPlacerHammer waits, cancels and gives back from many goroutines, then
// checks the books balance exactly.
func TestPlacerHammer(t *testing.T) {
	p := NewPlacer(time.Now)
	b := p.AddMachine(machine(8, 4, 32*GiB))
	var wg sync.WaitGroup
	for worker := range 32 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(worker), 2))
			for i := range 300 {
				ctx, cancel := context.WithCancel(context.Background())
				if rng.IntN(3) == 0 {
					// Cancel at a random moment, racing with the grant.
					go cancel()
				}
				req := ask(fmt.Sprintf("w%d-%d", worker, i), 1+rng.IntN(4), rng.IntN(3), int64(rng.IntN(16))*GiB)
				req.Priority = rng.IntN(3)
				book, g, err := p.Wait(ctx, req)
				cancel()
				if err != nil {
					if !errors.Is(err, context.Canceled) {
						t.Error(err)
					}
					continue
				}
				checkConsistent(t, book.Snapshot())
				if err := book.Give(g); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	if n := len(p.Waiting()); n != 0 {
		t.Fatalf("%d waiters left", n)
	}
	checkBalanced(t, b)
}

// TestPlacerProperty plays random histories against a fake clock: arrivals,
// cancellations, runs ending early or at their limit. After every step the
// books must add up, and a head whose earliest start is known must never see
// it move later, nor still be waiting once the clock has passed it.
func TestPlacerProperty(t *testing.T) {
	seeds := uint64(1000)
	if testing.Short() {
		seeds = 200
	}
	for seed := range seeds {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 3))
			clock := newFakeClock()
			p := NewPlacer(clock.Now)
			var books []*Book
			for i := range 1 + rng.IntN(2) {
				// Half the seeds play shares of cards among whole ones.
				withShares := seed%2 == 1
				c := machine(2+rng.IntN(6), rng.IntN(5), int64(4+rng.IntN(8))*GiB)
				if withShares {
					c.GPUs = 1 + rng.IntN(4)
				}
				c.Name = fmt.Sprint("m", i)
				for range c.GPUs {
					// Cards of known memory (some of unknown), which
					// shares pack.
					c.GPUMem = append(c.GPUMem, int64(rng.IntN(5))*16*GiB)
				}
				books = append(books, p.AddMachine(c))
			}
			var (
				waiting  []*waiter
				running  []Grant
				promised = map[*waiter]time.Time{}
			)
			collect := func() {
				kept := waiting[:0]
				for _, w := range waiting {
					if granted(w) {
						running = append(running, w.grant)
						delete(promised, w)
					} else {
						kept = append(kept, w)
					}
				}
				waiting = kept
			}
			give := func(i int) {
				g := running[i]
				running = append(running[:i], running[i+1:]...)
				for _, b := range books {
					if b.capacity.Name == g.Machine {
						if err := b.Give(g); err != nil {
							t.Fatal(err)
						}
					}
				}
				collect()
			}
			for step := range 300 {
				switch op := rng.IntN(10); {
				case op < 5: // arrival
					req := ask(fmt.Sprint("j", step), 1+rng.IntN(3), rng.IntN(3), int64(rng.IntN(4))*GiB)
					if seed%2 == 1 && rng.IntN(3) > 0 {
						req.GPUs, req.GPUMemBytes = 0, int64(1+rng.IntN(48))*GiB
					}
					req.Priority = rng.IntN(2)
					if rng.IntN(3) > 0 {
						req.Limit = time.Duration(1+rng.IntN(120)) * time.Minute
					}
					p.mu.Lock()
					err := p.placeable(req.Resources)
					p.mu.Unlock()
					if err == nil {
						// A higher priority goes first, even ahead of a head
						// that was promised a start.
						for w := range promised {
							if w.req.Priority < req.Priority {
								delete(promised, w)
							}
						}
						waiting = append(waiting, queueUp(p, req))
						collect()
					}
				case op < 6 && len(waiting) > 0: // cancellation
					i := rng.IntN(len(waiting))
					w := waiting[i]
					waiting = append(waiting[:i], waiting[i+1:]...)
					if !(&Ticket{p: p, w: w}).Cancel() {
						running = append(running, w.grant)
					}
					delete(promised, w)
					collect()
				case op < 8 && len(running) > 0: // a run ends early
					give(rng.IntN(len(running)))
				case op == 8 && seed%4 == 3: // the live view of the cards changes
					for _, b := range books {
						live := make([]CardLive, b.capacity.GPUs)
						for i := range live {
							live[i] = CardLive{Off: rng.IntN(4) == 0, OutsideBytes: int64(rng.IntN(3)) * 8 * GiB}
						}
						b.SetCards(live)
					}
					// What is in use outside the books may put a start
					// off: no promise holds across it.
					clear(promised)
					collect()
				case len(running) > 0: // the clock moves to the next limit
					next := time.Time{}
					for _, g := range running {
						if !g.Until.IsZero() && (next.IsZero() || g.Until.Before(next)) {
							next = g.Until
						}
					}
					if next.IsZero() {
						give(0)
						break
					}
					clock.Set(next)
					for i := len(running) - 1; i >= 0; i-- {
						if !running[i].Until.IsZero() && !running[i].Until.After(next) {
							give(i)
						}
					}
				}
				for _, b := range books {
					checkConsistent(t, b.Snapshot())
				}
				q := p.Waiting()
				if head, ok := p.Head(); ok != (len(q) > 0) || ok && !reflect.DeepEqual(head, q[0]) {
					t.Fatalf("step %d: Head() = %+v, %v; the queue's first is %+v", step, head, ok, q)
				}
				if len(q) == 0 {
					continue
				}
				headW := p.head.w
				if head := q[0]; !head.ExpectedStart.IsZero() {
					if before, ok := promised[headW]; ok && head.ExpectedStart.After(before) {
						t.Fatalf("step %d: head %s's expected start moved from %v to %v", step, head.Holder, before, head.ExpectedStart)
					}
					promised[headW] = head.ExpectedStart
				}
				for w, at := range promised {
					if w != headW {
						t.Fatalf("step %d: %s was promised a start at %v and is no longer the head, though nothing of higher priority arrived", step, w.req.Holder, at)
					}
					if clock.Now().After(at) {
						t.Fatalf("step %d: head %s still waits at %v, past its expected start %v", step, w.req.Holder, clock.Now(), at)
					}
				}
			}
		})
	}
}

// TestPlacerOrderBreaksTies: requests that arrive at one instant wait in
// their Order, whatever order they reached the Placer in, also across
// shapes; a different arrival still comes first.
func TestPlacerOrderBreaksTies(t *testing.T) {
	clock := newFakeClock()
	p := NewPlacer(clock.Now)
	b := p.AddMachine(machine(2, 0, 8*GiB))
	if _, ok := b.TryTake(ask("busy", 2, 0, 0), epoch); !ok {
		t.Fatal("the machine refused its first job")
	}
	together := epoch.Add(time.Second)
	for _, r := range []struct {
		holder string
		order  int
		ram    int64
	}{{"third", 3, 0}, {"first", 1, GiB}, {"second", 2, 0}} {
		req := ask(r.holder, 1, 0, r.ram)
		req.Arrived, req.Order = together, r.order
		queueUp(p, req)
	}
	early := ask("earlier", 1, 0, 0)
	early.Arrived, early.Order = epoch, 9
	queueUp(p, early)
	var got []string
	for _, w := range p.Waiting() {
		got = append(got, w.Holder)
	}
	if want := "[earlier first second third]"; fmt.Sprint(got) != want {
		t.Errorf("the queue is %v, want %s", got, want)
	}
}
