package main

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/berthd/berth/supervisor"
	"github.com/berthd/berth/supervisor/testkit"
)

// TestMain lets the test binary be berth itself: the end-to-end tests start
// it as a real daemon process, the way systemd would.
func TestMain(m *testing.M) {
	// berth check, run in this process by the tests, starts its
	// evaluating child as /proc/self/exe __eval: this binary, which is
	// then berth.
	if os.Getenv("BERTH_TEST_BE_BERTH") == "1" || len(os.Args) > 1 && os.Args[1] == evalCommand {
		main()
		return
	}
	// No test daemon makes people's job directories in /var/spool/berth;
	// those that try people's give their own.
	os.Setenv("BERTH_USER_JOBS", "")
	code := m.Run()
	if peopleAccounts.remove != nil {
		peopleAccounts.remove()
	}
	if plainBerth != "" {
		os.RemoveAll(filepath.Dir(plainBerth))
	}
	os.Exit(code)
}

// testDaemon is a berth daemon process in a temporary directory, with a
// fake NOTIFY_SOCKET that records every sd_notify message.
type testDaemon struct {
	t      testing.TB
	dir    string
	jobs   string
	state  string
	socket string
	out    string // where jobs in these tests write what they saw
	cmd    *exec.Cmd
	logs   *testkit.Buffer // this life's
	lives  int             // daemons started so far

	mu       sync.Mutex // guards notified and httpc
	notified []string
	httpc    *http.Client
	notes    chan string
}

type daemonOptions struct {
	args []string // more flags: --cpus, --gpus…
	env  []string // more environment: CUDA_VISIBLE_DEVICES, WATCHDOG_USEC…
	// exe and cred run the daemon as another user: a copy of the test
	// binary it may execute, and its IDs. Empty: this binary, as the test.
	exe  string
	cred *syscall.Credential
}

func newTestDaemon(t testing.TB, files map[string]string) *testDaemon {
	t.Helper()
	dir := t.TempDir()
	d := &testDaemon{
		t:      t,
		dir:    dir,
		jobs:   filepath.Join(dir, "jobs.d"),
		state:  filepath.Join(dir, "state"),
		socket: filepath.Join(dir, "berth.sock"),
		out:    filepath.Join(dir, "out"),
	}
	for _, p := range []string{d.jobs, d.out} {
		if err := os.MkdirAll(p, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for name, src := range files {
		d.write(name, src)
	}
	return d
}

// lua fills the placeholder OUT in a job file with the output directory.
func (d *testDaemon) lua(src string) string { return strings.ReplaceAll(src, "OUT", d.out) }

func (d *testDaemon) write(name, src string) {
	d.t.Helper()
	path := filepath.Join(d.jobs, name)
	tmp := filepath.Join(d.jobs, "."+name+".tmp")
	if err := os.WriteFile(tmp, []byte(d.lua(src)), 0o644); err != nil {
		d.t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		d.t.Fatal(err)
	}
}

func (d *testDaemon) start(opts daemonOptions) {
	t := d.t
	t.Helper()
	notifyPath := filepath.Join(d.dir, "notify.sock")
	os.Remove(notifyPath)
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: notifyPath, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(notifyPath, 0o777); err != nil { // for a daemon run as another user
		t.Fatal(err)
	}
	// Each life of the daemon has its own channel: what an earlier one
	// sent (a READY=1 after a reload) must not pass for this one's.
	notes := make(chan string, 1024)
	d.notes = notes
	go func() {
		buf := make([]byte, 4096)
		for {
			n, err := conn.Read(buf)
			if err != nil {
				return
			}
			msg := string(buf[:n])
			d.mu.Lock()
			d.notified = append(d.notified, msg)
			d.mu.Unlock()
			select {
			case notes <- msg:
			default:
			}
		}
	}()
	args := append([]string{"daemon", "--jobs", d.jobs, "--state", d.state, "--socket", d.socket, "--log-level", "debug"}, opts.args...)
	cmd := exec.Command(cmp.Or(opts.exe, os.Args[0]), args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: opts.cred}
	cmd.Env = append(os.Environ(), "BERTH_TEST_BE_BERTH=1", "NOTIFY_SOCKET="+notifyPath, "JOURNAL_STREAM=")
	cmd.Env = append(cmd.Env, opts.env...)
	logs := &testkit.Buffer{}
	d.logs = logs
	d.lives++
	life := d.lives
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	d.cmd = cmd
	d.mu.Lock()
	if d.httpc != nil {
		d.httpc.CloseIdleConnections() // to the daemon before this one
	}
	d.mu.Unlock()
	t.Cleanup(func() {
		if d.cmd != nil && d.cmd.ProcessState == nil {
			// Stopped as systemd stops it, so that its jobs go with it
			// (a SIGKILL leaves what a job's shell started running, which
			// a person's test account outlives the test in); killed if
			// it does not stop.
			d.cmd.Process.Signal(syscall.SIGTERM)
			exited := make(chan struct{})
			go func() {
				d.cmd.Wait()
				close(exited)
			}()
			select {
			case <-exited:
			case <-time.After(waitLong):
				d.cmd.Process.Kill()
				<-exited
			}
		}
		conn.Close()
		if t.Failed() {
			logTail(t, life, logs.String())
		}
	})
	d.waitNotify("READY=1")
}

// waitNotify waits for an sd_notify message that starts with prefix.
func (d *testDaemon) waitNotify(prefix string) string {
	d.t.Helper()
	deadline := time.After(waitLong)
	for {
		select {
		case msg := <-d.notes:
			if strings.HasPrefix(msg, prefix) {
				return msg
			}
		case <-deadline:
			d.mu.Lock()
			defer d.mu.Unlock()
			d.t.Fatalf("no %q from the daemon within %v; got %q", prefix, waitLong, d.notified)
		}
	}
}

// stop sends SIGTERM and waits for the daemon to exit 0.
func (d *testDaemon) stop() {
	d.t.Helper()
	d.cmd.Process.Signal(syscall.SIGTERM)
	if err := d.cmd.Wait(); err != nil {
		d.t.Fatalf("daemon exited with %v", err)
	}
}

// client is one client for the test's life, so that its connections are
// reused and the daemon's open files stay countable.
func (d *testDaemon) client() *http.Client {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.httpc == nil {
		tr := &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var dialer net.Dialer
			return dialer.DialContext(ctx, "unix", d.socket)
		}, IdleConnTimeout: 10 * time.Second} // below the daemon's 30 s
		d.httpc = &http.Client{Transport: tr, Timeout: 10 * time.Second}
		d.t.Cleanup(tr.CloseIdleConnections)
	}
	return d.httpc
}

func (d *testDaemon) status() supervisor.Status {
	d.t.Helper()
	resp, err := d.client().Get("http://berth/v1/status")
	if err != nil {
		d.t.Fatal(err)
	}
	defer resp.Body.Close()
	var s supervisor.Status
	if err := json.NewDecoder(resp.Body).Decode(&s); err != nil {
		d.t.Fatal(err)
	}
	return s
}

func (d *testDaemon) post(path string) *http.Response {
	d.t.Helper()
	resp, err := d.client().Post("http://berth"+path, "application/json", nil)
	if err != nil {
		d.t.Fatal(err)
	}
	resp.Body.Close()
	return resp
}

func (d *testDaemon) job(name string) (supervisor.JobStatus, bool) {
	for _, j := range d.status().Jobs {
		if j.Name == name {
			return j, true
		}
	}
	return supervisor.JobStatus{}, false
}

// waitLong bounds every wait for the daemon: generous, because a loaded
// machine running the race detector is slow, and a wait that holds
// returns at once.
const waitLong = 15 * time.Second

// waitJob polls the daemon until the job satisfies cond. Polling is the
// only way to see another process's state; the timeout bounds it.
func (d *testDaemon) waitJob(name string, what string, cond func(supervisor.JobStatus) bool) supervisor.JobStatus {
	d.t.Helper()
	var last supervisor.JobStatus
	// WaitFor fails with Fatalf, which runs this on its way out.
	held := false
	defer func() {
		if !held {
			d.t.Logf("job %s last seen: %+v", name, last)
		}
	}()
	testkit.WaitFor(d.t, waitLong, fmt.Sprintf("job %s to be %s", name, what), func() bool {
		j, ok := d.job(name)
		if ok {
			last = j
		}
		return ok && cond(j)
	})
	held = true
	return last
}

func (d *testDaemon) waitGone(name string) {
	d.t.Helper()
	testkit.WaitFor(d.t, waitLong, fmt.Sprintf("job %s to be gone after its file was removed", name), func() bool {
		_, ok := d.job(name)
		return !ok
	})
}

func (d *testDaemon) waitState(name, state string) supervisor.JobStatus {
	d.t.Helper()
	return d.waitJob(name, state, func(j supervisor.JobStatus) bool { return j.State == state })
}

// readEnv reads a file a job wrote with `env > FILE`.
func (d *testDaemon) readEnv(name string) map[string]string {
	d.t.Helper()
	data := d.waitFile(name)
	env := map[string]string{}
	sc := bufio.NewScanner(strings.NewReader(data))
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), "="); ok {
			env[k] = v
		}
	}
	return env
}

// waitFile waits until a job has written a complete file (jobs write to a
// temporary name and rename it, so a file seen is whole).
func (d *testDaemon) waitFile(name string) string {
	d.t.Helper()
	var data []byte
	testkit.WaitFor(d.t, waitLong, "a job to write OUT/"+name, func() bool {
		var err error
		data, err = os.ReadFile(filepath.Join(d.out, name))
		return err == nil
	})
	return string(data)
}

// logLines is how much of a daemon's log a failing test prints: its end,
// where the failure is. A busy daemon logs thousands of lines at debug
// level; all of them would bury the failure.
const logLines = 50

// logTail logs the last logLines lines of one life of the daemon's log,
// saying how many it left out and where the whole log is: a file under the
// test's artifact directory, kept when go test runs with -artifacts.
func logTail(t testing.TB, life int, log string) {
	lines := strings.SplitAfter(strings.TrimSuffix(log, "\n"), "\n")
	if len(lines) <= logLines {
		t.Logf("daemon log (life %d):\n%s", life, log)
		return
	}
	where := "rerun with -artifacts to keep the whole log"
	if f := flag.Lookup("test.artifacts"); f != nil && f.Value.String() == "true" {
		path := filepath.Join(t.ArtifactDir(), fmt.Sprintf("daemon-life-%d.log", life))
		if err := os.WriteFile(path, []byte(log), 0o644); err != nil {
			where = fmt.Sprintf("cannot keep the whole log: %v", err)
		} else {
			where = "the whole log is " + path
		}
	}
	t.Logf("daemon log (life %d), its last %d lines; %d earlier left out (%s):\n%s",
		life, logLines, len(lines)-logLines, where, strings.Join(lines[len(lines)-logLines:], ""))
}

// waitLog waits until this life's log holds text. The daemon writes its log
// to a pipe that a goroutine of os/exec copies into d.logs, so a line the
// daemon wrote before answering a request may reach d.logs only after the
// answer has reached the test.
func (d *testDaemon) waitLog(text string) {
	d.t.Helper()
	testkit.WaitFor(d.t, waitLong, fmt.Sprintf("the daemon to log %q", text), func() bool {
		return strings.Contains(d.logs.String(), text)
	})
}

// writeEnv is a job command that records the environment it was started with.
func writeEnv(name string) string {
	return fmt.Sprintf(`{ "sh", "-c", "env > OUT/%[1]s.tmp && mv OUT/%[1]s.tmp OUT/%[1]s" }`, name)
}

func TestDaemonEnvironment(t *testing.T) {
	t.Parallel()
	d := newTestDaemon(t, map[string]string{
		"env.lua": `
flavor "one-card" { cpus = 2, gpus = 1 }
job "gpu" { cmd = ` + writeEnv("gpu") + `, cpus = 2, gpus = 2 }
job "cpu" { cmd = ` + writeEnv("cpu") + `, cpus = 1 }
job "mine" { cmd = ` + writeEnv("mine") + `, flavor = "one-card", env = { OMP_NUM_THREADS = "1", CUDA_VISIBLE_DEVICES = "all-of-them" } }
job "shared" { cmd = ` + writeEnv("shared") + `, cpus = 0 }
job "where" { cmd = { "sh", "-c", "tr '\\0' '\\n' < /proc/$$/environ > OUT/where.tmp && mv OUT/where.tmp OUT/where" }, dir = "OUT" }
`,
	})
	d.start(daemonOptions{args: []string{"--cpus", "4"}, env: []string{"CUDA_VISIBLE_DEVICES=GPU-a,GPU-b,GPU-c", "OMP_NUM_THREADS=64", "MKL_NUM_THREADS=7",
		// A daemon started from a shell somewhere, and from a run of
		// another berth: neither where it was started nor that run's
		// variables are its jobs'.
		"PWD=/home/admin", "OLDPWD=/home", "BERTH_ARRAY_INDEX=3", "BERTH_ARRAY_SIZE=8", "BERTH_GPU_MEM=5", "BERTH_SOCKET=/run/other.sock"}})

	gpu := d.readEnv("gpu")
	for _, v := range []string{"OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "GOMAXPROCS", "BERTH_CPUS"} {
		if gpu[v] != "2" {
			t.Errorf("gpu job: %s=%q, want 2", v, gpu[v])
		}
	}
	if cvd := gpu["CUDA_VISIBLE_DEVICES"]; cvd != "GPU-a,GPU-b" && cvd != "GPU-b,GPU-c" && cvd != "GPU-a,GPU-c" {
		t.Errorf("gpu job: CUDA_VISIBLE_DEVICES=%q, want two of the daemon's names", cvd)
	}
	if gpu["BERTH_GPUS"] != gpu["CUDA_VISIBLE_DEVICES"] || gpu["BERTH_JOB"] != "gpu" || gpu["BERTH_RUN"] == "" {
		t.Errorf("gpu job: BERTH_* = %q %q %q", gpu["BERTH_GPUS"], gpu["BERTH_JOB"], gpu["BERTH_RUN"])
	}

	for _, v := range []string{"NOTIFY_SOCKET", "WATCHDOG_USEC", "JOURNAL_STREAM"} {
		if _, ok := gpu[v]; ok {
			t.Errorf("gpu job inherited the daemon's own %s", v)
		}
	}

	cpu := d.readEnv("cpu")
	if v, ok := cpu["CUDA_VISIBLE_DEVICES"]; !ok || v != "" {
		t.Errorf("cpu job: CUDA_VISIBLE_DEVICES=%q (set %v), want set and empty", v, ok)
	}
	if cpu["OMP_NUM_THREADS"] != "1" {
		t.Errorf("cpu job: OMP_NUM_THREADS=%q, want 1", cpu["OMP_NUM_THREADS"])
	}

	mine := d.readEnv("mine")
	if mine["OMP_NUM_THREADS"] != "1" || mine["CUDA_VISIBLE_DEVICES"] != "all-of-them" || mine["OPENBLAS_NUM_THREADS"] != "2" {
		t.Errorf("declared env must win: OMP=%q CVD=%q OPENBLAS=%q", mine["OMP_NUM_THREADS"], mine["CUDA_VISIBLE_DEVICES"], mine["OPENBLAS_NUM_THREADS"])
	}

	// The environment the process was given (/proc/PID/environ), before
	// the shell that reads it puts its own PWD in.
	where := d.readEnv("where")
	if where["PWD"] != d.out {
		t.Errorf("where: PWD=%q, want its dir %s", where["PWD"], d.out)
	}
	for _, v := range []string{"OLDPWD", "BERTH_ARRAY_INDEX", "BERTH_ARRAY_SIZE", "BERTH_GPU_MEM"} {
		if val, ok := where[v]; ok {
			t.Errorf("where: %s=%q, the daemon's own", v, val)
		}
	}
	if where["BERTH_SOCKET"] != "/run/other.sock" {
		t.Errorf("where: BERTH_SOCKET=%q; a BERTH_ name berth does not set on a run passes on as it is", where["BERTH_SOCKET"])
	}

	shared := d.readEnv("shared")
	if shared["OMP_NUM_THREADS"] != "64" || shared["MKL_NUM_THREADS"] != "7" || shared["OPENBLAS_NUM_THREADS"] != "4" {
		t.Errorf("unaccounted job: OMP=%q MKL=%q OPENBLAS=%q, want the daemon's 64 and 7, and the fair share 4",
			shared["OMP_NUM_THREADS"], shared["MKL_NUM_THREADS"], shared["OPENBLAS_NUM_THREADS"])
	}
	d.stop()
}

// What the seed module got wrong, as a daemon started by hand would show it:
// a job whose flavor does not exist is not an unaccounted job sharing the
// cores, and --gpus 0 under a CUDA_VISIBLE_DEVICES that names cards hides
// them from every job.
// TestDaemonCardsLeftOut: a daemon whose CUDA_VISIBLE_DEVICES ends before
// cards it names says so in its log, where the operator looks for the
// card missing from berth machine.
// TestQuickstartAsTheReadmeSays: the bundled quickstart, run as "Try it"
// says, ends its batch jobs done and keeps its service up (trial AO: a
// shell error left three of them failed, which berth check cannot see).
func TestQuickstartAsTheReadmeSays(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("../../examples/quickstart/*.lua")
	if err != nil || len(files) == 0 {
		t.Fatalf("the quickstart's files: %v %v", files, err)
	}
	srcs := map[string]string{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		srcs[filepath.Base(f)] = string(b)
	}
	d := newTestDaemon(t, srcs)
	d.start(daemonOptions{args: []string{"--user-jobs", "", "--cpus", "8"}}) // all at once: the test's time
	for _, name := range []string{"hello", "count", "chunk-1", "chunk-2", "chunk-3", "sweep"} {
		d.waitJob(name, "done, as the README says", func(j supervisor.JobStatus) bool {
			if j.State == "failed" {
				t.Fatalf("%s failed: %s (berth logs %s)", name, j.Why, name)
			}
			return j.State == "done"
		})
	}
	d.waitState("ticker", "running")
}

func TestDaemonCardsLeftOut(t *testing.T) {
	t.Parallel()
	d := newTestDaemon(t, nil)
	d.start(daemonOptions{args: []string{"--cpus", "2"}, env: []string{"CUDA_VISIBLE_DEVICES=0,-1,2"}})
	d.waitLog("[WARN]  berth: the machine as told is probably not as meant: kind=cards-left-out")
	if st := d.status(); len(st.Machine.Cards) != 1 {
		t.Errorf("cards %+v, want 0 alone", st.Machine.Cards)
	}
	if logs := d.logs.String(); !strings.Contains(logs, `write CUDA_VISIBLE_DEVICES=0,2 if they are meant to be`) {
		t.Errorf("the warning does not say what to write:\n%s", logs)
	}
	d.stop()
}

func TestDaemonSeedFidelity(t *testing.T) {
	t.Parallel()
	d := newTestDaemon(t, map[string]string{
		"env.lua": `
job "shared-1" { cmd = ` + writeEnv("shared-1") + `, cpus = 0 }
job "shared-2" { cmd = ` + writeEnv("shared-2") + `, cpus = 0 }
job "lost" { cmd = "true", flavor = "nowhere" }
job "cpu" { cmd = ` + writeEnv("cpu") + `, cpus = 1 }
`,
	})
	d.start(daemonOptions{args: []string{"--cpus", "4", "--gpus", "0"}, env: []string{"CUDA_VISIBLE_DEVICES=2,3"}})
	for _, job := range []string{"shared-1", "shared-2", "cpu"} {
		env := d.readEnv(job)
		if v, ok := env["CUDA_VISIBLE_DEVICES"]; !ok || v != "" {
			t.Errorf("%s: CUDA_VISIBLE_DEVICES=%q (set %v), want set and empty: --gpus 0 gives no job a card", job, v, ok)
		}
		want := "2" // 4 cores between the two unaccounted jobs that can run
		if job == "cpu" {
			want = "1"
		}
		if env["OMP_NUM_THREADS"] != want {
			t.Errorf("%s: OMP_NUM_THREADS=%q, want %s", job, env["OMP_NUM_THREADS"], want)
		}
	}
	d.stop()
}

func TestDaemonOneCardJobsTakeTurns(t *testing.T) {
	t.Parallel()
	// Each job appends "start" and "end" around a pause: with one card,
	// the two runs must not overlap.
	turn := func(name string) string {
		return fmt.Sprintf(`job %q { cmd = { "sh", "-c", "echo start %[1]s >> OUT/turns; sleep 0.3; echo end %[1]s >> OUT/turns" }, cpus = 1, gpus = 1 }`, name)
	}
	d := newTestDaemon(t, map[string]string{"turns.lua": turn("a") + "\n" + turn("b")})
	d.start(daemonOptions{args: []string{"--cpus", "4", "--gpus", "1"}})
	d.waitState("a", "done")
	d.waitState("b", "done")
	lines := strings.Fields(strings.ReplaceAll(d.waitFile("turns"), "\n", " "))
	if len(lines) != 8 || lines[0] != "start" || lines[2] != "end" || lines[1] != lines[3] || lines[4] != "start" || lines[6] != "end" {
		t.Fatalf("runs overlapped on the one card: %q", lines)
	}
	d.stop()
}

func TestDaemonUnplaceableAndInvalid(t *testing.T) {
	t.Parallel()
	d := newTestDaemon(t, map[string]string{
		"big.lua":  `job "big" { cmd = { "true" }, cpus = 1, gpus = 4 }`,
		"uses.lua": `job "uses" { cmd = ` + writeEnv("uses") + `, flavor = "later" }`,
	})
	d.start(daemonOptions{args: []string{"--cpus", "2", "--gpus", "2"}})
	big := d.waitState("big", "unplaceable")
	if !strings.Contains(big.Why, "asks for 4 GPUs; this machine has 2") {
		t.Errorf("unplaceable why = %q", big.Why)
	}
	uses := d.waitState("uses", "invalid")
	if !strings.Contains(uses.Why, `flavor "later" does not exist`) {
		t.Errorf("invalid why = %q", uses.Why)
	}
	// A later file declares the flavor: the job becomes runnable.
	d.write("zz-flavors.lua", `flavor "later" { cpus = 1 }`)
	d.waitState("uses", "done")
	d.stop()
}

// service is a long-running job that writes its pid where the test can see it.
func service(name string, extra string) string {
	return fmt.Sprintf(`job %q { cmd = { "sh", "-c", "echo $$ > OUT/%[1]s.pid.tmp && mv OUT/%[1]s.pid.tmp OUT/%[1]s.pid; exec sleep 1000" }, cpus = 1 %s }`, name, extra)
}

func TestDaemonReloadIsADiff(t *testing.T) {
	t.Parallel()
	d := newTestDaemon(t, map[string]string{
		"keep.lua":   service("keep", ""),
		"edit.lua":   service("edit", ""),
		"policy.lua": service("policy", ""),
		"gone.lua":   service("gone", ""),
	})
	d.start(daemonOptions{args: []string{"--cpus", "8"}})
	runs := map[string]uint64{}
	for _, name := range []string{"keep", "edit", "policy", "gone"} {
		runs[name] = d.waitJob(name, "running with a pid", func(j supervisor.JobStatus) bool { return j.State == "running" && j.PID > 0 }).Run
	}

	// What the process is changes: it restarts. Policy only: it does not.
	// Removed: it stops and goes. Atomic saves, as editors do.
	d.write("edit.lua", service("edit", `, env = { NEW = "1" }`))
	d.write("policy.lua", service("policy", `, priority = 5, description = "now described"`))
	os.Remove(filepath.Join(d.jobs, "gone.lua"))
	d.waitJob("edit", "restarted", func(j supervisor.JobStatus) bool { return j.State == "running" && j.Run != runs["edit"] })
	d.waitGone("gone")
	// What is left of it is its history, and the answer says so.
	if _, errOut, code := d.cli("show", "gone"); code != exitFailed ||
		!strings.Contains(errOut, "no job file declares it any more") || !strings.Contains(errOut, "berth history gone") {
		t.Errorf("berth show of a job whose file went: exit %d\n%s", code, errOut)
	}
	if j, _ := d.job("policy"); j.Run != runs["policy"] || j.State != "running" {
		t.Errorf("a policy edit restarted the job: %+v", j)
	}
	if j, _ := d.job("keep"); j.Run != runs["keep"] {
		t.Errorf("an untouched job was restarted: %+v", j)
	}

	// A broken edit keeps the old definition running, and says why.
	before, _ := d.job("keep")
	d.write("keep.lua", `job "keep" { cmd = { "sleep", "1" }, cpus = `)
	testkit.WaitFor(t, waitLong, "the broken file's error in the status", func() bool { return len(d.status().Errors) > 0 })
	s := d.status()
	if len(s.Errors) == 0 || !strings.Contains(s.Errors[0], "keep.lua") {
		t.Fatalf("the broken file's error is not shown: %q", s.Errors)
	}
	if j, _ := d.job("keep"); j.Run != before.Run || j.State != "running" {
		t.Errorf("a broken edit touched the running job: %+v", j)
	}
	// Renaming a file keeps its jobs as they are.
	if err := os.Rename(filepath.Join(d.jobs, "policy.lua"), filepath.Join(d.jobs, "renamed.lua")); err != nil {
		t.Fatal(err)
	}
	d.waitJob("policy", "declared by the renamed file", func(j supervisor.JobStatus) bool { return strings.HasSuffix(j.File, "renamed.lua") })
	if j, _ := d.job("policy"); j.Run != runs["policy"] {
		t.Errorf("renaming its file restarted the job: %+v", j)
	}
	d.stop()
}

func TestDaemonTimeoutAndStopTimeout(t *testing.T) {
	t.Parallel()
	d := newTestDaemon(t, map[string]string{
		"slow.lua": `job "slow" { cmd = { "sleep", "30" }, cpus = 1, timeout = "300ms" }`,
		"stubborn.lua": `job "stubborn" { cmd = { "sh", "-c", "trap '' TERM; echo ready > OUT/stubborn; while true; do sleep 1; done" },
			cpus = 1, stop_timeout = "300ms" }`,
	})
	d.start(daemonOptions{args: []string{"--cpus", "4"}})
	slow := d.waitState("slow", "failed")
	if slow.Why != "timed out after 300ms" {
		t.Errorf("slow: why %q, want timed out after 300ms", slow.Why)
	}
	d.waitFile("stubborn")
	began := time.Now()
	if resp := d.post("/v1/jobs/stubborn/stop"); resp.StatusCode != http.StatusOK {
		t.Fatalf("stop: %s", resp.Status)
	}
	stubborn := d.waitState("stubborn", "stopped")
	if stubborn.Why != "killed after stop_timeout" {
		t.Errorf("stubborn: why %q, want it killed after stop_timeout", stubborn.Why)
	}
	if took := time.Since(began); took < 300*time.Millisecond {
		t.Errorf("stopped after %v, before its stop_timeout", took)
	}
	d.stop()
}

// TestHistorySaysWhyStopped: a run berth stopped keeps why in the history,
// beside how it ended: a person's stop or restart, an edit, its file gone,
// its timeout, its stop_timeout run out.
func TestHistorySaysWhyStopped(t *testing.T) {
	t.Parallel()
	d := newTestDaemon(t, map[string]string{
		"st.lua": `job "st" { cmd = "sleep 600", cpus = 0 }`,
		"rs.lua": `job "rs" { cmd = "sleep 600", cpus = 0 }`,
		"ed.lua": `job "ed" { cmd = "sleep 600", cpus = 0 }`,
		"rm.lua": `job "rm" { cmd = "sleep 600", cpus = 0 }`,
		"to.lua": `job "to" { cmd = "sleep 600", cpus = 0, timeout = "1s", restart = "no" }`,
		"ki.lua": `job "ki" { cmd = { "sh", "-c", "trap '' TERM; echo ready > OUT/ki; while true; do sleep 0.2; done" }, cpus = 0, stop_timeout = "300ms" }`,
	})
	d.start(daemonOptions{})
	for _, name := range []string{"st", "rs", "ed", "rm"} {
		d.waitState(name, "running")
	}
	d.waitFile("ki")
	d.post("/v1/jobs/st/stop")
	d.post("/v1/jobs/ki/stop")
	d.post("/v1/jobs/rs/restart")
	d.write("ed.lua", `job "ed" { cmd = "sleep 601", cpus = 0 }`)
	if err := os.Remove(filepath.Join(d.jobs, "rm.lua")); err != nil {
		t.Fatal(err)
	}
	d.waitState("st", "stopped")
	d.waitState("ki", "stopped")
	d.waitState("to", "failed")
	d.waitGone("rm")
	for _, c := range []struct{ job, want string }{
		{"st", "stopped (SIGTERM): stopped on request (berth stop)"},
		{"ki", "killed after stop_timeout (SIGKILL): stopped on request (berth stop)"},
		{"rs", "stopped (SIGTERM): restarted on request (berth restart)"},
		{"ed", "stopped (SIGTERM): its definition changed"},
		{"rm", "stopped (SIGTERM): no job file declares it any more"},
		{"to", "timed out (SIGTERM): it ran past its timeout of 1s"},
	} {
		var first supervisor.RunView
		testkit.WaitFor(t, waitLong, c.job+"'s first run to end", func() bool {
			runs := d.history(c.job)
			if len(runs) == 0 {
				return false
			}
			first = runs[len(runs)-1]
			return first.End != nil
		})
		if got, _ := runResult(first); got != c.want {
			t.Errorf("%s's first run: %q, want %q", c.job, got, c.want)
		}
	}
	// And the history the client prints says it.
	if out, errOut, code := d.cli("history", "st"); code != exitOK || !strings.Contains(out, "stopped on request (berth stop)") {
		t.Errorf("berth history st: exit %d\n%s%s", code, out, errOut)
	}
	d.stop()
}

func TestDaemonStopLeavesNothingBehind(t *testing.T) {
	t.Parallel()
	d := newTestDaemon(t, map[string]string{
		"forks.lua": `job "forks" { cmd = { "sh", "-c", "sleep 1000 & echo $! > OUT/grandchild.tmp; mv OUT/grandchild.tmp OUT/grandchild; wait" }, cpus = 1 }`,
	})
	d.start(daemonOptions{args: []string{"--cpus", "2"}})
	pid := strings.TrimSpace(d.waitFile("grandchild"))
	d.post("/v1/jobs/forks/stop")
	d.waitState("forks", "stopped")
	if alive(t, pid) {
		t.Errorf("the grandchild %s outlived the stop", pid)
	}
	d.stop()
}

// alive reports whether a process exists and is not a zombie.
func alive(t *testing.T, pid string) bool {
	t.Helper()
	data, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return false
	}
	fields := strings.Fields(string(data[strings.LastIndexByte(string(data), ')')+1:]))
	return len(fields) > 0 && fields[0] != "Z"
}

func TestDaemonNotifySequence(t *testing.T) {
	t.Parallel()
	d := newTestDaemon(t, map[string]string{"a.lua": service("a", "")})
	d.start(daemonOptions{env: []string{"WATCHDOG_USEC=200000"}, args: []string{"--cpus", "2"}})
	d.waitNotify("WATCHDOG=1")
	d.waitNotify("STATUS=1 running")
	d.cmd.Process.Signal(syscall.SIGHUP)
	reloading := d.waitNotify("RELOADING=1")
	if !strings.Contains(reloading, "MONOTONIC_USEC=") {
		t.Errorf("RELOADING=1 without MONOTONIC_USEC in the same message: %q", reloading)
	}
	d.waitNotify("READY=1")
	d.cmd.Process.Signal(syscall.SIGTERM)
	d.waitNotify("STOPPING=1")
	if err := d.cmd.Wait(); err != nil {
		t.Fatalf("daemon exited with %v", err)
	}
}

// TestDaemonSocketBoundAgain: the control socket removed (rm -r of its
// directory), systemctl reload berth (SIGHUP) binds it again, as it was
// bound first: 0660, and the client reaches the daemon through it.
func TestDaemonSocketBoundAgain(t *testing.T) {
	t.Parallel()
	d := newTestDaemon(t, map[string]string{"a.lua": service("a", "")})
	d.socket = filepath.Join(d.dir, "run", "berth.sock")
	d.start(daemonOptions{args: []string{"--cpus", "2"}})
	if err := os.RemoveAll(filepath.Dir(d.socket)); err != nil {
		t.Fatal(err)
	}
	d.cmd.Process.Signal(syscall.SIGHUP)
	d.waitNotify("RELOADING=1")
	d.waitNotify("READY=1")
	st, err := os.Stat(d.socket)
	if err != nil || st.Mode().Type() != os.ModeSocket || st.Mode().Perm() != 0o660 {
		t.Fatalf("the socket after SIGHUP: %v, %v; want a socket, mode 0660", st, err)
	}
	if out, errOut, code := d.cli("status"); code != exitOK {
		t.Errorf("berth status over the socket bound again: exit %d\n%s%s", code, out, errOut)
	}
	if !strings.Contains(d.logs.String(), "the control socket was removed; bound it again") {
		t.Error("the daemon's log does not say it bound the socket again")
	}
}

// TestDaemonBinaryReplaced: an upgrade that puts a new file at the daemon's
// path is said in berth status and in the unit's status text until the
// daemon restarts.
func TestDaemonBinaryReplaced(t *testing.T) {
	t.Parallel()
	exe := filepath.Join(t.TempDir(), "berth")
	if err := os.Link(os.Args[0], exe); err != nil {
		testkit.CopyExecutable(t, os.Args[0], exe, 0o755) // another filesystem
	}
	d := newTestDaemon(t, map[string]string{"a.lua": service("a", "")})
	d.start(daemonOptions{exe: exe, args: []string{"--cpus", "2"}})
	if s := d.status(); s.Daemon.BinaryReplaced || s.Daemon.Binary != exe || s.Daemon.PID != d.cmd.Process.Pid {
		t.Fatalf("before the upgrade: %+v", s.Daemon)
	}
	// As a package manager does: the new file is renamed into place.
	next := exe + ".new"
	if err := os.WriteFile(next, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(next, exe); err != nil {
		t.Fatal(err)
	}
	if s := d.status(); !s.Daemon.BinaryReplaced {
		t.Errorf("after the upgrade: %+v", s.Daemon)
	}
	for !strings.HasSuffix(d.waitNotify("STATUS="), "; binary replaced: systemctl restart berth runs the new one, and stops the jobs") {
	}
	out, _, _ := d.cli("status")
	if !strings.Contains(strings.Join(strings.Fields(out), " "), "the daemon's binary "+exe+" was replaced since it started") {
		t.Errorf("berth status does not say the binary was replaced:\n%s", out)
	}
	d.waitLog("the daemon's binary was replaced since it started")
}

// TestDaemonWatchdogAbort: as systemd's watchdog does to a daemon that
// stopped pinging, SIGABRT to a stopped daemon, then SIGCONT. It leaves one
// line saying where the loop was, not the Go runtime's goroutine dump, and
// the stacks in a file that line names.
func TestDaemonWatchdogAbort(t *testing.T) {
	t.Parallel()
	d := newTestDaemon(t, map[string]string{"a.lua": service("a", "")})
	d.start(daemonOptions{env: []string{"WATCHDOG_USEC=200000"}, args: []string{"--cpus", "2"}})
	d.waitNotify("WATCHDOG=1")
	p := d.cmd.Process
	for _, sig := range []syscall.Signal{syscall.SIGSTOP, syscall.SIGABRT, syscall.SIGCONT} {
		if err := p.Signal(sig); err != nil {
			t.Fatal(err)
		}
	}
	err := d.cmd.Wait()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != exitAborted {
		t.Errorf("daemon exited with %v, want exit status %d", err, exitAborted)
	}
	logs := d.logs.String()
	if n := strings.Count(logs, "aborted"); n != 1 {
		t.Errorf("%d lines say it aborted, want 1:\n%s", n, logs)
	}
	for _, dump := range []string{"SIGABRT: abort", "goroutine "} {
		if strings.Contains(logs, dump) {
			t.Errorf("the log holds the runtime's dump (%q):\n%s", dump, logs)
		}
	}
	stacks := filepath.Join(d.state, "abort-goroutines.txt")
	if !strings.Contains(logs, "loop=") || !strings.Contains(logs, "last_watchdog_ping_ms_ago=") || !strings.Contains(logs, "stacks="+stacks) {
		t.Errorf("the abort's line does not say where the loop was, its last ping and where the stacks are:\n%s", logs)
	}
	if b, err := os.ReadFile(stacks); err != nil || !strings.Contains(string(b), "goroutine ") {
		t.Errorf("the stacks file: %v, %.200q", err, b)
	}
}

func TestDaemonSurvivesKill9(t *testing.T) {
	t.Parallel()
	files := map[string]string{
		"svc.lua":   service("svc", ""),
		"batch.lua": `job "batch" { cmd = { "sh", "-c", "echo ran >> OUT/batch" }, cpus = 1 }`,
	}
	d := newTestDaemon(t, files)
	d.start(daemonOptions{args: []string{"--cpus", "4"}})
	first := d.waitJob("svc", "running", func(j supervisor.JobStatus) bool { return j.State == "running" && j.PID > 0 })
	d.waitState("batch", "done")
	oldPID := strings.TrimSpace(d.waitFile("svc.pid"))
	os.Remove(filepath.Join(d.out, "svc.pid"))

	d.cmd.Process.Signal(syscall.SIGKILL)
	d.cmd.Wait()

	d.start(daemonOptions{args: []string{"--cpus", "4"}})
	second := d.waitJob("svc", "running again", func(j supervisor.JobStatus) bool { return j.State == "running" && j.PID > 0 })
	if second.Run == first.Run {
		t.Errorf("the lost run %d was not replaced", first.Run)
	}
	// Its history says why it was lost, and that its end is not known.
	for _, r := range d.history("svc") {
		if r.ID == first.Run && (r.Reason != "lost" || !strings.HasPrefix(r.Cause, "the daemon went away while it ran")) {
			t.Errorf("the run lost with the daemon: %s, cause %q", r.Reason, r.Cause)
		}
	}
	newPID := strings.TrimSpace(d.waitFile("svc.pid"))
	if alive(t, oldPID) && newPID != oldPID {
		t.Errorf("two live children: the old %s and the new %s", oldPID, newPID)
	}
	if batch, _ := d.job("batch"); batch.State != "done" {
		t.Errorf("a done batch job ran again after the restart: %+v", batch)
	}
	if ran := strings.Count(d.waitFile("batch"), "ran"); ran != 1 {
		t.Errorf("the batch job ran %d times, want once per definition", ran)
	}
	s := d.status()
	if s.Machine.CPUsFree != s.Machine.CPUs-1 {
		t.Errorf("books: %d of %d cores free with one 1-core job running", s.Machine.CPUsFree, s.Machine.CPUs)
	}
	d.stop()
}

// TestStopUnderWayOutlivesKill9: a person's stop, or a timeout, under way
// when the daemon is killed is seen through by the next one: the job rests
// stopped or failed, or waits out the restart its policy makes after a
// timeout, and its run ended stopped or timed out (not lost, run again at
// once and counted as no restart).
func TestStopUnderWayOutlivesKill9(t *testing.T) {
	t.Parallel()
	deaf := `cmd = { "sh", "-c", "trap '' TERM; touch OUT/$BERTH_JOB.trapped; while true; do sleep 0.2; done" }, cpus = 1, stop_timeout = "60s"`
	d := newTestDaemon(t, map[string]string{
		"stk.lua": `job "stk" { ` + deaf + ` }` + "\n" + `job "tmo" { ` + deaf + `, timeout = "1s", restart = "no" }` + "\n" +
			`job "rst" { cmd = { "sh", "-c", "test -e OUT/rst.ran && exec sleep 600; trap '' TERM; touch OUT/rst.ran; while true; do sleep 0.2; done" },
				cpus = 1, stop_timeout = "60s" }` + "\n" +
			`job "otm" { cmd = { "sh", "-c", "test -e OUT/otm.ran && exit 0; touch OUT/otm.ran; trap '' TERM; while true; do sleep 0.2; done" },
				cpus = 0, stop_timeout = "60s", timeout = "1s", restart = "on-failure" }`,
	})
	d.start(daemonOptions{args: []string{"--cpus", "4"}})
	otm := d.waitState("otm", "stopping")
	first := d.waitState("stk", "running")
	d.waitFile("stk.trapped") // a stop before would end it at once
	if resp := d.post("/v1/jobs/stk/stop"); resp.StatusCode != 200 {
		t.Fatalf("stop: %s", resp.Status)
	}
	if j := d.waitState("stk", "stopping"); j.Why != "stopped on request (berth stop); SIGTERM sent" || j.KillAt == nil ||
		j.KillAt.Before(time.Now().Add(50*time.Second)) || j.KillAt.After(time.Now().Add(time.Minute)) {
		t.Errorf("stk stopping: why %q, SIGKILL at %v, want a minute from the stop", j.Why, j.KillAt)
	}
	timedOut := d.waitState("tmo", "stopping")
	// A restart under way too: its run is on record as being stopped,
	// and why, before the daemon goes.
	restarted := d.waitState("rst", "running")
	d.waitFile("rst.ran") // its trap set
	d.post("/v1/jobs/rst/restart")
	testkit.WaitFor(t, waitLong, "rst's stop on record", func() bool {
		runs := d.history("rst")
		return len(runs) > 0 && strings.Contains(runs[0].Cause, "restarted on request")
	})
	d.cmd.Process.Signal(syscall.SIGKILL)
	d.cmd.Wait()

	d.start(daemonOptions{args: []string{"--cpus", "4"}})
	for _, c := range []struct {
		job, state, reason string
		run                uint64
	}{{"stk", "stopped", "stopped", first.Run}, {"tmo", "failed", "timed out", timedOut.Run}} {
		if j := d.waitState(c.job, c.state); j.Run != 0 {
			t.Errorf("%s after the restart: %+v, want %s with no run", c.job, j, c.state)
		}
		runs := d.history(c.job)
		if len(runs) != 1 || runs[0].ID != c.run || runs[0].End == nil || runs[0].Reason != c.reason || runs[0].ExitCode != nil ||
			!strings.Contains(runs[0].Cause, "the next one finished it") {
			t.Errorf("%s's runs: %+v, want its one run, ended %s (not lost: its stop was under way), with no exit code but why", c.job, runs, c.reason)
		}
	}
	// The restart's run ended stopped, not lost, saying why; the job runs
	// again, as the restart asked.
	d.waitJob("rst", "running again", func(j supervisor.JobStatus) bool { return j.State == "running" && j.Run != restarted.Run })
	if runs := d.history("rst"); len(runs) != 2 || runs[1].ID != restarted.Run || runs[1].Reason != "stopped" ||
		runs[1].Cause != "restarted on request (berth restart); its daemon went away during the stop, and the next one finished it" {
		t.Errorf("rst's runs: %+v, want the first stopped, as restarted, by the next daemon", runs)
	}
	// Restarted once, as the policy has it, and done by its second run.
	if j := d.waitState("otm", "done"); j.Restarts != 1 {
		t.Errorf("otm after its restart: %+v, want done with 1 restart", j)
	}
	if runs := d.history("otm"); len(runs) != 2 || runs[1].ID != otm.Run || runs[1].Reason != "timed out" || runs[0].Reason != "exited" {
		t.Errorf("otm's runs: %+v, want its first run timed out (not lost), its second exited", runs)
	}
	d.stop()
}

func TestDaemonShutdownStopsEveryJob(t *testing.T) {
	t.Parallel()
	d := newTestDaemon(t, map[string]string{
		"jobs.lua": service("polite", "") + "\n" + `job "stubborn" { cmd = { "sh", "-c", "trap '' TERM; echo $$ > OUT/stubborn.pid.tmp; mv OUT/stubborn.pid.tmp OUT/stubborn.pid; while true; do sleep 1; done" },
			cpus = 1, stop_timeout = "500ms" }`,
	})
	d.start(daemonOptions{args: []string{"--cpus", "4"}})
	polite := strings.TrimSpace(d.waitFile("polite.pid"))
	stubborn := strings.TrimSpace(d.waitFile("stubborn.pid"))
	began := time.Now()
	d.stop()
	if took := time.Since(began); took < 500*time.Millisecond {
		t.Errorf("exited after %v, before the stubborn job's stop_timeout", took)
	}
	for _, pid := range []string{polite, stubborn} {
		if alive(t, pid) {
			t.Errorf("job process %s outlived the daemon", pid)
		}
	}
}

// TestDaemonShuttingDownTakesNoRequest: while the daemon stops its jobs, a
// start, stop or restart is refused, and says so; taken, it was lost (a
// job stopped then ran again at the next start).
func TestDaemonShuttingDownTakesNoRequest(t *testing.T) {
	t.Parallel()
	d := newTestDaemon(t, map[string]string{
		"jobs.lua": `job "stubborn" { cmd = { "sh", "-c", "trap '' TERM; echo $$ > OUT/stubborn.pid.tmp; mv OUT/stubborn.pid.tmp OUT/stubborn.pid; while true; do sleep 1; done" },
			cpus = 0, stop_timeout = "1m" }
job "work" { cmd = "sleep 600", cpus = 0 }
job "once" { cmd = "true", cpus = 0 }`,
	})
	d.start(daemonOptions{})
	d.waitFile("stubborn.pid")
	d.waitState("work", "running")
	d.waitState("once", "done")
	if err := d.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	d.waitNotify("STOPPING=1") // sent once the loop has ended
	for _, verb := range []string{"stop", "restart", "start"} {
		for _, job := range []string{"work", "once"} {
			out, errOut, code := d.cli(verb, job)
			want := "berth: the daemon is stopping, and takes no request now: berth " + verb + " " + job + " was not done; ask again"
			if code != exitNoDaemon || !strings.HasPrefix(errOut, want) {
				t.Errorf("berth %s %s while the daemon stops: exit %d\n%s%s", verb, job, code, out, errOut)
			}
		}
	}
	if _, errOut, code := d.cli("reload"); code != exitNoDaemon || !strings.Contains(errOut, "the daemon is stopping") {
		t.Errorf("berth reload while the daemon stops: exit %d\n%s", code, errOut)
	}
	// Every job is stopping by now, and stop --all asks for each all the
	// same (it was 0 jobs, exit 0, and nothing held at the next start).
	if out, errOut, code := d.cli("stop", "--all"); code != exitNoDaemon || !strings.Contains(errOut, "the daemon is stopping, and takes no request now: berth stop --all was not done") {
		t.Errorf("berth stop --all while the daemon stops: exit %d\n%s%s", code, out, errOut)
	}
	// berth status says so.
	if out, errOut, code := d.cli("status"); code != exitOK || !strings.Contains(strings.Join(strings.Fields(out), " "), msgDaemonStopping(false)) {
		t.Errorf("berth status while the daemon stops: exit %d\n%s%s", code, out, errOut)
	}
}

func TestDaemonFailingFilesKeepWhatRuns(t *testing.T) {
	t.Parallel()
	d := newTestDaemon(t, map[string]string{
		"b.lua": service("x", "") + "\n" + service("y", ""),
	})
	d.start(daemonOptions{args: []string{"--cpus", "8"}})
	x := d.waitJob("x", "running", func(j supervisor.JobStatus) bool { return j.State == "running" && j.PID > 0 })
	y := d.waitJob("y", "running", func(j supervisor.JobStatus) bool { return j.State == "running" && j.PID > 0 })
	untouched := func(when string) {
		t.Helper()
		for _, want := range []supervisor.JobStatus{x, y} {
			if j, ok := d.job(want.Name); !ok || j.Run != want.Run || j.State != "running" {
				t.Errorf("%s: job %s was touched: %+v", when, want.Name, j)
			}
		}
	}
	waitErrors := func(what string, cond func([]string) bool) {
		t.Helper()
		var last []string
		held := false
		defer func() {
			if !held {
				t.Logf("errors last seen: %q", last)
			}
		}()
		testkit.WaitFor(t, waitLong, "the errors to "+what, func() bool {
			last = d.status().Errors
			return cond(last)
		})
		held = true
	}

	// A new file that declares a running job's name is the one refused.
	d.write("a.lua", service("x", `, env = { FROM = "a" }`))
	waitErrors("blame a.lua", func(errs []string) bool {
		return len(errs) == 1 && strings.Contains(errs[0], "a.lua:1: job \"x\" is already declared in ") &&
			strings.Contains(errs[0], "b.lua:1, which is in force")
	})
	untouched("a newcomer declared x again")
	// Fixing the newcomer is enough: it is tried again.
	d.write("a.lua", service("z", ""))
	d.waitState("z", "running")
	waitErrors("clear", func(errs []string) bool { return len(errs) == 0 })
	untouched("the newcomer was fixed")

	// A file made writable by others is refused, and what it declared runs on.
	path := filepath.Join(d.jobs, "b.lua")
	os.Chmod(path, 0o666)
	d.post("/v1/reload")
	waitErrors("say b.lua is writable by others", func(errs []string) bool {
		return len(errs) == 1 && strings.Contains(errs[0], "writable by others")
	})
	untouched("b.lua was refused")
	os.Chmod(path, 0o644)
	d.post("/v1/reload")
	waitErrors("clear", func(errs []string) bool { return len(errs) == 0 })
	untouched("b.lua was fixed")

	// A new file refused from the start is shown, and forgotten once gone.
	d.write("c.lua", service("c", ""))
	os.Chmod(filepath.Join(d.jobs, "c.lua"), 0o666)
	d.post("/v1/reload")
	waitErrors("say c.lua is refused", func(errs []string) bool {
		return len(errs) == 1 && strings.Contains(errs[0], "c.lua is writable by others")
	})
	os.Remove(filepath.Join(d.jobs, "c.lua"))
	d.post("/v1/reload")
	waitErrors("clear", func(errs []string) bool { return len(errs) == 0 })
	d.stop()
}

func TestDaemonUnaccountedRestart(t *testing.T) {
	t.Parallel()
	d := newTestDaemon(t, map[string]string{"free.lua": `job "free" { cmd = { "sleep", "1000" }, cpus = 0 }`})
	d.start(daemonOptions{})
	first := d.waitJob("free", "running", func(j supervisor.JobStatus) bool { return j.State == "running" && j.PID > 0 })
	d.post("/v1/jobs/free/restart")
	second := d.waitJob("free", "running again", func(j supervisor.JobStatus) bool {
		return j.State == "running" && j.Run != first.Run && j.PID > 0
	})
	d.post("/v1/jobs/free/stop")
	d.waitState("free", "stopped")
	if alive(t, strconv.Itoa(second.PID)) {
		t.Errorf("the restarted run %d outlived its stop", second.PID)
	}
	d.stop()
}

// TestShutdownAskedAgain: a second SIGTERM while the daemon waits for its
// jobs to stop says what it waits for (trial AC: the same "shutting down"
// line again), not a job whose run has ended since (trial AX).
func TestShutdownAskedAgain(t *testing.T) {
	t.Parallel()
	d := newTestDaemon(t, map[string]string{"s.lua": `job "stubborn" { cmd = { "sh", "-c", "trap '' TERM; touch OUT/trapped; while true; do sleep 0.1; done" }, cpus = 0, stop_timeout = "5m" }
job "quick" { cmd = { "sleep", "1000" }, cpus = 0 }`})
	d.start(daemonOptions{})
	j := d.waitJob("stubborn", "its run", func(j supervisor.JobStatus) bool { return j.State == "running" && j.PID > 0 })
	d.waitJob("quick", "its run", func(j supervisor.JobStatus) bool { return j.State == "running" && j.PID > 0 })
	d.waitFile("trapped") // a SIGTERM before would end it at once
	d.cmd.Process.Signal(syscall.SIGTERM)
	d.waitLog("state changed: job=stubborn from=running to=stopping")
	d.waitLog("exited: job=quick")
	// Asked until the answer leaves quick out: its goroutine ends a
	// moment after that line.
	const asked = "already shutting down: waiting for its jobs to stop, each killed once its stop_timeout has passed: signal=terminated "
	n := 0
	testkit.WaitFor(t, waitLong, "an answer to SIGTERM again that names stubborn alone", func() bool {
		n++
		d.cmd.Process.Signal(syscall.SIGTERM)
		testkit.WaitFor(t, waitLong, "the answer to SIGTERM again", func() bool { return strings.Count(d.logs.String(), asked) >= n })
		return strings.Contains(d.logs.String(), asked+"stopping=1 jobs=stubborn")
	})
	// Its stop_timeout is not waited for: the run is ended here.
	if err := syscall.Kill(-j.PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if err := d.cmd.Wait(); err != nil {
		t.Errorf("the daemon: %v", err)
	}
}
