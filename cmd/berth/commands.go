package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/berthd/berth/supervisor"
	"github.com/berthd/berth/supervisor/store"
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
func (c *cli) client(f *clientFlags) *client {
	cl := newClient(c.sockets(f.socket)...)
	if c.timeout > 0 {
		cl.timeout, cl.reloadTimeout = c.timeout, c.timeout
	}
	return cl
}

// sockets are where a client looks for the daemon: --socket, else
// BERTH_SOCKET, else the person's own daemon then the system's.
func (c *cli) sockets(flagValue string) []string {
	if flagValue != "" {
		return []string{flagValue}
	}
	socks := clientSockets(c.env)
	if c.env.get("BERTH_SOCKET") == "" && c.env.get("XDG_RUNTIME_DIR") == "" && c.env.uid != 0 {
		// The person's own daemon's socket is then in /tmp, where anyone
		// may make the directory first and answer as their daemon (and
		// be sent their job files): tried only where the directory is
		// theirs alone.
		own := socks[0]
		if why, fix := socketDirUnsafe(filepath.Dir(own), false, c.env.uid); why != "" {
			if !c.warnedSocketDir {
				c.warnedSocketDir = true
				fmt.Fprintln(c.stderr, msgWarning(msgSocketDirNotYours(filepath.Dir(own), why, fix)))
			}
			socks = socks[1:]
		}
	}
	return socks
}

// socketDirUnsafe says why dir may not hold a berth socket: it is not
// owned by one of owners, or others may write in it (where sticky is
// enough, not without the sticky bit, as in /tmp, which keeps them from
// removing what is not theirs); "" where it may, or where it is not there.
// Whoever may write in it can put their own socket in the daemon's place.
// fix is what makes it safe: chmod go-w where only its mode is wrong.
func socketDirUnsafe(dir string, sticky bool, owners ...int) (why, fix string) {
	var st unix.Stat_t
	if err := unix.Stat(dir, &st); err != nil {
		return "", ""
	}
	switch {
	case !slices.Contains(owners, int(st.Uid)):
		return fmt.Sprintf("it is owned by uid %d", st.Uid), "remove it"
	case st.Mode&0o022 != 0 && !(sticky && st.Mode&unix.S_ISVTX != 0):
		return fmt.Sprintf("others may write in it (mode %04o)", st.Mode&0o7777), "chmod go-w " + dir
	}
	return "", ""
}

// render are the options for text output where stdout goes. On a
// terminal the picture fits its width (COLUMNS where the size cannot be
// read, else 80). Off a terminal (a pipe to less or grep, a file) lines are
// whole, so that nothing a reader searches for is cut away, unless COLUMNS
// is set in the environment: then it is the width asked for.
func (c *cli) render(now time.Time) renderOptions {
	o := renderOptions{width: wholeLines, now: now, viewer: &viewer{uid: c.env.uid, name: c.env.user}}
	if f, ok := c.stdout.(*os.File); ok && isTerminal(f) {
		o.width = 80
		if ws, err := unix.IoctlGetWinsize(int(f.Fd()), unix.TIOCGWINSZ); err == nil && ws.Col > 0 {
			o.width = int(ws.Col)
			o.color = c.colorWanted()
		}
	}
	if o.width == 80 || o.width == wholeLines {
		if n, err := strconv.Atoi(c.env.get("COLUMNS")); err == nil && n > 0 {
			o.width = n
		}
	}
	return o
}

// colorWanted says whether a terminal may be given colours: not with
// NO_COLOR, nor on a dumb terminal.
func (c *cli) colorWanted() bool {
	return c.env.get("NO_COLOR") == "" && c.env.get("TERM") != "dumb"
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
// with --json, else through its renderer. filter, when not nil, adds the
// command's own flags and returns what it keeps of the answer.
func listing[T any](name string, path func(args []string) string, render func(io.Writer, T, renderOptions), now func(T) time.Time, args int, what string, filter func(*cli, *flag.FlagSet) func(*client, T) T) func(*cli, []string) int {
	return func(c *cli, argv []string) int {
		fs := c.flags(name)
		f := c.clientFlags(fs, true)
		keep := func(_ *client, v T) T { return v }
		if filter != nil {
			keep = filter(c, fs)
		}
		var index *indexFlag
		if args == 1 { // JOB: an array's index may be named by --index
			index = c.indexFlag(fs)
		}
		rest, code, done := c.parse(fs, argv)
		if done {
			return code
		}
		if len(rest) != args {
			if args == 0 {
				fmt.Fprintln(c.stderr, msgUnexpectedArgs(name, rest))
			} else {
				fmt.Fprintln(c.stderr, msgWantArgs(name, what))
			}
			return exitUsage
		}
		named := rest
		if index != nil {
			job, ok := index.job(c, name, rest)
			if !ok {
				return exitUsage
			}
			named = []string{job}
		}
		var v T
		cl := c.client(f)
		head, err := cl.doHeader(context.Background(), http.MethodGet, path(named), nil, nil, &v)
		if err != nil {
			// JOB --index N is JOB[N]: the daemon's answer, whichever was
			// written (trial AT: --index had words, and a code, of its own).
			return c.fail(err)
		}
		v = keep(cl, v)
		if head.Get(supervisor.HeaderLoading) != "" {
			// The list is not all there is yet: said on stderr, which a
			// script reading the list (--json too) does not parse.
			fmt.Fprintln(c.stderr, msgListLoading(name))
		}
		if f.json {
			at := now(v)
			switch v := any(v).(type) {
			case []supervisor.JobStatus:
				withAfterWhy(v, at)
			case supervisor.JobDetail:
				one := []supervisor.JobStatus{v.Status}
				withAfterWhy(one, at)
				v.Status = one[0]
				return c.writeJSON(v)
			}
			return c.writeJSON(v)
		}
		render(c.stdout, v, c.render(now(v)))
		return exitOK
	}
}

// ownerFilter is --mine and --owner NAME: only the jobs of one person.
// A job without an owner (an administrators', or any job of a person's
// own daemon) is the job of the account the daemon runs as.
type ownerFilter struct {
	c     *cli
	mine  *bool
	owner *string
	total int // how many jobs there were before the last filtering
	// me is what the daemon says of the caller and itself, asked once.
	me *supervisor.Me
}

func newOwnerFilter(c *cli, fs *flag.FlagSet) *ownerFilter {
	f := &ownerFilter{c: c, mine: new(false), owner: new("")}
	fs.BoolFunc("mine", "only your own jobs", func(v string) error {
		on, err := strconv.ParseBool(v)
		if err != nil {
			return err
		}
		if on && *f.owner != "" {
			return errMineAndOwner
		}
		*f.mine = on
		return nil
	})
	fs.Func("owner", "only the jobs of this `person`", func(v string) error {
		if *f.mine {
			return errMineAndOwner
		}
		*f.owner = v
		return nil
	})
	c.lookups = append(c.lookups, func() error {
		if *f.owner == "" {
			return nil
		}
		if _, err := user.Lookup(*f.owner); err != nil {
			return fmt.Errorf("no account is named %q; berth status shows each job's owner", *f.owner)
		}
		return nil
	})
	return f
}

var (
	errMineAndOwner = errors.New("--mine and --owner each name whose jobs to show: give one of them")
	errJobAndOwner  = errors.New("a JOB names the job whose runs to show, and so do --mine and --owner: give one or the other")
)

// ownerFlags is the filter of berth jobs.
func ownerFlags(c *cli, fs *flag.FlagSet) func(*client, []supervisor.JobStatus) []supervisor.JobStatus {
	return newOwnerFilter(c, fs).jobs
}

// on reports whether --mine or --owner was given.
func (f *ownerFilter) on() bool { return *f.mine || *f.owner != "" }

// args is the flag given, as a command line has it: "--mine", "--owner
// NAME", or "".
func (f *ownerFilter) args() string {
	switch {
	case *f.mine:
		return "--mine"
	case *f.owner != "":
		return "--owner " + quoteArg(*f.owner)
	}
	return ""
}

// owners are the owners of the jobs the filter keeps ("" for the
// administrators'), as cl's daemon tells who the caller is and whose the
// jobs without an owner are.
func (f *ownerFilter) owners(cl *client) []string {
	if f.me == nil {
		f.me = &supervisor.Me{}
		if err := cl.get("/me", nil, f.me); err != nil {
			// A daemon that cannot say: each job's owner as written.
			*f.me = supervisor.Me{User: f.c.env.user, Owner: f.c.env.user, JobsDir: "unknown"}
		}
	}
	switch {
	case *f.mine && f.me.JobsDir == "":
		return nil // the caller declares none
	case *f.mine:
		return []string{f.me.Owner}
	case *f.owner == f.me.DaemonUser:
		return []string{*f.owner, ""}
	default:
		return []string{*f.owner}
	}
}

// jobs keeps those of jobs that are the person's; with neither flag, all.
func (f *ownerFilter) jobs(cl *client, jobs []supervisor.JobStatus) []supervisor.JobStatus {
	if !f.on() {
		return jobs
	}
	f.total = len(jobs)
	owners := f.owners(cl)
	kept := []supervisor.JobStatus{}
	for _, j := range jobs {
		if slices.Contains(owners, j.Owner) {
			kept = append(kept, j)
		}
	}
	return kept
}

// status keeps the jobs of s as jobs does; the counts follow the jobs
// kept, and the machine stays whole.
func (f *ownerFilter) status(cl *client, s supervisor.Status) supervisor.Status {
	if !f.on() {
		return s
	}
	kept := f.jobs(cl, s.Jobs)
	if len(kept) != len(s.Jobs) {
		s.Jobs, s.Counts = kept, countStates(kept)
	}
	// The problems of the person's files and jobs, and the machine's:
	// not another person's thousand broken files.
	owners := f.owners(cl)
	dirOf := func(owner string) string {
		switch {
		case owner == "":
			return s.Daemon.JobsDir
		case s.Daemon.UserJobs != "":
			return filepath.Join(s.Daemon.UserJobs, owner)
		}
		return ""
	}
	s.Problems = slices.DeleteFunc(slices.Clone(s.Problems), func(p supervisor.Problem) bool {
		if !p.InAJobFile() {
			return false
		}
		for _, o := range owners {
			if owner, _, person := strings.Cut(p.Job, "/"); p.Job != "" && (person && owner == o || !person && o == "") {
				return false
			}
			if d := dirOf(o); d != "" && filepath.Dir(p.File) == d {
				return false
			}
		}
		return true
	})
	return s
}

// none is what berth status says where the filter kept no job.
func (f *ownerFilter) none() string {
	switch {
	case f.total == 0:
		return ""
	case *f.mine:
		return msgNoneKept(f.total, "yours")
	default:
		return msgNoneKept(f.total, *f.owner+"'s")
	}
}

func fixed(path string) func([]string) string { return func([]string) string { return path } }

func wallClock[T any](T) time.Time { return time.Now() }

var (
	runJobs    = listing("jobs", fixed("/jobs"), renderJobs, wallClock[[]supervisor.JobStatus], 0, "", ownerFlags)
	runFlavors = listing("flavors", fixed("/flavors"), renderFlavors, wallClock[[]supervisor.FlavorView], 0, "", nil)
	runShow    = listing("show", func(args []string) string { return "/jobs/" + url.PathEscape(args[0]) },
		renderShow, wallClock[supervisor.JobDetail], 1, "JOB", nil)
)

// indexFlag is --index N: one index of an array, for the commands that
// read one job's runs. berth asks the daemon for the job NAME[N], which is
// what an index is.
type indexFlag struct {
	n   int
	set bool
}

func (f *indexFlag) String() string {
	if f == nil || !f.set {
		return ""
	}
	return strconv.Itoa(f.n)
}

func (f *indexFlag) Set(s string) error {
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		return errors.New("an index is a whole number, 0 or more")
	}
	f.n, f.set = n, true
	return nil
}

func (c *cli) indexFlag(fs *flag.FlagSet) *indexFlag {
	f := &indexFlag{}
	fs.Var(f, "index", "only index `N` of the array JOB (the same as naming the job JOB[N])")
	return f
}

// job is the job that rest names, with the index, if any, given: NAME[N].
// ok is false, the usage error printed, where an index is given without
// a job or to a name that already has one.
func (f *indexFlag) job(c *cli, command string, rest []string) (name string, ok bool) {
	if len(rest) == 0 {
		if f.set {
			fmt.Fprintln(c.stderr, msgIndexWithoutJob(command, f.n))
			return "", false
		}
		return "", true
	}
	if !f.set {
		return rest[0], true
	}
	if strings.HasSuffix(rest[0], "]") {
		fmt.Fprintln(c.stderr, escapeText(msgIndexTwice(command, rest[0], f.n)))
		return "", false
	}
	return memberName(rest[0], f.n), true
}

func runHistory(c *cli, args []string) int {
	fs := c.flags("history")
	f := c.clientFlags(fs, true)
	n := 20
	fs.Func("n", "the newest `N` runs (default 20)", func(v string) error {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 1 {
			return errors.New("not a number of runs, 1 or more")
		}
		return nil
	})
	index := c.indexFlag(fs)
	whose := newOwnerFilter(c, fs)
	rest, code, done := c.parse(fs, args)
	if done {
		return code
	}
	if len(rest) > 1 {
		fmt.Fprintln(c.stderr, msgWantArgs("history", "at most one JOB"))
		return exitUsage
	}
	if len(rest) == 1 && whose.on() {
		fmt.Fprintln(c.stderr, msgUsage("berth history", errJobAndOwner))
		return exitUsage
	}
	job, ok := index.job(c, "history", rest)
	if !ok {
		return exitUsage
	}
	// One more than shown: whether there are more is said.
	q := url.Values{"n": {strconv.Itoa(n + 1)}}
	if job != "" {
		q.Set("job", job)
	}
	cl := c.client(f)
	runs := []supervisor.RunView{}
	if whose.on() {
		q["owner"] = whose.owners(cl) // none: the caller declares no job
	}
	if !whose.on() || len(q["owner"]) > 0 {
		if err := cl.get("/history", q, &runs); err != nil {
			return c.fail(err)
		}
	}
	more := len(runs) > n
	runs = runs[:min(n, len(runs))]
	code = exitOK
	if f.json {
		code = c.writeJSON(runs)
	} else {
		renderHistory(c.stdout, runs, c.render(time.Now()))
	}
	if more {
		// On stderr with --json too: the list is the runs, and a script
		// that asked for N may not know there were more.
		which := whose.args()
		if job != "" {
			which = quoteArg(job)
		}
		fmt.Fprintln(c.stderr, escapeText(msgMoreRuns(which, n)))
	}
	return code
}

// control makes start, stop and restart.
func control(verb string) func(c *cli, args []string) int {
	return func(c *cli, args []string) int {
		fs := c.flags(verb)
		f := c.clientFlags(fs, false)
		asJSON := fs.Bool("json", false, "print the daemon's answer as JSON; a failure as {code, error}")
		var ignoreDeps, failed, all, stopped *bool
		switch verb {
		case "stop":
			all = fs.Bool("all", false, "stop every job you may stop")
		case "start":
			all = fs.Bool("all", false, "start every job you may start that berth stop --all stopped, and the indices of arrays it stopped; a job stopped on its own stays so")
			stopped = fs.Bool("stopped", false, "for an array: start only its stopped indices, not the done ones again")
			ignoreDeps = fs.Bool("ignore-deps", false, "run it once now, without waiting for the jobs it runs after (after, after_any)")
		case "restart":
			failed = fs.Bool("failed", false, "for an array: restart only its failed indices (refused for a job that is not an array)")
		}
		index := c.indexFlag(fs)
		rest, code, done := c.parse(fs, args)
		if done {
			return code
		}
		if all != nil && *all {
			// What applies to one job does not to every one (trial AQ:
			// --all took it for a flag it did not know).
			var alone string
			fs.Visit(func(fl *flag.Flag) {
				if fl.Name != "all" && fl.Name != "json" && fl.Name != "socket" && alone == "" {
					alone = fl.Name
				}
			})
			if alone != "" {
				fmt.Fprintln(c.stderr, msgUsage("berth "+verb, fmt.Errorf("--%s applies to one JOB, not to --all", alone)))
				return exitUsage
			}
			return controlAll(c, verb, args)
		}
		if len(rest) != 1 {
			what := "one JOB"
			switch verb {
			case "stop":
				what = "one JOB, or --all for every job you may stop"
			case "start":
				what = "one JOB, or --all for every job stopped that you may start"
			}
			fmt.Fprintln(c.stderr, msgWantArgs(verb, what))
			return exitUsage
		}
		job, ok := index.job(c, verb, rest)
		if !ok {
			return exitUsage
		}
		cl := c.client(f)
		var q url.Values
		if ignoreDeps != nil && *ignoreDeps {
			q = url.Values{"ignore_deps": {"1"}}
		}
		if failed != nil && *failed {
			// The daemon refuses it for a job that is not an array
			// (not_array), and restarts nothing.
			q = url.Values{"failed": {"1"}}
		}
		if stopped != nil && *stopped {
			// Of a job that is not an array, a start: it is one index.
			q = url.Values{"stopped": {"1"}}
		}
		var ans supervisor.ControlAnswer
		if err := cl.call(http.MethodPost, "/jobs/"+url.PathEscape(job)+"/"+verb, q, &ans); err != nil {
			return c.fail(err)
		}
		if *asJSON {
			return c.writeJSON(ans)
		}
		// The job as the daemon names it: a bare name is the caller's own
		// job where they have one, else the administrators', and the
		// answer says which it was.
		job = cmp.Or(ans.Job, job)
		switch {
		case len(ans.HeldBy) > 0 && ans.Gated:
			fmt.Fprintln(c.stdout, escapeText(msgGated(verb, job, ans.File, ans.HeldBy, time.Now())))
		case len(ans.HeldBy) > 0 && ans.Array && ans.Indices > 0:
			// Some indices taken, others held by the array's parents.
			fmt.Fprintln(c.stdout, escapeText(msgControlled(job, verb, ans.Array, ans.Indices)))
			fmt.Fprintln(c.stdout, escapeText(msgHeld(verb, job, ans.File, ans.HeldBy, time.Now())))
		case len(ans.HeldBy) > 0:
			fmt.Fprintln(c.stdout, escapeText(msgHeld(verb, job, ans.File, ans.HeldBy, time.Now())))
		case ans.Already != "" && ans.Requested != "start stopped":
			fmt.Fprintln(c.stdout, escapeText(msgAlready(ans.Job, ans.Already)))
		case ans.HeldFromRerun:
			fmt.Fprintln(c.stdout, escapeText(msgHeldFromRerun(job)))
		case ans.RestsStoppedOnce != "":
			fmt.Fprintln(c.stdout, escapeText(msgStopKept(job, ans.RestsStoppedOnce)))
		case ans.Requested == "restart failed":
			// None failed is nothing to do, which is no failure.
			fmt.Fprintln(c.stdout, escapeText(msgRestartFailed(job, ans.Indices)))
		case ans.Requested == "start stopped" && ans.Already != "":
			fmt.Fprintln(c.stdout, escapeText(msgNotStopped(job, ans.Already)))
		case ans.Requested == "start stopped":
			fmt.Fprintln(c.stdout, escapeText(msgStartStopped(job, ans.Indices)))
		default:
			fmt.Fprintln(c.stdout, escapeText(msgControlled(job, verb, ans.Array, ans.Indices)))
		}
		return exitOK
	}
}

// holds is 1 for the states in which a job may hold a grant (an array's:
// while an index runs), 0 for the others.
func holds(state string) int {
	switch state {
	case "starting", "running", "stopping":
		return 1
	}
	return 0
}

// controlAll is `berth stop --all` and `berth start --all`. stop: every
// job that holds or waits for the machine is stopped, each with its own
// stop_signal and stop_timeout, and stays stopped; under systemd the jobs
// outlive the daemon, so this (or `systemctl stop berth.slice`) is how
// every job is stopped at once. start: every job that rests stopped (a
// person's stop, stop --all's) is started, and each array's stopped
// indices, not its done ones again: the way back from stop --all, as
// scontrol release is from hold. A person acts on the jobs they may, their
// own, as scancel -u does, and is told how many others' were left.
func controlAll(c *cli, verb string, args []string) int {
	fs := c.flags(verb)
	f := c.clientFlags(fs, false)
	fs.Bool("all", false, verb+" every job")
	asJSON := fs.Bool("json", false, "print how many were asked to "+verb+" as JSON")
	rest, code, done := c.parse(fs, args)
	if done {
		return code
	}
	if len(rest) > 0 {
		fmt.Fprintln(c.stderr, msgUnexpectedArgs(verb+" --all", rest))
		return exitUsage
	}
	cl := c.client(f)
	var jobs []supervisor.JobStatus
	if err := cl.get("/jobs", nil, &jobs); err != nil {
		return c.fail(err)
	}
	// pick says whether verb acts on j, and with what query: all=1 marks
	// what the stop stops, and the start starts only what a stop of every
	// job stopped, not a job someone stopped on its own (trial AG).
	pick := func(j supervisor.JobStatus) (url.Values, bool) {
		switch {
		case verb == "stop":
			return url.Values{"all": {"1"}}, stoppable(j.State) || j.State == keptRun
		case j.Array != nil:
			return url.Values{"stopped": {"1"}, "all": {"1"}}, j.Array.Counts["stopped"]+j.Array.Counts["stopping"] > 0
		}
		// One still stopping runs again once its run has ended (trial AJ:
		// left stopped, and not said).
		return url.Values{"all": {"1"}}, j.State == "stopped" || j.State == "stopping"
	}
	if verb == "stop" {
		// What waits first, then what runs: a run stopped first gives
		// back what it held, and a job still waiting would start on it
		// before its own stop came.
		slices.SortStableFunc(jobs, func(a, b supervisor.JobStatus) int {
			return cmp.Compare(holds(a.State), holds(b.State))
		})
		// And the runs taken back at the daemon's start that no file in
		// force declares, kept while a file that may declare them has
		// errors: they run, and are no job's (trial AW).
		var s supervisor.Status
		if err := cl.get("/status", nil, &s); err != nil {
			return c.fail(err)
		}
		for _, p := range s.Problems {
			if p.Code == supervisor.ProblemOrphanKept {
				jobs = append(jobs, supervisor.JobStatus{Name: p.Job, State: keptRun})
			}
		}
	}
	// indices counts each index of an array acted on, acted each job and
	// arrays each array once, as berth status lists them.
	indices, acted, arrays, others, stopping, kept, firstRefusal := 0, 0, 0, 0, 0, 0, ""
	for _, j := range jobs {
		q, ok := pick(j)
		if !ok {
			continue
		}
		var ans supervisor.ControlAnswer
		if err := cl.call(http.MethodPost, "/jobs/"+url.PathEscape(j.Name)+"/"+verb, q, &ans); err != nil {
			var ae *apiError
			switch {
			case errors.As(err, &ae) && ae.code == supervisor.CodeNotPermitted:
				others++
				firstRefusal = cmp.Or(firstRefusal, ae.msg)
				continue
			case errors.As(err, &ae) && ae.code == supervisor.CodeNoSuchJob && j.State == keptRun:
				continue // ended, stopped or declared again since the status was read (the review)
			case errors.As(err, &ae) && ae.code == supervisor.CodeStopping:
				// Said of what was asked: the daemon's sentence names the
				// one job it was asked of.
				ae.msg = supervisor.MsgStopping("berth " + verb + " --all")
			}
			return c.fail(err)
		}
		if j.Array == nil && ans.Already != "" || j.Array != nil && ans.Indices == 0 {
			// Started: stopped otherwise than by a stop of every job,
			// and left so. Stopped: on its way to rest stopped already.
			if verb == "stop" && j.State == "stopping" {
				stopping++
			}
			continue
		}
		if j.State == keptRun {
			kept++
			continue
		}
		acted++
		if j.Array == nil {
			continue
		}
		arrays++
		indices += ans.Indices
	}
	if *asJSON {
		key := map[string]string{"stop": "stopped", "start": "started"}[verb]
		// An array's indices, each job else (the key's count, as it was).
		return c.writeJSON(map[string]int{key: acted - arrays + indices + kept, "jobs": acted + kept, "others_left": others})
	}
	switch {
	case verb == "stop" && acted == 0 && kept > 0:
	case verb == "stop" && acted == 0 && stopping > 0:
		fmt.Fprintln(c.stdout, msgAlreadyStoppingAll(stopping))
	case verb == "stop":
		fmt.Fprintln(c.stdout, msgStoppedAll(acted, arrays, indices))
	default:
		fmt.Fprintln(c.stdout, msgStartedAll(acted, arrays, indices))
	}
	if kept > 0 {
		fmt.Fprintln(c.stdout, msgStoppedKept(kept))
	}
	if others > 0 {
		fmt.Fprintln(c.stdout, escapeText(msgOthersLeft(verb, others, firstRefusal)))
	}
	return exitOK
}

// keptRun stands, in berth stop --all's list, for a run taken back at the
// daemon's start that no file in force declares (orphan_kept): no job's,
// it does not run again once stopped.
const keptRun = "kept"

// stoppable says whether berth stop --all stops a job in state: one that
// holds or waits for the machine. One already stopping is asked too: an
// edit's restart, a timeout's policy or the daemon's shutdown would
// otherwise run it again, and a person's stop is where it rests.
func stoppable(state string) bool {
	switch state {
	// "new": declared a moment ago, its wait not yet begun (trial AV: stop
	// --all right after the daemon's start stopped nothing, and the jobs
	// started a moment later).
	case "new", "waiting", "starting", "running", "stopping", "backoff":
		return true
	}
	return false
}

func runReload(c *cli, args []string) int {
	f, _, code, done := c.simple("reload", args, true, 0, "")
	if done {
		return code
	}
	var res supervisor.ReloadResult
	cl := c.client(f)
	if err := cl.post("/reload", &res); err != nil {
		return c.fail(err)
	}
	if f.json {
		c.writeJSON(res)
	} else {
		fmt.Fprintln(c.stdout, msgReloaded(res, time.Now()))
		for _, e := range res.Errors {
			fmt.Fprintln(c.stdout, "  "+escapeText(e)) // errors in job files, which name and quote them
		}
	}
	if len(res.Errors) == 0 {
		return exitOK
	}
	// A reload fails for the errors of the caller's own files: a person's
	// in their directory, root's in the administrators' (systemctl reload
	// berth, run by config management, is not failed by a person's draft:
	// the review). Those of files they need not fix are said all the same.
	// A directory of theirs that could not be read fails it too: none of
	// its files was (trial AQ).
	var me supervisor.Me
	if cl.get("/me", nil, &me) == nil && me.JobsDir != "" &&
		!slices.ContainsFunc(res.Problems, func(p supervisor.Problem) bool {
			// A run kept for a file's errors is none of its own (the
			// review: it failed every reload while shown).
			return p.Code != supervisor.ProblemOrphanKept && (p.File == "" || p.File == me.JobsDir || strings.HasPrefix(p.File, me.JobsDir+"/"))
		}) {
		return exitOK
	}
	return exitFailed
}

func runLogs(c *cli, args []string) int {
	fs := c.flags("logs")
	f := c.clientFlags(fs, false)
	follow := fs.Bool("f", false, "keep printing what the job writes")
	var run uint64
	fs.Func("run", "only run `N`'s output (berth history lists the runs)", func(v string) error {
		var err error
		if run, err = strconv.ParseUint(v, 10, 64); err != nil || run == 0 {
			return errors.New("not a run id: berth history lists them")
		}
		return nil
	})
	raw := fs.Bool("raw", false, "write the output as the job wrote it; on a terminal, control sequences are otherwise shown escaped (\\x1b)")
	lines := ""
	fs.Func("n", "only the last `N` lines (with -f, then what comes; -n 0: only what comes)", func(v string) error {
		if n, err := strconv.Atoi(v); err != nil || n < 0 {
			return errors.New("not a number of lines, 0 or more")
		}
		lines = v
		return nil
	})
	index := c.indexFlag(fs)
	rest, code, done := c.parse(fs, args)
	if done {
		return code
	}
	if len(rest) > 1 || len(rest) == 0 && !index.set {
		fmt.Fprintln(c.stderr, msgWantArgs("logs", "JOB"))
		return exitUsage
	}
	job, ok := index.job(c, "logs", rest)
	if !ok {
		return exitUsage
	}
	// A job's output is the job's: on a terminal it may not drive it.
	out := c.stdout
	if !*raw && isTerminal(c.stdout) {
		e := &escapeWriter{w: c.stdout}
		defer e.Close()
		out = e
	}
	// The daemon reads the journal or the log file for the caller, if the
	// job is theirs: no journal group, no right on its state directory.
	q := url.Values{}
	if *follow {
		q.Set("follow", "1")
	}
	if run != 0 {
		q.Set("run", strconv.FormatUint(run, 10))
	}
	if lines != "" {
		q.Set("lines", lines)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	cl := c.client(f)
	needs := ""
	if lines != "" {
		needs = supervisor.HeaderLines
	}
	gone, cut, journal := false, "", false
	n, err := cl.stream(ctx, "/jobs/"+url.PathEscape(job)+"/logs", q, out, needs, func(h http.Header) {
		gone = h.Get(supervisor.HeaderOutputGone) != ""
		journal = h.Get(supervisor.HeaderOutputFrom) == "journal"
		cut = h.Get(supervisor.HeaderOutputCut)
		// Said first: the lines shown then begin later than asked.
		if h.Get(supervisor.HeaderOutputStartGone) != "" {
			fmt.Fprintln(c.stderr, msgRunOutputStartGone(job, run))
		}
		if h.Get(supervisor.HeaderNotDeclared) != "" {
			fmt.Fprintln(c.stderr, escapeText(msgFollowNotDeclared(job)))
		}
		if state := h.Get(supervisor.HeaderAtRest); state != "" {
			fmt.Fprintln(c.stderr, escapeText(msgFollowAtRest(job, state)))
		}
		lines, _ := strconv.Atoi(h.Get(supervisor.HeaderLinesLeftOut))
		bytes, _ := strconv.Atoi(h.Get(supervisor.HeaderBytesLeftOut))
		if lines > 0 || bytes > 0 {
			fmt.Fprintln(c.stderr, msgTailLeftOut(job, lines, bytes))
		}
	})
	if err != nil && ctx.Err() == nil {
		return c.fail(err)
	}
	if cut != "" {
		// Said last, after what was kept: the output ends short of what
		// the run wrote (the last line may be cut too).
		fmt.Fprintln(c.stderr, msgOutputCutShort(job, cut))
	}
	switch {
	case n == 0 && gone:
		fmt.Fprintln(c.stderr, msgRunOutputGone(job, run))
	case n == 0 && !*follow && lines != "0" && run == 0 && neverRan(cl, job):
		fmt.Fprintln(c.stderr, msgNeverRan(job))
	case n == 0 && !*follow && lines != "0":
		// Silence would leave the person guessing whether it worked.
		fmt.Fprintln(c.stderr, msgNoOutput(job, run, journal))
	}
	return exitOK
}

// neverRan reports whether job has not run: the daemon has no run of it
// on record, and it is in none of the states a run leads to (a run of a
// daemon whose state cannot be written is not on record; trial AG: a job
// that had not run was said to have no output kept, as if some had been
// lost).
func neverRan(cl *client, job string) bool {
	var runs []supervisor.RunView
	if err := cl.get("/history", url.Values{"job": {job}, "n": {"1"}}, &runs); err != nil || len(runs) > 0 {
		return false
	}
	var d supervisor.JobDetail
	if err := cl.get("/jobs/"+url.PathEscape(job), nil, &d); err != nil {
		return false
	}
	st := d.Status
	if st.Unrecorded {
		return false // its runs may have been had and not recorded
	}
	switch stateOf(st.State) {
	case 0, store.StateWaiting, store.StateStopped, store.StateDisabled, store.StateInvalid, store.StateUnplaceable:
		// (0: just declared, its first step not taken yet.)
		return st.Run == 0 && st.Restarts == 0 && st.Array == nil
	}
	return false
}
