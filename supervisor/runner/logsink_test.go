package runner

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/berthd/berth/supervisor/testkit"
)

// runToLog runs spec with its output in a LogSink for job in dir, and
// returns once the sink is closed.
func runToLog(t *testing.T, dir string, maxBytes int64, spec Spec) {
	t.Helper()
	runToLogAs(t, dir, maxBytes, "", spec)
}

// runToLogAs is runToLog for a run whose output starts with header.
func runToLogAs(t *testing.T, dir string, maxBytes int64, header string, spec Spec) {
	t.Helper()
	s, err := OpenLog(dir, "job", maxBytes, header)
	if err != nil {
		t.Fatal(err)
	}
	spec.Stdout = s.File()
	p, err := Start(spec)
	s.CloseWriter()
	if err != nil {
		s.Close()
		t.Fatal(err)
	}
	if e := wait(t, p); !e.Success() {
		t.Errorf("exit = %v", e)
	}
	if err := s.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
}

func readLogs(t *testing.T, dir string) (cur, old string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "job.log"))
	if err != nil {
		t.Fatal(err)
	}
	o, err := os.ReadFile(filepath.Join(dir, "job.log.1"))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	return string(b), string(o)
}

func TestLogSinkRotates(t *testing.T) {
	t.Parallel()
	const maxBytes, n = 4 << 10, 20 << 10
	dir := t.TempDir()
	runToLog(t, dir, maxBytes, helperSpec(t, "spew", strconv.Itoa(n)))
	cur, old := readLogs(t, dir)
	if len(cur) > maxBytes || len(old) > maxBytes {
		t.Errorf("sizes %d and %d, want at most %d each", len(cur), len(old), maxBytes)
	}
	var all strings.Builder
	for i := range n {
		all.WriteByte(spewByte(i))
	}
	// The newest output is kept, whole and in order, across the two files.
	if got := old + cur; !strings.HasSuffix(all.String(), got) || len(got) != 2*maxBytes {
		t.Errorf("job.log.1 + job.log: %d bytes, not the last %d bytes written", len(got), 2*maxBytes)
	}
}

func TestLogSinkKeepsLinesWhole(t *testing.T) {
	t.Parallel()
	const maxBytes, lines, width = 100, 50, 30
	dir := t.TempDir()
	runToLog(t, dir, maxBytes, helperSpec(t, "lines", strconv.Itoa(lines), strconv.Itoa(width)))
	cur, old := readLogs(t, dir)
	all := linesText(lines, width)
	for name, s := range map[string]string{"job.log": cur, "job.log.1": old} {
		if len(s) == 0 || len(s) > maxBytes || len(s)%width != 0 {
			t.Errorf("%s is %d bytes, want whole lines of %d, at most %d", name, len(s), width, maxBytes)
		}
	}
	if !strings.HasSuffix(all, old+cur) {
		t.Errorf("job.log.1 + job.log is not the end of what was written:\n%q", old+cur)
	}
}

func TestLogSinkAppends(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "job.log"), []byte("before restart\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	runToLog(t, dir, 1<<20, helperSpec(t, "print", "after restart"))
	if cur, _ := readLogs(t, dir); cur != "before restart\nafter restart\n" {
		t.Errorf("job.log = %q", cur)
	}
}

// TestLogSinkMemoryBounded sends 100 MB without a newline through a sink.
// Not parallel: it counts every allocation of the test process.
func TestLogSinkMemoryBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("moves 100 MB")
	}
	const maxBytes, n = 1 << 20, 100 << 20
	dir := t.TempDir()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	runToLog(t, dir, maxBytes, helperSpec(t, "spew", strconv.Itoa(n)))
	runtime.GC()
	runtime.ReadMemStats(&after)

	const bound = 4 << 20
	if d := after.TotalAlloc - before.TotalAlloc; d > bound {
		t.Errorf("allocated %d bytes to copy %d, want under %d", d, n, bound)
	}
	if d := int64(after.HeapInuse) - int64(before.HeapInuse); d > bound {
		t.Errorf("heap in use grew by %d bytes, want under %d", d, bound)
	}
	cur, old := readLogs(t, dir)
	if len(cur) != maxBytes || len(old) != maxBytes {
		t.Errorf("sizes %d and %d, want %d each", len(cur), len(old), maxBytes)
	}
}

// TestLogSinkCloseContext: when the deadline passes with a write end still
// held, the sink closes its read end, and the holder's next write fails.
// Not parallel: a process another test forks holds a copy of every
// descriptor of the test process from its fork to its exec, the pipe's
// read end included, and a write meanwhile would succeed.
func TestLogSinkCloseContext(t *testing.T) {
	s, err := OpenLog(t.TempDir(), "job", 1<<20, "")
	if err != nil {
		t.Fatal(err)
	}
	closeGivesUp(t, s)
}

// closeGivesUp checks that CloseContext gives up on s at its deadline
// while a write end is held elsewhere, as by a descendant that left the
// group, and that the pipe is then closed under the holder.
func closeGivesUp(t *testing.T, s *LogSink) {
	t.Helper()
	held, err := syscall.Dup(int(s.File().Fd()))
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(held)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if err := s.CloseContext(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("CloseContext = %v, want DeadlineExceeded", err)
	}
	if _, err := syscall.Write(held, []byte("x")); err != syscall.EPIPE {
		t.Errorf("write after abandon = %v, want EPIPE", err)
	}
}

func TestOpenLogRefuses(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, job := range []string{"", "a/b", "../x", ".hidden", "..", "nul\x00"} {
		if _, err := OpenLog(dir, job, 1<<20, ""); !errors.Is(err, ErrBadName) {
			t.Errorf("OpenLog(%q) = %v, want ErrBadName", job, err)
		}
	}
	if _, err := OpenLog(dir, "job", 0, ""); err == nil {
		t.Error("a cap of 0 accepted")
	}
	if _, err := OpenLog(filepath.Join(dir, "missing"), "job", 1<<20, ""); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("OpenLog in a missing directory = %v, want ErrNotExist", err)
	}

	// The file is opened at the first output, and a symlink planted in
	// its place is not followed then either.
	target := filepath.Join(dir, "target")
	if err := os.WriteFile(target, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, filepath.Join(dir, "link.log")); err != nil {
		t.Fatal(err)
	}
	s, err := OpenLog(dir, "link", 1<<20, "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.File().WriteString("x\n"); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); !errors.Is(err, syscall.ELOOP) {
		t.Errorf("Close = %v, want ELOOP from refusing the symlink", err)
	}
	if data, _ := os.ReadFile(target); len(data) != 0 {
		t.Errorf("a symlinked log file was followed: the target holds %q", data)
	}
}

// Each run's output starts with its header, and a run that prints nothing
// leaves none: the runs can be told apart in the file, and a header is
// found again by ParseRunHeader.
func TestLogSinkRunHeaders(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	start := time.Date(2026, 12, 4, 9, 0, 0, 0, time.UTC)
	for _, r := range []struct {
		run uint64
		cmd string
	}{{1, "echo one"}, {2, "true"}, {3, "echo two; echo three"}, {4, "printf cut"}, {5, "echo five"}} {
		runToLogAs(t, dir, 1<<20, RunHeader(r.run, start), Spec{Argv: []string{"sh", "-c", r.cmd}})
	}
	cur, _ := readLogs(t, dir)
	// Run 4 ended mid-line: run 5's header starts a line all the same.
	want := "--- berth: run 1 started 2026-12-04T09:00:00Z ---\none\n--- berth: run 3 started 2026-12-04T09:00:00Z ---\ntwo\nthree\n" +
		"--- berth: run 4 started 2026-12-04T09:00:00Z ---\ncut\n--- berth: run 5 started 2026-12-04T09:00:00Z ---\nfive\n"
	if cur != want {
		t.Errorf("the log:\n%s\nwant:\n%s", cur, want)
	}
	for _, tt := range []struct {
		line      string
		run       uint64 // 0: not a header
		continued bool
	}{
		{RunHeader(42, start), 42, false},
		{strings.TrimSuffix(RunHeader(7, start), "\n"), 7, false},
		{"--- berth: run 7 started 2026-12-04T09:00:00Z, continued ---\n", 7, true},
		{"--- berth: run x started 2026-12-04T09:00:00Z ---", 0, false},
		{"--- berth: run 5 began ---", 0, false},
		{"two", 0, false},
	} {
		if run, continued, ok := ParseRunHeader([]byte(tt.line)); run != tt.run || continued != tt.continued || ok != (tt.run != 0) {
			t.Errorf("ParseRunHeader(%q) = %d, %v, %v; want %d, %v", tt.line, run, continued, ok, tt.run, tt.continued)
		}
	}
}

// TestLogSinkRotatedRunContinues: a file a rotation starts while a run
// writes begins with the run's header, continued, so that the run's output
// is found there once the file its header began is gone.
func TestLogSinkRotatedRunContinues(t *testing.T) {
	t.Parallel()
	const maxBytes, lines, width = 300, 60, 30
	dir := t.TempDir()
	start := time.Date(2026, 12, 4, 9, 0, 0, 0, time.UTC)
	runToLogAs(t, dir, maxBytes, RunHeader(9, start), helperSpec(t, "lines", strconv.Itoa(lines), strconv.Itoa(width)))
	cur, old := readLogs(t, dir)
	for name, text := range map[string]string{"job.log": cur, "job.log.1": old} {
		first, rest, _ := strings.Cut(text, "\n")
		if run, continued, ok := ParseRunHeader([]byte(first)); !ok || run != 9 || !continued {
			t.Errorf("%s begins %q, want run 9's header, continued", name, first)
		}
		if len(text) > maxBytes || len(rest)%width != 0 {
			t.Errorf("%s: %d bytes, want at most %d, its lines whole", name, len(text), maxBytes)
		}
	}
}

// A job that prints nothing leaves no file.
func TestLogSinkNoOutputNoFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s, err := OpenLog(dir, "quiet", 1<<20, "")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "quiet.log")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a quiet job's log file: %v, want none", err)
	}
}

// TestLogSinkCloseContextUnderFlood: the bound holds while writers keep
// the pipe full and the disk is slower than they are (the copier must let
// Close in between chunks, not copy for as long as there is output).
func TestLogSinkCloseContextUnderFlood(t *testing.T) {
	t.Parallel()
	s, err := openLog(t.TempDir(), "job", 1<<20, "", sinkTuning{slowDisk: func() { time.Sleep(time.Millisecond) }, lookEvery: lookEvery})
	if err != nil {
		t.Fatal(err)
	}
	for range 4 {
		yes := exec.Command("yes", strings.Repeat("y", 4000))
		yes.Stdout = s.File()
		if err := yes.Start(); err != nil {
			t.Skipf("no yes to flood with: %v", err)
		}
		defer func() { yes.Process.Kill(); yes.Wait() }()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	closed := make(chan error, 1)
	go func() { closed <- s.CloseContext(ctx) }()
	select {
	case err := <-closed:
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("CloseContext = %v, want DeadlineExceeded", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("CloseContext still waiting 10 s past its 100 ms bound")
	}
}

// TestLogSinksShareOneCopier: the output of many jobs at once is copied by
// one goroutine, not one each, and each job's output reaches its own file.
// Not parallel: it counts the test process's goroutines.
func TestLogSinksShareOneCopier(t *testing.T) {
	const n = 50
	dir := t.TempDir()
	before := runtime.NumGoroutine()
	sinks := make([]*LogSink, n)
	procs := make([]*Process, n)
	for i := range sinks {
		s, err := OpenLog(dir, fmt.Sprintf("job-%d", i), 1<<20, "")
		if err != nil {
			t.Fatal(err)
		}
		spec := helperSpec(t, "print", fmt.Sprintf("line of job %d", i))
		spec.Stdout = s.File()
		p, err := Start(spec)
		if err != nil {
			t.Fatal(err)
		}
		sinks[i], procs[i] = s, p
	}
	// Every sink is open until its write end is closed here: none can
	// have reached the end of its pipe and let go of a goroutine.
	if grown := runtime.NumGoroutine() - before; grown >= n/2 {
		t.Errorf("%d goroutines more with %d sinks open, want about one", grown, n)
	}
	for i := range sinks {
		sinks[i].CloseWriter()
		wait(t, procs[i])
		if err := sinks[i].Close(); err != nil {
			t.Errorf("Close %d: %v", i, err)
		}
		b, err := os.ReadFile(filepath.Join(dir, fmt.Sprintf("job-%d.log", i)))
		if want := fmt.Sprintf("line of job %d\n", i); err != nil || string(b) != want {
			t.Errorf("job %d logged %q, %v; want %q", i, b, err, want)
		}
	}
}

// TestLogSinkWithoutSharedCopier copies on a goroutine of the sink's own,
// as where epoll cannot be had: output rotates as usual, and CloseContext
// still gives up on a write end held elsewhere. Not parallel: it switches
// the shared copier off for the package while it runs.
func TestLogSinkWithoutSharedCopier(t *testing.T) {
	noCopier.Store(true)
	defer noCopier.Store(false)
	const maxBytes, n = 4 << 10, 20 << 10
	dir := t.TempDir()
	runToLog(t, dir, maxBytes, helperSpec(t, "spew", strconv.Itoa(n)))
	if cur, old := readLogs(t, dir); len(cur)+len(old) == 0 || len(cur) > maxBytes || len(old) > maxBytes {
		t.Errorf("sizes %d and %d, want some, each at most %d", len(cur), len(old), maxBytes)
	}
	s, err := OpenLog(t.TempDir(), "job", 1<<20, "")
	if err != nil {
		t.Fatal(err)
	}
	if s.r == nil {
		t.Fatal("the sink is in the shared copier while it is switched off")
	}
	closeGivesUp(t, s)
}

// TestLogSinkCopiesAllWithoutNewWrites: output that is more than one
// chunk, written and then followed by nothing (no more writes, the write
// end still open), is all copied. The copier's set is waited on for edges:
// what is still ready after a chunk must be taken then.
func TestLogSinkCopiesAllWithoutNewWrites(t *testing.T) {
	const n = 5*copyBufferSize + 100
	dir := t.TempDir()
	s, err := OpenLog(dir, "job", 1<<20, "")
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		// Bounded: a copier that missed the output never sees its end.
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = s.CloseContext(ctx)
	}()
	if s.r != nil {
		t.Skip("no shared copier here")
	}
	// Past the pipe's capacity: the write waits for the copier, and where
	// the copier stalls it waits until the sink gives up.
	wrote := make(chan error, 1)
	go func() {
		_, err := s.File().Write([]byte(strings.Repeat("x", n-1) + "\n"))
		wrote <- err
	}()
	path := filepath.Join(dir, "job.log")
	testkit.WaitFor(t, 10*time.Second, fmt.Sprintf("%d bytes in %s", n, path), func() bool {
		fi, err := os.Stat(path)
		return err == nil && fi.Size() == n
	})
	if err := <-wrote; err != nil {
		t.Fatal(err)
	}
}

// removedAfterOne starts a job that writes "one", waits for gate, and
// writes "two", into s; once the first line is in dir's job.log, it
// removes the file, as someone freeing space would.
func removedAfterOne(t *testing.T, s *LogSink, dir, gate string) (*Process, string) {
	t.Helper()
	p, err := Start(Spec{Argv: []string{"/bin/sh", "-c", "echo one; while [ ! -e " + gate + " ]; do sleep 0.02; done; echo two"},
		Env: []string{"PATH=/usr/bin:/bin"}, Stdout: s.File()})
	s.CloseWriter()
	if err != nil {
		s.Close()
		t.Fatal(err)
	}
	path := filepath.Join(dir, "job.log")
	testkit.WaitFor(t, 10*time.Second, "the first line", func() bool {
		b, _ := os.ReadFile(path)
		return strings.Contains(string(b), "one\n")
	})
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	return p, path
}

// wantContinued lets the job of removedAfterOne go on to its second line,
// and checks that the file begun again holds run's header, marked
// continued, then that line.
func wantContinued(t *testing.T, s *LogSink, p *Process, dir, gate string, run uint64) {
	t.Helper()
	if err := os.WriteFile(gate, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if e := wait(t, p); !e.Success() {
		t.Errorf("exit = %v", e)
	}
	if err := s.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	cur, _ := readLogs(t, dir)
	first, rest, _ := strings.Cut(cur, "\n")
	if got, continued, ok := ParseRunHeader([]byte(first)); !ok || got != run || !continued || rest != "two\n" {
		t.Errorf("the new file: %q, want run %d's header, continued, then the line written after the removal", cur, run)
	}
}

// TestLogSinkQuietFileRemoved: a log file removed while its run is quiet
// is let go of at once, not at the run's next write, so that its space
// comes back; what the run writes later begins the file again.
func TestLogSinkQuietFileRemoved(t *testing.T) {
	t.Parallel()
	dir, gate := t.TempDir(), filepath.Join(t.TempDir(), "gate")
	s, err := OpenLog(dir, "job", 1<<20, RunHeader(5, time.Date(2026, 12, 4, 9, 0, 0, 0, time.UTC)))
	if err != nil {
		t.Fatal(err)
	}
	if sharedCopier() == nil || sharedCopier().notify < 0 {
		s.Close()
		t.Skip("no shared copier with inotify here")
	}
	p, path := removedAfterOne(t, s, dir, gate)
	// This process holds the file open while the sink does.
	testkit.WaitFor(t, 10*time.Second, "the removed file to be let go of", func() bool {
		fds, _ := os.ReadDir("/proc/self/fd")
		for _, fd := range fds {
			if to, _ := os.Readlink(filepath.Join("/proc/self/fd", fd.Name())); strings.HasPrefix(to, path) {
				return false
			}
		}
		return true
	})
	wantContinued(t, s, p, dir, gate, 5)
}

// TestLogSinkFileRemoved: a log file removed while its run writes (to
// free space) is let go of, and the run's output goes on in a new file at
// its path, under the run's header marked continued, so that it is found
// (berth logs) and the space of the removed one is given back.
func TestLogSinkFileRemoved(t *testing.T) {
	t.Parallel()
	dir, gate := t.TempDir(), filepath.Join(t.TempDir(), "gate")
	// Looking at each write: the two lines come within the second.
	s, err := openLog(dir, "job", 1<<20, RunHeader(4, time.Date(2026, 12, 4, 9, 0, 0, 0, time.UTC)), sinkTuning{})
	if err != nil {
		t.Fatal(err)
	}
	p, _ := removedAfterOne(t, s, dir, gate)
	wantContinued(t, s, p, dir, gate, 4)
}

// TestOpenLogNotADirectory: a log directory that is a file is said to be
// one, not "permission denied" (access(2) of a file for X_OK).
func TestOpenLogNotADirectory(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "logs")
	if err := os.WriteFile(dir, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := OpenLog(dir, "job", 1<<20, "")
	if !errors.Is(err, syscall.ENOTDIR) {
		t.Errorf("OpenLog in a file: %v, want ENOTDIR", err)
	}
}
