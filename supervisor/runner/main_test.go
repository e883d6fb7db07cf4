package runner

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// helperEnv names the helper mode. With it set, the test binary is not a
// test binary but the child of a test, as in Go's own os/exec tests: its
// behaviour is exact, and it needs nothing installed on the machine.
const helperEnv = "BERTH_RUNNER_HELPER"

func TestMain(m *testing.M) {
	if mode := os.Getenv(helperEnv); mode != "" {
		os.Exit(helper(mode, os.Args[1:]))
	}
	os.Exit(m.Run())
}

// helper is the child's side. Modes:
//
//	exit N                  exit with status N
//	sleep                   print "ready", then sleep until killed
//	wait-term               print "ready", print "terminated" and exit 0 on SIGTERM
//	group-term              ignore SIGTERM, start a wait-term grandchild, sleep
//	ignore-term             ignore SIGTERM, print "ready", sleep until killed
//	group-save              start a save-term grandchild, sleep (SIGTERM ends it)
//	save-term               print "ready"; on SIGTERM, take a while, print "saved", exit 0
//	fork-grandchild block   start a sleeping grandchild, print its pid, sleep
//	escape MODE             start a grandchild of MODE in a session of its own,
//	                        print its pid; exit 0 on SIGTERM
//	spawn-term              print "ready"; on SIGTERM, start an upload and exit 0
//	upload                  take a while, print "uploaded", exit 0
//	fork-grandchild FIFO    ... print its pid, then exit 0 once FIFO is closed
//	list-fds                print "self N" (the fd listing), then "N target" per fd
//	describe                print argv, dir, env and IDs as JSON
//	spew N                  write N bytes, no newline
//	lines N W               write N lines of W bytes each, newline included
//	print ARGS              write each argument on a line of its own
//	oom-start ADJ [FIFO]    once FIFO is closed, act as a daemon: start a job
//	                        at oom_score_adj ADJ (oomStart)
func helper(mode string, args []string) int {
	switch mode {
	case "exit":
		n, _ := strconv.Atoi(args[0])
		return n
	case "sleep":
		fmt.Println("ready")
		sleepForever()
	case "wait-term":
		c := make(chan os.Signal, 1)
		signal.Notify(c, syscall.SIGTERM)
		fmt.Println("ready")
		<-c
		fmt.Println("terminated")
		return 0
	case "group-save":
		gc, err := helperChild("save-term")
		if err != nil {
			return fail(err)
		}
		if err := gc.Start(); err != nil {
			return fail(err)
		}
		sleepForever()
	case "save-term":
		c := make(chan os.Signal, 1)
		signal.Notify(c, syscall.SIGTERM)
		fmt.Println("ready")
		<-c
		time.Sleep(200 * time.Millisecond) // a checkpoint being written
		fmt.Println("saved")
		return 0
	case "ignore-term":
		signal.Ignore(syscall.SIGTERM)
		fmt.Println("ready")
		sleepForever()
	case "fork-grandchild":
		gc, err := helperChild("sleep")
		if err != nil {
			return fail(err)
		}
		gc.Stdout = nil // read here
		out, err := gc.StdoutPipe()
		if err != nil {
			return fail(err)
		}
		if err := gc.Start(); err != nil {
			return fail(err)
		}
		// Its pid once it runs: Start returns at the exec's point of no
		// return, before the kernel has set up the new program's
		// environment, which /proc shows empty until then.
		if _, err := bufio.NewReader(out).ReadString('\n'); err != nil {
			return fail(err)
		}
		fmt.Println(gc.Process.Pid)
		if args[0] == "block" {
			sleepForever()
		}
		f, err := os.Open(args[0])
		if err != nil {
			return fail(err)
		}
		io.Copy(io.Discard, f)
		return 0
	case "escape":
		c := make(chan os.Signal, 1)
		signal.Notify(c, syscall.SIGTERM)
		gc, err := helperChild(args[0])
		if err != nil {
			return fail(err)
		}
		gc.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		if err := gc.Start(); err != nil {
			return fail(err)
		}
		fmt.Println(gc.Process.Pid)
		<-c
		return 0
	case "spawn-term":
		c := make(chan os.Signal, 1)
		signal.Notify(c, syscall.SIGTERM)
		fmt.Println("ready")
		<-c
		up, err := helperChild("upload")
		if err != nil {
			return fail(err)
		}
		if err := up.Start(); err != nil {
			return fail(err)
		}
		return 0 // the upload goes on
	case "upload":
		time.Sleep(300 * time.Millisecond)
		fmt.Println("uploaded")
		return 0
	case "group-term":
		signal.Ignore(syscall.SIGTERM)
		gc, err := helperChild("wait-term")
		if err != nil {
			return fail(err)
		}
		if err := gc.Start(); err != nil {
			return fail(err)
		}
		sleepForever()
	case "list-fds":
		return listFDs()
	case "describe":
		dir, _ := os.Getwd()
		groups, _ := os.Getgroups()
		json.NewEncoder(os.Stdout).Encode(description{
			Args: os.Args, Dir: dir, Env: os.Environ(),
			UID: os.Getuid(), GID: os.Getgid(), Groups: groups,
		})
		return 0
	case "spew":
		n, _ := strconv.Atoi(args[0])
		buf := make([]byte, 64<<10)
		for i := 0; n > 0; {
			k := min(n, len(buf))
			for j := range k {
				buf[j] = spewByte(i + j)
			}
			os.Stdout.Write(buf[:k])
			i, n = i+k, n-k
		}
		return 0
	case "lines":
		n, _ := strconv.Atoi(args[0])
		w, _ := strconv.Atoi(args[1])
		os.Stdout.WriteString(linesText(n, w))
		return 0
	case "print":
		for _, a := range args {
			fmt.Println(a)
		}
		return 0
	case "oom-start":
		return oomStart(args)
	}
	return fail(fmt.Errorf("unknown helper mode %q", mode))
}

type description struct {
	Args   []string
	Dir    string
	Env    []string
	UID    int
	GID    int
	Groups []int
}

func spewByte(i int) byte { return 'a' + byte(i%26) }

func linesText(n, w int) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "%0*d\n", w-1, i)
	}
	return b.String()
}

// listFDs reads /proc/self/fd with raw system calls: os.ReadDir could
// make the Go runtime open descriptors of its own (the poller's), which
// the listing would then show.
func listFDs() int {
	fd, err := syscall.Open("/proc/self/fd", syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return fail(err)
	}
	var names []string
	buf := make([]byte, 4096)
	for {
		n, err := syscall.ReadDirent(fd, buf)
		if err != nil {
			return fail(err)
		}
		if n == 0 {
			break
		}
		_, _, names = syscall.ParseDirent(buf[:n], -1, names)
	}
	fmt.Printf("self %d\n", fd)
	for _, name := range names {
		target, _ := os.Readlink("/proc/self/fd/" + name)
		fmt.Printf("%s %s\n", name, target)
	}
	return 0
}

// helperChild is this test binary as a helper of mode ("save-term"),
// its output this one's, not started yet.
func helperChild(mode string) (*exec.Cmd, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	c := exec.Command(exe)
	c.Env = append(os.Environ(), helperEnv+"="+mode)
	c.Stdout = os.Stdout
	return c, nil
}

func sleepForever() {
	for {
		time.Sleep(time.Hour)
	}
}

func fail(err error) int {
	fmt.Fprintln(os.Stderr, "helper:", err)
	return 100
}

// helperSpec is a Spec that runs the test binary as a helper in mode.
func helperSpec(t testing.TB, mode string, args ...string) Spec {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return Spec{
		Argv: append([]string{exe}, args...),
		// Under -race the child's runtime sleeps a second before exiting
		// unless told not to.
		Env: []string{helperEnv + "=" + mode, "GORACE=atexit_sleep_ms=0"},
	}
}

// child is a started helper with its output on a pipe.
type child struct {
	*Process
	out *bufio.Reader
	r   *os.File
}

// startChild starts spec with its output on a pipe, and makes sure the
// process is gone when the test ends.
func startChild(t *testing.T, spec Spec) *child {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	spec.Stdout = w
	p, err := Start(spec)
	w.Close()
	if err != nil {
		r.Close()
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() {
		p.Stop(syscall.SIGKILL, 0)
		r.Close()
	})
	return &child{Process: p, out: bufio.NewReader(r), r: r}
}

// line reads the child's next line, failing the test if none comes within
// ten seconds.
func (c *child) line(t *testing.T) string {
	t.Helper()
	c.r.SetReadDeadline(time.Now().Add(10 * time.Second))
	s, err := c.out.ReadString('\n')
	if err != nil {
		t.Fatalf("read child's output: %v (got %q)", err, s)
	}
	return strings.TrimSuffix(s, "\n")
}

// rest reads the child's output to EOF.
func (c *child) rest(t *testing.T) string {
	t.Helper()
	c.r.SetReadDeadline(time.Now().Add(10 * time.Second))
	b, err := io.ReadAll(c.out)
	if err != nil {
		t.Fatalf("read child's output: %v", err)
	}
	return string(b)
}

func (c *child) ready(t *testing.T) {
	t.Helper()
	if s := c.line(t); s != "ready" {
		t.Fatalf("child said %q, want \"ready\"", s)
	}
}

// wait is Wait with a deadline, so that a bug fails the test instead of
// hanging it.
func wait(t *testing.T, p *Process) Exit {
	t.Helper()
	select {
	case <-p.Done():
		return p.Wait()
	case <-time.After(10 * time.Second):
		t.Fatalf("pid %d not reaped after 10s", p.PID())
		return Exit{}
	}
}
