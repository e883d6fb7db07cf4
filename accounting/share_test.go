package accounting

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

// card is a one-card request of owner.
func card(owner, name string) Request {
	return Request{Holder: name, Owner: owner, Resources: Resources{CPUs: 1, GPUs: 1}}
}

// TestPlacerQuota: an owner at their quota waits, holding nothing back for
// themselves, while others start; their job starts once one of theirs ends;
// a quota raised lets them start at once.
func TestPlacerQuota(t *testing.T) {
	p := NewPlacer(time.Now)
	b := p.AddMachine(machine(8, 4, 0))
	p.SetQuotas(map[string]Quota{"alice": {CPUs: -1, GPUs: 2, RAMBytes: -1}}, NoQuota)
	a1, a2, a3 := queueUp(p, card("alice", "alice/1")), queueUp(p, card("alice", "alice/2")), queueUp(p, card("alice", "alice/3"))
	if !granted(a1) || !granted(a2) || granted(a3) {
		t.Fatalf("alice's three under a quota of 2 cards: %v %v %v", granted(a1), granted(a2), granted(a3))
	}
	if w, ok := p.QuotaWait(a3.req); !ok || w.Held.GPUs != 2 || w.Quota.GPUs != 2 || w.Owner != "alice" {
		t.Errorf("QuotaWait = %+v, %v; want alice holding 2 of 2", w, ok)
	}
	// Two cards are free and alice's third holds neither back.
	b1, b2 := queueUp(p, card("bob", "bob/1")), queueUp(p, card("bob", "bob/2"))
	if !granted(b1) || !granted(b2) {
		t.Fatal("bob's jobs waited behind alice's, which her quota holds back")
	}

	if err := b.Give(a1.grant); err != nil {
		t.Fatal(err)
	}
	if !granted(a3) {
		t.Fatal("alice's third did not start when one of hers ended")
	}
	a4 := queueUp(p, card("alice", "alice/4"))
	if granted(a4) {
		t.Fatal("alice's fourth started past her quota")
	}
	if err := b.Give(b1.grant); err != nil {
		t.Fatal(err)
	}
	if granted(a4) {
		t.Fatal("alice's fourth started past her quota on a card bob freed")
	}
	p.SetQuotas(map[string]Quota{"alice": {CPUs: -1, GPUs: 3, RAMBytes: -1}}, NoQuota)
	if !granted(a4) {
		t.Error("alice's fourth did not start once her quota was raised")
	}
}

// TestPlacerPositionsPassTheQuotaHeld: a waiter its owner's quota holds
// back has no place in the machine's queue, which passes it by: the one
// behind it is first.
func TestPlacerPositionsPassTheQuotaHeld(t *testing.T) {
	p := NewPlacer(time.Now)
	p.AddMachine(machine(8, 2, 0))
	p.SetQuotas(map[string]Quota{"alice": {CPUs: -1, GPUs: 1, RAMBytes: -1}}, NoQuota)
	a1, a2 := queueUp(p, card("alice", "alice/1")), queueUp(p, card("alice", "alice/2"))
	busy := queueUp(p, card("bob", "bob/1"))
	b2 := queueUp(p, card("bob", "bob/2"))
	if !granted(a1) || granted(a2) || !granted(busy) || granted(b2) {
		t.Fatalf("granted: alice's %v %v, bob's %v %v; want one each", granted(a1), granted(a2), granted(busy), granted(b2))
	}
	if pos := p.Positions(); pos["bob/2"] != 1 || pos["alice/2"] != 0 {
		t.Errorf("Positions() = %v, want bob/2 first and alice/2, held by her quota, in no place", pos)
	}
}

// TestPlacerQuotaUnplaceable: a request larger than its owner's quota
// fails at once; the default quota applies to every owner not named, and
// to no administrator's job.
func TestPlacerQuotaUnplaceable(t *testing.T) {
	p := NewPlacer(time.Now)
	p.AddMachine(machine(8, 4, 64*GiB))
	p.SetQuotas(map[string]Quota{"alice": {CPUs: 4, GPUs: 2, RAMBytes: -1}}, Quota{CPUs: -1, GPUs: 1, RAMBytes: 8 * GiB})
	for _, tt := range []struct {
		owner string
		r     Resources
		msg   string
	}{
		{"alice", Resources{CPUs: 1, GPUs: 3}, "asks for 3 GPUs; alice's quota allows 2"},
		{"alice", Resources{CPUs: 6, GPUs: 3}, "asks for 6 cores and 3 GPUs; alice's quota allows 4 and 2"},
		{"carol", Resources{CPUs: 1, GPUs: 2, RAMBytes: 16 * GiB}, "asks for 2 GPUs and 16G of memory; carol's quota allows 1 and 8G"},
		// Asking for none of what a quota bounds would escape it.
		{"alice", Resources{}, "asks for no cores (cpus = 0: unaccounted, it would hold none and escape alice's quota of 4 cores); ask for cores, cpus = 1 or more"},
		{"carol", Resources{CPUs: 1}, `asks for no memory, and carol's quota bounds their jobs' memory (8G): say how much it needs, as ram = "512M"`},
	} {
		req := Request{Holder: tt.owner + "/big", Owner: tt.owner, Resources: tt.r}
		_, err := p.Submit(req, nil)
		var ue *UnplaceableError
		if !errors.As(err, &ue) || ue.Quota == nil || err.Error() != tt.msg {
			t.Errorf("%s %+v: %v, want %q", tt.owner, tt.r, err, tt.msg)
		}
		if err := p.Placeable(req); err == nil || err.Error() != tt.msg {
			t.Errorf("Placeable(%s %+v) = %v, want %q", tt.owner, tt.r, err, tt.msg)
		}
	}
	if err := p.Placeable(Request{Owner: "alice", Resources: Resources{CPUs: 4, GPUs: 2}}); err != nil {
		t.Errorf("Placeable of a request the quota allows: %v", err)
	}
	if _, err := p.Submit(Request{Holder: "admin", Resources: Resources{CPUs: 1, GPUs: 4}}, nil); err != nil {
		t.Errorf("an administrator's job met a quota: %v", err)
	}
	if err := p.Placeable(Request{Holder: "admin", Resources: Resources{}}); err != nil {
		t.Errorf("an administrator's unaccounted job met a quota: %v", err)
	}
	// A quota of cards alone an unaccounted job does not escape: it holds
	// none, and is shown none.
	p.SetQuotas(map[string]Quota{"dave": {CPUs: -1, GPUs: 1, RAMBytes: -1, GPUMemBytes: -1}}, NoQuota)
	if err := p.Placeable(Request{Owner: "dave", Resources: Resources{}}); err != nil {
		t.Errorf("under a quota of cards alone, an unaccounted job was refused: %v", err)
	}
	p.SetQuotas(nil, NoQuota)
	if err := p.Placeable(Request{Owner: "alice", Resources: Resources{}}); err != nil {
		t.Errorf("without a quota, a person's unaccounted job was refused: %v", err)
	}
}

// TestPlacerFairShare: alice queues 20 one-card jobs on a 2-card box, then
// bob queues one: bob's starts at the next free card, and then alice's go
// on. A person's priority orders only their own jobs; an administrator's
// orders them among all.
func TestPlacerFairShare(t *testing.T) {
	p := NewPlacer(time.Now)
	b := p.AddMachine(machine(8, 2, 0))
	var alice []*waiter
	for i := range 20 {
		r := card("alice", fmt.Sprintf("alice/%02d", i))
		r.Priority = 10 // hers: ahead of her own others, not of bob
		alice = append(alice, queueUp(p, r))
	}
	bob := queueUp(p, card("bob", "bob/1"))
	if !granted(alice[0]) || !granted(alice[1]) || granted(bob) {
		t.Fatal("the first two cards did not go to alice's first two")
	}
	if err := b.Give(alice[0].grant); err != nil {
		t.Fatal(err)
	}
	if !granted(bob) || granted(alice[2]) {
		t.Fatalf("the next free card went to alice's third (%v), not bob (%v)", granted(alice[2]), granted(bob))
	}
	// Now both hold one: the tie goes to who asked first.
	if err := b.Give(alice[1].grant); err != nil {
		t.Fatal(err)
	}
	if !granted(alice[2]) {
		t.Fatal("alice's third did not start")
	}
	// An administrator's job at priority 5 goes before everyone's.
	admin := queueUp(p, Request{Holder: "admin", Resources: Resources{CPUs: 1, GPUs: 1}, Priority: 5})
	carol := queueUp(p, card("carol", "carol/1")) // holds nothing at all
	if err := b.Give(alice[2].grant); err != nil {
		t.Fatal(err)
	}
	if !granted(admin) || granted(carol) {
		t.Fatalf("admin at priority 5: %v, carol holding nothing: %v", granted(admin), granted(carol))
	}
	// alice and carol hold nothing now: the tie goes to alice, who asked
	// first; then carol holds least.
	if err := b.Give(bob.grant); err != nil {
		t.Fatal(err)
	}
	if !granted(alice[3]) || granted(carol) {
		t.Fatalf("holding nothing both, alice's fourth (asked first): %v; carol: %v", granted(alice[3]), granted(carol))
	}
	if err := b.Give(admin.grant); err != nil {
		t.Fatal(err)
	}
	if !granted(carol) || granted(alice[4]) {
		t.Fatalf("carol, who holds least: %v; alice's fifth: %v", granted(carol), granted(alice[4]))
	}
	if q := p.Waiting(); len(q) != 16 || q[0].Holder != "alice/04" {
		t.Errorf("%d waiting, head %s; want alice's 16 left, her fifth first", len(q), q[0].Holder)
	}
}

// TestPlacerQuotaProperty: under random arrivals, cancellations, ends and
// quota changes among three owners and the administrators, the books stay
// consistent and no owner ever holds past their quota.
func TestPlacerQuotaProperty(t *testing.T) {
	for seed := range uint64(40) {
		rng := rand.New(rand.NewPCG(seed, 7))
		p := NewPlacer(time.Now)
		c := machine(4+rng.IntN(8), rng.IntN(5), 16*GiB)
		for range c.GPUs {
			c.GPUMem = append(c.GPUMem, 16*GiB)
		}
		b := p.AddMachine(c)
		owners := []string{"", "alice", "bob", "carol"}
		quotas := func() map[string]Quota {
			q := map[string]Quota{}
			for _, o := range owners[1:] {
				// gpu_mem bounded, or unbounded (gpus bounds shares then).
				q[o] = Quota{CPUs: rng.IntN(8) - 1, GPUs: rng.IntN(4) - 1, RAMBytes: int64(rng.IntN(12)-1) * GiB,
					GPUMemBytes: int64(rng.IntN(3)-1) * 12 * GiB}
			}
			return q
		}
		current := quotas()
		p.SetQuotas(current, NoQuota)
		var waiting []*waiter
		var running []Grant
		heldBy := func(owner string) Resources {
			var r Resources
			for _, g := range running {
				if g.Owner == owner {
					r = r.Plus(g.Resources())
				}
			}
			return r
		}
		// collect takes in what was granted since it last looked, each
		// grant checked against its owner's quota as it stood.
		collect := func() {
			kept := waiting[:0]
			for _, w := range waiting {
				if !granted(w) {
					kept = append(kept, w)
					continue
				}
				if o := w.req.Owner; o != "" && !current[o].allows(heldBy(o), w.req.Resources, c.LargestCardMem()) {
					t.Fatalf("seed %d: %s was granted %+v holding %+v, past the quota %+v", seed, w.req.Holder, w.req.Resources, heldBy(o), current[o])
				}
				running = append(running, w.grant)
			}
			waiting = kept
		}
		for step := range 300 {
			switch op := rng.IntN(10); {
			case op < 5:
				owner := owners[rng.IntN(len(owners))]
				req := ask(fmt.Sprint(owner, "/", step), 1+rng.IntN(3), rng.IntN(3), int64(rng.IntN(4))*GiB)
				if rng.IntN(2) == 0 {
					req.GPUs, req.GPUMemBytes = 0, int64(1+rng.IntN(16))*GiB
				}
				req.Owner, req.Priority = owner, rng.IntN(3)
				if tk, err := p.Submit(req, nil); err == nil {
					waiting = append(waiting, tk.w)
				}
				collect()
			case op < 6 && len(waiting) > 0:
				i := rng.IntN(len(waiting))
				w := waiting[i]
				waiting = append(waiting[:i], waiting[i+1:]...)
				if !(&Ticket{p: p, w: w}).Cancel() {
					running = append(running, w.grant)
				}
				collect()
			case op < 9 && len(running) > 0:
				i := rng.IntN(len(running))
				if err := b.Give(running[i]); err != nil {
					t.Fatal(err)
				}
				running = append(running[:i], running[i+1:]...)
				collect()
			default:
				// A quota lowered applies to what starts next; what runs
				// keeps its grant.
				current = quotas()
				p.SetQuotas(current, NoQuota)
				collect()
				continue
			}
			checkConsistent(t, b.Snapshot())
			held := map[string]Resources{}
			for _, g := range running {
				held[g.Owner] = held[g.Owner].Plus(g.Resources())
			}
			for owner, r := range held {
				if owner != "" && b.Held(owner) != r {
					t.Fatalf("seed %d step %d: the book says %s holds %+v, the grants %+v", seed, step, owner, b.Held(owner), r)
				}
			}
			for _, w := range waiting {
				if granted(w) {
					t.Fatalf("seed %d step %d: a granted waiter still listed", seed, step)
				}
			}
		}
	}
}
