package accounting

import (
	"slices"
	"testing"
	"time"
)

// sharing is a box of 8 cores and cards of the given memory, in GiB.
func sharing(cardsGiB ...int64) Capacity {
	c := machine(8, len(cardsGiB), 64*GiB)
	for _, g := range cardsGiB {
		c.GPUMem = append(c.GPUMem, g*GiB)
	}
	return c
}

func share(holder string, gib int64) Request {
	return Request{Holder: holder, Resources: Resources{CPUs: 1, GPUMemBytes: gib * GiB}}
}

// TestBookShares: a share goes to the shared card it fills best, else to
// the lowest untouched card; a shared card is no one's whole, a card held
// whole is no one's share; what is in use outside the books is room no
// share is given; a card whose memory is unknown is never shared.
func TestBookShares(t *testing.T) {
	type take struct {
		req  Request
		card int // -1: refused
	}
	whole := func(n int) Request { return ask("whole", 1, n, 0) }
	for _, c := range []struct {
		name  string
		cap   Capacity
		live  []CardLive
		takes []take
	}{
		{"packs the shared card before an untouched one", sharing(80, 80, 80, 40), nil, []take{
			{share("a", 20), 0},
			{share("b", 30), 0},
			{share("c", 40), 1}, // card 0 has 30 left
			{share("d", 35), 1}, // card 1 has 40 left, the best fit
			{share("e", 30), 0}, // card 0: 30 left, exactly
			{whole(2), 2},       // the untouched ones
			{whole(1), -1},      // none untouched
			{share("f", 10), -1},
		}},
		{"the tightest fit among shared cards", sharing(80, 80, 80), nil, []take{
			{share("a", 70), 0},
			{share("b", 50), 1},
			{share("c", 10), 0}, // 10 left on card 0, 30 on card 1
			{share("d", 10), 1},
		}},
		{"no share on a card held whole", sharing(80, 80), nil, []take{
			{whole(1), 0},
			{share("a", 80), 1},
			{share("b", 1), -1},
		}},
		{"memory in use outside the books", sharing(80, 80), []CardLive{{OutsideBytes: 50 * GiB}, {}}, []take{
			{share("a", 40), 1},  // card 0, untouched, has 30 of room
			{share("b", 45), -1}, // 40 left on card 1
			{share("c", 30), 1},  // the shared card first
			{share("d", 30), 0},
		}},
		{"a card off for whole jobs takes shares first", sharing(40, 80), []CardLive{{Off: true, OutsideBytes: 21 * GiB}, {}}, []take{
			{whole(1), 1},
			{whole(1), -1},
			{share("a", 20), -1}, // 19 left beside the foreign process
			{share("b", 19), 0},
		}},
		{"a card of unknown memory is not shared", sharing(80, 0), nil, []take{
			{share("a", 80), 0},
			{share("b", 1), -1},
			{whole(1), 1},
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := NewBook(c.cap, nil)
			b.SetCards(c.live)
			for i, tk := range c.takes {
				g, ok := b.TryTake(tk.req, epoch)
				switch {
				case tk.card < 0 && ok:
					t.Fatalf("take %d (%v) granted card %v; want refused", i, tk.req.Resources, g.GPUs)
				case tk.card < 0:
				case !ok:
					t.Fatalf("take %d (%v) refused; want card %d", i, tk.req.Resources, tk.card)
				case g.GPUs[0] != tk.card:
					t.Fatalf("take %d (%v) granted card %v; want %d", i, tk.req.Resources, g.GPUs, tk.card)
				case tk.req.Shares() && (len(g.GPUs) != 1 || g.GPUMemBytes != tk.req.GPUMemBytes):
					t.Fatalf("take %d: share granted %+v", i, g)
				}
				checkConsistent(t, b.Snapshot())
			}
		})
	}
}

// TestBookShareGive: the card is whole again once its last share is
// given back, and not before.
func TestBookShareGive(t *testing.T) {
	b := NewBook(sharing(80), nil)
	a, _ := b.TryTake(share("a", 30), epoch)
	c, _ := b.TryTake(share("c", 30), epoch)
	if s := b.Snapshot(); s.Free.GPUs != 0 || s.Free.GPUMemBytes != 20*GiB || s.CardBooked[0] != 60*GiB {
		t.Fatalf("two shares: free %+v, booked %v", s.Free, s.CardBooked)
	}
	if err := b.Give(a); err != nil {
		t.Fatal(err)
	}
	if _, ok := b.TryTake(ask("whole", 1, 1, 0), epoch); ok {
		t.Fatal("a card with a share on it was granted whole")
	}
	if err := b.Give(c); err != nil {
		t.Fatal(err)
	}
	checkBalanced(t, b)
	if _, ok := b.TryTake(ask("whole", 1, 1, 0), epoch); !ok {
		t.Fatal("the card, its shares given back, is not granted whole")
	}
}

func TestBookShareFits(t *testing.T) {
	b := NewBook(sharing(80, 40), nil)
	for _, c := range []struct {
		r    Resources
		fits bool
	}{
		{Resources{CPUs: 1, GPUMemBytes: 80 * GiB}, true},
		{Resources{CPUs: 1, GPUMemBytes: 81 * GiB}, false},
		{Resources{CPUs: 1, GPUs: 1, GPUMemBytes: GiB}, false}, // both
	} {
		if got := b.Fits(c.r); got != c.fits {
			t.Errorf("Fits(%v) = %v", c.r, got)
		}
	}
	if NewBook(sharing(0, 0), nil).Fits(Resources{CPUs: 1, GPUMemBytes: 1}) {
		t.Error("a share fits cards of unknown memory")
	}
}

func TestRestoreShare(t *testing.T) {
	b := NewBook(sharing(80, 80), nil)
	g, err := b.Restore(Grant{Holder: "a", CPUIDs: []int{2}, GPUs: []int{1}, GPUMemBytes: 50 * GiB})
	if err != nil {
		t.Fatal(err)
	}
	if s := b.Snapshot(); s.CardBooked[1] != 50*GiB || s.Free.GPUs != 1 {
		t.Fatalf("restored share: booked %v, %d whole cards free", s.CardBooked, s.Free.GPUs)
	}
	for _, bad := range []Grant{
		{Holder: "over", GPUs: []int{1}, GPUMemBytes: 31 * GiB}, // 30 left
		{Holder: "whole on shared", GPUs: []int{1}},
		{Holder: "two cards", GPUs: []int{0, 1}, GPUMemBytes: GiB},
	} {
		if _, err := b.Restore(bad); err == nil {
			t.Errorf("restore %+v succeeded", bad)
		}
	}
	if _, err := b.Restore(Grant{Holder: "whole", GPUs: []int{0}}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Restore(Grant{Holder: "share on whole", GPUs: []int{0}, GPUMemBytes: GiB}); err == nil {
		t.Error("a share restored on a card held whole")
	}
	if err := b.Give(g); err != nil {
		t.Fatal(err)
	}
	checkConsistent(t, b.Snapshot())
}

// TestPlacerShares: the head of the queue is starved neither by shares
// nor of them: a whole-card head keeps its cards from shares, a share
// head keeps its card's room from other shares; a share certain to end
// before the head's start backfills.
func TestPlacerShares(t *testing.T) {
	t.Run("a whole-card head keeps the untouched cards from shares", func(t *testing.T) {
		p := NewPlacer(newFakeClock().Now)
		b := p.AddMachine(sharing(80, 80))
		running := queueUp(p, ask("running", 1, 1, 0))
		head := queueUp(p, ask("head", 1, 2, 0))
		small := queueUp(p, share("small", 10))
		if granted(head) || granted(small) {
			t.Fatalf("head granted %v, small %v: want both waiting", granted(head), granted(small))
		}
		if err := b.Give(running.grant); err != nil {
			t.Fatal(err)
		}
		if !granted(head) || granted(small) {
			t.Fatalf("after the end: head granted %v, small %v", granted(head), granted(small))
		}
	})
	t.Run("a share head keeps its card's room", func(t *testing.T) {
		p := NewPlacer(newFakeClock().Now)
		b := p.AddMachine(sharing(80))
		big := queueUp(p, share("big", 60))
		head := queueUp(p, share("head", 40))
		small := queueUp(p, share("small", 10))
		if !granted(big) || granted(head) || granted(small) {
			t.Fatal("want big granted, head and small waiting")
		}
		// The 20G of room there is the head's, and it says so.
		if w, _ := p.Head(); w.KeptShareCard != 0 || w.KeptShareBytes != 20*GiB || len(w.KeptCards) != 0 {
			t.Errorf("the head keeps %d bytes of card %d and cards %v; want the 20G of card 0", w.KeptShareBytes, w.KeptShareCard, w.KeptCards)
		}
		if err := b.Give(big.grant); err != nil {
			t.Fatal(err)
		}
		if !granted(head) || !granted(small) {
			t.Fatalf("after big ended: head %v, small %v", granted(head), granted(small))
		}
	})
	t.Run("the untouched card a share head waits on is no one's whole", func(t *testing.T) {
		p := NewPlacer(newFakeClock().Now)
		b := p.AddMachine(sharing(24, 24))
		queueUp(p, ask("whole", 1, 1, 0))                   // card 0
		b.SetCards([]CardLive{{}, {OutsideBytes: 5 * GiB}}) // card 1: 19G of room
		head := queueUp(p, share("head", 20))
		other := queueUp(p, ask("other", 1, 1, 0))
		small := queueUp(p, share("small", 5))
		if granted(head) || granted(other) || granted(small) {
			t.Fatalf("head %v, other %v, small %v: want all waiting for card 1", granted(head), granted(other), granted(small))
		}
		b.SetCards(nil) // what was outside is gone
		if !granted(head) || !slices.Equal(head.grant.GPUs, []int{1}) {
			t.Fatalf("head %v on %v; want card 1", granted(head), head.grant.GPUs)
		}
	})
	t.Run("a share that ends before the head may start backfills", func(t *testing.T) {
		clock := newFakeClock()
		p := NewPlacer(clock.Now)
		p.AddMachine(sharing(80))
		queueUp(p, bounded(share("big", 60), time.Hour))
		head := queueUp(p, share("head", 40))
		short := queueUp(p, bounded(share("short", 10), 30*time.Minute))
		long := queueUp(p, share("long", 10))
		if granted(head) || !granted(short) || granted(long) {
			t.Fatalf("head %v, short %v, long %v: want only short granted", granted(head), granted(short), granted(long))
		}
		if w := p.Waiting(); w[0].Holder != "head" || !w[0].ExpectedStart.Equal(epoch.Add(time.Hour)) {
			t.Fatalf("head %+v; want its start when big ends", w[0])
		}
	})
	t.Run("a whole head waits for the last share on a card", func(t *testing.T) {
		clock := newFakeClock()
		p := NewPlacer(clock.Now)
		p.AddMachine(sharing(80))
		queueUp(p, bounded(share("a", 10), time.Hour))
		queueUp(p, bounded(share("b", 10), 2*time.Hour))
		head := queueUp(p, ask("head", 1, 1, 0))
		if granted(head) {
			t.Fatal("a shared card was granted whole")
		}
		if w := p.Waiting(); !w[0].ExpectedStart.Equal(epoch.Add(2 * time.Hour)) {
			t.Fatalf("head expected at %v; want when the last share ends", w[0].ExpectedStart)
		}
	})
}

// TestPlacerShareOrder: shares and whole cards alike, the books always add
// up and every waiter is granted once everything ends.
func TestPlacerShareOrder(t *testing.T) {
	p := NewPlacer(newFakeClock().Now)
	b := p.AddMachine(sharing(80, 80, 40))
	var ws []*waiter
	for i, r := range []Request{share("a", 30), ask("b", 1, 2, 0), share("c", 50), share("d", 40), ask("e", 1, 3, 0), share("f", 80)} {
		r.Holder = string(rune('a' + i))
		ws = append(ws, queueUp(p, r))
		checkConsistent(t, b.Snapshot())
	}
	for range len(ws) {
		i := slices.IndexFunc(ws, func(w *waiter) bool { return granted(w) })
		if i < 0 {
			t.Fatalf("nothing granted, %d waiting: %+v", len(ws), p.Waiting())
		}
		if err := b.Give(ws[i].grant); err != nil {
			t.Fatal(err)
		}
		ws = slices.Delete(ws, i, i+1)
		checkConsistent(t, b.Snapshot())
	}
	checkBalanced(t, b)
}

// TestPlacerWholeHeadNotStarvedByShares: a head that asks whole cards,
// whose start cannot be known (the shares are unbounded), keeps the
// shared card it waits on from new shares: a stream of overlapping
// shares cannot keep it from the card for ever.
func TestPlacerWholeHeadNotStarvedByShares(t *testing.T) {
	p := NewPlacer(newFakeClock().Now)
	b := p.AddMachine(sharing(80))
	running := queueUp(p, share("s0", 10))
	head := queueUp(p, ask("head", 1, 1, 0))
	next := queueUp(p, share("s1", 10)) // arrives while s0 runs
	if granted(next) {
		t.Fatal("a share was booked on the card the head waits to have whole")
	}
	if err := b.Give(running.grant); err != nil {
		t.Fatal(err)
	}
	if !granted(head) || granted(next) {
		t.Fatalf("s0 ended: head %v, s1 %v; want the head first", granted(head), granted(next))
	}
}

// TestPlacerBackfilledShareOpensNoKeptCard: a share certain to end before
// the head's start may take a card the head keeps, but that card, shared
// now, is not then open to a share that is not: at its start the head
// starts.
func TestPlacerBackfilledShareOpensNoKeptCard(t *testing.T) {
	clock := newFakeClock()
	p := NewPlacer(clock.Now)
	b := p.AddMachine(sharing(80, 80))
	a := queueUp(p, bounded(ask("a", 1, 1, 0), time.Hour))
	f := queueUp(p, bounded(ask("f", 7, 0, 0), 10*time.Minute))
	head := queueUp(p, ask("head", 1, 2, 0))
	short := queueUp(p, bounded(share("short", 10), 30*time.Minute))
	long := queueUp(p, share("long", 10))
	if err := b.Give(f.grant); err != nil {
		t.Fatal(err)
	}
	if !granted(short) || granted(long) {
		t.Fatalf("short %v, long %v (on %v); want only the short share, which ends before the head's start", granted(short), granted(long), long.grant.GPUs)
	}
	if w := p.Waiting(); w[0].Holder != "head" || !w[0].ExpectedStart.Equal(epoch.Add(time.Hour)) {
		t.Fatalf("head %+v; want its start at 1h", w[0])
	}
	clock.Set(epoch.Add(time.Hour))
	for _, g := range []Grant{short.grant, a.grant} {
		if err := b.Give(g); err != nil {
			t.Fatal(err)
		}
	}
	if !granted(head) {
		t.Errorf("at its expected start the head still waits: %+v", p.Waiting())
	}
}

// TestQuotaBoundsShares: a quota of gpus bounds shares too, a card's
// worth of memory counting as a card, unless gpu_mem bounds them on its
// own; one larger than the quota allows at all is unplaceable.
func TestQuotaBoundsShares(t *testing.T) {
	for _, c := range []struct {
		name    string
		quota   Quota
		granted int // of four shares of 12G on 24G cards
	}{
		{"gpus = 1: two shares", Quota{CPUs: -1, GPUs: 1, RAMBytes: -1, GPUMemBytes: -1}, 2},
		{"gpus = 0: none", Quota{CPUs: -1, GPUs: 0, RAMBytes: -1, GPUMemBytes: -1}, 0},
		{"gpu_mem = 36G, gpus = 0: three", Quota{CPUs: -1, GPUs: 0, RAMBytes: -1, GPUMemBytes: 36 * GiB}, 3},
		{"no quota: four", NoQuota, 4},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := NewPlacer(newFakeClock().Now)
			p.AddMachine(sharing(24, 24, 24, 24))
			p.SetQuotas(nil, c.quota)
			got := 0
			for range 4 {
				r := share("s", 12)
				r.Owner = "guest"
				if tk, err := p.Submit(r, nil); err == nil && granted(tk.w) {
					got++
				}
			}
			if got != c.granted {
				t.Errorf("%d shares granted, want %d", got, c.granted)
			}
		})
	}
	p := NewPlacer(newFakeClock().Now)
	p.AddMachine(sharing(24, 24))
	p.SetQuotas(nil, Quota{CPUs: -1, GPUs: 1, RAMBytes: -1, GPUMemBytes: -1})
	big := share("big", 20)
	big.Owner = "guest"
	if err := p.Placeable(big); err != nil {
		t.Errorf("a 20G share under a quota of one 24G card: %v", err)
	}
	over := Request{Holder: "over", Owner: "guest", Resources: Resources{CPUs: 1, GPUs: 1}}
	if _, err := p.Submit(over, nil); err != nil {
		t.Fatal(err)
	}
	if _, over := p.QuotaWait(big); !over {
		t.Error("a share beside a whole card, past one card's worth, is not held back by the quota")
	}
}

// TestFairShareCountsShares: among owners, a share counts as its part of
// a card: one holding three shares of nearly a card each holds more than
// one holding one card.
func TestFairShareCountsShares(t *testing.T) {
	a := Resources{GPUMemBytes: 3 * 23 * GiB}
	b := Resources{GPUs: 1}
	if compareHeld(a, b, 24*GiB) <= 0 {
		t.Error("three shares of 23G on 24G cards hold no more than one card")
	}
	if compareHeld(Resources{GPUMemBytes: 12 * GiB}, b, 24*GiB) >= 0 {
		t.Error("half a card holds no less than a card")
	}
}
