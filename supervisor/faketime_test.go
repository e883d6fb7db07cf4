package supervisor

import (
	"testing"
	"time"

	"github.com/berthd/berth/supervisor/clock"
	"github.com/berthd/berth/supervisor/store"
	"github.com/berthd/berth/supervisor/testkit"
)

// fakeTimeDaemon runs a daemon over jobs, a job file's source, on a fake
// clock: restart delays and timeouts fire only when the test moves it.
func fakeTimeDaemon(t *testing.T, jobs string) (*Daemon, *clock.Fake) {
	t.Helper()
	clk := clock.NewFake(time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC))
	d, _ := runDaemon(t, jobs, func(cfg *Config) { cfg.Clock = clk })
	return d, clk
}

// waitJob waits until job's status satisfies cond, and returns it.
func waitJob(t *testing.T, d *Daemon, job, what string, cond func(JobStatus) bool) JobStatus {
	t.Helper()
	var js JobStatus
	testkit.WaitFor(t, 20*time.Second, "job "+job+" "+what, func() bool {
		var ok bool
		js, ok = d.jobStatus(job)
		return ok && cond(js)
	})
	return js
}

// TestFakeTimeRestartDelays: a failing job's restarts wait 1 s, then 2 s,
// on the daemon's clock, and not a moment less.
func TestFakeTimeRestartDelays(t *testing.T) {
	d, clk := fakeTimeDaemon(t, `job "flaky" { cmd = "exit 3", restart = "on-failure" }`)
	for i, delay := range []time.Duration{time.Second, 2 * time.Second} {
		js := waitJob(t, d, "flaky", "backed off", func(js JobStatus) bool {
			return js.State == "backoff" && js.Restarts == i+1
		})
		if js.Why != "exit 3" {
			t.Errorf("backoff %d: why %q, want exit 3", i+1, js.Why)
		}
		// The restart delay is the one timer on the fake clock: it has
		// not fired a millisecond early, and fires on time.
		clk.Advance(delay - time.Millisecond)
		if n := clk.Pending(); n != 1 {
			t.Fatalf("backoff %d: %d timers pending a millisecond before the delay, want the restart's", i+1, n)
		}
		clk.Advance(time.Millisecond)
		if n := clk.Pending(); n != 0 {
			t.Fatalf("backoff %d: the restart delay did not fire after %v", i+1, delay)
		}
	}
	waitJob(t, d, "flaky", "backed off a third time", func(js JobStatus) bool { return js.Restarts == 3 })
}

// TestFakeTimeTimeout: a run that outlives its timeout on the daemon's
// clock is stopped and recorded as timed out.
func TestFakeTimeTimeout(t *testing.T) {
	d, clk := fakeTimeDaemon(t, `job "slow" { cmd = "sleep 600", timeout = "2h", stop_timeout = "5s" }`)
	waitJob(t, d, "slow", "running", func(js JobStatus) bool { return js.State == "running" })
	clk.Advance(2 * time.Hour)
	js := waitJob(t, d, "slow", "failed", func(js JobStatus) bool { return js.State == "failed" })
	if js.Why != "timed out after 2h" {
		t.Errorf("why %q, want timed out after 2h", js.Why)
	}
	runs, err := d.store.Runs("slow", 1)
	if err != nil || len(runs) != 1 || runs[0].Reason != store.ReasonTimedOut {
		t.Fatalf("history %+v %v, want one run that timed out", runs, err)
	}
	if got := runs[0].End.Sub(runs[0].Start); got != 2*time.Hour {
		t.Errorf("the run lasted %v on the daemon's clock, want 2h", got)
	}
}
