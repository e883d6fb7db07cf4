package clock

import (
	"testing"
	"time"
)

var t0 = time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)

func fired(t Timer) (time.Time, bool) {
	select {
	case at := <-t.C():
		return at, true
	default:
		return time.Time{}, false
	}
}

func TestFakeFiresInOrderOfDeadline(t *testing.T) {
	f := NewFake(t0)
	late := f.NewTimer(3 * time.Second)
	early := f.NewTimer(time.Second)
	never := f.NewTimer(time.Hour)
	if f.Pending() != 3 {
		t.Fatalf("Pending() = %d, want 3", f.Pending())
	}
	f.Advance(999 * time.Millisecond)
	if _, ok := fired(early); ok {
		t.Fatal("a timer fired before its deadline")
	}
	f.Advance(5 * time.Second)
	if at, ok := fired(early); !ok || !at.Equal(t0.Add(time.Second)) {
		t.Errorf("early fired %v %v, want at t0+1s", at, ok)
	}
	if at, ok := fired(late); !ok || !at.Equal(t0.Add(3*time.Second)) {
		t.Errorf("late fired %v %v, want at t0+3s", at, ok)
	}
	if _, ok := fired(never); ok {
		t.Error("a timer an hour away fired")
	}
	if got := f.Now(); !got.Equal(t0.Add(5*time.Second + 999*time.Millisecond)) {
		t.Errorf("Now() = %v", got)
	}
	if !never.Stop() || never.Stop() {
		t.Error("Stop should report true once, then false")
	}
	if f.Pending() != 0 {
		t.Errorf("Pending() = %d after all fired or stopped", f.Pending())
	}
}

func TestFakeZeroDurationFiresAtOnce(t *testing.T) {
	f := NewFake(t0)
	if _, ok := fired(f.NewTimer(0)); !ok {
		t.Error("a timer of 0 did not fire at once")
	}
	select {
	case <-f.Armed():
	default:
		t.Error("making a timer was not announced on Armed")
	}
}

func TestRealTimer(t *testing.T) {
	tm := Real.NewTimer(time.Millisecond)
	select {
	case <-tm.C():
	case <-time.After(10 * time.Second):
		t.Fatal("a real timer of 1 ms did not fire")
	}
	if tm.Stop() {
		t.Error("Stop after firing reported true")
	}
}
