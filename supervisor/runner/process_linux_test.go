package runner

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/berthd/berth/supervisor/testkit"
)

func TestExitCode(t *testing.T) {
	t.Parallel()
	for _, code := range []int{0, 3} {
		t.Run(strconv.Itoa(code), func(t *testing.T) {
			t.Parallel()
			c := startChild(t, helperSpec(t, "exit", strconv.Itoa(code)))
			got := wait(t, c.Process)
			if want := (Exit{Code: code}); got != want {
				t.Errorf("Wait() = %+v, want %+v", got, want)
			}
			if got.Success() != (code == 0) {
				t.Errorf("Success() = %v for %v", got.Success(), got)
			}
		})
	}
}

func TestExitBySignal(t *testing.T) {
	t.Parallel()
	c := startChild(t, helperSpec(t, "sleep"))
	c.ready(t)
	if err := unix.Kill(c.PID(), unix.SIGTERM); err != nil {
		t.Fatal(err)
	}
	got := wait(t, c.Process)
	if want := (Exit{Code: -1, Signal: syscall.SIGTERM}); got != want {
		t.Errorf("Wait() = %+v, want %+v", got, want)
	}
	if s := got.String(); s != "signal: terminated" {
		t.Errorf("String() = %q", s)
	}
}

func TestSpecDelivered(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	spec := helperSpec(t, "describe", "two words", "", "ünïcode")
	spec.Dir = dir
	spec.Env = append(spec.Env, "FOO=1", "EMPTY=", "FOO=2")
	c := startChild(t, spec)
	var d description
	if err := json.Unmarshal([]byte(c.rest(t)), &d); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(d.Args, spec.Argv) {
		t.Errorf("argv = %q, want %q", d.Args, spec.Argv)
	}
	if want, _ := filepath.EvalSymlinks(dir); d.Dir != want {
		t.Errorf("dir = %q, want %q", d.Dir, want)
	}
	// The last FOO wins, as with os/exec, and nothing of the daemon's
	// environment comes along.
	if want := []string{helperEnv + "=describe", "GORACE=atexit_sleep_ms=0", "EMPTY=", "FOO=2"}; !slices.Equal(d.Env, want) {
		t.Errorf("env = %q, want %q", d.Env, want)
	}
	if e := wait(t, c.Process); !e.Success() {
		t.Errorf("exit: %v", e)
	}
}

func TestPathLookup(t *testing.T) {
	t.Parallel()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bin := t.TempDir()
	if err := os.Symlink(exe, filepath.Join(bin, "berth-helper")); err != nil {
		t.Fatal(err)
	}

	t.Run("job's PATH", func(t *testing.T) {
		c := startChild(t, Spec{
			Argv: []string{"berth-helper", "7"},
			Env:  []string{helperEnv + "=exit", "PATH=/nonexistent:" + bin},
		})
		if got := wait(t, c.Process); got.Code != 7 {
			t.Errorf("exit = %v, want status 7", got)
		}
	})
	t.Run("not the daemon's", func(t *testing.T) {
		// sh is in the daemon's PATH, and must not be found through it.
		_, err := Start(Spec{Argv: []string{"sh", "-c", "exit 0"}, Env: []string{"PATH=" + bin}})
		if !errors.Is(err, ErrNotFound) {
			t.Errorf("Start = %v, want ErrNotFound", err)
		}
	})
	t.Run("relative entry", func(t *testing.T) {
		_, err := Start(Spec{
			Argv: []string{"berth-helper", "0"},
			Dir:  bin,
			Env:  []string{helperEnv + "=exit", "PATH=/nonexistent::/usr/bin"},
		})
		if !errors.Is(err, ErrRelativePath) {
			t.Errorf("Start = %v, want ErrRelativePath", err)
		}
	})
	t.Run("relative name with a slash", func(t *testing.T) {
		c := startChild(t, Spec{
			Argv: []string{"./berth-helper", "5"},
			Dir:  bin,
			Env:  []string{helperEnv + "=exit"},
		})
		if got := wait(t, c.Process); got.Code != 5 {
			t.Errorf("exit = %v, want status 5", got)
		}
	})
	t.Run("no PATH", func(t *testing.T) {
		if _, err := os.Stat("/usr/bin/true"); err != nil {
			t.Skip("no /usr/bin/true to find through the default PATH")
		}
		c := startChild(t, Spec{Argv: []string{"true"}})
		if got := wait(t, c.Process); !got.Success() {
			t.Errorf("exit = %v", got)
		}
	})
}

func TestStartErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		spec Spec
		want error
	}{
		{"no argv", Spec{}, ErrNoCommand},
		{"no such file", Spec{Argv: []string{"/nonexistent/prog"}}, fs.ErrNotExist},
		{"no such dir", Spec{Argv: []string{"/bin/sh"}, Dir: "/nonexistent"}, fs.ErrNotExist},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := Start(tt.spec)
			if !errors.Is(err, tt.want) {
				t.Errorf("Start = %v, %v; want error %v", p, err, tt.want)
			}
		})
	}
}

func TestStopCooperative(t *testing.T) {
	t.Parallel()
	c := startChild(t, helperSpec(t, "wait-term"))
	c.ready(t)
	if killed := c.Stop(syscall.SIGTERM, 10*time.Second); killed {
		t.Error("Stop killed a child that exits on SIGTERM")
	}
	if got := c.Wait(); !got.Success() {
		t.Errorf("exit = %v, want status 0", got)
	}
}

func TestStopKillsAfterTimeout(t *testing.T) {
	t.Parallel()
	const timeout = 300 * time.Millisecond
	c := startChild(t, helperSpec(t, "ignore-term"))
	c.ready(t)
	start := time.Now()
	killed := c.Stop(syscall.SIGTERM, timeout)
	took := time.Since(start)
	if !killed {
		t.Error("Stop did not report SIGKILL for a child that ignores SIGTERM")
	}
	if took < timeout {
		t.Errorf("Stop returned after %v, before the timeout of %v", took, timeout)
	}
	if got := c.Wait(); got.Signal != syscall.SIGKILL {
		t.Errorf("exit = %v, want signal: killed", got)
	}
}

// TestStopKillMoved: MoveKill, before the stop's wait or during it, moves
// its SIGKILL (a stop_timeout edited): from an hour to now, and from 2 s
// to an hour, then to now.
func TestStopKillMoved(t *testing.T) {
	t.Parallel()
	started := func(c *child) bool {
		c.kill.mu.Lock()
		defer c.kill.mu.Unlock()
		return c.kill.fired != nil
	}
	stopped := func(c *child, timeout time.Duration) <-chan bool {
		done := make(chan bool, 1)
		go func() { done <- c.Stop(syscall.SIGTERM, timeout) }()
		return done
	}
	killedBy := func(what string, c *child, done <-chan bool) {
		t.Helper()
		select {
		case killed := <-done:
			if !killed {
				t.Errorf("%s: not reported SIGKILLed", what)
			}
		case <-time.After(20 * time.Second):
			t.Fatalf("%s: Stop still waits", what)
		}
		if got := c.Wait(); got.Signal != syscall.SIGKILL {
			t.Errorf("%s: exit = %v, want signal: killed", what, got)
		}
	}

	c := startChild(t, helperSpec(t, "ignore-term"))
	c.ready(t)
	c.MoveKill(0)
	killedBy("moved to now before the stop", c, stopped(c, time.Hour))

	c = startChild(t, helperSpec(t, "ignore-term"))
	c.ready(t)
	done := stopped(c, time.Hour)
	testkit.WaitFor(t, 20*time.Second, "the stop's wait to begin", func() bool { return started(c) })
	c.MoveKill(0)
	killedBy("moved to now during the stop", c, done)

	c = startChild(t, helperSpec(t, "ignore-term"))
	c.ready(t)
	done = stopped(c, 2*time.Second)
	testkit.WaitFor(t, 20*time.Second, "the stop's wait to begin", func() bool { return started(c) })
	c.MoveKill(time.Hour)
	select {
	case <-done:
		t.Fatal("moved from 2s to an hour: SIGKILLed at the 2s")
	case <-time.After(3 * time.Second):
	}
	c.MoveKill(0)
	killedBy("moved to an hour, then to now", c, done)
}

func TestStopContinuesStopped(t *testing.T) {
	t.Parallel()
	c := startChild(t, helperSpec(t, "wait-term"))
	c.ready(t)
	if err := unix.Kill(c.PID(), unix.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	// WNOWAIT leaves the state for the reaper; this only waits for it.
	var info unix.Siginfo
	if err := unix.Waitid(unix.P_PID, c.PID(), &info, unix.WSTOPPED|unix.WNOWAIT, nil); err != nil {
		t.Fatal(err)
	}
	if killed := c.Stop(syscall.SIGTERM, 10*time.Second); killed {
		t.Error("a stopped child was not continued to act on SIGTERM")
	}
	if got := c.Wait(); !got.Success() {
		t.Errorf("exit = %v, want status 0", got)
	}
}

func TestStopAfterExit(t *testing.T) {
	t.Parallel()
	c := startChild(t, helperSpec(t, "exit", "0"))
	wait(t, c.Process)
	done := make(chan bool)
	go func() { done <- c.Stop(syscall.SIGTERM, time.Hour) }()
	select {
	case killed := <-done:
		if killed {
			t.Error("Stop of a reaped process reported a kill")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Stop of a reaped process did not return")
	}
}

// pidfd opens a descriptor that becomes readable when pid ends, so that a
// test can wait for a process it is not the parent of without polling.
func pidfd(t *testing.T, pid int) int {
	t.Helper()
	fd, err := unix.PidfdOpen(pid, 0)
	if err == unix.ENOSYS {
		t.Skip("no pidfd_open on this kernel")
	}
	if err != nil {
		t.Fatalf("pidfd_open(%d): %v", pid, err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	return fd
}

func waitGone(t *testing.T, fd, pid int) {
	t.Helper()
	fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	for {
		n, err := unix.Poll(fds, 10_000)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			t.Fatalf("grandchild %d still alive 10s after its group was killed", pid)
		}
		return
	}
}

func TestStopKillsGroup(t *testing.T) {
	t.Parallel()
	c := startChild(t, helperSpec(t, "fork-grandchild", "block"))
	gc, err := strconv.Atoi(c.line(t))
	if err != nil {
		t.Fatal(err)
	}
	fd := pidfd(t, gc)
	c.Stop(syscall.SIGTERM, 10*time.Second)
	waitGone(t, fd, gc)
}

// TestStopSignalsGroup tells the stop signal reaching the group from the
// SIGKILL that follows a leader's end: the grandchild says it got SIGTERM,
// which the SIGKILL would not let it do.
func TestStopSignalsGroup(t *testing.T) {
	t.Parallel()
	c := startChild(t, helperSpec(t, "group-term"))
	c.ready(t) // the grandchild's
	if killed := c.Stop(syscall.SIGTERM, 200*time.Millisecond); !killed {
		t.Error("Stop did not report SIGKILL for a leader that ignores SIGTERM")
	}
	if out := c.rest(t); out != "terminated\n" {
		t.Errorf("grandchild's output after Stop = %q, want \"terminated\\n\"", out)
	}
}

// TestStopWaitsForGroup: a leader that ends on the stop signal (a
// launcher) leaves its workers, which got it too, the rest of the stop's
// time to save their work; Stop returns once they have ended, without
// SIGKILL.
func TestStopWaitsForGroup(t *testing.T) {
	t.Parallel()
	c := startChild(t, helperSpec(t, "group-save"))
	c.ready(t) // the grandchild's
	if killed := c.Stop(syscall.SIGTERM, 10*time.Second); killed {
		t.Error("Stop reported SIGKILL for a group that ended on SIGTERM")
	}
	if out := c.rest(t); out != "saved\n" {
		t.Errorf("grandchild's output after Stop = %q, want \"saved\\n\"", out)
	}
}

// escaped starts a helper whose grandchild, of mode, leaves its group
// (setsid), with Spec.LeftGroup finding it, and waits until it is ready.
func escaped(t *testing.T, mode string) (c *child, gc int) {
	t.Helper()
	spec := helperSpec(t, "escape", mode)
	var left []Tagged
	spec.LeftGroup = func(int) []Tagged { return left }
	c = startChild(t, spec)
	gc = escapedReady(t, c)
	st, err := readStat(gc)
	if err != nil {
		t.Fatal(err)
	}
	if st.pgrp == c.PID() {
		t.Fatalf("the grandchild %d is in its parent's group", gc)
	}
	left = []Tagged{{PID: gc, StartTicks: st.startTicks}}
	t.Cleanup(func() { awaitLeft(left, unix.SIGKILL, expired) }) // should the test fail
	return c, gc
}

// escapedReady reads what an escape helper says, in either order: its
// grandchild's pid, and "ready" once that one is.
func escapedReady(t *testing.T, c *child) (gc int) {
	t.Helper()
	for ready := false; gc == 0 || !ready; {
		line := c.line(t)
		if line == "ready" {
			ready = true
			continue
		}
		pid, err := strconv.Atoi(line)
		if err != nil {
			t.Fatalf("child said %q, want its grandchild's pid or \"ready\"", line)
		}
		gc = pid
	}
	return gc
}

// gone says whether gc has ended: it is not there, or a zombie that its
// new parent has yet to reap.
func gone(gc int) bool {
	st, err := readStat(gc)
	return err != nil || st.state == 'Z' || st.state == 'X'
}

// TestStopReachesLeftGroup: a process that left the run's group gets the
// stop signal once the group has ended, and the rest of the stop's time
// to save its work; Stop returns once it has ended, without SIGKILL.
func TestStopReachesLeftGroup(t *testing.T) {
	t.Parallel()
	c, gc := escaped(t, "save-term")
	if killed := c.Stop(syscall.SIGTERM, 10*time.Second); killed {
		t.Error("Stop reported SIGKILL for a process that left the group and ended on SIGTERM")
	}
	if !gone(gc) {
		t.Errorf("Stop returned while %d, which left the group, still runs", gc)
	}
	if out := c.rest(t); out != "saved\n" {
		t.Errorf("the grandchild's output after Stop = %q, want \"saved\\n\"", out)
	}
}

// TestStopKillsLeftGroupAtDeadline: one that ignores the stop signal is
// SIGKILLed at the stop's deadline, and Stop says so.
func TestStopKillsLeftGroupAtDeadline(t *testing.T) {
	t.Parallel()
	const timeout = 300 * time.Millisecond
	c, gc := escaped(t, "ignore-term")
	start := time.Now()
	killed := c.Stop(syscall.SIGTERM, timeout)
	took := time.Since(start)
	if !killed {
		t.Error("Stop did not report SIGKILL for a process that left the group and ignores SIGTERM")
	}
	if took < timeout {
		t.Errorf("Stop returned after %v, before the timeout of %v", took, timeout)
	}
	if !gone(gc) {
		t.Errorf("Stop returned while %d, which left the group, still runs", gc)
	}
}

// TestStopAwaitsWhatLeftGroupStarts: what a process that left the group
// starts as it is stopped (an upload its handler begins) is waited for
// too: LeftGroup is asked again once those it found are gone (trial AV:
// such a child outlived the run, its cores given to the next job).
func TestStopAwaitsWhatLeftGroupStarts(t *testing.T) {
	t.Parallel()
	marker := fmt.Sprintf("left-%d-%d", os.Getpid(), time.Now().UnixNano())
	spec := helperSpec(t, "escape", "spawn-term")
	spec.Env = append(spec.Env, "BERTH_TEST_LEFT="+marker)
	left := func() []Tagged {
		tagged, err := FindTagged(map[string]string{"BERTH_TEST_LEFT": marker}, "BERTH_TEST_LEFT")
		if err != nil {
			t.Error(err)
		}
		return tagged
	}
	spec.LeftGroup = func(int) []Tagged { return left() }
	c := startChild(t, spec)
	t.Cleanup(func() { awaitLeft(left(), unix.SIGKILL, expired) }) // should the test fail
	escapedReady(t, c)
	if killed := c.Stop(syscall.SIGTERM, 10*time.Second); killed {
		t.Error("Stop reported SIGKILL for an upload that ended by itself")
	}
	for _, p := range left() {
		if p.StartTicks != 0 && !gone(p.PID) {
			t.Errorf("Stop returned while %d, started by a process that left the group, still runs", p.PID)
		}
	}
	if out := c.rest(t); out != "uploaded\n" {
		t.Errorf("output after Stop = %q, want \"uploaded\\n\"", out)
	}
}

func TestLeaderExitKillsGroup(t *testing.T) {
	t.Parallel()
	fifo := filepath.Join(t.TempDir(), "fifo")
	if err := unix.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	c := startChild(t, helperSpec(t, "fork-grandchild", fifo))
	gc, err := strconv.Atoi(c.line(t))
	if err != nil {
		t.Fatal(err)
	}
	fd := pidfd(t, gc)
	// Opening blocks until the leader opens its end; closing lets it exit.
	f, err := os.OpenFile(fifo, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	if got := wait(t, c.Process); !got.Success() {
		t.Errorf("leader exit = %v, want status 0", got)
	}
	waitGone(t, fd, gc)
}

func TestDescriptors(t *testing.T) {
	// Not parallel: the planted descriptor would reach other tests'
	// children through os/exec, which is this test's point, not theirs.
	//
	// A descriptor opened without O_CLOEXEC, as one inherited by the
	// daemon or opened by a C library would be.
	planted, err := syscall.Open("/dev/null", syscall.O_RDONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(planted)

	spec := helperSpec(t, "list-fds")
	// The Go runtime of the child keeps the cgroup's CPU limit files open
	// to follow changes of the limit: descriptors of its own, not leaked.
	spec.Env = append(spec.Env, "GODEBUG=containermaxprocs=0,updatemaxprocs=0")
	c := startChild(t, spec)
	self, err := strconv.Atoi(strings.TrimPrefix(c.line(t), "self "))
	if err != nil {
		t.Fatal(err)
	}
	targets := map[int]string{}
	for _, l := range strings.Split(strings.TrimSpace(c.rest(t)), "\n") {
		n, target, _ := strings.Cut(l, " ")
		fd, err := strconv.Atoi(n)
		if err != nil {
			t.Fatalf("bad line %q", l)
		}
		targets[fd] = target
	}
	var fds []int
	for fd := range targets {
		fds = append(fds, fd)
	}
	slices.Sort(fds)
	if want := []int{0, 1, 2, self}; !slices.Equal(fds, want) {
		t.Errorf("child's descriptors = %v (%v), want %v (planted: %d)", fds, targets, want, planted)
	}
	if targets[0] != "/dev/null" {
		t.Errorf("stdin is %q, want /dev/null", targets[0])
	}
	if targets[1] != targets[2] || !strings.HasPrefix(targets[1], "pipe:") {
		t.Errorf("stdout %q and stderr %q, want the same pipe", targets[1], targets[2])
	}
}

func TestCredential(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("switching to another user needs root")
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

	spec := helperSpec(t, "describe")
	spec.Argv[0] = filepath.Join(dir, "helper")
	spec.Dir = "/"
	spec.Credential = &syscall.Credential{Uid: 65534, Gid: 65534, Groups: []uint32{4242}}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	spec.Stdout = w
	p, err := Start(spec)
	w.Close()
	if errors.Is(err, fs.ErrPermission) {
		t.Skipf("nobody cannot execute %s (a directory above it is closed to others): %v", spec.Argv[0], err)
	}
	if err != nil {
		t.Fatal(err)
	}
	out, _ := io.ReadAll(r)
	if e := wait(t, p); !e.Success() {
		t.Fatalf("exit = %v; output %s", e, out)
	}
	var d description
	if err := json.Unmarshal(out, &d); err != nil {
		t.Fatal(err)
	}
	if d.UID != 65534 || d.GID != 65534 || !slices.Equal(d.Groups, []int{4242}) {
		t.Errorf("uid %d gid %d groups %v, want 65534 65534 [4242]", d.UID, d.GID, d.Groups)
	}
}

func TestStartTicks(t *testing.T) {
	t.Parallel()
	c := startChild(t, helperSpec(t, "sleep"))
	c.ready(t)
	ticks, err := c.StartTicks()
	if err != nil {
		t.Fatal(err)
	}
	st, err := readStat(c.PID())
	if err != nil {
		t.Fatal(err)
	}
	if ticks == 0 || ticks != st.startTicks || st.pgrp != c.PID() {
		t.Errorf("StartTicks() = %d; /proc says ticks %d, pgrp %d (pid %d)", ticks, st.startTicks, st.pgrp, c.PID())
	}
}

func TestKillLeftover(t *testing.T) {
	t.Parallel()
	t.Run("ticks differ", func(t *testing.T) {
		t.Parallel()
		c := startChild(t, helperSpec(t, "wait-term"))
		c.ready(t)
		ticks, _ := c.StartTicks()
		if ok, err := KillLeftover(c.PID(), ticks+1); ok || err != nil {
			t.Errorf("KillLeftover(other ticks) = %v, %v; want false, nil", ok, err)
		}
		// Still alive: it exits 0 on SIGTERM, which only a live child can.
		c.Stop(syscall.SIGTERM, 10*time.Second)
		if got := c.Wait(); !got.Success() {
			t.Errorf("exit = %v, want status 0 (killed by KillLeftover?)", got)
		}
	})
	t.Run("ticks match", func(t *testing.T) {
		t.Parallel()
		c := startChild(t, helperSpec(t, "fork-grandchild", "block"))
		gc, err := strconv.Atoi(c.line(t))
		if err != nil {
			t.Fatal(err)
		}
		fd := pidfd(t, gc)
		ticks, _ := c.StartTicks()
		if ok, err := KillLeftover(c.PID(), ticks); !ok || err != nil {
			t.Errorf("KillLeftover = %v, %v; want true, nil", ok, err)
		}
		if got := wait(t, c.Process); got.Signal != syscall.SIGKILL {
			t.Errorf("exit = %v, want signal: killed", got)
		}
		waitGone(t, fd, gc)
	})
	t.Run("gone", func(t *testing.T) {
		t.Parallel()
		c := startChild(t, helperSpec(t, "exit", "0"))
		ticks, _ := c.StartTicks()
		wait(t, c.Process)
		if ok, err := KillLeftover(c.PID(), ticks); ok || err != nil {
			t.Errorf("KillLeftover(reaped) = %v, %v; want false, nil", ok, err)
		}
	})
	t.Run("never a whole-system kill", func(t *testing.T) {
		t.Parallel()
		for _, pid := range []int{-5, 0, 1, os.Getpid()} {
			if ok, err := KillLeftover(pid, 0); ok || err == nil {
				t.Errorf("KillLeftover(%d) = %v, %v; want an error", pid, ok, err)
			}
		}
	})
}

func TestParseStat(t *testing.T) {
	tail := " S 1 4242 4242 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 987654 1234 56 18446744073709551615\n"
	tests := []struct {
		name, in string
		want     procStat
		err      bool
	}{
		{"plain", "4242 (sleep)" + tail, procStat{state: 'S', pgrp: 4242, startTicks: 987654}, false},
		{"parens and spaces in comm", "4242 (a) S 9 9 (b c))" + tail, procStat{state: 'S', pgrp: 4242, startTicks: 987654}, false},
		{"a zombie", "4242 (sleep)" + strings.Replace(tail, " S ", " Z ", 1), procStat{state: 'Z', pgrp: 4242, startTicks: 987654}, false},
		{"no paren", "4242 sleep" + tail, procStat{}, true},
		{"short", "4242 (sleep) S 1 4242", procStat{}, true},
		{"not a number", "4242 (sleep) S 1 x 4242 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 y", procStat{}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseStat([]byte(tt.in))
			if (err != nil) != tt.err || got != tt.want {
				t.Errorf("parseStat = %+v, %v; want %+v, error %v", got, err, tt.want, tt.err)
			}
		})
	}
}

func FuzzParseStat(f *testing.F) {
	f.Add([]byte("1 (init) S 0 1 1 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 5 1234 56 0\n"))
	f.Add([]byte("7 ()) ) R"))
	f.Fuzz(func(t *testing.T, b []byte) {
		parseStat(b) // must not panic, whatever the kernel or a fixture says
	})
}

func BenchmarkStartWait(b *testing.B) {
	if _, err := os.Stat("/bin/true"); err != nil {
		b.Skip("no /bin/true")
	}
	spec := Spec{Argv: []string{"/bin/true"}}
	for b.Loop() {
		p, err := Start(spec)
		if err != nil {
			b.Fatal(err)
		}
		if e := p.Wait(); !e.Success() {
			b.Fatal(e)
		}
	}
}

// FindByEnv finds a run's leader and the grandchild it forked by the
// variable they inherited, and nothing for a value no process has.
func TestFindByEnv(t *testing.T) {
	t.Parallel()
	marker := fmt.Sprintf("find-%d-%d", os.Getpid(), time.Now().UnixNano())
	spec := helperSpec(t, "fork-grandchild", "block")
	spec.Env = append(spec.Env, "BERTH_TEST_MARK="+marker, "BERTH_TEST_ALSO=yes")
	c := startChild(t, spec)
	gc, err := strconv.Atoi(c.line(t))
	if err != nil {
		t.Fatal(err)
	}
	fd := pidfd(t, gc)
	if found, err := FindByEnv(map[string]string{"BERTH_TEST_ALSO": "no"}, "BERTH_TEST_MARK", map[string]bool{marker: true}); err != nil || len(found) != 0 {
		t.Errorf("found %v, %v with a pair the processes do not have", found, err)
	}
	found, err := FindByEnv(map[string]string{"BERTH_TEST_ALSO": "yes"}, "BERTH_TEST_MARK", map[string]bool{marker: true, "nobody-has-this": true})
	if err != nil {
		t.Fatal(err)
	}
	got := found[marker]
	slices.Sort(got)
	want := []int{c.PID(), gc}
	slices.Sort(want)
	if !slices.Equal(got, want) || len(found["nobody-has-this"]) != 0 {
		t.Errorf("found %v, want %v for the marker and nothing else", found, want)
	}
	if err := syscall.Kill(-c.PID(), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	wait(t, c.Process)
	waitGone(t, fd, gc)
}

// FindTagged finds every process carrying the key, whatever its value,
// with the values of the other keys asked for and its start ticks.
func TestFindTagged(t *testing.T) {
	t.Parallel()
	also := fmt.Sprintf("tagged-%d-%d", os.Getpid(), time.Now().UnixNano())
	spec := helperSpec(t, "fork-grandchild", "block")
	spec.Env = append(spec.Env, "BERTH_TEST_TAG=17", "BERTH_TEST_JOB=j", "BERTH_TEST_ALSO="+also)
	c := startChild(t, spec)
	gc, err := strconv.Atoi(c.line(t))
	if err != nil {
		t.Fatal(err)
	}
	fd := pidfd(t, gc)
	found, err := FindTagged(map[string]string{"BERTH_TEST_ALSO": also}, "BERTH_TEST_TAG", "BERTH_TEST_JOB", "BERTH_TEST_NONE")
	if err != nil {
		t.Fatal(err)
	}
	var pids []int
	for _, f := range found {
		pids = append(pids, f.PID)
		if !slices.Equal(f.Values, []string{"17", "j", ""}) || f.StartTicks == 0 || f.UID != os.Geteuid() {
			t.Errorf("pid %d: values %q, start ticks %d, uid %d", f.PID, f.Values, f.StartTicks, f.UID)
		}
	}
	slices.Sort(pids)
	want := []int{c.PID(), gc}
	slices.Sort(want)
	if !slices.Equal(pids, want) {
		t.Errorf("found %v, want %v", pids, want)
	}
	ticks, _ := c.StartTicks()
	if i := slices.IndexFunc(found, func(f Tagged) bool { return f.PID == c.PID() }); i >= 0 && found[i].StartTicks != ticks {
		t.Errorf("the leader's start ticks %d differ from Start's %d", found[i].StartTicks, ticks)
	}
	if err := syscall.Kill(-c.PID(), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	wait(t, c.Process)
	waitGone(t, fd, gc)
}

func TestEnvironEntry(t *testing.T) {
	env := []byte("A=1\x00BERTH_RUN=42\x00BERTH_RUNX=7\x00")
	if v, ok := environEntry(env, []byte("BERTH_RUN=")); !ok || v != "42" {
		t.Errorf("got %q, %v", v, ok)
	}
	if _, ok := environEntry(env, []byte("MISSING=")); ok {
		t.Error("found a missing key")
	}
	if v, ok := environEntry([]byte("K=v"), []byte("K=")); !ok || v != "v" {
		t.Errorf("no trailing NUL: got %q, %v", v, ok)
	}
}

// TestWithoutSharedReaper runs exits through the fallback, a waitid per
// child, as on a kernel without pidfds. Not parallel: it switches the
// shared reaper off for the package while it runs.
func TestWithoutSharedReaper(t *testing.T) {
	noSharedReaper.Store(true)
	defer noSharedReaper.Store(false)

	c := startChild(t, helperSpec(t, "exit", "3"))
	if got := wait(t, c.Process); got != (Exit{Code: 3}) {
		t.Errorf("Wait() = %+v, want exit 3", got)
	}

	c = startChild(t, helperSpec(t, "fork-grandchild", "block"))
	gc, err := strconv.Atoi(c.line(t))
	if err != nil {
		t.Fatal(err)
	}
	fd := pidfd(t, gc)
	if killed := c.Stop(syscall.SIGTERM, 10*time.Second); killed {
		t.Error("Stop needed SIGKILL for a child that exits on SIGTERM")
	}
	if got := c.Wait(); got.Signal != syscall.SIGTERM {
		t.Errorf("exit = %v, want signal: terminated", got)
	}
	waitGone(t, fd, gc)
}

// TestDedupEnv: where a key repeats the last wins, in the order of first
// appearance of what is kept; a list of unique keys in order is used as it
// is.
func TestDedupEnv(t *testing.T) {
	for _, c := range []struct{ env, want []string }{
		{nil, nil},
		{[]string{"A=1", "B=2", "C=3"}, []string{"A=1", "B=2", "C=3"}},
		{[]string{"A=1", "A=2"}, []string{"A=2"}},
		{[]string{"B=1", "A=2", "B=3"}, []string{"A=2", "B=3"}},
		{[]string{"B=1", "A=2"}, []string{"B=1", "A=2"}},
	} {
		if got := dedupEnv(c.env); !slices.Equal(got, c.want) {
			t.Errorf("dedupEnv(%q) = %q, want %q", c.env, got, c.want)
		}
	}
	sorted := []string{"A=1", "B=2"}
	if got := dedupEnv(sorted); &got[0] != &sorted[0] {
		t.Error("a list of unique keys in order was copied")
	}
}

// TestOnExit: a call asked for before the exit is made once the process is
// reaped, Done closed already; one asked for after is made at once. Both
// by the shared reaper and by the fallback.
func TestOnExit(t *testing.T) {
	check := func(t *testing.T) {
		c := startChild(t, helperSpec(t, "sleep"))
		c.ready(t)
		called := make(chan bool, 2)
		c.OnExit(func() {
			select {
			case <-c.Done():
				called <- true
			default:
				called <- false // Done not closed yet
			}
		})
		select {
		case <-called:
			t.Fatal("OnExit called while the process runs")
		default:
		}
		c.Stop(syscall.SIGKILL, 0)
		select {
		case closed := <-called:
			if !closed {
				t.Error("OnExit called before Done was closed")
			}
		case <-time.After(10 * time.Second):
			t.Fatal("OnExit not called 10 s after the kill")
		}
		c.OnExit(func() { called <- true })
		select {
		case <-called:
		default:
			t.Error("OnExit after the exit not called at once")
		}
	}
	t.Run("shared reaper", check)
	t.Run("fallback", func(t *testing.T) {
		noSharedReaper.Store(true)
		defer noSharedReaper.Store(false)
		check(t)
	})
}

// TestMissingDir: a working directory that is not there, or is no
// directory, is said before any start; one there is left to the kernel.
func TestMissingDir(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct{ dir, want string }{
		{"", ""},
		{dir, ""},
		{filepath.Join(dir, "nosuch"), "dir " + filepath.Join(dir, "nosuch") + " does not exist"},
		{file, "dir " + file + " is not a directory"},
	} {
		err := MissingDir(tt.dir, nil)
		if got := fmt.Sprint(err); tt.want == "" && err != nil || tt.want != "" && got != tt.want {
			t.Errorf("MissingDir(%q) = %v, want %q", tt.dir, err, tt.want)
		}
	}
}

// TestGroupLiveIgnoresZombies: a group whose only member has ended, but
// is not reaped yet, is over, though kill(-pgid, 0) still finds it.
func TestGroupLiveIgnoresZombies(t *testing.T) {
	cmd := exec.Command("/bin/sh", "-c", "exit 0")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	defer cmd.Wait()
	// WNOWAIT: waits for its end and leaves it a zombie.
	var info unix.Siginfo
	if err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT, nil); err != nil {
		t.Fatal(err)
	}
	if unix.Kill(-pid, 0) != nil {
		t.Fatal("kill(-pgid, 0) does not find the zombie: the test proves nothing")
	}
	if groupLive(pid) {
		t.Error("a group of a zombie alone is live")
	}
	if !groupLive(os.Getpid()) && unix.Getpgrp() == os.Getpid() {
		t.Error("the test's own group is not live")
	}
}
