package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// jobsPerRun is how many jobs each benchmark declares.
const jobsPerRun = 1000

// pollEvery is how often a benchmark reads the daemon's status.
const pollEvery = 20 * time.Millisecond

// jobFiles writes files × perFile jobs before the daemon starts; decl gives
// the declaration of job i of file f.
func jobFiles(d *daemon, files, perFile int, decl func(f, i int) string) error {
	for f := range files {
		var b strings.Builder
		for i := range perFile {
			b.WriteString(decl(f, i))
			b.WriteByte('\n')
		}
		if err := os.WriteFile(filepath.Join(d.jobs, fmt.Sprintf("bench-%03d.lua", f)), []byte(b.String()), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// runThroughput: 1 000 runs of /bin/true, one job each (cpus = 1, two cores),
// against the same 1 000 spawns from a plain Go loop with two workers.
func runThroughput(b *bencher, dir string) ([]sample, error) {
	var before, after, selfBefore, selfAfter syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_CHILDREN, &before)
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &selfBefore)
	loop, err := spawnLoop(jobsPerRun, 2, "/bin/true")
	if err != nil {
		return nil, err
	}
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &selfAfter)
	_ = syscall.Getrusage(syscall.RUSAGE_CHILDREN, &after)
	loopChildren := cpuMs(after, before) / jobsPerRun
	// The loop's own CPU, the forks' and the waits' in the parent: what
	// the daemon's CPU per run has to pay before any of its own work.
	loopSelf := cpuMs(selfAfter, selfBefore) / jobsPerRun

	d, err := newDaemon(dir)
	if err != nil {
		return nil, err
	}
	defer d.stop()
	err = jobFiles(d, 10, 100, func(f, i int) string {
		return fmt.Sprintf(`job "true-%02d-%03d" { cmd = { "/bin/true" }, cpus = 1 }`, f, i)
	})
	if err != nil {
		return nil, err
	}
	ready, err := d.startReady(b.berth)
	if err != nil {
		return nil, err
	}
	// Asked before the CPU is, so that its collection is not counted.
	commits0, commitsErr := d.metrics(commitsMetric, commitsMetricSum)
	st0, err := procStat(d.cmd.Process.Pid)
	if err != nil {
		return nil, err
	}
	// The end is the jobs' counts of GET /metrics showing all done. Each
	// GET /metrics costs the daemon a collection (nearly 1 ms of CPU, the
	// process's figures read from /proc), and asked every 20 ms through
	// the runs they were 8 % of its CPU: the counts are asked only once
	// the daemon's log has its 1 000th exited line, which comes a commit
	// before the last job is shown done, and then every millisecond. A
	// full GET /v1/status, which with 1 000 jobs costs it several
	// milliseconds of CPU, is asked every 200 ms beside, for its own
	// figure. So the daemon's CPU per run is the runs', not the observer's.
	failed := func(c map[string]int) error {
		if n := c["failed"]; n > 0 {
			return fmt.Errorf("%d jobs failed", n)
		}
		return nil
	}
	stopCalls := d.timeStatus(200 * time.Millisecond)
	err = d.waitLog("berth.job: exited: ", jobsPerRun, 2*time.Millisecond, 5*time.Minute, func() error {
		c, err := d.counts()
		if err != nil {
			return err
		}
		return failed(c)
	})
	var doneAt time.Time
	if err == nil {
		doneAt, err = d.pollCounts(time.Millisecond, time.Minute,
			func(c map[string]int) bool { return c["done"] == jobsPerRun }, failed)
	}
	statusCalls, _ := stopCalls()
	if err != nil {
		return nil, err
	}
	st1, err := procStat(d.cmd.Process.Pid)
	if err != nil {
		return nil, err
	}
	samples := []sample{
		{"throughput/loop", loop.Seconds()},
		{"throughput/berth", doneAt.Sub(d.started).Seconds()},
		{"throughput/ready-to-done", doneAt.Sub(ready).Seconds()},
		{"throughput/daemon-cpu", float64(st1.utime+st1.stime-st0.utime-st0.stime) / clockTicks() * 1000 / jobsPerRun},
		{"throughput/daemon-sys", float64(st1.stime-st0.stime) / clockTicks() * 1000 / jobsPerRun},
		{"throughput/loop-cpu", loopSelf},
		{"throughput/loop-child-cpu", loopChildren},
	}
	if st1.children > st0.children {
		// Runs as systemd units are not the daemon's children.
		samples = append(samples, sample{"throughput/child-cpu", float64(st1.children-st0.children) / clockTicks() * 1000 / jobsPerRun})
	}
	if len(statusCalls) > 0 {
		samples = append(samples, sample{"throughput/status-call", percentile(statusCalls, 50)})
	}
	if commits1, err := d.metrics(commitsMetric, commitsMetricSum); err == nil && commitsErr == nil {
		n := commits1[0] - commits0[0]
		samples = append(samples, sample{"throughput/commits", n / jobsPerRun})
		if n > 0 {
			samples = append(samples, sample{"throughput/commit-ms", (commits1[1] - commits0[1]) / n * 1000})
		}
	}
	// A berth older than the figure does not log it: left out.
	if starts := startTimes(d.logPath); len(starts) > 0 {
		samples = append(samples, sample{"throughput/start-p50", percentile(starts, 50)},
			sample{"throughput/start-p99", percentile(starts, 99)})
	}
	return samples, nil
}

// The state file's write transactions: how many, and how long in all.
const (
	commitsMetric    = "berth_store_commit_seconds_count"
	commitsMetricSum = "berth_store_commit_seconds_sum"
)

// startTimes reads, from a daemon's log, how long each run took from its
// grant to its process running (grant_to_running_us of "started").
func startTimes(logPath string) []float64 {
	b, err := os.ReadFile(logPath)
	if err != nil {
		return nil
	}
	var out []float64 // ms
	for _, line := range strings.Split(string(b), "\n") {
		_, v, ok := strings.Cut(line, "grant_to_running_us=")
		if !ok || !strings.Contains(line, "started:") {
			continue
		}
		v, _, _ = strings.Cut(v, " ")
		if us, err := strconv.ParseInt(v, 10, 64); err == nil {
			out = append(out, float64(us)/1000)
		}
	}
	return out
}

// spawnLoop runs argv n times with the given number of workers.
func spawnLoop(n, workers int, argv ...string) (time.Duration, error) {
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	start := time.Now()
	for range workers {
		wg.Go(func() {
			for next.Add(1) <= int64(n) {
				if err := exec.Command(argv[0], argv[1:]...).Run(); err != nil {
					errs <- fmt.Errorf("the loop's %s: %w", argv[0], err)
					return
				}
			}
		})
	}
	wg.Wait()
	took := time.Since(start)
	close(errs)
	return took, <-errs
}

// cpuMs is the CPU time, user and system, from before to after, in ms.
func cpuMs(after, before syscall.Rusage) float64 {
	return float64(after.Utime.Nano()+after.Stime.Nano()-before.Utime.Nano()-before.Stime.Nano()) / 1e6
}

// probeCmd is a command that writes the clock, in ns, to path once it runs.
func probeCmd(path string) []string {
	return []string{"sh", "-c", fmt.Sprintf("date +%%s%%N > %s.tmp && mv %s.tmp %s", path, path, path)}
}

// waitStamp waits for the file a probe writes and returns its clock.
func waitStamp(path string, timeout time.Duration) (time.Time, error) {
	deadline := time.Now().Add(timeout)
	for {
		data, err := os.ReadFile(path)
		if err == nil {
			ns, err := strconv.ParseInt(strings.TrimSpace(string(data)), 10, 64)
			if err != nil {
				return time.Time{}, fmt.Errorf("%s: %w", path, err)
			}
			return time.Unix(0, ns), nil
		}
		if !errors.Is(err, os.ErrNotExist) {
			return time.Time{}, err
		}
		if time.Now().After(deadline) {
			return time.Time{}, fmt.Errorf("no %s within %v", filepath.Base(path), timeout)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// saves is how many job files the reload benchmark saves.
const saves = 50

// runReload: with 1 000 jobs loaded (two running, 998 waiting), 50 atomic
// saves of a new file, each declaring one unaccounted job that writes the
// clock; latency is that clock less the time just before the rename.
func runReload(b *bencher, dir string) ([]sample, error) {
	// The floor: the same child, spawned directly.
	var floor []float64
	for i := range saves {
		stamp := filepath.Join(dir, fmt.Sprintf("floor-%d", i))
		argv := probeCmd(stamp)
		t0 := time.Now()
		if err := exec.Command(argv[0], argv[1:]...).Run(); err != nil {
			return nil, err
		}
		at, err := waitStamp(stamp, 10*time.Second)
		if err != nil {
			return nil, err
		}
		floor = append(floor, ms(at.Sub(t0)))
	}

	d, err := newDaemon(dir)
	if err != nil {
		return nil, err
	}
	defer d.stop()
	// As BenchmarkSaveToRunning: 100 files of 10 jobs.
	err = jobFiles(d, 100, 10, func(f, i int) string {
		return fmt.Sprintf(`job "load-%03d-%d" { cmd = { "sleep", "1000" }, cpus = 1, priority = %d }`, f, i, i)
	})
	if err != nil {
		return nil, err
	}
	if _, err := d.startReady(b.berth); err != nil {
		return nil, err
	}
	_, _, err = d.poll(pollEvery, 2*time.Minute,
		func(s status) bool { return s.Counts["running"] == 2 && s.Counts["waiting"] == jobsPerRun-2 }, nil)
	if err != nil {
		return nil, err
	}
	// Past the daemon's settling after the load (it frees memory 2 s after
	// a reload): the saves meet a daemon at rest.
	time.Sleep(2500 * time.Millisecond)

	var lat []float64
	for i := range saves {
		name := fmt.Sprintf("probe-%02d", i)
		stamp := filepath.Join(d.out, name)
		argv := probeCmd(stamp)
		src := fmt.Sprintf("job %q { cmd = { %q, %q, %q }, cpus = 0 }\n", name, argv[0], argv[1], argv[2])
		saved, err := d.put(name+".lua", src)
		if err != nil {
			return nil, err
		}
		at, err := waitStamp(stamp, 15*time.Second)
		if err != nil {
			return nil, d.failure(err)
		}
		lat = append(lat, ms(at.Sub(saved)))
	}
	return []sample{
		{"reload/floor-p50", percentile(floor, 50)},
		{"reload/p50", percentile(lat, 50)},
		{"reload/p99", percentile(lat, 99)},
	}, nil
}

// runFootprint: 1 000 unaccounted jobs running `sleep 100000`; once all run,
// the daemon's RSS and CPU time over the idle window.
func runFootprint(b *bencher, dir string) ([]sample, error) {
	d, err := newDaemon(dir)
	if err != nil {
		return nil, err
	}
	defer d.stop()
	err = jobFiles(d, 10, 100, func(f, i int) string {
		return fmt.Sprintf(`job "sleep-%02d-%03d" { cmd = { "sleep", "100000" }, cpus = 0 }`, f, i)
	})
	if err != nil {
		return nil, err
	}
	if _, err := d.startReady(b.berth); err != nil {
		return nil, err
	}
	_, _, err = d.poll(pollEvery, 3*time.Minute,
		func(s status) bool { return s.Counts["running"] == jobsPerRun },
		func(s status) error {
			if n := s.Counts["failed"] + s.Counts["backoff"]; n > 0 {
				return fmt.Errorf("%d jobs failed or in backoff", n)
			}
			return nil
		})
	if err != nil {
		return nil, err
	}
	d.client.CloseIdleConnections()

	pid := d.cmd.Process.Pid
	tick := clockTicks()
	st0, err := procStat(pid)
	if err != nil {
		return nil, err
	}
	t0 := time.Now()
	peak := 0
	for time.Since(t0) < b.idle {
		time.Sleep(min(time.Second, b.idle-time.Since(t0)))
		kib, err := rssKiB(pid)
		if err != nil {
			return nil, err
		}
		peak = max(peak, kib)
	}
	st1, err := procStat(pid)
	if err != nil {
		return nil, err
	}
	elapsed := time.Since(t0).Seconds()
	kib, err := rssKiB(pid)
	if err != nil {
		return nil, err
	}
	anon, err := statusKiB(pid, "RssAnon")
	if err != nil {
		return nil, err
	}
	cpu := float64(st1.utime+st1.stime-st0.utime-st0.stime) / tick / elapsed * 100
	samples := []sample{
		{"footprint/rss", float64(kib) / 1024},
		{"footprint/rss-peak", float64(peak) / 1024},
		{"footprint/anon", float64(anon) / 1024},
	}
	// Where the anonymous part goes, asked once the window is over.
	if m, err := d.metrics("go_memstats_heap_inuse_bytes", "go_memstats_stack_inuse_bytes"); err == nil {
		samples = append(samples, sample{"footprint/heap", m[0] / (1 << 20)}, sample{"footprint/stacks", m[1] / (1 << 20)})
	}
	return append(samples, sample{"footprint/cpu", cpu}, sample{"footprint/threads", float64(st1.threads)}), nil
}

// runStartup: exec of `berth daemon` to READY=1, with no job files and with
// 1 000 files of one disabled job each.
func runStartup(b *bencher, dir string) ([]sample, error) {
	var out []sample
	for _, files := range []int{0, jobsPerRun} {
		sub := filepath.Join(dir, strconv.Itoa(files))
		d, err := newDaemon(sub)
		if err != nil {
			return nil, err
		}
		err = jobFiles(d, files, 1, func(f, _ int) string {
			return fmt.Sprintf(`job "start-%04d" { cmd = { "/bin/true" }, cpus = 1, enabled = false }`, f)
		})
		if err != nil {
			return nil, err
		}
		ready, err := d.startReady(b.berth)
		var settled time.Time
		if err == nil {
			// Every file loaded, none refused: every job shows disabled.
			// READY=1 comes before the jobs' goroutines have all taken
			// their first definition (they show "new" meanwhile), so this
			// is its own figure.
			settled, _, err = d.poll(pollEvery, time.Minute,
				func(s status) bool { return s.Counts["disabled"] == files && len(s.Jobs) == files }, nil)
		}
		d.stop()
		if err != nil {
			return nil, err
		}
		if files == 0 {
			out = append(out, sample{"startup/empty", ms(ready.Sub(d.started))})
			continue
		}
		out = append(out,
			sample{"startup", ms(ready.Sub(d.started))},
			sample{"startup/all-disabled", ms(settled.Sub(d.started))})
	}
	return out, nil
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// runStorm: 100 edits a second to two job files for the storm's length
// while 200 jobs churn (restart = "always", runs of 0.1-0.9 s), a client
// asking the status every 10 ms throughout; then the storm's files are
// removed, and the daemon's memory and goroutines compared with before.
func runStorm(b *bencher, dir string) ([]sample, error) {
	d, err := newDaemon(dir)
	if err != nil {
		return nil, err
	}
	defer d.stop()
	if _, err := d.put("base.lua", `job "base" { cmd = { "sleep", "100000" }, cpus = 0 }`); err != nil {
		return nil, err
	}
	if _, err := d.startReady(b.berth); err != nil {
		return nil, err
	}
	settled := func() (int, runtimeFigures, error) {
		// Past the daemon's settling (it frees memory 2 s after a reload).
		time.Sleep(2500 * time.Millisecond)
		kib, err := rssKiB(d.cmd.Process.Pid)
		if err != nil {
			return 0, runtimeFigures{}, err
		}
		f, err := d.runtime()
		return kib, f, err
	}
	rss0, rt0, err := settled()
	if err != nil {
		return nil, err
	}

	var churn strings.Builder
	for i := range 200 {
		fmt.Fprintf(&churn, "job \"churn-%03d\" { cmd = { \"sleep\", \"0.%d\" }, restart = \"always\", cpus = 0 }\n", i, 1+i%9)
	}
	if _, err := d.put("churn.lua", churn.String()); err != nil {
		return nil, err
	}
	stopCalls := d.timeStatus(10 * time.Millisecond)
	began := time.Now()
	edits := 0
	tick := time.NewTicker(10 * time.Millisecond)
	for time.Since(began) < b.storm {
		<-tick.C
		src := fmt.Sprintf("job \"storm-%d\" { cmd = { \"sleep\", \"%d\" }, cpus = 0 }", edits%2, 1000+edits)
		if edits%10 == 9 {
			src = `job "storm" { cmd = ` // broken: refused, the last good version stays
		}
		if _, err := d.put(fmt.Sprintf("storm-%d.lua", edits%2), src); err != nil {
			tick.Stop()
			stopCalls()
			return nil, err
		}
		edits++
	}
	tick.Stop()
	length := time.Since(began)
	lat, statusErr := stopCalls()
	if statusErr != nil {
		return nil, d.failure(statusErr)
	}
	for _, name := range []string{"churn.lua", "storm-0.lua", "storm-1.lua"} {
		if err := os.Remove(filepath.Join(d.jobs, name)); err != nil {
			return nil, err
		}
	}
	if _, _, err := d.poll(pollEvery, time.Minute, func(s status) bool { return len(s.Jobs) == 1 }, nil); err != nil {
		return nil, err
	}
	d.client.CloseIdleConnections()
	rss1, rt1, err := settled()
	if err != nil {
		return nil, err
	}
	return []sample{
		{"storm/edits-per-s", float64(edits) / length.Seconds()},
		{"storm/status-p50", percentile(lat, 50)},
		{"storm/status-p99", percentile(lat, 99)},
		{"storm/status-max", percentile(lat, 100)},
		{"storm/rss-before", float64(rss0) / 1024},
		{"storm/rss-after", float64(rss1) / 1024},
		{"storm/heap-before", float64(rt0.HeapBytes) / (1 << 20)},
		{"storm/heap-after", float64(rt1.HeapBytes) / (1 << 20)},
		{"storm/goroutines-before", float64(rt0.Goroutines)},
		{"storm/goroutines-after", float64(rt1.Goroutines)},
	}, nil
}

// timeStatus asks the daemon for GET /v1/status every interval, and times
// each answer, until the function it returns is called: that returns the
// times, in milliseconds, and the error that ended the calls early, if
// one did.
func (d *daemon) timeStatus(every time.Duration) (stop func() ([]float64, error)) {
	quit := make(chan struct{})
	var took []float64
	var failed error
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(every)
		defer tick.Stop()
		for {
			select {
			case <-quit:
				return
			case <-tick.C:
			}
			t0 := time.Now()
			if _, err := d.status(); err != nil {
				failed = err
				return
			}
			took = append(took, ms(time.Since(t0)))
		}
	})
	return func() ([]float64, error) {
		close(quit)
		wg.Wait()
		return took, failed
	}
}
