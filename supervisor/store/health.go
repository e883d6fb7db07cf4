package store

import (
	"sync/atomic"
	"time"

	"github.com/berthd/berth/supervisor/clock"
)

// defaultRecoverAfter is how long commits must go without a failure before
// the state counts as recorded again. On a nearly full disk some commits
// fit in pages bbolt already has and others need new ones, so successes
// and failures alternate; without this the status and the log would flap.
const defaultRecoverAfter = 5 * time.Second

// health is whether the state is being recorded: one verdict, reached
// by the writer goroutine alone, that the status (Failing) and the log lines
// (OnHealth) both follow, so they cannot disagree. It turns to failing at
// the first failed commit. It turns back once a commit has succeeded with
// no write of a failed one still kept, and recoverAfter has passed since
// the last failure: a timer on the writer's clock makes the turn at that
// moment, whether or not anything is being written then.
type health struct {
	clock        clock.Clock
	recoverAfter time.Duration
	onHealth     func(error) // nil: nobody to tell

	// Owned by the writer goroutine.
	failedAt time.Time   // when the last commit failed, while failing
	recovery clock.Timer // armed once a commit has succeeded since the last failure, else nil

	// failing is the verdict: the error of the last failed commit while
	// failing, nil while the state is recorded. Written by the writer only;
	// read by anyone (Store.Failing).
	failing atomic.Pointer[error]
}

// committed takes the outcome of one commit; backlog says that writes of
// failed commits are still kept, not yet in. Writer only.
func (h *health) committed(err error, backlog bool) {
	if err != nil {
		h.failedAt = h.clock.Now()
		h.disarm()
		if h.failing.Load() == nil {
			h.turn(err)
			return
		}
		h.failing.Store(&err) // still failing: the status shows the latest cause
		return
	}
	if h.failing.Load() == nil {
		return
	}
	if backlog {
		// Newer writes go in beside older ones that do not: the state
		// is not recorded until those are in too.
		h.disarm()
		return
	}
	if h.recovery != nil {
		return
	}
	left := h.recoverAfter - h.clock.Now().Sub(h.failedAt)
	if left <= 0 {
		h.turn(nil)
		return
	}
	h.recovery = h.clock.NewTimer(left)
}

// due fires when the state counts as recorded again; the writer waits on
// it beside its work and then calls recovered. Nil, which never fires,
// while no recovery is pending. Writer only.
func (h *health) due() <-chan time.Time {
	if h.recovery == nil {
		return nil
	}
	return h.recovery.C()
}

// recovered makes the turn that due announced. Writer only.
func (h *health) recovered() {
	h.recovery = nil
	h.turn(nil)
}

// disarm cancels a pending recovery. Writer only.
func (h *health) disarm() {
	if h.recovery != nil {
		h.recovery.Stop()
		h.recovery = nil
	}
}

// turn changes the verdict to err (nil: recorded). It publishes before it
// tells onHealth, so that onHealth, and whoever hears from it, finds
// Failing already saying the same.
func (h *health) turn(err error) {
	if err == nil {
		h.failing.Store(nil)
	} else {
		h.failing.Store(&err)
	}
	if h.onHealth != nil {
		h.onHealth(err)
	}
}

// Failing is the error of the last failed commit while the state is not
// being recorded, nil while it is. It turns to the error at the first
// failed commit, and back to nil once a commit has succeeded and 5 s have
// passed since the last failure, whether or not anything is written then.
func (s *Store) Failing() error {
	if p := s.health.failing.Load(); p != nil {
		return *p
	}
	return nil
}
