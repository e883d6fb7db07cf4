package runner

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/berthd/berth/supervisor/testkit"
	"golang.org/x/sys/unix"
)

// The tests here change the test process's own oom_score_adj, which stands
// for the daemon's: none of them is parallel, so that no other test starts
// a process meanwhile (parallel tests run once every serial one is done).

// scoreJob prints the oom_score_adj of the job's leader, of a process the
// leader forks, and of one that process forks in turn, a line each.
var scoreJob = []string{"/bin/sh", "-c", `read v </proc/$$/oom_score_adj; echo "$v"; cat /proc/self/oom_score_adj; sh -c 'cat /proc/self/oom_score_adj'`}

var scoreEnv = []string{"PATH=/usr/bin:/bin"}

// ownScoreValue is the test process's own oom_score_adj.
func ownScoreValue(t testing.TB) int {
	t.Helper()
	b, err := os.ReadFile("/proc/self/oom_score_adj")
	if err != nil {
		t.Fatal(err)
	}
	v, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func setOwnScore(t testing.TB, v int) {
	t.Helper()
	if err := os.WriteFile("/proc/self/oom_score_adj", []byte(strconv.Itoa(v)), 0); err != nil {
		t.Fatalf("set the test process's oom_score_adj to %d: %v", v, err)
	}
}

// canLowerScore reports whether this process has CAP_SYS_RESOURCE, which
// lowering an oom_score_adj below its floor needs. Root in a container
// may lack it.
func canLowerScore() bool {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if unix.Capget(&hdr, &data[0]) != nil {
		return false
	}
	return data[unix.CAP_SYS_RESOURCE/32].Effective&(1<<(unix.CAP_SYS_RESOURCE%32)) != 0
}

// atScore sets the test process's own oom_score_adj to daemon until t
// ends. Below the value the test process started at, where its floor may
// be, it and the values in jobs (what the test will have Start give the
// daemon) need CAP_SYS_RESOURCE; the test is skipped without it.
func atScore(t testing.TB, daemon int, jobs ...int) {
	t.Helper()
	was := ownScoreValue(t)
	if !canLowerScore() && slices.Min(append(jobs, daemon)) < was {
		t.Skipf("needs CAP_SYS_RESOURCE, to set the test process's oom_score_adj below its own %d", was)
	}
	t.Cleanup(func() { setOwnScore(t, was) })
	setOwnScore(t, daemon)
}

// scores starts spec, a job that prints values a line each, and returns
// its lines once it has exited, with what the Process says about the
// daemon's own value. It does not use t, so that goroutines may call it.
func scores(spec Spec) (lines []string, restoreErr, err error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, nil, err
	}
	defer r.Close()
	spec.Stdout = w
	p, err := Start(spec)
	w.Close()
	if err != nil {
		return nil, nil, err
	}
	defer p.Stop(syscall.SIGKILL, 0)
	r.SetReadDeadline(time.Now().Add(10 * time.Second))
	out, err := io.ReadAll(r)
	if err != nil {
		return nil, nil, fmt.Errorf("read the job's output: %w (got %q)", err, out)
	}
	select {
	case <-p.Done():
	case <-time.After(10 * time.Second):
		return nil, nil, fmt.Errorf("pid %d not reaped after 10s", p.PID())
	}
	if e := p.Wait(); !e.Success() {
		return nil, nil, fmt.Errorf("job: %v; output %q", e, out)
	}
	return strings.Fields(string(out)), p.DaemonOOMScoreAdjErr(), nil
}

func repeat(s string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = s
	}
	return out
}

// TestOOMScoreAdj: every process of a job has the job's value, whatever the
// daemon's, and the daemon has its own back once Start returns.
func TestOOMScoreAdj(t *testing.T) {
	for _, c := range []struct {
		name        string
		daemon, job int
	}{
		{"daemon protected, as under the shipped unit", -900, 0},
		{"daemon more killable than the job", 500, 0},
		{"job's own value", -500, 300},
		{"job more protected than the daemon", 0, -200},
		{"job more killable than the daemon", 200, 700},
		{"daemon at the job's value", 0, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			atScore(t, c.daemon, c.job)
			lines, restoreErr, err := scores(Spec{Argv: scoreJob, Env: scoreEnv, OOMScoreAdj: c.job})
			if err != nil {
				t.Fatal(err)
			}
			if want := repeat(strconv.Itoa(c.job), 3); !slices.Equal(lines, want) {
				t.Errorf("leader, child, grandchild at %q, want %q", lines, want)
			}
			if restoreErr != nil {
				t.Errorf("DaemonOOMScoreAdjErr() = %v", restoreErr)
			}
			if got := ownScoreValue(t); got != c.daemon {
				t.Errorf("daemon at %d after the start, want its own %d", got, c.daemon)
			}
		})
	}
}

// TestOOMScoreAdjConcurrent: Starts that want different values, at once,
// each get theirs, and none sees another's value for the daemon's own;
// those that want the daemon's own (and fork without a flip, side by
// side) never fork while another has the daemon at its job's value.
func TestOOMScoreAdjConcurrent(t *testing.T) {
	daemon := -900
	if !canLowerScore() {
		daemon = 500 // above the jobs', which only lowering reaches
	}
	atScore(t, daemon, 0, 300)
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for g := range 9 {
		job := []int{0, 300, daemon}[g%3]
		wg.Go(func() {
			for range 4 {
				lines, restoreErr, err := scores(Spec{Argv: scoreJob, Env: scoreEnv, OOMScoreAdj: job})
				switch want := repeat(strconv.Itoa(job), 3); {
				case err != nil:
					errs <- err
				case !slices.Equal(lines, want):
					errs <- fmt.Errorf("leader, child, grandchild at %q, want %q", lines, want)
				case restoreErr != nil:
					errs <- restoreErr
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if got := ownScoreValue(t); got != daemon {
		t.Errorf("daemon at %d after the starts, want its own %d", got, daemon)
	}
}

// oomStart is the oom-start helper: the test binary as a daemon, which
// starts scoreJob at oom_score_adj args[0] and prints the job's lines, then
// what came of the start, then its own value, "daemon N". With args[1]
// "wait", it first prints "ready" and waits for SIGUSR1.
func oomStart(args []string) int {
	want, err := strconv.Atoi(args[0])
	if err != nil {
		return fail(err)
	}
	if len(args) > 1 && args[1] == "wait" {
		c := make(chan os.Signal, 1)
		signal.Notify(c, syscall.SIGUSR1)
		fmt.Println("ready")
		<-c
	}
	p, err := Start(Spec{Argv: scoreJob, Env: scoreEnv, Stdout: os.Stdout, OOMScoreAdj: want})
	var se *OOMScoreAdjError
	switch {
	case errors.As(err, &se) && !se.Restore:
		fmt.Println("refused, EACCES:", errors.Is(err, syscall.EACCES))
	case err != nil:
		return fail(err)
	default:
		if e := p.Wait(); !e.Success() {
			return fail(fmt.Errorf("job: %v", e))
		}
		if err := p.DaemonOOMScoreAdjErr(); err != nil {
			fmt.Println("not restored, EACCES:", errors.As(err, &se) && se.Restore && errors.Is(err, syscall.EACCES))
		}
	}
	v, err := os.ReadFile("/proc/self/oom_score_adj")
	if err != nil {
		return fail(err)
	}
	fmt.Print("daemon ", string(v))
	return 0
}

// TestOOMScoreAdjUnprivilegedDaemon runs the test binary as a daemon
// without CAP_SYS_RESOURCE (uid 65534), which may lower its value no
// further than its floor: a daemon under systemd that is not root.
func TestOOMScoreAdjUnprivilegedDaemon(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root, to start a daemon as uid 65534")
	}
	// The daemon starts at base. With the capability, the test's write of
	// base sets the daemon's floor there too, as systemd's write of
	// OOMScoreAdjust= does. Without it, the daemon inherits the test
	// process's floor, which can be found only as a value the kernel
	// refuses: the test process's own, if one below it is refused.
	base, floor := -900, -900
	if !canLowerScore() {
		was := ownScoreValue(t)
		if was == -1000 || os.WriteFile("/proc/self/oom_score_adj", []byte(strconv.Itoa(was-1)), 0) == nil {
			setOwnScore(t, was)
			t.Skipf("needs CAP_SYS_RESOURCE, or a test process whose oom_score_adj (%d) is at its floor", was)
		}
		base, floor = was+100, was
	}

	// The test binary sits in a directory only root may enter; nobody
	// needs a copy it can execute.
	dir := t.TempDir()
	for _, d := range []string{dir, filepath.Dir(dir)} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	testkit.CopyExecutable(t, exe, filepath.Join(dir, "helper"), 0o755)
	daemon := func(t *testing.T, score int, args ...string) *child {
		t.Helper()
		spec := helperSpec(t, "oom-start", args...)
		spec.Argv[0] = filepath.Join(dir, "helper")
		spec.Dir = "/"
		spec.Credential = &syscall.Credential{Uid: 65534, Gid: 65534, Groups: []uint32{}}
		spec.OOMScoreAdj = score
		return startChild(t, spec)
	}
	expect := func(t *testing.T, c *child, want ...string) {
		t.Helper()
		got := strings.Split(strings.TrimSuffix(c.rest(t), "\n"), "\n")
		if !slices.Equal(got, want) {
			t.Errorf("daemon said %q, want %q", got, want)
		}
		if e := wait(t, c.Process); !e.Success() {
			t.Errorf("daemon: %v", e)
		}
	}
	daemonAt := "daemon " + strconv.Itoa(base)

	t.Run("job above the daemon", func(t *testing.T) {
		job := strconv.Itoa(floor + 900) // 0 under the shipped unit
		c := daemon(t, base, job)
		expect(t, c, job, job, job, daemonAt)
	})
	t.Run("job at the daemon's floor", func(t *testing.T) {
		job := strconv.Itoa(floor)
		c := daemon(t, base, job)
		expect(t, c, job, job, job, daemonAt)
	})
	t.Run("job below the daemon's floor", func(t *testing.T) {
		// Refused, rather than the job started at the daemon's value.
		if floor-50 < -1000 {
			t.Skip("the daemon's floor is the lowest value")
		}
		c := daemon(t, base, strconv.Itoa(floor-50))
		expect(t, c, "refused, EACCES: true", daemonAt)
	})
	t.Run("daemon below its floor", func(t *testing.T) {
		if !canLowerScore() {
			t.Skip("needs CAP_SYS_RESOURCE, to write another process's oom_adj below its value")
		}
		// The deprecated oom_adj lowers the value but leaves the floor
		// (100) where it was: the daemon can raise itself to the job's
		// value but not come back.
		c := daemon(t, 100, "200", "wait")
		c.ready(t)
		if err := os.WriteFile(fmt.Sprintf("/proc/%d/oom_adj", c.PID()), []byte("-15"), 0); err != nil {
			t.Skipf("no oom_adj to write: %v", err)
		}
		if err := unix.Kill(c.PID(), unix.SIGUSR1); err != nil {
			t.Fatal(err)
		}
		expect(t, c, "200", "200", "200", "not restored, EACCES: true", "daemon 200")
	})
}

// fakeScore stands in for the daemon's value in TestFlipScore.
type fakeScore struct {
	v                  int
	readErr            error
	setErr, restoreErr error // for the first write, and the second
	writes             []int
}

func (f *fakeScore) read() (int, error) { return f.v, f.readErr }

func (f *fakeScore) write(v int) error {
	f.writes = append(f.writes, v)
	if len(f.writes) == 1 && f.setErr != nil {
		return f.setErr
	}
	if len(f.writes) == 2 && f.restoreErr != nil {
		return f.restoreErr
	}
	f.v = v
	return nil
}

// TestFlipScore pins startAtScore's table of outcomes, including the two a
// test process cannot bring about without privileges it may lack.
func TestFlipScore(t *testing.T) {
	t.Parallel()
	readErr := errors.New("no /proc")
	for _, c := range []struct {
		name       string
		f          fakeScore
		forked     bool
		atFork     int // the value at the fork
		writes     []int
		restoreErr bool
		err        error
	}{
		{"at the job's value", fakeScore{v: 0}, true, 0, nil, false, nil},
		{"flip", fakeScore{v: -900}, true, 0, []int{0, -900}, false, nil},
		{"unreadable", fakeScore{v: -900, readErr: readErr}, false, 0, nil, false, readErr},
		{"job's value refused", fakeScore{v: -900, setErr: syscall.EACCES}, false, 0, []int{0}, false, syscall.EACCES},
		{"own value refused", fakeScore{v: -900, restoreErr: syscall.EACCES}, true, 0, []int{0, -900}, true, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := c.f
			forked, atFork := false, 0
			restoreErr, err := flipScore(&f, 0, func() { forked, atFork = true, f.v })
			if forked != c.forked || (forked && atFork != c.atFork) {
				t.Errorf("forked %v at %d, want %v at %d", forked, atFork, c.forked, c.atFork)
			}
			if !slices.Equal(f.writes, c.writes) {
				t.Errorf("wrote %v, want %v", f.writes, c.writes)
			}
			if !errors.Is(err, c.err) {
				t.Errorf("err = %v, want %v", err, c.err)
			}
			var se *OOMScoreAdjError
			if c.err != nil && c.err != readErr && (!errors.As(err, &se) || se.Restore || se.Daemon != -900 || se.Job != 0) {
				t.Errorf("err = %#v, want an *OOMScoreAdjError from -900 to 0", err)
			}
			if got := restoreErr != nil; got != c.restoreErr {
				t.Errorf("restoreErr = %v, want one: %v", restoreErr, c.restoreErr)
			}
			if c.restoreErr && (!errors.As(restoreErr, &se) || !se.Restore || !errors.Is(restoreErr, syscall.EACCES)) {
				t.Errorf("restoreErr = %#v, want an *OOMScoreAdjError with Restore", restoreErr)
			}
		})
	}
}

func TestStartBadOOMScoreAdj(t *testing.T) {
	t.Parallel()
	for _, v := range []int{-1001, 1001} {
		p, err := Start(Spec{Argv: []string{"/bin/sh", "-c", "exit 0"}, OOMScoreAdj: v})
		if !errors.Is(err, ErrBadOOMScoreAdj) {
			t.Errorf("Start at %d = %v, %v; want ErrBadOOMScoreAdj", v, p, err)
		}
	}
}

func TestOOMScoreAdjErrorMessages(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	for _, c := range []struct {
		name string
		err  *OOMScoreAdjError
	}{
		{"job below the floor", &OOMScoreAdjError{Daemon: -900, Job: -950, Err: syscall.EACCES}},
		{"daemon may not write its value", &OOMScoreAdjError{Daemon: -900, Job: 0, Err: syscall.EACCES}},
		{"daemon may not open its value for writing", &OOMScoreAdjError{Daemon: 500, Job: 0, Err: &fs.PathError{Op: "open", Path: "/proc/self/oom_score_adj", Err: syscall.EACCES}}},
		{"not restored", &OOMScoreAdjError{Restore: true, Daemon: -882, Job: 200, Err: syscall.EACCES}},
	} {
		fmt.Fprintf(&b, "%s: %v\n", c.name, c.err)
	}
	testkit.Golden(t, "testdata/oom_score_adj_errors.golden", []byte(b.String()))
}

// BenchmarkStartOOMScoreAdj compares a start with the daemon at the job's
// value, which writes nothing, with one that sets the daemon's value and
// puts it back.
func BenchmarkStartOOMScoreAdj(b *testing.B) {
	if _, err := os.Stat("/bin/true"); err != nil {
		b.Skip("no /bin/true")
	}
	spec := Spec{Argv: []string{"/bin/true"}}
	flip := -900
	if !canLowerScore() {
		flip = 500 // lowered to the job's 0 and raised back, as -900 is raised and lowered
	}
	for _, c := range []struct {
		name   string
		daemon int
	}{
		{"same", 0},
		{"flip", flip},
	} {
		b.Run(c.name, func(b *testing.B) {
			atScore(b, c.daemon, 0)
			for b.Loop() {
				p, err := Start(spec)
				if err != nil {
					b.Fatal(err)
				}
				if e := p.Wait(); !e.Success() {
					b.Fatal(e)
				}
			}
		})
	}
}

// BenchmarkStartAtScore is what Start adds to a start, without the start:
// a read of the daemon's value, and two writes where it is not the job's.
func BenchmarkStartAtScore(b *testing.B) {
	flip := -900
	if !canLowerScore() {
		flip = 500
	}
	for _, c := range []struct {
		name   string
		daemon int
	}{
		{"same", 0},
		{"flip", flip},
	} {
		b.Run(c.name, func(b *testing.B) {
			atScore(b, c.daemon, 0)
			for b.Loop() {
				if _, err := startAtScore(0, func() {}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestStartsAtTheDaemonsScoreSideBySide: a Start that finds the daemon at
// the value it wants forks without waiting for another such Start's fork
// to return (they waited for each other when every Start held the value
// exclusive, which cost short jobs about 10 % of their throughput).
func TestStartsAtTheDaemonsScoreSideBySide(t *testing.T) {
	own := ownScoreValue(t)
	if _, err := startAtScore(own, func() {}); err != nil { // opens the file
		t.Fatal(err)
	}
	inFirst, release := make(chan struct{}), make(chan struct{})
	first := make(chan error, 1)
	go func() {
		_, err := startAtScore(own, func() { close(inFirst); <-release })
		first <- err
	}()
	<-inFirst
	second := make(chan error, 1)
	go func() {
		_, err := startAtScore(own, func() {})
		second <- err
	}()
	waited := false
	select {
	case err := <-second:
		if err != nil {
			t.Error(err)
		}
	case <-time.After(10 * time.Second):
		t.Error("a second start at the daemon's value waited for the first one's fork")
		waited = true
	}
	close(release)
	if err := <-first; err != nil {
		t.Error(err)
	}
	if waited {
		<-second
	}
}
