package accounting

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// BenchmarkPlacementDecision measures one decision on a full machine with n
// waiters in a handful of shapes behind a blocked head: a run ends, the
// Placer offers what it held back to the queue, one waiter backfills, and a
// new waiter of the same shape queues up (a second, cheaper decision).
func BenchmarkPlacementDecision(b *testing.B) {
	for _, n := range []int{10, 1000, 10000} {
		b.Run(fmt.Sprint("waiters=", n), func(b *testing.B) {
			clock := newFakeClock()
			p := NewPlacer(clock.Now)
			book := p.AddMachine(machine(64, 8, 512*GiB))
			var running []Grant
			for range 8 {
				g, _ := book.TryTake(bounded(ask("running", 8, 1, 32*GiB), time.Hour), epoch)
				running = append(running, g)
			}
			// The head wants every card: it blocks and holds back what frees.
			queueUp(p, ask("whole-box", 4, 8, 0))
			shapes := map[string]Request{
				"sweep":    bounded(ask("sweep", 8, 1, 32*GiB), 2*time.Hour),
				"notebook": ask("notebook", 8, 1, 16*GiB),
				"prep":     bounded(ask("prep", 8, 1, 8*GiB), 30*time.Minute),
				"eval":     ask("eval", 8, 1, 32*GiB),
			}
			names := []string{"sweep", "notebook", "prep", "eval"}
			for i := range n {
				queueUp(p, shapes[names[i%len(names)]])
			}
			started := 0
			b.ResetTimer()
			for i := 0; b.Loop(); i++ {
				k := i % len(running)
				last := book.nextID
				if err := book.Give(running[k]); err != nil {
					b.Fatal(err)
				}
				if book.nextID == last {
					b.Fatal("nothing started in the released place")
				}
				started++
				running[k] = book.grants[book.nextID]
				queueUp(p, shapes[running[k].Holder])
			}
			if waiting := len(p.Waiting()); waiting != n+1 {
				b.Fatalf("queue length drifted to %d", waiting)
			}
		})
	}
}

// BenchmarkPlacementChurn: 10 000 jobs of twelve shapes wait on a 64-core,
// 8-card machine; runs end at 100 a second (the clock moves 10 ms per end),
// each end has the Placer start what now fits, and a job of a random shape
// joins the queue. One op is one end and everything it decides; the
// distribution of their times is reported as p50-ns, p99-ns and max-ns.
func BenchmarkPlacementChurn(b *testing.B) {
	const waiters = 10000
	clock := newFakeClock()
	p := NewPlacer(clock.Now)
	book := p.AddMachine(machine(64, 8, 512*GiB))
	rng := rand.New(rand.NewPCG(1, 2))
	var shapes []Request
	for i, s := range []struct {
		cpus, gpus int
		ram        int64
		limit      time.Duration
	}{
		{1, 0, 2 * GiB, 0}, {2, 0, 4 * GiB, 10 * time.Minute}, {4, 0, 8 * GiB, time.Hour}, {8, 0, 16 * GiB, 0},
		{16, 0, 64 * GiB, 2 * time.Hour}, {4, 1, 32 * GiB, 0}, {8, 1, 32 * GiB, time.Hour}, {8, 2, 64 * GiB, 0},
		{16, 4, 128 * GiB, 6 * time.Hour}, {32, 8, 256 * GiB, 0}, {1, 0, 0, time.Minute}, {2, 1, 8 * GiB, 30 * time.Minute},
	} {
		shapes = append(shapes, bounded(ask(fmt.Sprint("shape-", i), s.cpus, s.gpus, s.ram), s.limit))
	}
	var running []uint64 // ids of the grants held
	collect := func(after uint64) {
		for id := after + 1; id <= book.nextID; id++ {
			if _, ok := book.grants[id]; ok {
				running = append(running, id)
			}
		}
	}
	for range waiters {
		queueUp(p, shapes[rng.IntN(len(shapes))])
	}
	collect(0)
	times := make([]time.Duration, 0, 1<<16)
	for b.Loop() {
		if len(running) == 0 {
			b.Fatal("nothing runs")
		}
		k := rng.IntN(len(running))
		id := running[k]
		running[k] = running[len(running)-1]
		running = running[:len(running)-1]
		clock.Set(clock.Now().Add(10 * time.Millisecond))
		last := book.nextID
		t0 := time.Now()
		if err := book.Give(book.grants[id]); err != nil {
			b.Fatal(err)
		}
		times = append(times, time.Since(t0))
		// The arrival may start at once, too.
		queueUp(p, shapes[rng.IntN(len(shapes))])
		collect(last)
	}
	slices.Sort(times)
	at := func(q float64) float64 { return float64(times[int(q*float64(len(times)-1))].Nanoseconds()) }
	b.ReportMetric(at(0.5), "p50-ns")
	b.ReportMetric(at(0.99), "p99-ns")
	b.ReportMetric(at(1), "max-ns")
	b.ReportMetric(float64(len(p.Waiting())), "waiting-at-end")
}
