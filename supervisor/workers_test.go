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

// runOne runs a function on w and returns the goroutine it ran on.
func runOne(t *testing.T, w *workers) uint64 {
	t.Helper()
	ids := make(chan uint64, 1)
	w.run(func() { ids <- goroutineID() })
	select {
	case id := <-ids:
		return id
	case <-time.After(10 * time.Second):
		t.Fatal("the function did not run in 10s")
		return 0
	}
}

// waitIdle waits for n of w's workers to be counted as waiting.
func waitIdle(t *testing.T, w *workers, n int32) {
	t.Helper()
	testkit.WaitFor(t, 10*time.Second, strconv.Itoa(int(n))+" waiting workers", func() bool { return w.idle.Load() == n })
}

// TestWorkersReuse: functions run one after the other go to the workers
// that wait, not each to a goroutine of its own; at most maxIdle wait;
// after stop none does, and run still runs.
func TestWorkersReuse(t *testing.T) {
	t.Parallel()
	w := newWorkers()
	w.idleFor = time.Hour // none leaves on its own here
	const n = 50
	ids := map[uint64]bool{}
	first := runOne(t, w)
	ids[first] = true
	for range n - 1 {
		// Counted as waiting a moment before it waits: a run in that
		// moment starts a goroutine, which then waits too.
		testkit.WaitFor(t, 10*time.Second, "a waiting worker", func() bool { return w.idle.Load() >= 1 })
		ids[runOne(t, w)] = true
	}
	if len(ids) > n/5 {
		t.Errorf("%d functions run one after the other went to %d goroutines, want a few", n, len(ids))
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
	waitIdle(t, w, maxIdle)

	w.stop()
	waitIdle(t, w, 0)
	if id := runOne(t, w); id == first {
		t.Errorf("a run after stop went to a worker that should have left")
	}
}

// TestWorkersLeaveWhenIdle: a worker that waited idleFor for nothing ends,
// so that a daemon at rest keeps none.
func TestWorkersLeaveWhenIdle(t *testing.T) {
	t.Parallel()
	w := newWorkers()
	defer w.stop()
	w.idleFor = 10 * time.Millisecond
	runOne(t, w)
	testkit.WaitFor(t, 10*time.Second, "the worker to leave", func() bool { return w.alive.Load() == 0 })
	if n := w.idle.Load(); n != 0 {
		t.Errorf("%d workers waiting with none alive", n)
	}
}
