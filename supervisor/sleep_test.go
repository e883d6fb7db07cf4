package supervisor

import (
	"fmt"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/berthd/berth/supervisor/testkit"
)

// TestRunningJobsSleep: the goroutine of a job whose run is under way
// ends while all it waits for is the run's end, a message or the daemon's
// end, and each of those wakes it as before: a stop is seen through, a
// run that ends by itself is restarted, and the daemon's end stops every
// run.
func TestRunningJobsSleep(t *testing.T) {
	const n = 40
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "job \"s%02d\" { cmd = \"sleep 1000\", cpus = 0 }\n", i)
	}
	b.WriteString(`job "again" { cmd = "sleep 1000", cpus = 0, restart = "always" }` + "\n")
	d, _, stop := startDaemon(t, b.String(), nil)
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			stop()
		}
	})
	running := func(js JobStatus) bool { return js.State == "running" && js.PID != 0 }
	var pids []int
	for i := range n {
		pids = append(pids, waitJob(t, d, fmt.Sprintf("s%02d", i), "running", running).PID)
	}
	first := waitJob(t, d, "again", "running", running)

	// The daemon's own goroutines are a dozen or so: fewer than the runs.
	testkit.WaitFor(t, 20*time.Second, "the running jobs' goroutines to end", func() bool {
		return runtime.NumGoroutine() < n
	})

	// A message wakes one: it stops.
	if code, body := as(t, d, "root", "POST", jobPath("s00")+"/stop"); code != 200 {
		t.Fatalf("stop s00: %d %s", code, body)
	}
	waitJob(t, d, "s00", "stopped", func(js JobStatus) bool { return js.State == "stopped" })

	// Its run's end wakes one: killed from outside, it runs again.
	if err := syscall.Kill(first.PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	again := waitJob(t, d, "again", "running again", func(js JobStatus) bool {
		return running(js) && js.PID != first.PID && js.Restarts == 1
	})

	// The daemon's end wakes every one: each stops its run.
	stopped = true
	ended := make(chan error, 1)
	go func() { ended <- stop() }()
	select {
	case err := <-ended:
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the daemon not stopped 20 s after its end was asked")
	}
	for _, pid := range append(pids[1:], again.PID) {
		if err := syscall.Kill(pid, 0); err == nil {
			t.Errorf("pid %d still there after the daemon stopped", pid)
		}
	}
}
