package supervisor

import (
	"testing"
	"time"
)

// The memory a reload left is handed back once no run has started for a
// whole settleAfter: while runs keep starting, the timer is armed again.
func TestSettleWaitsForQuiet(t *testing.T) {
	freed := 0
	d := &Daemon{settle: time.NewTimer(time.Hour), freeMemory: func() { freed++ }}
	d.settle.Stop()

	d.settled()
	if freed != 1 {
		t.Fatalf("no run started since the reload: memory handed back %d times, want 1", freed)
	}

	d.starts.Add(3)
	d.settled()
	if freed != 1 {
		t.Fatalf("runs started since the timer was armed: memory handed back %d times, want still 1", freed)
	}
	if !d.settle.Stop() {
		t.Fatal("runs started since the timer was armed: the timer was not armed again")
	}
	if d.settleStarts != 3 {
		t.Fatalf("settleStarts = %d, want the 3 runs started", d.settleStarts)
	}

	d.settled()
	if freed != 2 {
		t.Fatalf("a quiet settleAfter followed: memory handed back %d times, want 2", freed)
	}
	if d.settle.Stop() {
		t.Fatal("memory handed back, yet the timer was armed again")
	}
}
