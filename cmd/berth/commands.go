package main

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"slices"
	"strconv"
	"time"

	"golang.org/x/sys/unix"

	"github.com/berthd/berth/supervisor"
)

// clientFlags are the flags every client command takes.
type clientFlags struct {
	socket string
	json   bool
}

func (c *cli) clientFlags(fs *flag.FlagSet, listing bool) *clientFlags {
	f := &clientFlags{}
	fs.StringVar(&f.socket, "socket", "", "the daemon's control socket (env BERTH_SOCKET; default: your own daemon's if one answers, else the system's, "+systemSocket+")")
	if listing {
		fs.BoolVar(&f.json, "json", false, "print JSON instead of text")
	}
	return f
}

// client is the client of the daemon these flags name.
func (c *cli) client(f *clientFlags) *client { return newClient(c.sockets(f.socket)...) }

// sockets are where a client looks for the daemon: --socket, else
// BERTH_SOCKET, else the person's own daemon then the system's.
func (c *cli) sockets(flagValue string) []string {
	if flagValue != "" {
		return []string{flagValue}
	}
	return clientSockets(c.env)
}

// render are the options for text output on this terminal.
func (c *cli) render(now time.Time) renderOptions {
	o := renderOptions{width: 80, now: now}
	if f, ok := c.stdout.(*os.File); ok {
		if ws, err := unix.IoctlGetWinsize(int(f.Fd()), unix.TIOCGWINSZ); err == nil && ws.Col > 0 {
			o.width = int(ws.Col)
			o.color = c.env.get("NO_COLOR") == "" && c.env.get("TERM") != "dumb"
		}
	}
	if o.width == 80 {
		if n, err := strconv.Atoi(c.env.get("COLUMNS")); err == nil && n > 0 {
			o.width = n
		}
	}
	return o
}

// simple parses a client command line that takes exactly want positional
// arguments, named by what in messages.
func (c *cli) simple(name string, args []string, listing bool, want int, what string) (*clientFlags, []string, int, bool) {
	fs := c.flags(name)
	f := c.clientFlags(fs, listing)
	rest, code, done := c.parse(fs, args)
	if done {
		return nil, nil, code, true
	}
	if len(rest) != want {
		if want == 0 {
			fmt.Fprintln(c.stderr, msgUnexpectedArgs(name, rest))
		} else {
			fmt.Fprintln(c.stderr, msgWantArgs(name, what))
		}
		return nil, nil, exitUsage, true
	}
	return f, rest, exitOK, false
}

// listing makes a command that shows one answer of the daemon: as JSON
// with --json, else through its renderer.
func listing[T any](name string, path func(args []string) string, render func(io.Writer, T, renderOptions), now func(T) time.Time, args int, what string) func(*cli, []string) int {
	return func(c *cli, argv []string) int {
		f, rest, code, done := c.simple(name, argv, true, args, what)
		if done {
			return code
		}
		var v T
		if err := c.client(f).get(path(rest), nil, &v); err != nil {
			return c.fail(err)
		}
		if f.json {
			return c.writeJSON(v)
		}
		render(c.stdout, v, c.render(now(v)))
		return exitOK
	}
}

func fixed(path string) func([]string) string { return func([]string) string { return path } }

func wallClock[T any](T) time.Time { return time.Now() }

var (
	runStatus = listing("status", fixed("/status"), renderStatus,
		func(s supervisor.Status) time.Time { return s.Now }, 0, "")
	runJobs    = listing("jobs", fixed("/jobs"), renderJobs, wallClock[[]supervisor.JobStatus], 0, "")
	runFlavors = listing("flavors", fixed("/flavors"), renderFlavors, wallClock[[]supervisor.FlavorView], 0, "")
	runShow    = listing("show", func(args []string) string { return "/jobs/" + url.PathEscape(args[0]) },
		renderShow, wallClock[supervisor.JobDetail], 1, "JOB")
)

func runHistory(c *cli, args []string) int {
	fs := c.flags("history")
	f := c.clientFlags(fs, true)
	n := fs.Int("n", 20, "how many runs, newest first")
	rest, code, done := c.parse(fs, args)
	if done {
		return code
	}
	if len(rest) > 1 {
		fmt.Fprintln(c.stderr, msgWantArgs("history", "at most one JOB"))
		return exitUsage
	}
	if *n < 1 {
		fmt.Fprintln(c.stderr, msgUsage("berth history", fmt.Errorf("-n %d: give 1 or more runs", *n)))
		return exitUsage
	}
	q := url.Values{"n": {strconv.Itoa(*n)}}
	if len(rest) == 1 {
		q.Set("job", rest[0])
	}
	var runs []supervisor.RunView
	if err := c.client(f).get("/history", q, &runs); err != nil {
		return c.fail(err)
	}
	if f.json {
		return c.writeJSON(runs)
	}
	renderHistory(c.stdout, runs, c.render(time.Now()))
	return exitOK
}

// control makes start, stop and restart.
func control(verb string) func(c *cli, args []string) int {
	return func(c *cli, args []string) int {
		if verb == "stop" && slices.Contains(args, "--all") {
			return stopAll(c, args)
		}
		f, rest, code, done := c.simple(verb, args, false, 1, "JOB")
		if done {
			return code
		}
		if err := c.client(f).post("/jobs/"+url.PathEscape(rest[0])+"/"+verb, nil); err != nil {
			return c.fail(err)
		}
		fmt.Fprintf(c.stdout, "%s: %s requested (berth status shows it)\n", rest[0], verb)
		return exitOK
	}
}

// stopAll is `berth stop --all`: every job that holds or waits for the
// machine is stopped, each with its own stop_signal and stop_timeout, and
// stays stopped. Under systemd the jobs outlive the daemon, so this (or
// `systemctl stop berth.slice`) is how every job is stopped at once.
func stopAll(c *cli, args []string) int {
	fs := c.flags("stop")
	f := c.clientFlags(fs, false)
	fs.Bool("all", false, "stop every job")
	rest, code, done := c.parse(fs, args)
	if done {
		return code
	}
	if len(rest) > 0 {
		fmt.Fprintln(c.stderr, msgUnexpectedArgs("stop --all", rest))
		return exitUsage
	}
	cl := c.client(f)
	var jobs []supervisor.JobStatus
	if err := cl.get("/jobs", nil, &jobs); err != nil {
		return c.fail(err)
	}
	stopped := 0
	for _, j := range jobs {
		switch j.State {
		case "waiting", "starting", "running", "backoff":
		default:
			continue
		}
		if err := cl.post("/jobs/"+url.PathEscape(j.Name)+"/stop", nil); err != nil {
			return c.fail(err)
		}
		stopped++
	}
	fmt.Fprintf(c.stdout, "%s: stop requested (berth status shows them)\n", count(stopped, "job"))
	return exitOK
}

func runReload(c *cli, args []string) int {
	f, _, code, done := c.simple("reload", args, true, 0, "")
	if done {
		return code
	}
	var res supervisor.ReloadResult
	if err := c.client(f).post("/reload", &res); err != nil {
		return c.fail(err)
	}
	if f.json {
		c.writeJSON(res)
	} else {
		fmt.Fprintln(c.stdout, msgReloaded(res))
		for _, e := range res.Errors {
			fmt.Fprintln(c.stdout, "  "+escapeText(e)) // errors in job files, which name and quote them
		}
	}
	if len(res.Errors) > 0 {
		return exitFailed
	}
	return exitOK
}

func runLogs(c *cli, args []string) int {
	fs := c.flags("logs")
	f := c.clientFlags(fs, false)
	follow := fs.Bool("f", false, "keep printing what the job writes")
	run := fs.Uint64("run", 0, "only this run's output (journald only)")
	raw := fs.Bool("raw", false, "write the output as the job wrote it; on a terminal, control sequences are otherwise shown escaped (\x1b)")
	rest, code, done := c.parse(fs, args)
	if done {
		return code
	}
	if len(rest) != 1 {
		fmt.Fprintln(c.stderr, msgWantArgs("logs", "JOB"))
		return exitUsage
	}
	cl := c.client(f)
	var d supervisor.JobDetail
	if err := cl.get("/jobs/"+url.PathEscape(rest[0]), nil, &d); err != nil {
		return c.fail(err)
	}
	if d.Logs != "journal" && *run != 0 {
		fmt.Fprintln(c.stderr, msgRunNeedsJournal(d.Logs))
		return exitFailed
	}
	// A job's output is the job's: on a terminal it may not drive it.
	out := c.stdout
	if !*raw && isTerminal(c.stdout) {
		e := &escapeWriter{w: c.stdout}
		defer e.Close()
		out = e
	}
	if d.Logs == "journal" {
		return c.journalctl(cl, out, rest[0], *run, *follow)
	}
	return c.tail(out, d.Logs, *follow)
}

// journalctl shows a job's output from journald, for one run's time window
// when asked.
func (c *cli) journalctl(cl *client, out io.Writer, job string, run uint64, follow bool) int {
	// --all: the lines as the job wrote them, not "[42B blob data]" for a
	// line with a control character; out escapes them on a terminal.
	args := []string{"--no-pager", "--all", "-o", "short-iso", "-t", job}
	if run != 0 {
		var runs []supervisor.RunView
		if err := cl.get("/history", url.Values{"job": {job}, "n": {"100"}}, &runs); err != nil {
			return c.fail(err)
		}
		var found *supervisor.RunView
		for i := range runs {
			if runs[i].ID == run {
				found = &runs[i]
			}
		}
		if found == nil {
			fmt.Fprintln(c.stderr, msgNoSuchRun(job, run))
			return exitFailed
		}
		args = append(args, "--since", found.Start.Local().Format("2006-01-02 15:04:05"))
		if found.End != nil {
			args = append(args, "--until", found.End.Add(time.Second).Local().Format("2006-01-02 15:04:05"))
		}
	}
	if follow {
		args = append(args, "-f")
	}
	cmd := exec.Command("journalctl", args...)
	cmd.Stdout, cmd.Stderr = out, c.stderr
	if err := cmd.Run(); err != nil {
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			return exitFailed
		}
		fmt.Fprintln(c.stderr, "berth: cannot run journalctl: "+err.Error())
		return exitFailed
	}
	return exitOK
}

// tail prints a log file to out, and with follow keeps printing what is
// appended until interrupted.
func (c *cli) tail(out io.Writer, path string, follow bool) int {
	file, err := os.Open(path)
	if os.IsNotExist(err) && !follow {
		return exitOK // nothing written yet
	}
	for os.IsNotExist(err) {
		time.Sleep(250 * time.Millisecond)
		file, err = os.Open(path)
	}
	if err != nil {
		fmt.Fprintln(c.stderr, msgCannotReadLog(path, err))
		return exitFailed
	}
	defer func() { file.Close() }()
	r := bufio.NewReader(file)
	if _, err := io.Copy(out, r); err != nil {
		return exitFailed
	}
	if !follow {
		return exitOK
	}
	interrupt := make(chan os.Signal, 1)
	signal.Notify(interrupt, os.Interrupt)
	defer signal.Stop(interrupt)
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-interrupt:
			return exitOK
		case <-tick.C:
			if _, err := io.Copy(out, r); err != nil {
				return exitFailed
			}
			// The daemon rotates a full log to PATH.1: follow the new file.
			if now, err := os.Stat(path); err == nil {
				if was, err := file.Stat(); err == nil && !os.SameFile(was, now) {
					if next, err := os.Open(path); err == nil {
						file.Close()
						file, r = next, bufio.NewReader(next)
					}
				}
			}
		}
	}
}
