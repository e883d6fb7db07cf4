// Package clock is the time that the supervisor's decisions read: the real
// one in production, a fake that a test moves by hand. Every timer that
// decides something about a job (its timeout, its restart delay) and every
// "since when" comes from a Clock, so that such behaviour is tested on fake
// time instead of by waiting.
//
// It must never read the time other than through the Clock it is given.
package clock

import "time"

// Clock tells the time and makes timers on it.
type Clock interface {
	Now() time.Time
	// NewTimer is time.NewTimer on this clock: its channel receives the
	// clock's time once d has passed on it.
	NewTimer(d time.Duration) Timer
}

// Timer is the part of *time.Timer that callers use.
type Timer interface {
	C() <-chan time.Time
	// Stop prevents the timer from firing; it reports whether it stopped
	// it (false: it had fired or been stopped already).
	Stop() bool
}

// Real is the system's clock.
var Real Clock = real{}

type real struct{}

func (real) Now() time.Time { return time.Now() }

func (real) NewTimer(d time.Duration) Timer { return realTimer{time.NewTimer(d)} }

type realTimer struct{ t *time.Timer }

func (r realTimer) C() <-chan time.Time { return r.t.C }
func (r realTimer) Stop() bool          { return r.t.Stop() }
