package supervisor

import (
	"net/http"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
)

// Handing memory back once the daemon is quiet.
//
// Work allocates briefly and heavily (evaluating a file costs ~150 KiB,
// five statuses of 1 000 jobs grew the heap by 3 MB, every job a reload
// starts grows a stack) and touches code all over the binary, and the
// daemon then idles for hours holding both: 1 000 running jobs kept
// 26.8 MiB of RSS where 16.9 MiB do (berth-bench -only footprint). While
// work goes on, though, the memory is wanted again at once, and handing it
// back would be paid for nothing. So the daemon waits until it has done no
// work for settleAfter.

// defaultSettle is how long the daemon waits with no work done before it
// hands memory back.
const defaultSettle = 2 * time.Second

// worked notes that the daemon did some work: a reload, a request, a run
// started. Once it has done none for settleAfter, settled hands back the
// memory the work left. Any goroutine.
func (d *Daemon) worked() {
	n := d.work.Add(1)
	if !d.settleArmed.Load() && d.settleArmed.CompareAndSwap(false, true) {
		d.settleWork.Store(n)
		d.settle.Reset(d.settleAfter)
	}
}

// asWork counts every request h serves as work: what it leaves is handed
// back once the daemon is quiet.
func (d *Daemon) asWork(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		d.worked()
		h.ServeHTTP(w, r)
	})
}

// settled is called by the loop when settle fires: work done since it was
// armed arms it again; otherwise the memory is handed back, or the timer
// stays armed until it may be.
func (d *Daemon) settled() {
	n := d.work.Load()
	if n != d.settleWork.Load() {
		d.settleWork.Store(n)
		d.settle.Reset(d.settleAfter)
		return
	}
	if again := d.freeMemory(); again > 0 {
		d.settle.Reset(again)
		return
	}
	d.settleArmed.Store(false)
	// Work done while the memory was handed back did not arm the timer.
	if d.work.Load() != n {
		d.worked()
	}
}

// The Go runtime collects of its own accord too, at least every two
// minutes when nothing else made it, and a collection maps again what it
// runs and scans: 3–4 MiB of the binary with 1 000 jobs, which a quiet
// daemon kept until its next work, the watcher's rescan up to 30 s later
// (RSS 20.6–21.7 MiB for 21–24 s, where 17 before). So the runtime's
// collections count as work.
//
// gcWatch reports each collection to seen, with whether it was the
// hand-back's own (collect), which must not count: it would arm one more
// hand-back after each that collects. It learns of a collection through a cleanup on an
// object nothing holds: the next collection frees it, and the cleanup
// attaches itself to a new one.
type gcWatch struct {
	seen    func(own bool)
	own     atomic.Bool // the next collection is the hand-back's
	stopped atomic.Bool
}

// gcSentinel holds a pointer so that it is never batched with other
// objects in one allocation (the tiny allocator's), which would keep its
// cleanup from running while they live.
type gcSentinel struct{ _ *gcSentinel }

func (w *gcWatch) start() {
	runtime.AddCleanup(new(gcSentinel), (*gcWatch).collected, w)
}

// stop ends the watch at the next collection, after which nothing holds
// w (or what seen refers to).
func (w *gcWatch) stop() { w.stopped.Store(true) }

func (w *gcWatch) collected() {
	if w.stopped.Load() {
		return
	}
	// Armed again before the report: whoever hears it and collects at
	// once is seen too (the test's second collection went unseen when it
	// came between the report and the re-arming).
	own := w.own.Swap(false)
	w.start()
	w.seen(own)
}

// collect collects and returns the heap's free pages to the system; the
// collection is reported as the hand-back's own.
func (w *gcWatch) collect() {
	w.own.Store(true)
	debug.FreeOSMemory()
}

// What a hand-back costs: a collection, a whole one (6–16 ms of CPU with
// 1 000 jobs here), and the reading of /proc/self/smaps and the unmapping
// (1–6 ms), after which the next work maps again what it runs (a status or
// a scrape of 1 000 jobs: 7 MB of the binary). So the binary's pages are
// unmapped at most every releaseEvery and a collection is made at most
// every collectEvery: a client that asks for a status every few seconds
// costs at most one of each every 10 and 30 s, not one each time (every
// 2 s or less, none: the daemon is never quiet). And a collection is made
// only when collectWorth was allocated since the hand-back's last: a
// reload that found nothing new, every 30 s, allocates 90–180 KiB with
// 1 000 jobs (the debug line's allocated_kib).
const (
	releaseEvery = 10 * time.Second
	collectEvery = 30 * time.Second
	collectWorth = 1 << 20
)

// handBack hands memory back to the system: the heap's free pages, after
// a collection, and the pages of the binary that work touched
// (binpages_linux.go). Only the loop runs it.
type handBack struct {
	log       hclog.Logger
	now       func() time.Time
	allocated func() uint64 // bytes allocated on the heap since the start
	collect   func()
	release   func() (kib int, err error)

	released    time.Time // when it last unmapped the binary's pages
	collected   time.Time // when it last collected
	collectedAt uint64    // allocated, then
}

// newHandBack returns the daemon's hand-back, which collects through
// collect (gcWatch's).
func newHandBack(log hclog.Logger, collect func()) *handBack {
	allocs := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}}
	return &handBack{
		log: log,
		now: time.Now,
		allocated: func() uint64 {
			metrics.Read(allocs)
			return allocs[0].Value.Uint64()
		},
		collect: collect,
		release: releaseBinaryPages,
	}
}

// run hands memory back; again > 0 is how long until it may hand back
// what it could not now. A collection put off is come back for after
// releaseEvery at most, so that the pages of work done meanwhile are not
// kept for longer.
func (h *handBack) run() (again time.Duration) {
	now := h.now()
	if wait := h.released.Add(releaseEvery).Sub(now); wait > 0 {
		return wait
	}
	collected, allocated := false, h.allocated()
	since := allocated - h.collectedAt
	if since >= collectWorth {
		if wait := h.collected.Add(collectEvery).Sub(now); wait > 0 {
			again = min(wait, releaseEvery)
		} else {
			h.collect()
			h.collected, h.collectedAt, collected = now, allocated, true
		}
	}
	kib, err := h.release()
	if err != nil {
		h.log.Debug("could not unmap the binary's pages", "error", err)
	}
	h.released = now
	h.log.Debug("memory handed back", "allocated_kib", since>>10, "collected", collected,
		"binary_unmapped_kib", kib, "duration_us", h.now().Sub(now).Microseconds())
	return again
}
