package accounting

import (
	"errors"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"
)

var epoch = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

func machine(cpus, gpus int, ram int64) Capacity {
	ids := make([]int, cpus)
	for i := range ids {
		ids[i] = i + 2 // as probed: the lowest two are the daemon's
	}
	return Capacity{Name: "local", CPUIDs: ids, GPUs: gpus, RAMBytes: ram, RAMKnown: ram > 0}
}

func ask(holder string, cpus, gpus int, ram int64) Request {
	return Request{Holder: holder, Resources: Resources{CPUs: cpus, GPUs: gpus, RAMBytes: ram}}
}

// checkBalanced fails unless the book is idle and whole again.
func checkBalanced(t *testing.T, b *Book) {
	t.Helper()
	s := b.Snapshot()
	c := s.Capacity
	if len(s.Grants) != 0 {
		t.Errorf("%d grants still held: %+v", len(s.Grants), s.Grants)
	}
	if s.Free.CPUs != c.CPUs() || s.Free.GPUs != c.GPUs || c.RAMKnown && s.Free.RAMBytes != c.RAMBytes {
		t.Errorf("free %+v, capacity %d cpus %d gpus %d ram", s.Free, c.CPUs(), c.GPUs, c.RAMBytes)
	}
	for i, h := range s.CardHolders {
		if h != "" {
			t.Errorf("card %d still held by %q", i, h)
		}
	}
}

func TestBookFits(t *testing.T) {
	b := NewBook(machine(8, 2, 16*GiB), nil)
	unknownRAM := NewBook(machine(8, 2, 0), nil)
	tests := []struct {
		name    string
		r       Resources
		fits    bool
		unknown bool // fits a machine whose memory is unknown
	}{
		{"small", Resources{CPUs: 1}, true, true},
		{"whole machine", Resources{CPUs: 8, GPUs: 2, RAMBytes: 16 * GiB}, true, true},
		{"one core too many", Resources{CPUs: 9}, false, false},
		{"one card too many", Resources{CPUs: 1, GPUs: 3}, false, false},
		{"too much memory", Resources{CPUs: 1, RAMBytes: 17 * GiB}, false, true},
		{"unaccounted", Resources{}, true, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := b.Fits(tt.r); got != tt.fits {
				t.Errorf("Fits(%v) = %v, want %v", tt.r, got, tt.fits)
			}
			if got := unknownRAM.Fits(tt.r); got != tt.unknown {
				t.Errorf("with unknown memory, Fits(%v) = %v, want %v", tt.r, got, tt.unknown)
			}
		})
	}
}

func TestBookTakesLowestFreeFirst(t *testing.T) {
	b := NewBook(machine(4, 4, 8*GiB), nil)
	a, ok := b.TryTake(ask("a", 2, 2, GiB), epoch)
	if !ok {
		t.Fatal("first take refused")
	}
	if !slices.Equal(a.CPUIDs, []int{2, 3}) || !slices.Equal(a.GPUs, []int{0, 1}) {
		t.Fatalf("a got cores %v cards %v, want [2 3] and [0 1]", a.CPUIDs, a.GPUs)
	}
	c, _ := b.TryTake(ask("c", 1, 1, GiB), epoch)
	if err := b.Give(a); err != nil {
		t.Fatal(err)
	}
	d, _ := b.TryTake(ask("d", 2, 2, 0), epoch)
	if !slices.Equal(d.CPUIDs, []int{2, 3}) || !slices.Equal(d.GPUs, []int{0, 1}) {
		t.Fatalf("after a left, d got cores %v cards %v, want the freed [2 3] and [0 1]", d.CPUIDs, d.GPUs)
	}
	s := b.Snapshot()
	if want := []string{"d", "d", "c", ""}; !slices.Equal(s.CardHolders, want) {
		t.Errorf("card holders %q, want %q", s.CardHolders, want)
	}
	if s.Free != (Resources{CPUs: 1, GPUs: 1, RAMBytes: 7 * GiB}) {
		t.Errorf("free %+v", s.Free)
	}
	for _, g := range []Grant{c, d} {
		if err := b.Give(g); err != nil {
			t.Fatal(err)
		}
	}
	checkBalanced(t, b)
}

func TestBookRefusesWhatIsNotFree(t *testing.T) {
	tests := []struct {
		name  string
		first Request
		then  Request
		ok    bool
	}{
		{"cores", ask("a", 3, 0, 0), ask("b", 2, 0, 0), false},
		{"cards", ask("a", 1, 2, 0), ask("b", 1, 1, 0), false},
		{"memory", ask("a", 1, 0, 6*GiB), ask("b", 1, 0, 3*GiB), false},
		{"exactly the rest", ask("a", 1, 1, 4*GiB), ask("b", 3, 1, 4*GiB), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := NewBook(machine(4, 2, 8*GiB), nil)
			if _, ok := b.TryTake(tt.first, epoch); !ok {
				t.Fatal("first take refused")
			}
			before := b.Snapshot().Free
			_, ok := b.TryTake(tt.then, epoch)
			if ok != tt.ok {
				t.Fatalf("second take ok = %v, want %v", ok, tt.ok)
			}
			if !ok && b.Snapshot().Free != before {
				t.Errorf("a refused take changed the books: %+v → %+v", before, b.Snapshot().Free)
			}
		})
	}
}

func TestBookUnknownMemoryIsNotAccounted(t *testing.T) {
	b := NewBook(machine(2, 0, 0), nil)
	for i := range 2 {
		if _, ok := b.TryTake(ask("big", 1, 0, 512*GiB), epoch); !ok {
			t.Fatalf("take %d refused: memory is unknown, so it must not count", i)
		}
	}
}

func TestBookGiveTwice(t *testing.T) {
	released := 0
	b := NewBook(machine(2, 1, 0), func() { released++ })
	g, _ := b.TryTake(ask("a", 1, 1, 0), epoch)
	if err := b.Give(g); err != nil {
		t.Fatal(err)
	}
	if err := b.Give(g); !errors.Is(err, ErrUnknownGrant) {
		t.Fatalf("second Give = %v, want ErrUnknownGrant", err)
	}
	if released != 1 {
		t.Errorf("release callback ran %d times, want 1", released)
	}
	checkBalanced(t, b)
}

func TestBookGrantUntil(t *testing.T) {
	b := NewBook(machine(2, 0, 0), nil)
	req := ask("a", 1, 0, 0)
	req.Limit = time.Hour
	g, _ := b.TryTake(req, epoch)
	if !g.Until.Equal(epoch.Add(time.Hour)) {
		t.Errorf("Until = %v, want an hour after the start", g.Until)
	}
	g, _ = b.TryTake(ask("b", 1, 0, 0), epoch)
	if !g.Until.IsZero() {
		t.Errorf("unbounded request got Until %v", g.Until)
	}
}

// TestBookReleaseOutsideLock checks the written lock order: the callback can
// use the book.
func TestBookReleaseOutsideLock(t *testing.T) {
	var b *Book
	b = NewBook(machine(1, 0, 0), func() { b.Snapshot() })
	g, _ := b.TryTake(ask("a", 1, 0, 0), epoch)
	if err := b.Give(g); err != nil {
		t.Fatal(err)
	}
}

// checkConsistent fails unless a snapshot adds up: free plus everything
// granted is the capacity, no core is in two grants, no card is held whole
// by two or both held whole and shared, and what shares booked of a card
// is what its shares asked, within its memory.
func checkConsistent(t *testing.T, s Snapshot) {
	t.Helper()
	sum := s.Free
	sum.GPUMemBytes = 0
	cores, cards := map[int]uint64{}, map[int]uint64{}
	booked := make([]int64, len(s.CardHolders))
	for _, g := range s.Grants {
		sum = sum.Plus(g.Resources())
		for _, c := range g.CPUIDs {
			if other, dup := cores[c]; dup {
				t.Errorf("core %d is in grants %d and %d", c, other, g.ID)
			}
			cores[c] = g.ID
		}
		for _, c := range g.GPUs {
			if g.GPUMemBytes > 0 {
				booked[c] += g.GPUMemBytes
				continue
			}
			if other, dup := cards[c]; dup {
				t.Errorf("card %d is in grants %d and %d", c, other, g.ID)
			}
			cards[c] = g.ID
			if s.CardHolders[c] != g.Holder {
				t.Errorf("card %d shows holder %q, granted to %q", c, s.CardHolders[c], g.Holder)
			}
		}
	}
	for c := range s.CardHolders {
		switch {
		case booked[c] != s.CardBooked[c]:
			t.Errorf("card %d: shares asked %d bytes, the books say %d booked", c, booked[c], s.CardBooked[c])
		case booked[c] > 0 && s.CardHolders[c] != "":
			t.Errorf("card %d is held whole by %q and shared", c, s.CardHolders[c])
		case booked[c] > 0:
			sum.GPUs++ // a shared card is no whole card
			if m := s.Capacity.cardMem(c); m > 0 && booked[c] > m {
				t.Errorf("card %d: %d bytes booked of its %d", c, booked[c], m)
			}
		case s.CardsOff[c] && s.CardHolders[c] == "":
			sum.GPUs++ // off, and counted free by no one
		}
	}
	c := s.Capacity
	if sum.CPUs != c.CPUs() || sum.GPUs != c.GPUs || c.RAMKnown && sum.RAMBytes != c.RAMBytes {
		t.Errorf("free + granted = %+v, capacity %d cpus %d gpus %d ram", sum, c.CPUs(), c.GPUs, c.RAMBytes)
	}
}

// TestBookHammer takes and gives from many goroutines while another checks
// that every snapshot adds up, then that the books balance exactly.
func TestBookHammer(t *testing.T) {
	b := NewBook(machine(16, 4, 64*GiB), nil)
	done := make(chan struct{})
	checked := make(chan int)
	go func() {
		n := 0
		for {
			select {
			case <-done:
				checked <- n
				return
			default:
				checkConsistent(t, b.Snapshot())
				n++
			}
		}
	}()
	var wg sync.WaitGroup
	for worker := range 16 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(worker), 1))
			holder := string(rune('a' + worker))
			for range 2000 {
				g, ok := b.TryTake(ask(holder, 1+rng.IntN(3), rng.IntN(2), int64(rng.IntN(8))*GiB), epoch)
				if !ok {
					continue
				}
				if err := b.Give(g); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	close(done)
	if n := <-checked; n == 0 {
		t.Error("no snapshot was checked while the workers ran")
	}
	checkBalanced(t, b)
}

func BenchmarkTakeGive(b *testing.B) {
	book := NewBook(machine(64, 8, 512*GiB), nil)
	// A half-busy machine, as it usually is.
	for i := range 16 {
		book.TryTake(ask(string(rune('a'+i)), 2, 0, GiB), epoch)
	}
	req := ask("bench", 4, 1, 8*GiB)
	b.ReportAllocs()
	for b.Loop() {
		g, ok := book.TryTake(req, epoch)
		if !ok {
			b.Fatal("refused")
		}
		if err := book.Give(g); err != nil {
			b.Fatal(err)
		}
	}
}

func TestRestoreTakesExactlyWhatARunHolds(t *testing.T) {
	b := NewBook(Capacity{Name: "local", CPUIDs: []int{0, 2, 4, 6}, GPUs: 2, RAMBytes: 8 << 30, RAMKnown: true}, nil)
	g, err := b.Restore(Grant{Holder: "train", Owner: "alice", CPUIDs: []int{6, 2}, GPUs: []int{1}, RAMBytes: 2 << 30})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(g.CPUIDs, []int{2, 6}) || !slices.Equal(g.GPUs, []int{1}) || g.RAMBytes != 2<<30 {
		t.Fatalf("restored %+v", g)
	}
	// What is left is granted lowest first, around the restored grant.
	next, ok := b.TryTake(Request{Holder: "next", Resources: Resources{CPUs: 2, GPUs: 1, RAMBytes: 6 << 30}}, time.Time{})
	if !ok || !slices.Equal(next.CPUIDs, []int{0, 4}) || !slices.Equal(next.GPUs, []int{0}) {
		t.Fatalf("next grant %+v %v", next, ok)
	}
	for _, bad := range []struct {
		cpus, gpus []int
		ram        int64
	}{
		{[]int{0}, nil, 0}, // held
		{[]int{8}, nil, 0}, // not on this machine
		{nil, []int{2}, 0}, // no such card
		{nil, []int{1}, 0}, // held
		{nil, nil, 1},      // no memory left
	} {
		if _, err := b.Restore(Grant{Holder: "bad", CPUIDs: bad.cpus, GPUs: bad.gpus, RAMBytes: bad.ram}); err == nil {
			t.Errorf("restore %+v succeeded", bad)
		}
	}
	if err := b.Give(g); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Restore(Grant{Holder: "again", CPUIDs: []int{2, 6}, GPUs: []int{1}, RAMBytes: 2 << 30}); err != nil {
		t.Errorf("after Give: %v", err)
	}
}

// TestBookReschedule: a grant's end moves earlier or later, and only for
// a grant the book holds.
func TestBookReschedule(t *testing.T) {
	b := NewBook(machine(2, 0, 0), nil)
	g, ok := b.TryTake(bounded(ask("a", 1, 0, 0), time.Hour), epoch)
	if !ok {
		t.Fatal("the book refused its first grant")
	}
	for _, until := range []time.Time{epoch.Add(time.Minute), epoch.Add(2 * time.Hour), {}} {
		if err := b.Reschedule(g, until); err != nil {
			t.Fatal(err)
		}
		if got := b.grants[g.ID].Until; !got.Equal(until) {
			t.Errorf("Until after Reschedule to %v: %v", until, got)
		}
	}
	if err := b.Give(g); err != nil {
		t.Fatal(err)
	}
	if err := b.Reschedule(g, epoch); !errors.Is(err, ErrUnknownGrant) {
		t.Errorf("Reschedule of a grant given back = %v, want ErrUnknownGrant", err)
	}
}
