package supervisor

import (
	"net"
	"path/filepath"
	"testing"
	"time"
)

// Work arms the timer; memory is handed back once a whole settleAfter has
// passed with no work: while work goes on, the timer is armed again.
func TestSettleWaitsForQuiet(t *testing.T) {
	freed := 0
	d := &Daemon{settle: time.NewTimer(time.Hour), settleAfter: time.Hour, freeMemory: func() { freed++ }}
	d.settle.Stop()

	d.worked()
	if !d.settle.Stop() {
		t.Fatal("work did not arm the timer")
	}
	d.settled()
	if freed != 1 {
		t.Fatalf("no work since the timer was armed: memory handed back %d times, want 1", freed)
	}
	if d.settle.Stop() {
		t.Fatal("memory handed back, yet the timer was armed again")
	}

	d.worked()
	d.settle.Stop()
	d.worked()
	d.worked()
	d.settled()
	if freed != 1 {
		t.Fatalf("work went on since the timer was armed: memory handed back %d times, want still 1", freed)
	}
	if !d.settle.Stop() {
		t.Fatal("work went on since the timer was armed: the timer was not armed again")
	}
	d.settled()
	if freed != 2 {
		t.Fatalf("a quiet settleAfter followed: memory handed back %d times, want 2", freed)
	}
	if d.settle.Stop() {
		t.Fatal("memory handed back, yet the timer was armed again")
	}

	// Work noted just as the timer is disarmed, too late to arm it
	// itself: settled arms it.
	d.worked()
	d.settle.Stop()
	d.freeMemory = func() { freed++; d.work.Add(1) }
	d.settled()
	if freed != 3 || !d.settle.Stop() {
		t.Fatalf("work came while memory was handed back: handed back %d times (want 3), the timer not armed again", freed)
	}
}

// A running daemon hands memory back after its first reload and after a
// request on its socket, and not again with no work between: its own
// upkeep is not work.
func TestQuietDaemonHandsMemoryBack(t *testing.T) {
	const settle = 200 * time.Millisecond
	sock := filepath.Join(t.TempDir(), "berth.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	handed := make(chan struct{}, 8)
	runDaemon(t, `job "idle" { cmd = "sleep 600", cpus = 0 }`, func(cfg *Config) {
		cfg.Listener = l
		cfg.handBack = func() { handed <- struct{}{} }
		cfg.settleAfter = settle
	})
	handedBack := func(after string) {
		t.Helper()
		select {
		case <-handed:
		case <-time.After(settle + answerWithin):
			t.Fatalf("no memory handed back after %s", after)
		}
	}
	handedBack("the first reload")

	resp, err := unixClient(sock).Get("http://berth" + APIVersion + "/status")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	handedBack("a request")

	select {
	case <-handed:
		t.Fatal("memory handed back again with no work done since")
	case <-time.After(3 * settle):
	}
}
