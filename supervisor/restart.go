package supervisor

import (
	"time"

	"github.com/berthd/berth/luaapi"
	"github.com/berthd/berth/supervisor/store"
)

// Restart delays, as DESIGN.md fixes them: they double from the first to
// the last, and start over after a run that stayed up for healthyRun.
const (
	firstDelay = time.Second
	lastDelay  = time.Minute
	healthyRun = time.Minute
)

// restartPolicy is the part of a job's declaration that decides restarts.
type restartPolicy struct {
	mode        luaapi.Restart
	maxRestarts int // consecutive; negative means unlimited
}

// restartDecision is what a run's end means for the next one.
type restartDecision struct {
	restart  bool
	delay    time.Duration // before the restart
	next     time.Duration // the delay after that
	restarts int           // consecutive restarts, this one included
	// final is where the job rests when it does not restart.
	final store.State
}

// decideRestart applies the policy to a run that ended on its own (or by its
// timeout). failed is a non-zero exit, a signal, a timeout or a spawn error;
// ran is how long it was up; restarts and delay are the job's counters.
// delayAfter is the delay before the restart that follows restarts of
// them in a row (decideRestart's, doubled at each).
func delayAfter(restarts int) time.Duration {
	d := firstDelay
	for range restarts {
		if d = 2 * d; d >= lastDelay {
			return lastDelay
		}
	}
	return d
}

// wants says whether p restarts a job whose run failed (or not), after
// restarts in a row; restarts < 0 asks of the mode alone.
func (p restartPolicy) wants(failed bool, restarts int) bool {
	mode := p.mode == luaapi.RestartAlways || p.mode == luaapi.RestartOnFailure && failed
	return mode && (restarts < 0 || p.maxRestarts < 0 || restarts < p.maxRestarts)
}

func decideRestart(p restartPolicy, failed bool, ran time.Duration, restarts int, delay time.Duration) restartDecision {
	if ran >= healthyRun || delay == 0 {
		restarts, delay = 0, firstDelay
	}
	final := store.StateDone
	if failed || p.wants(failed, -1) {
		// A run that failed, or one the policy would have restarted but
		// for max_restarts: it gave up, whatever the last exit, also
		// where max_restarts = 0 let it make none (trial AX: "always"
		// rested done with 0 and failed with 3).
		final = store.StateFailed
	}
	if !p.wants(failed, restarts) {
		return restartDecision{final: final, restarts: restarts, next: delay}
	}
	return restartDecision{
		restart:  true,
		delay:    delay,
		next:     min(2*delay, lastDelay),
		restarts: restarts + 1,
	}
}
