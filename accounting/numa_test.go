package accounting

import (
	"slices"
	"testing"
)

// twoNodes is a box of 16 cores and 8 cards on two NUMA nodes: cores 0-7
// and cards 0-3 on node 0, cores 8-15 and cards 4-7 on node 1.
func twoNodes() Capacity {
	c := machine(16, 8, 256*GiB)
	c.CPUIDs = make([]int, 16)
	c.CPUNodes = make([]int, 16)
	for i := range c.CPUIDs {
		c.CPUIDs[i] = i
		c.CPUNodes[i] = i / 8
	}
	c.GPUNodes = []int{0, 0, 0, 0, 1, 1, 1, 1}
	return c
}

// TestBookNUMA: a job's cards are chosen on one node where one has enough
// free, the node with more free cores first; its cores come from its
// cards' nodes, then from anywhere; without a topology, lowest first.
func TestBookNUMA(t *testing.T) {
	type take struct {
		cpus, gpus int
		cores      []int
		cards      []int
	}
	for _, c := range []struct {
		name  string
		cap   Capacity
		takes []take
	}{
		{"one job, node 0", twoNodes(), []take{
			{4, 2, []int{0, 1, 2, 3}, []int{0, 1}},
		}},
		{"node 0 short of cards: node 1 whole, cores there", twoNodes(), []take{
			{1, 3, []int{0}, []int{0, 1, 2}},
			{4, 2, []int{8, 9, 10, 11}, []int{4, 5}},
		}},
		{"no node has enough: lowest free across both", twoNodes(), []take{
			{1, 2, []int{0}, []int{0, 1}},
			{1, 2, []int{8}, []int{4, 5}},
			{2, 4, []int{1, 2}, []int{2, 3, 6, 7}},
		}},
		{"cards free on both: the node with more free cores", twoNodes(), []take{
			{6, 0, []int{0, 1, 2, 3, 4, 5}, nil}, // a CPU-only job, lowest first
			{2, 1, []int{8, 9}, []int{4}},
		}},
		{"the cards' node short of cores: the rest from the other", twoNodes(), []take{
			{1, 4, []int{0}, []int{0, 1, 2, 3}},
			{7, 4, []int{8, 9, 10, 11, 12, 13, 14}, []int{4, 5, 6, 7}},
			{4, 0, []int{1, 2, 3, 4}, nil},
		}},
		{"cards on node 1 spill cores to node 0", twoNodes(), []take{
			{1, 4, []int{0}, []int{0, 1, 2, 3}},
			{10, 2, []int{1, 2, 8, 9, 10, 11, 12, 13, 14, 15}, []int{4, 5}},
		}},
		{"no topology: lowest first", machine(16, 8, 256*GiB), []take{
			{1, 3, []int{0}, []int{0, 1, 2}},
			{4, 2, []int{1, 2, 3, 4}, []int{3, 4}},
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			c.cap.CPUIDs = make([]int, 16)
			for i := range c.cap.CPUIDs {
				c.cap.CPUIDs[i] = i
			}
			b := NewBook(c.cap, nil)
			for i, tk := range c.takes {
				g, ok := b.TryTake(ask("j", tk.cpus, tk.gpus, 0), epoch)
				if !ok {
					t.Fatalf("take %d refused", i)
				}
				if !slices.Equal(g.CPUIDs, tk.cores) || !slices.Equal(g.GPUs, tk.cards) {
					t.Errorf("take %d: cores %v cards %v; want %v and %v", i, g.CPUIDs, g.GPUs, tk.cores, tk.cards)
				}
			}
		})
	}
}

// TestBookCardsOff: a card that is off is not granted and not counted
// free; one held when it goes off stays held; coming back on places what
// waits.
func TestBookCardsOff(t *testing.T) {
	released := 0
	b := NewBook(machine(8, 4, 0), func() { released++ })
	held, _ := b.TryTake(ask("a", 1, 1, 0), epoch) // card 0
	b.SetCards(off(4, 0, 1))
	if s := b.Snapshot(); s.Free.GPUs != 2 || !slices.Equal(s.CardsOff, []bool{true, true, false, false}) {
		t.Fatalf("free %d cards, off %v", s.Free.GPUs, s.CardsOff)
	}
	g, ok := b.TryTake(ask("b", 1, 2, 0), epoch)
	if !ok || !slices.Equal(g.GPUs, []int{2, 3}) {
		t.Fatalf("took %v, %v; want cards 2 and 3", g.GPUs, ok)
	}
	if _, ok := b.TryTake(ask("c", 1, 1, 0), epoch); ok {
		t.Fatal("a card that is off was granted")
	}
	if err := b.Give(held); err != nil {
		t.Fatal(err)
	}
	if b.Snapshot().Free.GPUs != 0 {
		t.Errorf("card 0, given back while off, counts as free")
	}
	released = 0
	b.SetCards(off(4, 1))
	if released != 1 || b.Snapshot().Free.GPUs != 1 {
		t.Errorf("card 0 back on: %d releases, %d free", released, b.Snapshot().Free.GPUs)
	}
	b.SetCards(off(4, 1))
	if released != 1 {
		t.Errorf("nothing changed, yet %d releases", released)
	}
	// A card going off moves the head's plan: the placer looks again.
	b.SetCards(off(4, 1, 2))
	if released != 2 {
		t.Errorf("card 2 went off: %d releases, want 2", released)
	}
}

// off is the live view of n cards of which those listed are off.
func off(n int, cards ...int) []CardLive {
	live := make([]CardLive, n)
	for _, c := range cards {
		live[c].Off = true
	}
	return live
}

// TestKeepOverFree: a reservation planned before a card went off keeps no
// more than is free: a job that asks for no card is still placed.
func TestKeepOverFree(t *testing.T) {
	b := NewBook(machine(4, 2, 0), nil)
	b.SetCards(off(2, 1))
	if _, ok := b.takeKeeping(ask("cpu-only", 1, 0, 0), epoch, holdBack{Resources: Resources{GPUs: 2}}); !ok {
		t.Error("a job asking for no card was refused for a card that went off")
	}
}
