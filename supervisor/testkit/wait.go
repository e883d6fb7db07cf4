package testkit

import (
	"testing"
	"time"
)

// The pause between two looks starts short, so that a condition that holds
// at once costs nothing, and doubles up to a cap, so that a slow one (a
// daemon polled over its socket) is not asked hundreds of times a second.
const (
	firstPause = time.Millisecond
	maxPause   = 50 * time.Millisecond
)

// WaitFor polls cond until it holds, and fails the test, naming what it
// waited for, once timeout has passed without it. what completes the
// sentence "timed out after 15s waiting for …".
//
// It is for state that another process or goroutine reaches with nothing
// to wait on: a daemon's status, a file a child writes, a queue's length.
// Where there is a channel, receive from it with a deadline instead.
// cond runs on the test's goroutine and may call t's methods; one that logs
// what it saw when that changes leaves a trail for the failure to explain.
func WaitFor(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	pause := firstPause
	for !cond() {
		left := time.Until(deadline)
		if left <= 0 {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		// The last look is at the deadline, not a pause past it.
		time.Sleep(min(pause, left))
		pause = min(2*pause, maxPause)
	}
}
