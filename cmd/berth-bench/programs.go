package main

import (
	"bytes"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// programs is how many long-running programs the programs benchmark
// starts and stops.
const programs = 100

// runPrograms: 100 programs that run until told to stop (sleep, which
// obeys SIGTERM), from `berth daemon`'s exec to every one shown running,
// and from the daemon's SIGTERM to its exit, every one stopped; each
// against a plain Go loop that starts the same 100 children, each in its
// own process group as berth does, then sends each SIGTERM and waits for
// them all.
//
// "Shown running" is the daemon's "started" line of each run, which it
// writes when it shows the run, as its status does: the latest of the
// hundred, on the daemon's log clock (milliseconds), less the exec.
func runPrograms(b *bencher, dir string) ([]sample, error) {
	startLimit, stopLimit, err := startStopLoop(programs, "sleep", "100000")
	if err != nil {
		return nil, err
	}

	d, err := newDaemon(dir)
	if err != nil {
		return nil, err
	}
	defer d.stop()
	err = jobFiles(d, 1, programs, func(_, i int) string {
		return fmt.Sprintf(`job "prog-%03d" { cmd = { "sleep", "100000" }, cpus = 0 }`, i)
	})
	if err != nil {
		return nil, err
	}
	if _, err := d.startReady(b.berth); err != nil {
		return nil, err
	}
	_, _, err = d.poll(pollEvery, time.Minute,
		func(s status) bool { return s.Counts["running"] == programs },
		func(s status) error {
			if n := s.Counts["failed"] + s.Counts["backoff"]; n > 0 {
				return fmt.Errorf("%d jobs failed or in backoff", n)
			}
			return nil
		})
	if err != nil {
		return nil, err
	}
	shown, err := startedLines(d.logPath)
	if err != nil {
		return nil, d.failure(err)
	}
	if len(shown) != programs {
		return nil, d.failure(fmt.Errorf("%d started lines in the log, want %d", len(shown), programs))
	}
	var last time.Time
	for _, t := range shown {
		if t.After(last) {
			last = t
		}
	}
	// Past the daemon's settling after the load (it frees memory 2 s after
	// a reload): the stop meets a daemon at rest.
	d.client.CloseIdleConnections()
	time.Sleep(2500 * time.Millisecond)
	t0 := time.Now()
	if err := d.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		return nil, err
	}
	select {
	case <-d.exited:
	case <-time.After(time.Minute):
		return nil, d.failure(fmt.Errorf("the daemon still runs a minute after SIGTERM"))
	}
	stopped := time.Since(t0)
	if !d.cmd.ProcessState.Success() {
		return nil, d.failure(fmt.Errorf("the daemon exited %v after SIGTERM", d.cmd.ProcessState))
	}
	return []sample{
		{"programs/start-loop", ms(startLimit)},
		{"programs/start", ms(last.Sub(d.started))},
		{"programs/stop-loop", ms(stopLimit)},
		{"programs/stop", ms(stopped)},
	}, nil
}

// startStopLoop starts n children of argv one after the other, each in a
// process group of its own, and says how long until the last one had
// executed (exec.Cmd.Start returns then); then it sends each SIGTERM and
// says how long until the last one had been waited for.
func startStopLoop(n int, argv ...string) (start, stop time.Duration, err error) {
	cmds := make([]*exec.Cmd, 0, n)
	defer func() {
		for _, c := range cmds {
			if c.ProcessState == nil {
				_ = c.Process.Kill()
				_ = c.Wait()
			}
		}
	}()
	t0 := time.Now()
	for range n {
		c := exec.Command(argv[0], argv[1:]...)
		c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := c.Start(); err != nil {
			return 0, 0, fmt.Errorf("the loop's %s: %w", argv[0], err)
		}
		cmds = append(cmds, c)
	}
	start = time.Since(t0)
	t1 := time.Now()
	for _, c := range cmds {
		if err := c.Process.Signal(syscall.SIGTERM); err != nil {
			return 0, 0, err
		}
	}
	for _, c := range cmds {
		_ = c.Wait() // terminated by the signal: an error, as it should be
	}
	return start, time.Since(t1), nil
}

// startedLines are the times of the daemon's "started" lines, on its log
// clock (hclog's, to the millisecond).
func startedLines(logPath string) ([]time.Time, error) {
	data, err := os.ReadFile(logPath)
	if err != nil {
		return nil, err
	}
	var out []time.Time
	for line := range strings.SplitSeq(string(data), "\n") {
		stamp, rest, ok := strings.Cut(line, " ")
		if !ok || !strings.Contains(rest, " started: ") {
			continue
		}
		t, err := time.Parse("2006-01-02T15:04:05.000Z0700", stamp)
		if err != nil {
			return nil, fmt.Errorf("a started line's time %q: %w", stamp, err)
		}
		out = append(out, t)
	}
	return out, nil
}

// churnJobs and churnRounds make the churn benchmark's 10 000 runs; by
// churnSettled runs every job's history is full (100 runs each), so that
// the state file, which the daemon maps, has stopped growing.
const churnJobs, churnRounds, churnSettled = 20, 500, 2000

// runChurn: 20 jobs of /bin/true, each started 500 times (a round starts
// every one and waits until all are done again): 10 000 runs. The daemon's
// RSS, live heap and goroutines after the first 2 000 runs, once the
// history is full, and after the 10 000, and its CPU time per run over
// the last 8 000.
func runChurn(b *bencher, dir string) ([]sample, error) {
	d, err := newDaemon(dir)
	if err != nil {
		return nil, err
	}
	defer d.stop()
	err = jobFiles(d, 1, churnJobs, func(_, i int) string {
		return fmt.Sprintf(`job "churn-%03d" { cmd = { "/bin/true" }, cpus = 0 }`, i)
	})
	if err != nil {
		return nil, err
	}
	if _, err := d.startReady(b.berth); err != nil {
		return nil, err
	}
	bad := func(s status) error {
		if n := s.Counts["failed"]; n > 0 {
			return fmt.Errorf("%d jobs failed", n)
		}
		return nil
	}
	// A round is over when every job is done since later than it was done
	// before the round.
	doneSince := map[string]time.Time{}
	doneAfter := func(s status) bool {
		for _, j := range s.Jobs {
			if j.State != "done" || !j.Since.After(doneSince[j.Name]) {
				return false
			}
		}
		if len(s.Jobs) != churnJobs {
			return false
		}
		for _, j := range s.Jobs {
			doneSince[j.Name] = j.Since
		}
		return true
	}
	if _, _, err := d.poll(pollEvery, time.Minute, doneAfter, bad); err != nil {
		return nil, err
	}
	type figures struct {
		rss, anon  int
		stateBytes int64
		rt         runtimeFigures
		ticks      uint64
	}
	// Each measure is taken just after a collection, so that the two are
	// at the same point of the heap's cycle.
	measure := func() (figures, error) {
		d.client.CloseIdleConnections()
		rt, err := d.runtime()
		if err != nil {
			return figures{}, err
		}
		kib, err := rssKiB(d.cmd.Process.Pid)
		if err != nil {
			return figures{}, err
		}
		anon, err := statusKiB(d.cmd.Process.Pid, "RssAnon")
		if err != nil {
			return figures{}, err
		}
		fi, err := os.Stat(filepath.Join(d.state, "state.db"))
		if err != nil {
			return figures{}, err
		}
		st, err := procStat(d.cmd.Process.Pid)
		return figures{rss: kib, anon: anon, stateBytes: fi.Size(), rt: rt, ticks: st.utime + st.stime}, err
	}
	var atSettled figures
	for round := 1; round < churnRounds; round++ {
		for i := range churnJobs {
			if err := d.post(fmt.Sprintf("/v1/jobs/churn-%03d/start", i)); err != nil {
				return nil, d.failure(err)
			}
		}
		if _, _, err := d.poll(pollEvery, time.Minute, doneAfter, bad); err != nil {
			return nil, err
		}
		if (round+1)*churnJobs == churnSettled {
			if atSettled, err = measure(); err != nil {
				return nil, err
			}
		}
	}
	end, err := measure()
	if err != nil {
		return nil, err
	}
	runs := float64(churnRounds*churnJobs - churnSettled)
	return []sample{
		{"churn/rss-2000", float64(atSettled.rss) / 1024},
		{"churn/rss-10000", float64(end.rss) / 1024},
		{"churn/anon-2000", float64(atSettled.anon) / 1024},
		{"churn/anon-10000", float64(end.anon) / 1024},
		{"churn/state-2000", float64(atSettled.stateBytes) / (1 << 20)},
		{"churn/state-10000", float64(end.stateBytes) / (1 << 20)},
		{"churn/heap-2000", float64(atSettled.rt.HeapBytes) / (1 << 20)},
		{"churn/heap-10000", float64(end.rt.HeapBytes) / (1 << 20)},
		{"churn/goroutines-2000", float64(atSettled.rt.Goroutines)},
		{"churn/goroutines-10000", float64(end.rt.Goroutines)},
		{"churn/daemon-cpu", float64(end.ticks-atSettled.ticks) / clockTicks() * 1000 / runs},
	}, nil
}

// post sends POST path and wants 200.
func (d *daemon) post(path string) error {
	resp, err := d.client.Post("http://berth"+path, "application/json", bytes.NewReader(nil))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("POST %s: %s", path, resp.Status)
	}
	return nil
}
