package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/berthd/berth/supervisor"
	"github.com/berthd/berth/supervisor/testkit"
)

// manyJobs is headBox with twelve more done jobs: a list taller than a
// small screen.
func manyJobs() supervisor.Status {
	s := headBox()
	for i := range 12 {
		s.Jobs = append(s.Jobs, supervisor.JobStatus{Name: fmt.Sprintf("batch-%02d", i), State: "done",
			Since: ago(time.Duration(i+1) * time.Hour), Why: "exit 0", GPUs: []string{}})
	}
	return s
}

// TestRenderStatusFitsHeight: the watch's picture is never taller than
// the screen; the jobs a person looks for first stay, and a line says how
// many more were cut. A picture that fits is the one berth status prints.
func TestRenderStatusFitsHeight(t *testing.T) {
	pinRenderZone(t)
	for _, tt := range []struct {
		name   string
		state  func() supervisor.Status
		width  int
		height int
		shown  []string // the jobs on screen, in order
		more   int      // how many the last job line says were cut; 0: none
	}{
		{"fits", headBox, 80, 40, nil, 0},
		{"exactly", headBox, 80, 15, []string{"sweep-1", "sweep-3", "train-resnet", "train-llama-7b-lora", "sweep-2", "eval-nightly", "report"}, 0},
		{"one line short", headBox, 80, 11, []string{"sweep-1", "sweep-3", "train-resnet", "train-llama-7b-lora", "sweep-2"}, 2},
		{"running first", manyJobs, 80, 10, []string{"sweep-1", "sweep-3", "train-resnet", "train-llama-7b-lora"}, 15},
		{"no room for jobs", manyJobs, 80, 6, nil, 19},
		{"errors kept", errorsBox, 80, 9, nil, 2},
		{"tiny", manyJobs, 80, 3, nil, -1},
		// At 50 columns a why goes below its job, and train-llama-7b-lora
		// is cut to train-l…b-lora (so not counted here): six jobs in 9 rows.
		{"whys below", manyJobs, 50, 16, []string{"sweep-1", "sweep-3", "train-resnet", "sweep-2", "eval-nightly"}, 13},
	} {
		t.Run(tt.name, func(t *testing.T) {
			o := renderOptions{width: tt.width, now: renderNow}
			p := layoutStatus(tt.state(), o)
			lines := p.fit(tt.height)
			if len(lines) > tt.height {
				t.Fatalf("%d lines on a screen of %d", len(lines), tt.height)
			}
			var b bytes.Buffer
			o.writeLines(&b, lines, tt.width)
			text := b.String()
			if tt.more == 0 {
				if want := statusText(tt.state(), tt.width, false); text != want {
					t.Errorf("a picture that fits differs from berth status:\n%s---\n%s", text, want)
				}
				return
			}
			var names []string
			for _, l := range strings.Split(text, "\n") {
				for _, j := range tt.state().Jobs {
					if f := strings.Fields(l); len(f) > 0 && f[0] == j.Name {
						names = append(names, j.Name)
					}
				}
			}
			if fmt.Sprint(names) != fmt.Sprint(tt.shown) {
				t.Errorf("jobs shown %v, want %v:\n%s", names, tt.shown, text)
			}
			if tt.more > 0 && !strings.Contains(text, msgMoreJobs(tt.more)+"\n") {
				t.Errorf("no %q:\n%s", msgMoreJobs(tt.more), text)
			}
			if tt.name == "errors kept" && !strings.Contains(text, "errors:") {
				t.Errorf("the errors gave way before the jobs:\n%s", text)
			}
		})
	}
	// Where every job fits but the hint on the failed one does not, the
	// jobs are kept, and the hint left out.
	var b bytes.Buffer
	o := renderOptions{width: 80, now: renderNow}
	o.writeLines(&b, layoutStatus(headBox(), o).fit(12), 80)
	if text := b.String(); !strings.Contains(text, "report ") || strings.Contains(text, "failed: berth logs") {
		t.Errorf("a screen with room for the jobs, not the hint:\n%s", text)
	}
}

// TestRenderStatusFitsHeightKeepsCutJobsErrors: a job's problem that its
// line says whole, and the errors therefore leave out, is said under the
// errors again once the job's line is cut off a short screen (the review:
// said nowhere, on a busy machine).
func TestRenderStatusFitsHeightKeepsCutJobsErrors(t *testing.T) {
	pinRenderZone(t)
	o := renderOptions{width: 200, now: renderNow}
	s := errorsBox()
	for i := range 5 {
		s.Jobs = append(s.Jobs, supervisor.JobStatus{Name: fmt.Sprintf("r%d", i), State: "running", Since: renderNow.Add(-time.Hour), CPUs: 1, GPUs: []string{}})
	}
	p := layoutStatus(s, o)
	whole := p.lines()
	flavorGone := `flavor "gpu-huge" does not exist`
	said := func(lines []textLine) int {
		var b bytes.Buffer
		o.writeLines(&b, lines, o.width)
		return strings.Count(b.String(), flavorGone)
	}
	if n := said(whole); n != 1 {
		t.Fatalf("the whole picture says sweep-1's problem %d times, want once (on its line)", n)
	}
	// One line short: sweep-1's line, the last, is cut, and two more for
	// the line that says so and the problem said again.
	lines := p.fit(len(whole) - 1)
	var b bytes.Buffer
	o.writeLines(&b, lines, o.width)
	if n := said(lines); n != 1 || strings.Contains(b.String(), "sweep-1  invalid") || !strings.Contains(b.String(), msgMoreJobs(3)) {
		t.Errorf("one line short, sweep-1's line cut, its problem is said %d times, want once:\n%s", n, b.String())
	}
}

// TestRenderStatusFitsHeightManyErrors: 10 000 jobs that fit no machine,
// their lines cut off a screen of 40, leave the jobs shown at least half
// of it; their errors take the rest, the others counted (the review: no
// job shown at all, the running one included).
func TestRenderStatusFitsHeightManyErrors(t *testing.T) {
	pinRenderZone(t)
	s := errorsBox()
	for i := range 10000 {
		name := fmt.Sprintf("big-%05d", i)
		text := fmt.Sprintf(`jobs.d/big.lua:%d: job %q asks for 2 GPUs; this machine has 1 (berth machine shows what it has)`, i+1, name)
		s.Jobs = append(s.Jobs, supervisor.JobStatus{Name: name, State: "unplaceable", Since: renderNow.Add(-time.Minute), Why: text, GPUs: []string{}})
		s.Problems = append(s.Problems, supervisor.Problem{Code: "unplaceable", File: "jobs.d/big.lua", Line: i + 1, Kind: "job", Job: name, Text: text})
	}
	o := renderOptions{width: 200, now: renderNow}
	lines := layoutStatus(s, o).fit(40)
	var b bytes.Buffer
	o.writeLines(&b, lines, o.width)
	text := b.String()
	if len(lines) > 40 || !strings.Contains(text, "train    running") && !strings.Contains(text, "train  ") ||
		!strings.Contains(text, "more errors (berth status shows all)") || strings.Count(text, "\n") < 30 {
		t.Errorf("on 40 lines (%d), want train's line, errors, and the rest counted:\n%s", len(lines), text)
	}

	// Two jobs and 200 errors of files: both jobs fit beside half a
	// screen of errors (the review: one was cut, the errors took more).
	s = errorsBox()
	for i := range 200 {
		s.Problems = append(s.Problems, supervisor.Problem{Code: "syntax", File: fmt.Sprintf("jobs.d/f%03d.lua", i), Line: 1, Text: fmt.Sprintf("jobs.d/f%03d.lua:1: syntax error", i)})
	}
	lines = layoutStatus(s, o).fit(40)
	b.Reset()
	o.writeLines(&b, lines, o.width)
	text = b.String()
	if len(lines) > 40 || strings.Contains(text, "more job") || !strings.Contains(text, "sweep-1  invalid") || !strings.Contains(text, "more errors") {
		t.Errorf("on 40 lines (%d), want both jobs and the errors counted:\n%s", len(lines), text)
	}
}

// TestStatusWholeOffATerminal: into a pipe berth status cuts no line, so
// that grep and less see a job's whole reason; COLUMNS set by the caller
// is a width asked for; on a terminal the picture fits it.
func TestStatusWholeOffATerminal(t *testing.T) {
	t.Parallel()
	d := newTestDaemon(t, map[string]string{
		"odd.lua": `job "odd" { cmd = { "true" }, user = "no-such-user-with-a-rather-long-name-to-make-the-reason-long" }`,
	})
	d.start(daemonOptions{args: []string{"--cpus", "2"}})
	j := d.waitState("odd", "invalid")
	if runeLen(j.Why) < 100 {
		t.Fatalf("the reason %q is too short to be cut", j.Why)
	}
	out, _, code := d.cli("status")
	if code != exitOK || !strings.Contains(out, j.Why) {
		t.Errorf("berth status into a pipe (exit %d) lacks the whole reason %q:\n%s", code, j.Why, out)
	}
	out, _, _ = berth(t, map[string]string{"BERTH_SOCKET": d.socket, "COLUMNS": "80"}, "status")
	for _, l := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		if runeLen(l) > 80 {
			t.Errorf("with COLUMNS=80, a line of %d: %q", runeLen(l), l)
		}
	}

	p := openPTY(t)
	setSize(t, p.tty, 80, 24)
	c := &cli{stdout: p.tty, stderr: os.Stderr, env: env{lookup: func(k string) (string, bool) {
		if k == "BERTH_SOCKET" {
			return d.socket, true
		}
		return "", false
	}}}
	if code := c.main([]string{"status"}); code != exitOK {
		t.Fatalf("berth status on a terminal: exit %d", code)
	}
	for _, l := range strings.Split(ansiCode.ReplaceAllString(p.read(), ""), "\n") {
		if runeLen(l) > 80 {
			t.Errorf("on a terminal of 80 columns, a line of %d: %q", runeLen(l), l)
		}
	}
}

func setSize(t *testing.T, tty *os.File, cols, rows int) {
	t.Helper()
	if err := unix.IoctlSetWinsize(int(tty.Fd()), unix.TIOCSWINSZ, &unix.Winsize{Col: uint16(cols), Row: uint16(rows)}); err != nil {
		t.Fatal(err)
	}
}

// screen is what has been written to p so far.
func (p *pty) screen() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.got.String()
}

// lastFrame is the last picture drawn: what follows the last move home.
func lastFrame(s string) string {
	return s[strings.LastIndex(s, "\x1b[H")+1:]
}

// TestStatusWatchOnATerminal runs berth status --watch as its own process
// on a pseudo-terminal, as a person would: it draws at once, draws again
// when a job changes state and when the window shrinks (cutting the job
// list), says so when the daemon goes away and draws again when it is
// back, and on Ctrl-C gives the screen and the cursor back and exits 0.
// Off a terminal --watch is a usage error.
func TestStatusWatchOnATerminal(t *testing.T) {
	t.Parallel()
	files := map[string]string{"svc.lua": service("svc", "")}
	for i := range 8 {
		files[fmt.Sprintf("b%d.lua", i)] = fmt.Sprintf(`job "batch-%d" { cmd = { "true" } }`, i)
	}
	d := newTestDaemon(t, files)
	d.start(daemonOptions{args: []string{"--cpus", "2"}})
	d.waitState("svc", "running")
	for i := range 8 {
		d.waitState(fmt.Sprintf("batch-%d", i), "done")
	}

	if _, errOut, code := d.cli("status", "--watch"); code != exitUsage || errOut != msgWatchNotTerminal()+"\n" {
		t.Errorf("--watch into a pipe: exit %d, %q; want %d, %q", code, errOut, exitUsage, msgWatchNotTerminal())
	}

	p := openPTY(t)
	setSize(t, p.tty, 120, 30)
	cmd := exec.Command(os.Args[0], "status", "--watch", "--socket", d.socket)
	cmd.Env = append(os.Environ(), "BERTH_TEST_BE_BERTH=1", "NO_COLOR=1", "TERM=xterm")
	cmd.Stdin, cmd.Stdout, cmd.Stderr = p.tty, p.tty, p.tty
	// Its own session, with the pseudo-terminal as its controlling
	// terminal: the kernel then sends it SIGWINCH when the size changes.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			cmd.Wait()
		}
	})
	frameHas := func(what string, cond func(frame string) bool) {
		t.Helper()
		testkit.WaitFor(t, waitLong, what, func() bool { return cond(lastFrame(p.screen())) })
	}
	frameHas("a picture with svc running", func(f string) bool {
		return strings.Contains(f, "svc") && strings.Contains(f, "running") && strings.Contains(f, "batch-7")
	})
	if s := p.screen(); !strings.HasPrefix(s, "\x1b[?1049h") || !strings.Contains(s, "\x1b[?25l") {
		t.Errorf("the watch did not take the alternate screen and hide the cursor: %q", s[:min(len(s), 40)])
	}

	resp := d.post("/v1/jobs/svc/stop")
	resp.Body.Close()
	frameHas("a picture with svc stopped", func(f string) bool {
		return strings.Contains(f, "stopped") && !strings.Contains(f, "running")
	})

	setSize(t, p.tty, 120, 10)
	frameHas("the job list cut to 10 rows", func(f string) bool {
		return strings.Contains(f, "more jobs (berth status shows all)") && strings.Count(f, "\r\n") <= 9
	})

	d.stop()
	frameHas("the screen to say the daemon is away", func(f string) bool {
		return strings.Contains(f, "the daemon is stopping") || strings.Contains(f, "no daemon answers on")
	})
	d.start(daemonOptions{args: []string{"--cpus", "2"}})
	frameHas("the picture drawn again once the daemon is back", func(f string) bool {
		return !strings.Contains(f, "the daemon is stopping") && !strings.Contains(f, "no daemon answers on") &&
			strings.Contains(f, "more jobs")
	})

	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Errorf("after SIGINT the watch exited with %v, want 0", err)
	}
	if s := p.read(); !strings.HasSuffix(s, leaveScreen) || !strings.Contains(leaveScreen, "\x1b[?25h") || !strings.HasSuffix(leaveScreen, "\x1b[?1049l") {
		t.Errorf("the watch's last bytes %q do not give back the cursor and the main screen", s[max(0, len(s)-40):])
	}
}

// TestStatusWatchOldDaemon: a daemon that predates /v1/events answers 404
// for it; the watch says the daemon is older than the client, exit 1.
func TestStatusWatchOldDaemon(t *testing.T) {
	socket := fakeDaemon(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/status" {
			w.Write([]byte(`{"jobs":[]}`))
			return
		}
		w.WriteHeader(http.StatusNotFound)
		w.Write([]byte(`{"code":"no_such_call","error":"no such call"}`))
	})
	_, errOut, code := berth(t, map[string]string{"BERTH_SOCKET": socket}, "status", "--watch", "--json")
	if want := msgDaemonTooOld(socket, "GET /v1/events"); code != exitFailed || !strings.Contains(errOut, want) {
		t.Errorf("exit %d, %q; want %d and %q", code, errOut, exitFailed, want)
	}
}

// TestStatusWatchJSONDaemonGoneMidAnswer: a daemon that goes away while
// the watch asks for the status after a change (killed between the change
// and the answer: CI saw it once) ends the watch as one that goes away
// between changes does, exit 3 and the same sentence.
func TestStatusWatchJSONDaemonGoneMidAnswer(t *testing.T) {
	t.Parallel()
	for _, how := range []string{"closed mid-answer", "socket gone"} {
		var socket string
		answered := make(chan struct{})
		var asked atomic.Int32
		socket = fakeDaemon(t, func(w http.ResponseWriter, r *http.Request) {
			switch r.URL.Path {
			case "/v1/events":
				w.Write([]byte(`{"seq":1,"kind":"status"}` + "\n"))
				w.(http.Flusher).Flush()
				<-answered
				if how == "socket gone" {
					os.Remove(socket) // the next request's dial fails
				}
				w.Write([]byte(`{"seq":2,"kind":"status"}` + "\n"))
				w.(http.Flusher).Flush()
				<-r.Context().Done()
			case "/v1/status":
				if asked.Add(1) == 1 {
					w.Header().Set("Connection", "close")
					w.Write([]byte(`{"jobs":[]}`))
					close(answered)
					return
				}
				if conn, _, err := w.(http.Hijacker).Hijack(); err == nil {
					conn.Close()
				}
			}
		})
		out, errOut, code := berth(t, map[string]string{"BERTH_SOCKET": socket}, "status", "--watch", "--json")
		if code != exitNoDaemon || errOut != msgWatchEnded(socket)+"\n" || strings.Count(out, "\n") != 1 {
			t.Errorf("%s: exit %d, %q, %q; want %d, one status and %q", how, code, out, errOut, exitNoDaemon, msgWatchEnded(socket))
		}
	}
}

// TestStatusWatchJSONDaemonGone: --watch --json ends with exit 3, saying
// the daemon stopped, whether it stopped or was killed (kill -9 gave
// "unexpected EOF" and exit 1: trial AC).
func TestStatusWatchJSONDaemonGone(t *testing.T) {
	t.Parallel()
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGKILL} {
		d := newTestDaemon(t, map[string]string{"svc.lua": service("svc", "")})
		d.start(daemonOptions{})
		d.waitState("svc", "running")
		cmd := exec.Command(os.Args[0], "status", "--watch", "--json", "--socket", d.socket)
		cmd.Env = append(os.Environ(), "BERTH_TEST_BE_BERTH=1")
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		if _, err := bufio.NewReader(out).ReadString('\n'); err != nil {
			t.Fatalf("the first status: %v", err)
		}
		d.cmd.Process.Signal(sig)
		d.cmd.Wait()
		io.Copy(io.Discard, out) // to its end, as the watch exits
		err = cmd.Wait()
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != exitNoDaemon || stderr.String() != msgWatchEnded(d.socket)+"\n" {
			t.Errorf("the daemon ended by %v: the watch exited with %v\n%s", sig, err, stderr.String())
		}
	}
}

// TestRenderStatusHintForTheViewer: the hint below the jobs names a failed
// job whose output the viewer may read (trial AN: bob was pointed to
// berth logs of root's job): their own, or any for root and the daemon's
// own user; none where they may read none.
func TestRenderStatusHintForTheViewer(t *testing.T) {
	pinRenderZone(t)
	s := headBox() // eval-nightly, an administrators' job, failed
	s.Daemon.UID = 0
	hint := func(v *viewer) string {
		var b bytes.Buffer
		o := renderOptions{width: 200, now: renderNow, viewer: v}
		o.writeLines(&b, layoutStatus(s, o).lines(), 200)
		for _, l := range strings.Split(b.String(), "\n") {
			if strings.HasPrefix(l, "failed: ") {
				return l
			}
		}
		return ""
	}
	if got := hint(&viewer{uid: 0}); !strings.Contains(got, "berth logs eval-nightly") {
		t.Errorf("root's hint: %q", got)
	}
	if got := hint(&viewer{uid: 1001, name: "bob"}); got != "" {
		t.Errorf("bob's hint, none of whose jobs failed: %q", got)
	}
	s.Jobs = append(s.Jobs, supervisor.JobStatus{Name: "bob/train", Owner: "bob", State: "failed", Since: renderNow.Add(-time.Minute), GPUs: []string{}})
	if got := hint(&viewer{uid: 1001, name: "bob"}); !strings.Contains(got, "berth logs bob/train") {
		t.Errorf("bob's hint, his job failed: %q", got)
	}
	// A job that could not start wrote no output; its why names what
	// helps (trial AO): no hint sends one to berth logs of it.
	s.Jobs[len(s.Jobs)-1].Why = `cannot start: program "python4" was not found in the job's PATH (berth show bob/train shows its command, directory and user)`
	if got := hint(&viewer{uid: 1001, name: "bob"}); got != "" {
		t.Errorf("bob's hint, his job could not start: %q", got)
	}
}
