package clock

import (
	"sync"
	"time"
)

// Fake is a Clock that moves only when told to. Timers fire, in the order
// of their deadlines, during the Advance that reaches them.
type Fake struct {
	// mu guards now and timers.
	mu     sync.Mutex
	now    time.Time
	timers []*fakeTimer // pending, in no particular order
	// armed receives a value, without blocking, each time a timer is made;
	// capacity 1, so it says "at least one since you last looked".
	armed chan struct{}
}

// NewFake returns a fake clock that reads start.
func NewFake(start time.Time) *Fake {
	return &Fake{now: start, armed: make(chan struct{}, 1)}
}

// Now returns the fake time.
func (f *Fake) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

// NewTimer makes a timer that fires once the fake time has moved d on.
func (f *Fake) NewTimer(d time.Duration) Timer {
	f.mu.Lock()
	t := &fakeTimer{f: f, at: f.now.Add(d), c: make(chan time.Time, 1)}
	if d <= 0 {
		t.c <- f.now
	} else {
		f.timers = append(f.timers, t)
	}
	f.mu.Unlock()
	select {
	case f.armed <- struct{}{}:
	default:
	}
	return t
}

// Armed is told each time a timer is made, so that a test can wait until
// the code under test has armed the timer it means to fire.
func (f *Fake) Armed() <-chan struct{} { return f.armed }

// Pending is the number of timers that have not fired or been stopped.
func (f *Fake) Pending() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.timers)
}

// Advance moves the time on by d and fires every timer whose deadline it
// reaches, earliest first, each with its own deadline as the time sent.
func (f *Fake) Advance(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	end := f.now.Add(d)
	for {
		next := -1
		for i, t := range f.timers {
			if !t.at.After(end) && (next < 0 || t.at.Before(f.timers[next].at)) {
				next = i
			}
		}
		if next < 0 {
			break
		}
		t := f.timers[next]
		f.timers = append(f.timers[:next], f.timers[next+1:]...)
		f.now = t.at
		t.c <- t.at // capacity 1, and each timer fires once
	}
	f.now = end
}

type fakeTimer struct {
	f  *Fake
	at time.Time
	c  chan time.Time
}

func (t *fakeTimer) C() <-chan time.Time { return t.c }

func (t *fakeTimer) Stop() bool {
	t.f.mu.Lock()
	defer t.f.mu.Unlock()
	for i, p := range t.f.timers {
		if p == t {
			t.f.timers = append(t.f.timers[:i], t.f.timers[i+1:]...)
			return true
		}
	}
	return false
}
