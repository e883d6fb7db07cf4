package supervisor

import (
	"sync/atomic"
	"time"
)

// workers runs the jobs' goroutines (a job's loop, each time it wakes from
// sleep) on goroutines it keeps: one that is done waits for the next loop,
// with the stack the last one grew, up to maxIdle of them. A new goroutine
// starts at the runtime's smallest stack and grows it, copying it at each
// doubling, on a job's way through a spawn or a reaping; a thousand short
// runs wake their jobs twice each, and the copies were 6 % of the daemon's
// CPU. The runtime still shrinks the stacks of those that wait (at a GC),
// but one that is used again grows once per GC, not once per wake-up.
type workers struct {
	loops   chan func() // unbuffered: a send is taken only by a waiting worker
	quit    chan struct{}
	idle    atomic.Int32 // waiting for a loop
	alive   atomic.Int32 // waiting or running one
	idleFor time.Duration
}

// maxIdle bounds the workers kept waiting, and defaultIdleFor how long one
// waits before it ends: jobs wake a few at a time, each waiting worker
// costs its stack, and a daemon at rest keeps none.
const (
	maxIdle        = 8
	defaultIdleFor = time.Second
)

func newWorkers() *workers {
	return &workers{loops: make(chan func()), quit: make(chan struct{}), idleFor: defaultIdleFor}
}

// run runs f on a waiting worker, or on a new goroutine that then stays
// as one. It does not block.
func (w *workers) run(f func()) {
	select {
	case w.loops <- f:
	default:
		go w.work(f)
	}
}

func (w *workers) work(f func()) {
	w.alive.Add(1)
	defer w.alive.Add(-1)
	var timer *time.Timer // made at the first wait, reset at each
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		f()
		if w.idle.Add(1) > maxIdle {
			w.idle.Add(-1)
			return
		}
		if timer == nil {
			timer = time.NewTimer(w.idleFor)
		} else {
			timer.Reset(w.idleFor)
		}
		more := false
		select {
		case f = <-w.loops:
			more = true
		case <-timer.C:
		case <-w.quit:
		}
		w.idle.Add(-1)
		if !more {
			return
		}
	}
}

// stop lets the waiting workers go; run still works after it, on new
// goroutines that end with their function.
func (w *workers) stop() { close(w.quit) }
