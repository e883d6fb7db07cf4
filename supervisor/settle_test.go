package supervisor

import (
	"net"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
)

// Work arms the timer; memory is handed back once a whole settleAfter has
// passed with no work: while work goes on, the timer is armed again.
func TestSettleWaitsForQuiet(t *testing.T) {
	freed := 0
	d := &Daemon{settle: time.NewTimer(time.Hour), settleAfter: time.Hour, freeMemory: func() time.Duration { freed++; return 0 }}
	d.settle.Stop()
	// work notes work done, which must arm the timer; settled stands in
	// for its firing, after which memory was handed back wantFreed times
	// in all, and the timer is armed again or not.
	work := func() {
		t.Helper()
		d.worked()
		if !d.settle.Stop() {
			t.Fatal("work did not arm the timer")
		}
	}
	settled := func(what string, wantFreed int, wantArmed bool) {
		t.Helper()
		d.settled()
		if armed := d.settle.Stop(); freed != wantFreed || armed != wantArmed {
			t.Fatalf("%s: memory handed back %d times, the timer armed again: %v; want %d, %v", what, freed, armed, wantFreed, wantArmed)
		}
	}

	work()
	settled("no work since the timer was armed", 1, false)

	work()
	d.worked()
	d.worked()
	settled("work went on since the timer was armed", 1, true)
	settled("a quiet settleAfter followed", 2, false)

	// Work noted just as the timer is disarmed, too late to arm it
	// itself: settled arms it.
	work()
	d.freeMemory = func() time.Duration { freed++; d.work.Add(1); return 0 }
	settled("work came while memory was handed back", 3, true)

	// A hand-back put off keeps the timer armed until it may be.
	d.freeMemory = func() time.Duration { freed++; return 20 * time.Second }
	settled("a hand-back put off", 4, true)
	if !d.settleArmed.Load() {
		t.Fatal("a hand-back put off: the timer is not marked armed, so work would arm it again")
	}
}

// handBack unmaps the binary's pages at most every releaseEvery and
// collects at most every collectEvery, and only when a MiB was allocated
// since its last collection, telling settled when to come back for what
// it put off.
func TestHandBack(t *testing.T) {
	now := time.Date(2026, 12, 4, 9, 0, 0, 0, time.UTC)
	var allocated uint64
	collections, releases := 0, 0
	h := &handBack{
		log:       hclog.NewNullLogger(),
		now:       func() time.Time { return now },
		allocated: func() uint64 { return allocated },
		collect:   func() { collections++ },
		release:   func() (int, error) { releases++; return 0, nil },
	}
	steps := []struct {
		what      string
		allocate  uint64
		pass      time.Duration
		collected bool
		released  bool
		again     time.Duration
	}{
		{"the first quiet, after the start's work", 8 << 20, 0, true, true, 0},
		{"a status 5 s later", 3 << 20, 5 * time.Second, false, false, 5 * time.Second},
		{"back 5 s later: a collection still put off", 0, 5 * time.Second, false, true, 10 * time.Second},
		{"back 10 s later: still put off", 0, 10 * time.Second, false, true, 10 * time.Second},
		{"back 10 s later", 0, 10 * time.Second, true, true, 0},
		{"a reload that found nothing new, 30 s later", 4 << 10, 30 * time.Second, false, true, 0},
		{"a status a minute later", 3 << 20, time.Minute, true, true, 0},
	}
	for _, st := range steps {
		allocated += st.allocate
		now = now.Add(st.pass)
		c, r := collections, releases
		again := h.run()
		collected, released := collections > c, releases > r
		if collected != st.collected || released != st.released || again != st.again {
			t.Errorf("%s: collected %v, released %v, again %v; want %v, %v, %v",
				st.what, collected, released, again, st.collected, st.released, st.again)
		}
	}
}

// gcWatch reports every collection, again and again, and the hand-back's
// own as its own. A collection the test process makes meanwhile, in
// another test, is reported too, so each step waits for the report it
// must see and passes over others.
func TestGCWatch(t *testing.T) {
	seen := make(chan bool, 64)
	w := &gcWatch{seen: func(own bool) { seen <- own }}
	w.start()
	defer w.stop()
	saw := func(step string, want bool) {
		t.Helper()
		timeout := time.After(20 * time.Second)
		for {
			select {
			case own := <-seen:
				if own == want {
					return
				}
			case <-timeout:
				t.Fatalf("%s: no collection reported with own %v", step, want)
			}
		}
	}
	runtime.GC()
	saw("a collection", false)
	w.collect()
	saw("the hand-back's collection", true)
	runtime.GC()
	saw("a collection after the hand-back's", false)
	runtime.GC()
	saw("another collection", false)
}

// A running daemon hands memory back after its first reload, after a
// request on its socket and after a collection the runtime made, and not
// again with no work between: its own upkeep, a watchdog ping every 50 ms
// here, is not work.
func TestQuietDaemonHandsMemoryBack(t *testing.T) {
	const settle = 500 * time.Millisecond
	// No collection but the test's own: one the test process made
	// meanwhile would be work.
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	sock := filepath.Join(t.TempDir(), "berth.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	handed := make(chan struct{}, 8)
	runDaemon(t, "", func(cfg *Config) {
		cfg.Listener, cfg.Watchdog = l, 50*time.Millisecond
		cfg.handBack = func() time.Duration { handed <- struct{}{}; return 0 }
		cfg.settleAfter = settle
	})
	handedBack := func(after string) {
		t.Helper()
		select {
		case <-handed:
		case <-time.After(20 * time.Second): // the first evaluation's child included
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

	runtime.GC()
	handedBack("a collection")

	select {
	case <-handed:
		t.Fatal("memory handed back again with no work done since")
	case <-time.After(3 * settle):
	}
}
