package accounting

import (
	"fmt"
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
