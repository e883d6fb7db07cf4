package supervisor

import (
	"bytes"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/berthd/berth/supervisor/testkit"
)

// goroutineID is the calling goroutine's number, as a stack dump has it.
func goroutineID() uint64 {
	b := make([]byte, 64)
	b = b[:runtime.Stack(b, false)]
	b = bytes.TrimPrefix(b, []byte("goroutine "))
	id, _ := strconv.ParseUint(string(b[:bytes.IndexByte(b, ' ')]), 10, 64)
	return id
}

// TestWorkersReuse: a function run once a worker waits runs on that
// worker; at most maxIdle wait; after stop none does, and run still runs.
func TestWorkersReuse(t *testing.T) {
	w := newWorkers()
	ids := make(chan uint64, 1)
	runOne := func() uint64 {
		w.run(func() { ids <- goroutineID() })
		select {
		case id := <-ids:
			return id
		case <-time.After(10 * time.Second):
			t.Fatal("the function did not run in 10s")
			return 0
		}
	}
	idle := func(n int32) {
		t.Helper()
		testkit.WaitFor(t, 10*time.Second, strconv.Itoa(int(n))+" waiting workers", func() bool { return w.idle.Load() == n })
	}
	first := runOne()
	idle(1)
	for i := range 5 {
		if id := runOne(); id != first {
			t.Fatalf("run %d went to goroutine %d, not to the waiting worker %d", i, id, first)
		}
		idle(1)
	}

	// Many at once: each on a goroutine, and no more than maxIdle stay.
	release := make(chan struct{})
	started := make(chan uint64, 3*maxIdle)
	for range 3 * maxIdle {
		w.run(func() {
			started <- goroutineID()
			<-release
		})
	}
	seen := map[uint64]bool{}
	for range 3 * maxIdle {
		seen[<-started] = true
	}
	if len(seen) != 3*maxIdle {
		t.Errorf("%d functions that block ran on %d goroutines", 3*maxIdle, len(seen))
	}
	close(release)
	idle(maxIdle)

	w.stop()
	idle(0)
	if id := runOne(); id == first {
		t.Errorf("a run after stop went to a worker that should have left")
	}
}
