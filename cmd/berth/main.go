// Command berth is a job supervisor for one machine, configured in Lua.
// `berth daemon` is the supervisor; every other subcommand is its client or,
// like `berth check` and `berth machine`, works without one.
package main

import (
	"cmp"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"
	"time"

	"github.com/berthd/berth/probes"
	"github.com/berthd/berth/supervisor"
)

// Exit codes, as DESIGN.md fixes them.
const (
	exitOK       = 0 // done
	exitFailed   = 1 // the thing asked about failed or does not exist
	exitUsage    = 2 // the command line is wrong
	exitNoDaemon = 3 // no daemon answered
	// exitAborted is the daemon's exit after SIGABRT (systemd's watchdog):
	// 128 + 6, as a shell reports a death by that signal.
	exitAborted = 134
)

// version is set at build time with -ldflags "-X main.version=…".
var version = "dev"

// cli is what every command runs with: its output streams and the part of
// the process's world it reads, so tests can supply their own.
type cli struct {
	stdout, stderr io.Writer
	stdin          io.Reader // nil: the process's
	env            env
	// root is the filesystem the machine is probed under: "/" except in tests.
	root string
	// cards reads what the cards hold (NVML); nil in tests, which probe
	// fixture machines.
	cards probes.CardReader
	// cardUse is what cards answered when the inventory was probed; nil
	// without it.
	cardUse []probes.CardUse
	// adminJobs is the system daemon's jobs directory, whose flavors a
	// person's berth check borrows when they have no jobs directory of
	// their own; "" for none (tests).
	adminJobs string
	// failCode is the code of what failed, where it has one of its own
	// (the daemon's, a refused socket): a failed --json answers with it.
	failCode string
	// warnedSocketDir: the warning that the person's own socket's
	// directory is not theirs was given (once a command).
	warnedSocketDir bool
	// lookups look for what the command line names once it is read
	// (--owner's account): one not found is what was asked about not
	// existing (exit 1), not a command line written wrong.
	lookups []func() error
	// timeout, where not 0, bounds every one-shot request in place of
	// requestTimeout and reloadTimeout: tests shorten it.
	timeout time.Duration
}

type command struct {
	name    string
	args    string // the synopsis after the name
	summary string // one line for `berth help`
	notes   string // more for the command's --help, after the summary
	example string
	run     func(c *cli, args []string) int
}

// commands is the one list of subcommands; help and the man page are made
// from it.
var commands []command

func init() {
	commands = []command{
		{name: "status", args: "[--watch] [--json] [--mine | --owner NAME]",
			summary: "the machine and every job: who holds what, what waits and why",
			notes: "On a terminal the picture fits its width; into a pipe or a file its lines are whole\n" +
				"(COLUMNS=N sets a width there). --watch keeps it on the terminal, redrawn as the\n" +
				"daemon's jobs change and cut to the screen's height, until Ctrl-C.\n" +
				"An array is one line: STATE array, and how many of its indices are done, running,\n" +
				"waiting and failed; berth show ARRAY lists them.",
			example: "berth status\nberth status --watch\nberth status | grep waiting\nberth status --json | jq '.jobs[] | select(.state == \"failed\")'",
			run:     runStatus},
		{name: "jobs", args: "[--json] [--mine | --owner NAME]",
			summary: "one line per job, for scripts",
			notes:   "An array is one line, its state that of its indices as a whole; INDICES is how many\nit has (\"-\" for a job that is not an array).",
			example: "berth jobs | awk '$2 == \"running\"'",
			run:     runJobs},
		{name: "show", args: "JOB [--index N] [--json]",
			summary: "a job's definition, the environment its next run gets, its last runs",
			notes:   "For an array, also its indices by state; JOB[N] (e.g. sweep[7]), or --index N, shows one index.",
			example: "berth show train-resnet\nberth show sweep\nberth show 'sweep[7]'",
			run:     runShow},
		{name: "history", args: "[JOB [--index N] | --mine | --owner NAME] [-n N] [--json]",
			summary: "past runs, newest first",
			notes:   "For an array, the runs of all its indices (the JOB column names the index);\n--index N only those of index N.",
			example: "berth history train-resnet -n 5\nberth history sweep --index 7\nberth history --mine",
			run:     runHistory},
		{name: "logs", args: "JOB [--index N] [-f] [-n N] [--run N] [--raw]",
			summary: "a job's output, from journald or its log file",
			notes:   "Each index of an array has its own output: name one with --index N (or as JOB[N]).",
			example: "berth logs train-resnet -f -n 20\nberth logs train-resnet --run 42\nberth logs sweep --index 7",
			run:     runLogs},
		{name: "submit", args: "FILE... [--replace]",
			summary: "put job files in your job directory, once the daemon has checked them",
			example: "berth submit train.lua\nberth submit sweeps/*.lua",
			run:     runSubmit},
		{name: "edit", args: "JOB | FILE.lua",
			summary: "edit a job's file in $EDITOR; a file that does not load is not saved",
			example: "berth edit train\nEDITOR=nano berth edit new.lua",
			run:     runEdit},
		{name: "flavors", args: "[--json]",
			summary: "the named sizes in force, and the jobs that use each",
			example: "berth flavors",
			run:     runFlavors},
		{name: "start", args: "JOB [--index N] [--stopped] [--ignore-deps] | --all [--json]", summary: "run a job that is not running (a done job runs again), or every job stopped",
			notes: "For an array, each of its indices; --index N (or JOB[N]) one of them; --stopped only\n" +
				"those stopped, not the done ones again. --all starts every job you may start that\n" +
				"rests stopped (the way back from berth stop --all), and the arrays' stopped indices.",
			example: "berth start prep-imagenet", run: control("start")},
		{name: "stop", args: "JOB [--index N] | --all [--json]", summary: "stop a job (or every job) with its stop_signal; it stays stopped",
			notes:   "For an array, each of its indices; --index N (or JOB[N]) one of them.",
			example: "berth stop notebook", run: control("stop")},
		{name: "restart", args: "JOB [--index N] [--failed] [--json]", summary: "stop a job if it runs, then run it again",
			notes: "For an array, each of its indices (--index N, or JOB[N], one of them); with --failed\n" +
				"only those that failed (berth says how many, or that none had). For a job that is\n" +
				"not an array --failed is refused and nothing restarted (berth looks the job up first).",
			example: "berth restart train-resnet\nberth restart sweep --failed", run: control("restart")},
		{name: "reload", args: "[--json]",
			summary: "reload the job files now, and print what changed",
			example: "berth reload",
			run:     runReload},
		{name: "check", args: "[FILE|DIR...] [--json] [--cpus N] [--gpus N] [--ram SIZE] [--gpu-mem SIZE] [--file-budget D] [--socket PATH]",
			summary: "validate job files without a daemon; exit 1 on any error",
			example: "berth check    # no FILE: your job files, where the daemon that answers reads them\nberth check /etc/berth/jobs.d\nberth check train.lua --gpus 4",
			run:     runCheck},
		{name: "machine", args: "[--json] [--cpus N] [--gpus N] [--ram SIZE] [--gpu-mem SIZE]",
			summary: "what this machine offers jobs, and who holds it when a daemon runs",
			example: "berth machine\nCUDA_VISIBLE_DEVICES=2,3 berth machine --json",
			run:     runMachine},
		{name: "daemon", args: "[--jobs DIR] [--user-jobs DIR] [--state DIR] [--socket PATH] [--metrics ADDR] [--cpus N] [--gpus N] [--ram SIZE] [--gpu-mem SIZE] [--foreign-limit SIZE] [--file-budget D] [--group G] [--admin-group G] [--person-jobs N] [--runner units|direct|auto] [--log-level L] [--cpuprofile FILE]",
			summary: "run the supervisor (systemd runs it as berth.service)",
			example: "berth daemon --jobs examples/quickstart --state /tmp/berth-demo --socket /tmp/berth-demo/berth.sock --user-jobs \"\"\nsystemctl start berth   # as the package installs it",
			run:     runDaemon},
		{name: "version", args: "[--json]",
			summary: "print berth's version, and the version of the daemon that answers",
			example: "berth version",
			run:     runVersion},
	}
}

func main() {
	c := &cli{stdout: os.Stdout, stderr: os.Stderr, env: processEnv(), root: "/", cards: probes.NVML(), adminJobs: adminJobsDir}
	os.Exit(c.main(os.Args[1:]))
}

func (c *cli) main(args []string) int {
	if len(args) == 0 {
		c.help(c.stdout)
		return exitOK
	}
	switch args[0] {
	case "help", "-h", "-help", "--help":
		if len(args) > 1 {
			if cmd := lookup(args[1]); cmd != nil {
				return cmd.run(c, []string{"--help"})
			}
			fmt.Fprintln(c.stderr, msgUnknownCommand(args[1], commandNames()))
			return exitUsage
		}
		c.help(c.stdout)
		return exitOK
	case "--version":
		return runVersion(c, nil)
	case evalCommand:
		// Hidden: the daemon's and berth check's evaluating child.
		return runEval(c, args[1:])
	}
	args = commandFirst(args)
	cmd := lookup(args[0])
	switch {
	case cmd == nil && strings.HasPrefix(args[0], "-"):
		// Flags, and no command among the arguments after them.
		return c.usageError(args, msgNoCommand(args))
	case cmd == nil:
		return c.usageError(args, msgUnknownCommand(args[0], commandNames()))
	}
	if asksJSON(args[1:]) {
		return c.runJSON(cmd, args[1:])
	}
	return cmd.run(c, args[1:])
}

// jsonFailure is what a command asked for --json writes on stdout when it
// fails without having written anything there: the shape of the daemon's
// own errors, so that a script reads {code, error} rather than nothing.
type jsonFailure struct {
	Code  string `json:"code"`
	Error string `json:"error"`
}

// runJSON runs cmd, asked for --json: where it fails and wrote nothing on
// stdout, its sentence (still on stderr for a person) is also written
// there as a jsonFailure.
func (c *cli) runJSON(cmd *command, args []string) int {
	stdout, stderr := c.stdout, c.stderr
	out := &countingWriter{w: stdout}
	var said strings.Builder
	c.stdout, c.stderr = out, io.MultiWriter(stderr, &said)
	code := cmd.run(c, args)
	c.stdout, c.stderr = stdout, stderr
	if code == exitOK || out.n > 0 {
		return code
	}
	failure := jsonFailure{Code: c.failCode, Error: strings.TrimPrefix(strings.TrimSpace(said.String()), "berth: ")}
	if failure.Code == "" {
		failure.Code = map[int]string{exitUsage: "usage", exitNoDaemon: "no_daemon"}[code]
		failure.Code = cmp.Or(failure.Code, "failed")
	}
	c.writeJSON(failure)
	return code
}

// usageError says sentence, a command line that names no command berth
// has, and exits 2; asked for --json anywhere in args, it writes the
// jsonFailure on stdout too, as every other usage error does (trial AT:
// berth bogus --json wrote nothing there).
func (c *cli) usageError(args []string, sentence string) int {
	fmt.Fprintln(c.stderr, sentence)
	if asksJSON(args) {
		c.writeJSON(jsonFailure{Code: "usage", Error: strings.TrimPrefix(sentence, "berth: ")})
	}
	return exitUsage
}

// asksJSON reports whether a command's arguments ask for --json (flags are
// read anywhere before a "--").
func asksJSON(args []string) bool {
	for _, a := range args {
		switch a {
		case "--":
			return false
		case "--json", "-json", "--json=true", "-json=true":
			return true
		}
	}
	return false
}

// countingWriter counts what goes through it.
type countingWriter struct {
	w io.Writer
	n int64
}

func (cw *countingWriter) Write(p []byte) (int, error) {
	n, err := cw.w.Write(p)
	cw.n += int64(n)
	return n, err
}

// commandFirst moves flags given before the command after it: `berth
// --socket /x status` is `berth status --socket /x`, as a command's flags
// are read wherever they are. The command is the first argument that names
// one; with none, the arguments are left as they are.
func commandFirst(args []string) []string {
	if len(args) == 0 || !strings.HasPrefix(args[0], "-") {
		return args
	}
	for i, a := range args {
		if lookup(a) != nil {
			return append(append([]string{a}, args[:i]...), args[i+1:]...)
		}
	}
	return args
}

func lookup(name string) *command {
	for i := range commands {
		if commands[i].name == name {
			return &commands[i]
		}
	}
	return nil
}

func commandNames() []string {
	names := make([]string, len(commands))
	for i, cmd := range commands {
		names[i] = cmd.name
	}
	return names
}

func (c *cli) help(w io.Writer) {
	fmt.Fprintln(w, "berth: a job supervisor for one machine, configured in Lua")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Usage: berth COMMAND [ARGS]")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Commands:")
	for _, cmd := range commands {
		fmt.Fprintf(w, "  %-9s %s\n", cmd.name, cmd.summary)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, `Run "berth COMMAND --help" for a command's flags and an example.`)
}

// flags starts a command's flag set; its usage text is the command's help.
func (c *cli) flags(name string) *flag.FlagSet {
	cmd := lookup(name)
	fs := flag.NewFlagSet("berth "+name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {
		w := c.stdout
		fmt.Fprintf(w, "Usage: berth %s %s\n\n%s.\n", cmd.name, cmd.args, upperFirst(cmd.summary))
		if cmd.notes != "" {
			fmt.Fprintf(w, "\n%s\n", cmd.notes)
		}
		if hasFlags(fs) {
			fmt.Fprintln(w, "\nFlags:")
			// As the usage line and the README write them: --json, not
			// the flag package's -json (both are taken).
			var b strings.Builder
			fs.SetOutput(&b)
			fs.PrintDefaults()
			fs.SetOutput(io.Discard)
			for line := range strings.Lines(b.String()) {
				name, _, _ := strings.Cut(strings.TrimPrefix(line, "  -"), " ")
				name, _, _ = strings.Cut(name, "\t")
				if rest, ok := strings.CutPrefix(line, "  -"); ok && len(strings.TrimSpace(name)) > 1 {
					line = "  --" + rest // -f and -n stay as tail writes them
				}
				io.WriteString(w, line)
			}
		}
		fmt.Fprintf(w, "\nExample:\n  %s\n", strings.ReplaceAll(cmd.example, "\n", "\n  "))
	}
	return fs
}

func hasFlags(fs *flag.FlagSet) bool {
	n := 0
	fs.VisitAll(func(*flag.Flag) { n++ })
	return n > 0
}

func upperFirst(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// parse reads flags anywhere among the arguments (`berth check dir --json`
// works as people type it) and returns the positional ones. done is true
// when the command should return code at once: help was asked for (0), or
// the command line is wrong (2, with the message printed).
func (c *cli) parse(fs *flag.FlagSet, args []string) (positional []string, code int, done bool) {
	// The flag package prints the usage on a mistake too: the one line
	// that says what is wrong and where the usage is, on stderr, is
	// enough there, and keeps stdout for what was asked.
	usage := fs.Usage
	fs.Usage = func() {}
	defer func() { fs.Usage = usage }()
	if fs.Lookup("n") != nil {
		args = splitCount(args)
	}
	for {
		err := fs.Parse(args)
		if errors.Is(err, flag.ErrHelp) {
			usage()
			return nil, exitOK, true
		}
		if err != nil {
			fmt.Fprintln(c.stderr, msgUsage(fs.Name(), longFlags(err)))
			return nil, exitUsage, true
		}
		rest := fs.Args()
		if len(rest) > 0 && rest[0] != "--" {
			positional = append(positional, rest[0])
			args = rest[1:]
			continue
		}
		if len(rest) > 0 {
			positional = append(positional, rest[1:]...)
		}
		for _, lookup := range c.lookups {
			if err := lookup(); err != nil {
				fmt.Fprintf(c.stderr, "%s: %v\n", fs.Name(), err)
				return nil, exitFailed, true
			}
		}
		return positional, exitOK, false
	}
}

// flagNamed is a flag's name in the flag package's errors ("for flag
// -owner", "not defined: -bogus", "needs an argument: -owner").
var flagNamed = regexp.MustCompile(`(flag|for|defined:|argument:) -([A-Za-z0-9][A-Za-z0-9_-]+)`)

// longFlags is err with its flags named as the README and people write
// them, --owner; a one-letter flag (-n) keeps its one dash.
func longFlags(err error) error {
	return errors.New(flagNamed.ReplaceAllString(err.Error(), "$1 --$2"))
}

// splitCount reads -n5 as -n 5, as head, tail and journalctl do, in args
// up to "--".
func splitCount(args []string) []string {
	out := make([]string, 0, len(args)+1)
	for i, a := range args {
		if a == "--" {
			return append(out, args[i:]...)
		}
		if n, ok := strings.CutPrefix(a, "-n"); ok && n != "" && strings.Trim(n, "0123456789") == "" {
			out = append(out, "-n", n)
			continue
		}
		out = append(out, a)
	}
	return out
}

// versionJSON is what berth version --json prints: the client's version,
// and the daemon's where one answers.
type versionJSON struct {
	Version string         `json:"version"`
	Daemon  *daemonVersion `json:"daemon,omitempty"`
}

type daemonVersion struct {
	Version string    `json:"version"`
	PID     int       `json:"pid"`
	Started time.Time `json:"started"`
	Socket  string    `json:"socket"`
	// Replaced: its binary was replaced since it started (an upgrade not
	// yet in force).
	Replaced bool `json:"binary_replaced"`
}

func runVersion(c *cli, args []string) int {
	fs := c.flags("version")
	f := c.clientFlags(fs, true)
	rest, code, done := c.parse(fs, args)
	if done {
		return code
	}
	if len(rest) > 0 {
		fmt.Fprintln(c.stderr, msgUnexpectedArgs("version", rest))
		return exitUsage
	}
	// The daemon's is a help, not the answer: none may run.
	out := versionJSON{Version: version}
	cl := c.client(f)
	var s supervisor.Status
	err := cl.get("/status", nil, &s)
	if err == nil {
		out.Daemon = &daemonVersion{Version: s.Daemon.Version, PID: s.Daemon.PID, Started: s.Daemon.Started,
			Socket: cl.socket, Replaced: s.Daemon.BinaryReplaced}
	}
	if f.json {
		return c.writeJSON(out)
	}
	fmt.Fprintln(c.stdout, "berth", version)
	if nd := (*noDaemonError)(nil); errors.As(err, &nd) {
		// Said, or the daemon's line is missed unremarked (trial AJ).
		fmt.Fprintln(c.stdout, msgVersionNoDaemon(nd.sockets...))
	}
	if d := out.Daemon; d != nil {
		fmt.Fprintf(c.stdout, "daemon %s (pid %d on %s, started %s)\n", d.Version, d.PID, d.Socket, d.Started.Local().Format(time.DateTime))
		if d.Replaced {
			fmt.Fprintln(c.stdout, msgBinaryReplaced(s.Daemon, s.Runner, version))
		}
	}
	return exitOK
}
