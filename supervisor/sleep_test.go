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

// TestJobsSleep: the goroutine of a job ends while all it waits for is its
// run's end, a message or the daemon's end (a job at rest, or running),
// and each of those wakes it as before: a start and a stop are seen
// through, a run that ends by itself is restarted, and the daemon's end
// stops every run.
func TestJobsSleep(t *testing.T) {
	const n = 40
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "job \"s%02d\" { cmd = \"sleep 1000\", cpus = 0 }\n", i)
	}
	for i := range n {
		fmt.Fprintf(&b, "job \"d%02d\" { cmd = \"true\", cpus = 0, restart = \"no\" }\n", i)
	}
	b.WriteString(`job "again" { cmd = "sleep 1000", cpus = 0, restart = "always" }` + "\n")
	// Goroutines not the daemon's: the parallel tests', waiting their turn.
	others := runtime.NumGoroutine()
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
	isDone := func(js JobStatus) bool { return js.State == "done" }
	for i := range n {
		waitJob(t, d, fmt.Sprintf("d%02d", i), "done", isDone)
	}
	done := waitJob(t, d, "d00", "done", isDone)

	// The daemon's own goroutines are a dozen or so: fewer than the runs,
	// or than the jobs at rest.
	testkit.WaitFor(t, 20*time.Second, "the jobs' goroutines to end", func() bool {
		return runtime.NumGoroutine()-others < n
	})

	// A message wakes one at rest: it runs again.
	if code, body := as(t, d, "root", "POST", jobPath("d00")+"/start"); code != 200 {
		t.Fatalf("start d00: %d %s", code, body)
	}
	waitJob(t, d, "d00", "done again", func(js JobStatus) bool { return isDone(js) && js.Since.After(done.Since) })

	// A message wakes one running: it stops.
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
