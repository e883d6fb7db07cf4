package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// daemon is one berth daemon process with its own jobs directory, state,
// control socket and a fake NOTIFY_SOCKET that notes when READY=1 comes.
type daemon struct {
	dir, jobs, state, socket, out string
	logPath                       string

	cmd     *exec.Cmd
	started time.Time // just before the exec
	ready   chan time.Time
	exited  chan struct{} // closed once the process has been waited for
	notify  *net.UnixConn
	client  *http.Client
	once    sync.Once // stops it
}

// live are the daemons not yet stopped, for Ctrl-C.
var (
	liveMu sync.Mutex
	live   = map[*daemon]bool{}
)

func stopAll() {
	liveMu.Lock()
	ds := make([]*daemon, 0, len(live))
	for d := range live {
		ds = append(ds, d)
	}
	liveMu.Unlock()
	for _, d := range ds {
		d.stop()
	}
}

func newDaemon(dir string) (*daemon, error) {
	d := &daemon{
		dir: dir,
		// One level down: the daemon watches the jobs directory's parent
		// too, and its log, written beside, would wake it at every line.
		jobs:    filepath.Join(dir, "etc", "jobs.d"),
		state:   filepath.Join(dir, "state"),
		socket:  filepath.Join(dir, "berth.sock"),
		out:     filepath.Join(dir, "out"),
		logPath: filepath.Join(dir, "daemon.log"),
		ready:   make(chan time.Time, 1),
		exited:  make(chan struct{}),
	}
	for _, p := range []string{d.jobs, d.out} {
		if err := os.MkdirAll(p, 0o755); err != nil {
			return nil, err
		}
	}
	d.client = &http.Client{
		Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var dialer net.Dialer
			return dialer.DialContext(ctx, "unix", d.socket)
		}, IdleConnTimeout: 10 * time.Second, // below the daemon's 30 s
			// GET /metrics would be gzipped for the asking, which costs the
			// daemon more than counting its jobs.
			DisableCompression: true},
		Timeout: 30 * time.Second,
	}
	return d, nil
}

// put writes a job file into place; atomic (a temporary name, then a
// rename) so that a running daemon never reads half of it. It returns the
// time just before the rename.
func (d *daemon) put(name, src string) (time.Time, error) {
	tmp := filepath.Join(d.jobs, "."+name+".tmp")
	if err := os.WriteFile(tmp, []byte(src), 0o644); err != nil {
		return time.Time{}, err
	}
	saved := time.Now()
	return saved, os.Rename(tmp, filepath.Join(d.jobs, name))
}

// profileDir, when set, is where each daemon writes its CPU profile, named
// after the run's directory.
var profileDir string

// runnerMode, when set, is given to every daemon as --runner.
var runnerMode string

// start execs `berth daemon` with args after the paths; its log goes to
// daemon.log in the run's directory.
func (d *daemon) start(berth string, args ...string) error {
	notifyPath := filepath.Join(d.dir, "notify.sock")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: notifyPath, Net: "unixgram"})
	if err != nil {
		return err
	}
	d.notify = conn
	go func() {
		buf := make([]byte, 4096)
		sent := false
		for {
			n, err := conn.Read(buf)
			if err != nil {
				return
			}
			at := time.Now()
			for line := range strings.SplitSeq(string(buf[:n]), "\n") {
				if line == "READY=1" && !sent {
					sent = true
					d.ready <- at
				}
			}
		}
	}()
	logf, err := os.Create(d.logPath)
	if err != nil {
		return err
	}
	defer logf.Close()
	argv := []string{"daemon", "--jobs", d.jobs, "--state", d.state, "--socket", d.socket}
	if runnerMode != "" {
		argv = append(argv, "--runner", runnerMode)
	}
	if profileDir != "" {
		argv = append(argv, "--cpuprofile", filepath.Join(profileDir, filepath.Base(d.dir)+".pprof"))
	}
	cmd := exec.Command(berth, append(argv, args...)...)
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); k != "NOTIFY_SOCKET" && k != "JOURNAL_STREAM" && k != "WATCHDOG_USEC" && k != "WATCHDOG_PID" {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, "NOTIFY_SOCKET="+notifyPath, "NO_COLOR=1")
	cmd.Stdout, cmd.Stderr = logf, logf
	// If this program dies, the daemon is told to stop its jobs and go.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	d.cmd = cmd
	d.started = time.Now()
	if err := cmd.Start(); err != nil {
		conn.Close()
		return err
	}
	liveMu.Lock()
	live[d] = true
	liveMu.Unlock()
	go func() {
		_ = cmd.Wait()
		close(d.exited)
	}()
	return nil
}

// startReady starts the daemon on two cores, as every benchmark runs it,
// and returns when it said READY=1.
func (d *daemon) startReady(berth string) (time.Time, error) {
	if err := d.start(berth, "--cpus", "2"); err != nil {
		return time.Time{}, err
	}
	return d.waitReady(60 * time.Second)
}

// waitReady waits for READY=1 and returns when it came.
func (d *daemon) waitReady(timeout time.Duration) (time.Time, error) {
	select {
	case at := <-d.ready:
		return at, nil
	case <-d.exited:
		return time.Time{}, d.failure(fmt.Errorf("the daemon exited (%v) before READY=1", d.cmd.ProcessState))
	case <-time.After(timeout):
		return time.Time{}, d.failure(fmt.Errorf("no READY=1 within %v", timeout))
	}
}

// status is the part of GET /v1/status the benchmarks read.
type status struct {
	Jobs []struct {
		Name  string    `json:"name"`
		State string    `json:"state"`
		PID   int       `json:"pid"`
		Since time.Time `json:"since"`
	} `json:"jobs"`
	Counts map[string]int `json:"counts"`
}

func (d *daemon) status() (status, error) {
	var s status
	err := d.get("/v1/status", &s)
	return s, err
}

// get decodes the answer to GET path into v.
func (d *daemon) get(path string, v any) error {
	resp, err := d.client.Get("http://berth" + path)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", path, resp.Status)
	}
	return json.NewDecoder(resp.Body).Decode(v)
}

// poll reads the status every interval until done says so, and returns
// the time of the answer that satisfied it, and how long the status calls
// took on average. bad, when it returns an error, ends the wait.
func (d *daemon) poll(interval, timeout time.Duration, done func(status) bool, bad func(status) error) (time.Time, time.Duration, error) {
	deadline := time.Now().Add(timeout)
	var calls int
	var spent time.Duration
	var last status
	for {
		t0 := time.Now()
		s, err := d.status()
		at := time.Now()
		if err != nil {
			return at, 0, d.failure(err)
		}
		calls++
		spent += at.Sub(t0)
		last = s
		if done(s) {
			return at, spent / time.Duration(calls), nil
		}
		if bad != nil {
			if err := bad(s); err != nil {
				return at, 0, d.failure(err)
			}
		}
		if at.After(deadline) {
			return at, 0, d.failure(fmt.Errorf("not there within %v; counts %v", timeout, last.Counts))
		}
		select {
		case <-d.exited:
			return at, 0, d.failure(fmt.Errorf("the daemon exited (%v)", d.cmd.ProcessState))
		case <-time.After(interval):
		}
	}
}

// getMetrics is the body of GET /metrics.
func (d *daemon) getMetrics() (string, error) {
	resp, err := d.client.Get("http://berth/metrics")
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GET /metrics: %s", resp.Status)
	}
	body, err := io.ReadAll(resp.Body)
	return string(body), err
}

// metrics are the values of the unlabelled metrics names in GET /metrics.
func (d *daemon) metrics(names ...string) ([]float64, error) {
	body, err := d.getMetrics()
	if err != nil {
		return nil, err
	}
	out := make([]float64, len(names))
	for i, name := range names {
		found := false
		for line := range strings.SplitSeq(body, "\n") {
			if v, ok := strings.CutPrefix(line, name+" "); ok {
				if out[i], err = strconv.ParseFloat(v, 64); err != nil {
					return nil, fmt.Errorf("GET /metrics: %q: %w", line, err)
				}
				found = true
				break
			}
		}
		if !found {
			return nil, fmt.Errorf("GET /metrics: no %s", name)
		}
	}
	return out, nil
}

// counts are the jobs by state of GET /metrics (berth_jobs): what the
// status counts, for the price of a count.
func (d *daemon) counts() (map[string]int, error) {
	body, err := d.getMetrics()
	if err != nil {
		return nil, err
	}
	c := map[string]int{}
	for line := range strings.SplitSeq(body, "\n") {
		rest, ok := strings.CutPrefix(line, `berth_jobs{state="`)
		if !ok {
			continue
		}
		state, value, ok := strings.Cut(rest, `"} `)
		if !ok {
			continue
		}
		n, err := strconv.ParseFloat(value, 64)
		if err != nil {
			return nil, fmt.Errorf("GET /metrics: %q: %w", line, err)
		}
		c[state] = int(n)
	}
	if len(c) == 0 {
		return nil, errors.New("GET /metrics: no berth_jobs")
	}
	return c, nil
}

// pollCounts is poll over counts: it returns the time of the answer that
// satisfied done.
func (d *daemon) pollCounts(interval, timeout time.Duration, done func(map[string]int) bool, bad func(map[string]int) error) (time.Time, error) {
	deadline := time.Now().Add(timeout)
	var last map[string]int
	for {
		c, err := d.counts()
		at := time.Now()
		if err != nil {
			return at, d.failure(err)
		}
		last = c
		if done(c) {
			return at, nil
		}
		if bad != nil {
			if err := bad(c); err != nil {
				return at, d.failure(err)
			}
		}
		if at.After(deadline) {
			return at, d.failure(fmt.Errorf("not there within %v; counts %v", timeout, last))
		}
		select {
		case <-d.exited:
			return at, d.failure(fmt.Errorf("the daemon exited (%v)", d.cmd.ProcessState))
		case <-time.After(interval):
		}
	}
}

// waitLog returns once the daemon's log holds n lines containing marker,
// looking every interval at what was appended since the last look. It
// costs the daemon nothing, where each GET /metrics costs it a
// collection; bad, when set, is asked every second (a GET /metrics) so that
// a failing benchmark stops early.
func (d *daemon) waitLog(marker string, n int, interval, timeout time.Duration, bad func() error) error {
	f, err := os.Open(d.logPath)
	if err != nil {
		return err
	}
	defer f.Close()
	deadline := time.Now().Add(timeout)
	lastCheck := time.Now()
	var partial []byte // a line not yet ended
	seen := 0
	buf := make([]byte, 64<<10)
	for {
		for {
			k, err := f.Read(buf)
			partial = append(partial, buf[:k]...)
			if i := bytes.LastIndexByte(partial, '\n'); i >= 0 {
				seen += bytes.Count(partial[:i], []byte(marker))
				partial = append(partial[:0], partial[i+1:]...)
			}
			if err != nil || k < len(buf) {
				break // io.EOF: all there is for now
			}
		}
		if seen >= n {
			return nil
		}
		now := time.Now()
		if now.After(deadline) {
			return d.failure(fmt.Errorf("%d of %d %q lines in the log within %v", seen, n, marker, timeout))
		}
		if bad != nil && now.Sub(lastCheck) >= time.Second {
			lastCheck = now
			if err := bad(); err != nil {
				return d.failure(err)
			}
		}
		select {
		case <-d.exited:
			return d.failure(fmt.Errorf("the daemon exited (%v)", d.cmd.ProcessState))
		case <-time.After(interval):
		}
	}
}

// failure adds the end of the daemon's log to err.
func (d *daemon) failure(err error) error {
	data, _ := os.ReadFile(d.logPath)
	tail := string(data)
	if len(tail) > 3000 {
		tail = "…" + tail[len(tail)-3000:]
	}
	return fmt.Errorf("%w\n--- daemon log (end) ---\n%s--- end ---", err, tail)
}

// stop ends the daemon: SIGTERM (it stops every job itself), then SIGKILL
// if it has not exited within 60 s; then any job process group it left is
// killed too.
func (d *daemon) stop() {
	if d.cmd == nil || d.cmd.Process == nil {
		return
	}
	d.once.Do(d.doStop)
}

func (d *daemon) doStop() {
	defer func() {
		liveMu.Lock()
		delete(live, d)
		liveMu.Unlock()
		d.notify.Close()
		d.client.CloseIdleConnections()
	}()
	pid := d.cmd.Process.Pid
	kids := children(pid)
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-d.exited:
	case <-time.After(60 * time.Second):
		fmt.Fprintf(os.Stderr, "berth-bench: daemon %d still there 60 s after SIGTERM: SIGKILL\n", pid)
		kids = append(kids, children(pid)...)
		_ = d.cmd.Process.Kill()
		<-d.exited
	}
	// The jobs are process group leaders; the daemon stops each group and
	// the kernel kills leaders with it (Pdeathsig). Whatever is left of
	// those groups goes now, as long as the leader is the process we saw.
	for _, k := range kids {
		if st, err := procStat(k.pid); err == nil && st.startTicks == k.startTicks {
			_ = syscall.Kill(-k.pid, syscall.SIGKILL)
			_ = syscall.Kill(k.pid, syscall.SIGKILL)
		}
	}
}

type proc struct {
	pid        int
	startTicks uint64
}

// children are the processes whose parent is pid.
func children(pid int) []proc {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var out []proc
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if st, err := procStat(p); err == nil && st.ppid == pid {
			out = append(out, proc{pid: p, startTicks: st.startTicks})
		}
	}
	return out
}

// stat is what the benchmarks read of /proc/PID/stat.
type stat struct {
	ppid       int
	utime      uint64 // clock ticks
	stime      uint64
	children   uint64 // cutime + cstime: the children it has waited for
	threads    int
	startTicks uint64
}

func procStat(pid int) (stat, error) {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return stat{}, err
	}
	// The command name, field 2, is in parentheses and may hold anything.
	i := strings.LastIndexByte(string(data), ')')
	if i < 0 {
		return stat{}, errors.New("bad /proc stat")
	}
	f := strings.Fields(string(data[i+1:]))
	// f[0] is field 3 (state): field n is f[n-3].
	if len(f) < 20 {
		return stat{}, errors.New("short /proc stat")
	}
	var st stat
	st.ppid, _ = strconv.Atoi(f[1])
	st.utime, _ = strconv.ParseUint(f[11], 10, 64)
	st.stime, _ = strconv.ParseUint(f[12], 10, 64)
	cutime, _ := strconv.ParseUint(f[13], 10, 64)
	cstime, _ := strconv.ParseUint(f[14], 10, 64)
	st.children = cutime + cstime
	st.threads, _ = strconv.Atoi(f[17])
	st.startTicks, _ = strconv.ParseUint(f[19], 10, 64)
	return st, nil
}

// rssKiB is VmRSS of /proc/PID/status.
func rssKiB(pid int) (int, error) { return statusKiB(pid, "VmRSS") }

// statusKiB is a "kB" field of /proc/PID/status.
func statusKiB(pid int, field string) (int, error) {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, err
	}
	for line := range strings.SplitSeq(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			if f := strings.Fields(v); len(f) > 0 {
				return strconv.Atoi(f[0])
			}
		}
	}
	return 0, fmt.Errorf("no %s", field)
}

// clockTicks is the unit of /proc's CPU times: getconf CLK_TCK, else 100.
func clockTicks() float64 {
	out, err := exec.Command("getconf", "CLK_TCK").Output()
	if err == nil {
		if n, err := strconv.Atoi(strings.TrimSpace(string(out))); err == nil && n > 0 {
			return float64(n)
		}
	}
	return 100
}

// processRoom says whether need more processes (and as many threads in
// the daemon, which holds one per running job in waitid) fit under this
// user's limits, and why.
func processRoom(need int) (string, bool) {
	limit := "unlimited"
	n := -1
	if data, err := os.ReadFile("/proc/self/limits"); err == nil {
		for line := range strings.SplitSeq(string(data), "\n") {
			if rest, ok := strings.CutPrefix(line, "Max processes"); ok {
				if f := strings.Fields(rest); len(f) > 0 && f[0] != "unlimited" {
					limit = f[0]
					n, _ = strconv.Atoi(f[0])
				}
			}
		}
	}
	pidMax := readInt("/proc/sys/kernel/pid_max")
	threadsMax := readInt("/proc/sys/kernel/threads-max")
	tasks := userTasks(os.Getuid())
	// A job is one task and costs the daemon one thread while it runs.
	want := tasks + 2*need
	msg := fmt.Sprintf("ulimit -u %s, pid_max %d, threads-max %d; this user has %d tasks, 1 000 jobs need ~%d more",
		limit, pidMax, threadsMax, tasks, 2*need)
	switch {
	case os.Getuid() == 0:
		msg += "; running as root, which ulimit -u does not bind"
	case n >= 0 && want > n:
		return msg + ": NOT ENOUGH (raise ulimit -u)", false
	}
	if pidMax > 0 && want > pidMax || threadsMax > 0 && want > threadsMax {
		return msg + ": NOT ENOUGH (kernel limits)", false
	}
	return msg + ": enough", true
}

func readInt(path string) int {
	data, err := os.ReadFile(path)
	if err != nil {
		return -1
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil {
		return -1
	}
	return n
}

// userTasks counts the threads of every process whose real uid is uid:
// what RLIMIT_NPROC counts.
func userTasks(uid int) int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0
	}
	total := 0
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		data, err := os.ReadFile("/proc/" + e.Name() + "/status")
		if err != nil {
			continue
		}
		mine, threads := false, 1
		for line := range strings.SplitSeq(string(data), "\n") {
			if v, ok := strings.CutPrefix(line, "Uid:"); ok {
				if f := strings.Fields(v); len(f) > 0 && f[0] == strconv.Itoa(uid) {
					mine = true
				}
			}
			if v, ok := strings.CutPrefix(line, "Threads:"); ok {
				threads, _ = strconv.Atoi(strings.TrimSpace(v))
			}
		}
		if mine {
			total += threads
		}
	}
	return total
}

// runtimeFigures is GET /v1/debug/runtime?gc=1: the daemon's goroutines and
// live heap.
type runtimeFigures struct {
	Goroutines int    `json:"goroutines"`
	OpenFiles  int    `json:"open_files"`
	HeapBytes  uint64 `json:"heap_bytes"`
}

func (d *daemon) runtime() (runtimeFigures, error) {
	var f runtimeFigures
	err := d.get("/v1/debug/runtime?gc=1", &f)
	return f, err
}
