package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"os/user"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/coreos/go-systemd/v22/daemon"
	"github.com/coreos/go-systemd/v22/journal"
	"github.com/hashicorp/go-hclog"
	"golang.org/x/sys/unix"

	"github.com/berthd/berth/accounting"
	"github.com/berthd/berth/supervisor"
	"github.com/berthd/berth/supervisor/units"
	"github.com/berthd/berth/supervisor/watch"
)

// journalStdout is where journald takes stream connections.
const journalStdout = "/run/systemd/journal/stdout"

func runDaemon(c *cli, args []string) int {
	fs := c.flags("daemon")
	var m machineFlags
	m.register(fs)
	var budget budgetFlag
	budget.register(fs)
	jobs := fs.String("jobs", defaultJobsDir(c.env), "the jobs directory (env BERTH_JOBS)")
	state := fs.String("state", defaultStateDir(c.env), "the state directory (env BERTH_STATE)")
	socket := fs.String("socket", defaultSocket(c.env), "the control socket (env BERTH_SOCKET)")
	level := fs.String("log-level", "info", "trace, debug, info, warn or error")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile for go tool pprof to this file until the daemon stops")
	userJobs := fs.String("user-jobs", defaultUserJobs(c.env), "the directory of the people's own job directories, DIR/USER, one for each member of --group; \"\" for none (env BERTH_USER_JOBS)")
	group := fs.String("group", supervisor.DefaultGroup, "the group whose members may use the daemon and declare jobs of their own")
	adminGroup := fs.String("admin-group", supervisor.DefaultAdminGroup, "the group whose members may start, stop and read every job, as root may")
	metrics := fs.String("metrics", c.env.get("BERTH_METRICS"), "also serve GET /metrics, and nothing else, on this TCP address, e.g. 127.0.0.1:9465; \"\" for none (env BERTH_METRICS)")
	foreign := fs.String("foreign-limit", "1G", "a card on which a process berth did not start holds more than this is given to no job whole (shares get what is left of it)")
	personJobs := fs.Int("person-jobs", supervisor.DefaultPersonJobs, "how many jobs one person's files may declare in all, an array's indices counted; a file past it is not loaded")
	runMode := fs.String("runner", "auto", "how runs are started: units (each a systemd unit, its grant enforced, outliving the daemon), direct (the daemon's own children) or auto (units when systemd started the daemon)")
	rest, code, done := c.parse(fs, args)
	if done {
		return code
	}
	if len(rest) > 0 {
		fmt.Fprintln(c.stderr, msgUnexpectedArgs("daemon", rest))
		return exitUsage
	}
	// An empty path is a variable that was not set (--state "$STATE"):
	// taken as it is, the state would go to wherever the daemon was
	// started, and a start from elsewhere would begin a new one (trial AQ).
	for _, p := range []struct{ flag, value, what string }{
		{"--jobs", *jobs, "the jobs directory"}, {"--state", *state, "the state directory"}, {"--socket", *socket, "the control socket's path"},
	} {
		if p.value == "" {
			fmt.Fprintln(c.stderr, msgUsage("berth daemon", fmt.Errorf("%s is empty: give %s, or leave the flag out for the default", p.flag, p.what)))
			return exitUsage
		}
	}
	if *personJobs < 1 {
		fmt.Fprintln(c.stderr, msgUsage("berth daemon", fmt.Errorf("--person-jobs %d: a person may declare at least 1 job", *personJobs)))
		return exitUsage
	}
	lvl := hclog.LevelFromString(*level)
	if lvl == hclog.NoLevel {
		fmt.Fprintln(c.stderr, msgUsage("berth daemon", fmt.Errorf("--log-level %q is not one of trace, debug, info, warn, error", *level)))
		return exitUsage
	}
	log := c.logger(lvl)
	if *cpuProfile != "" {
		stop, err := startCPUProfile(*cpuProfile)
		if err != nil {
			fmt.Fprintln(c.stderr, msgUsage("berth daemon", err))
			return exitUsage
		}
		defer stop()
	}
	// Where there are job files, the child that evaluates the first of
	// them starts now: its start overlaps the probes and the state's.
	evaluator := newEvaluator(log.Named("lua"), budget.d)
	if hasJobFiles(*jobs) {
		evaluator.Prestart()
		defer evaluator.Discard()
	}

	foreignLimit, err := parseFlagSize(*foreign)
	if err == nil && foreignLimit <= 0 {
		err = errors.New("it must be above 0")
	}
	if err != nil {
		fmt.Fprintln(c.stderr, msgUsage("berth daemon", flagError{flag: "--foreign-limit", err: err}))
		return exitUsage
	}
	if *runMode != "auto" && *runMode != "units" && *runMode != "direct" {
		fmt.Fprintln(c.stderr, msgUsage("berth daemon", fmt.Errorf("--runner %q is not one of auto, units, direct", *runMode)))
		return exitUsage
	}

	// Said in the daemon's log, where the operator looks when a card or
	// a core is not where it was meant to be.
	inv, err := c.inventory(&m, func(kind, text string) {
		log.Warn("the machine as told is probably not as meant", "kind", kind, "detail", text)
	})
	if err != nil {
		fmt.Fprintln(c.stderr, msgInventory(err))
		return inventoryExit(err)
	}
	l, err := listen(*socket, *group)
	if err != nil {
		fmt.Fprintln(c.stderr, msgSocket(*socket, err))
		return exitFailed
	}
	defer l.Close()
	if err := openToGroup(*socket, *adminGroup); err != nil {
		log.Warn("the admin group may not open the control socket, for want of an ACL: its members must be in the socket's group too", "socket", *socket, "group", *adminGroup, "error", err)
	}
	var metricsL net.Listener
	if *metrics != "" {
		if metricsL, err = listenMetrics(*metrics, log); err != nil {
			fmt.Fprintln(c.stderr, msgMetricsListen(*metrics, err))
			return exitFailed
		}
		defer metricsL.Close()
	}

	cfg := supervisor.Config{
		JobsDir:   *jobs,
		StateDir:  *state,
		Listener:  l,
		Machine:   inv,
		Logger:    log,
		Environ:   jobsEnviron(os.Environ()),
		Evaluator: evaluator,
		UserJobs:  *userJobs, Group: *group, AdminGroup: *adminGroup,
		SocketAccess: func() error {
			if err := giveSocket(*socket, *group); err != nil {
				return err
			}
			return openToGroup(*socket, *adminGroup)
		},
		Relisten:        func() (net.Listener, error) { return listen(*socket, *group) },
		Version:         version,
		MetricsListener: metricsL,
		ForeignLimit:    foreignLimit,
		PersonJobs:      *personJobs,
	}
	if len(inv.GPUs) > 0 && c.cards != nil {
		// What the cards hold now, through NVML where it is there.
		cfg.Cards = c.cards
	}
	if cfg.UserJobs != "" && os.Geteuid() != 0 {
		// Only root can give each person a directory of their own and run
		// their jobs as them.
		log.Warn("not root: the people's job directories are not read", "user_jobs", cfg.UserJobs)
		cfg.UserJobs = ""
	}
	if ok, _ := journal.StderrIsJournalStream(); ok {
		cfg.JournalSocket = journalStdout
	}
	if os.Getenv("NOTIFY_SOCKET") != "" {
		cfg.Notify = func(state string) error {
			_, err := daemon.SdNotify(false, state)
			return err
		}
		if interval, err := daemon.SdWatchdogEnabled(false); err == nil && interval > 0 {
			cfg.Watchdog = interval / 2
		}
	}
	if *runMode == "units" || *runMode == "auto" && os.Getenv("INVOCATION_ID") != "" {
		// Started by systemd (INVOCATION_ID is set for every unit's
		// processes): the manager that started it starts its runs, the
		// system's for root, the person's own otherwise.
		conn, events, err := units.Connect(context.Background(), os.Getuid() != 0)
		switch {
		case err == nil:
			defer conn.Close()
			runs := units.New(conn, events)
			defer runs.Close()
			cfg.Units = runs
		case *runMode == "units":
			fmt.Fprintln(c.stderr, msgNoSystemd(err))
			return exitFailed
		default:
			log.Warn("cannot reach systemd: runs are the daemon's own children, their grants not enforced", "error", err)
		}
	}
	d, err := supervisor.Open(cfg)
	if err != nil {
		fmt.Fprintln(c.stderr, msgOpenState(*state, err))
		return exitFailed
	}
	fs.Visit(func(f *flag.Flag) {
		// Said once the daemon will run: a typo in --group would leave
		// everyone but root out, silently. (The default group's absence
		// is a machine where no one shares berth yet.)
		switch _, err := user.LookupGroup(f.Value.String()); {
		case err == nil:
		case f.Name == "group":
			log.Warn("the daemon's group does not exist: only root and the daemon's user may use berth until it is made (it is taken at the next reload)",
				"group", *group, "socket", *socket, "hint", "groupadd "+*group+"; berth reload")
		case f.Name == "admin-group":
			// Its refusals name it (trial AQ: they sent people to a
			// group that was not there).
			log.Warn("the admin group does not exist: only root and the daemon's user have every right until it is made",
				"group", *adminGroup, "hint", "groupadd "+*adminGroup+"; berth reload")
		}
	})

	// systemd's watchdog aborts a daemon that stopped pinging with SIGABRT.
	// The Go runtime's answer, every goroutine's stack on stderr, would
	// put hundreds of lines into the journal at err; one line saying where
	// the loop was stuck serves the operator better (the stacks go to a
	// file it names). The line goes to stderr, which under journald is a
	// stream journald tied to berth.service when it opened: a native entry
	// sent just before the exit could lose its unit, and with it its place
	// in journalctl -u berth.
	abortLog := log
	if cfg.JournalSocket != "" {
		abortLog = hclog.New(&hclog.LoggerOptions{Name: "berth", Output: syslogPrefixed{w: c.stderr, prefix: "<3>"},
			DisableTime: true, Color: hclog.ColorOff})
	}
	aborts := make(chan os.Signal, 1)
	signal.Notify(aborts, syscall.SIGABRT)
	defer signal.Stop(aborts)
	running := make(chan struct{})
	var aborter sync.WaitGroup
	defer aborter.Wait()
	defer close(running)
	aborter.Go(func() {
		select {
		case <-aborts:
			d.ReportAbort(abortLog, "SIGABRT")
			os.Exit(exitAborted)
		case <-running:
		}
	})

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	signals := make(chan os.Signal, 4)
	signal.Notify(signals, syscall.SIGHUP, syscall.SIGTERM, syscall.SIGINT)
	defer signal.Stop(signals)
	go func() {
		for sig := range signals {
			if sig == syscall.SIGHUP {
				log.Info("reloading", "signal", sig.String())
				go func() {
					if _, err := d.Reload(ctx); err != nil {
						log.Warn("reload on SIGHUP failed", "error", err)
					}
				}()
				continue
			}
			if ctx.Err() != nil {
				// Asked again: what it still waits for.
				left := d.StillStopping()
				if len(left) == 0 {
					log.Info("already shutting down", "signal", sig.String())
					continue
				}
				log.Info("already shutting down: waiting for its jobs to stop, each killed once its stop_timeout has passed",
					"signal", sig.String(), "stopping", len(left), "jobs", strings.Join(left[:min(len(left), 10)], " "))
				continue
			}
			log.Info("shutting down", "signal", sig.String())
			cancel()
		}
	}()
	if err := d.Run(ctx); err != nil {
		log.Error("daemon failed", "error", err)
		return exitFailed
	}
	return exitOK
}

// hasJobFiles says whether dir holds a job file. A daemon without one
// would only pay for a child started for it.
func hasJobFiles(dir string) bool {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return false
	}
	return slices.ContainsFunc(entries, func(e os.DirEntry) bool { return watch.IsJobFile(e.Name()) })
}

// startCPUProfile profiles the daemon into path; stop ends the profile and
// closes the file.
func startCPUProfile(path string) (stop func(), err error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("--cpuprofile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("--cpuprofile: %w", err)
	}
	return func() { pprof.StopCPUProfile(); f.Close() }, nil
}

// logger builds the one root logger. Under journald each entry becomes a
// native journal entry with its priority and fields; elsewhere it is text on
// stderr, coloured only on a terminal and never with NO_COLOR. Uncoloured,
// the lines are written by lineLogger, hclog's format without hclog's cost.
func (c *cli) logger(level hclog.Level) hclog.Logger {
	if ok, _ := journal.StderrIsJournalStream(); ok {
		return journalLogger(level, &journalSink{level: level, fallback: c.stderr, send: journal.Send})
	}
	if c.env.get("NO_COLOR") == "" && isTerminal(c.stderr) {
		return hclog.New(&hclog.LoggerOptions{Name: "berth", Level: level, Output: c.stderr, Color: hclog.AutoColor})
	}
	return plainLogger(level, c.stderr, time.Now)
}

// listen binds the control socket: mode 0660, group berth where that group
// exists. A live socket of another daemon is refused; a stale one (nothing
// answers) is removed.
func listen(path, group string) (net.Listener, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, err
	}
	// Whoever may write in the socket's directory can put their own
	// socket in its place, and be asked what the daemon is asked (the
	// default /tmp/berth-UID of a person's daemon can be anyone's).
	if why, fix := socketDirUnsafe(filepath.Dir(path), true, 0, os.Geteuid()); why != "" {
		return nil, &socketDirError{dir: filepath.Dir(path), why: why, fix: fix}
	}
	if fi, err := os.Lstat(path); err == nil {
		if fi.Mode()&os.ModeSocket == 0 {
			return nil, errNotSocket
		}
		conn, err := net.DialTimeout("unix", path, time.Second)
		if err == nil {
			conn.Close()
			return nil, errSocketLive
		}
		if err := os.Remove(path); err != nil {
			return nil, err
		}
	}
	l, err := net.Listen("unix", path)
	if err != nil {
		return nil, err
	}
	if err := os.Chmod(path, 0o660); err != nil {
		l.Close()
		return nil, err
	}
	_ = giveSocket(path, group) // a socket the group cannot have is root's and the daemon's alone
	return l, nil
}

// socketDirError: the socket's directory is another's, or others may
// write in it.
type socketDirError struct{ dir, why, fix string }

func (e *socketDirError) Error() string { return e.dir + ": " + e.why }
func (e *socketDirError) Unwrap() error { return errSocketDir }

// giveSocket gives the socket at path to group where that group exists
// (listen, and again at each reload: a group made later takes effect).
func giveSocket(path, group string) error {
	g, err := user.LookupGroup(group)
	if err != nil {
		return nil // not there (yet): root and the daemon's user alone
	}
	gid, err := strconv.Atoi(g.Gid)
	if err != nil {
		return err
	}
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return err
	}
	if int(st.Gid) == gid {
		return nil
	}
	return os.Chown(path, -1, gid)
}

// openToGroup lets the members of group open the socket at path as its
// own group may, with a POSIX ACL (group:NAME:rw-): the admin group acts on
// every job without being in the socket's group as well. Nothing to do
// where the group does not exist or is the socket's own.
func openToGroup(path, group string) error {
	g, err := user.LookupGroup(group)
	if err != nil {
		return nil
	}
	gid, err := strconv.ParseUint(g.Gid, 10, 32)
	if err != nil {
		return err
	}
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return err
	}
	if st.Gid == uint32(gid) {
		return nil
	}
	acl := socketACL(uint32(gid))
	have := make([]byte, len(acl)+1)
	if n, err := unix.Getxattr(path, "system.posix_acl_access", have); err == nil && bytes.Equal(have[:n], acl) {
		return nil // as it was at the last reload
	}
	return unix.Setxattr(path, "system.posix_acl_access", acl, 0)
}

// socketACL is the extended attribute of the ACL user::rw- group::rw-
// group:GID:rw- mask::rw- other::---, as the kernel reads it: a version,
// then (tag, permissions, id) entries in tag order.
func socketACL(gid uint32) []byte {
	const (
		version  = 2
		userObj  = 0x01
		groupObj = 0x04
		groupTag = 0x08
		mask     = 0x10
		other    = 0x20
		rw       = 0x6
		noID     = 0xffffffff
	)
	b := binary.LittleEndian.AppendUint32(nil, version)
	for _, e := range []struct {
		tag, perm uint16
		id        uint32
	}{{userObj, rw, noID}, {groupObj, rw, noID}, {groupTag, rw, gid}, {mask, rw, noID}, {other, 0, noID}} {
		b = binary.LittleEndian.AppendUint16(b, e.tag)
		b = binary.LittleEndian.AppendUint16(b, e.perm)
		b = binary.LittleEndian.AppendUint32(b, e.id)
	}
	return b
}

var (
	errSocketLive = errors.New("another berth daemon is listening on it")
	errSocketDir  = errors.New("its directory is not the daemon's alone")
	errNotSocket  = errors.New("something that is not a socket is in the way")
)

// systemdOnly are the variables systemd sets for the daemon itself. A job
// must not inherit them: with NOTIFY_SOCKET it would speak for berth.service,
// with STATE_DIRECTORY it would write into berth's state, and JOURNAL_STREAM
// would name the daemon's stream, not the job's.
var systemdOnly = map[string]bool{
	"NOTIFY_SOCKET": true, "WATCHDOG_PID": true, "WATCHDOG_USEC": true,
	"LISTEN_FDS": true, "LISTEN_PID": true, "LISTEN_FDNAMES": true,
	"INVOCATION_ID": true, "JOURNAL_STREAM": true, "SYSTEMD_EXEC_PID": true,
	"MAINPID": true, "MANAGERPID": true, "TRIGGER_UNIT": true, "TRIGGER_PATH": true,
	"STATE_DIRECTORY": true, "RUNTIME_DIRECTORY": true, "CONFIGURATION_DIRECTORY": true,
	"LOGS_DIRECTORY": true, "CACHE_DIRECTORY": true, "CREDENTIALS_DIRECTORY": true,
	"MONITOR_SERVICE_RESULT": true, "MONITOR_EXIT_CODE": true, "MONITOR_EXIT_STATUS": true,
	"MONITOR_INVOCATION_ID": true, "MONITOR_UNIT": true,
}

// jobsEnviron is the daemon's environment as its jobs start from it: less
// what systemd set for the daemon itself (systemdOnly), where it was
// started (PWD, OLDPWD: a run's PWD is its dir), and berth's run variables
// (accounting.RunVars), which a daemon started from a run of another berth
// has: each of its runs gets its own, and a run that is no index of an
// array, or holds no share of a card, gets none.
func jobsEnviron(environ []string) []string {
	out := make([]string, 0, len(environ))
	for _, kv := range environ {
		k, _, _ := strings.Cut(kv, "=")
		if !systemdOnly[k] && k != "PWD" && k != "OLDPWD" && !slices.Contains(accounting.RunVars, k) {
			out = append(out, kv)
		}
	}
	return out
}
