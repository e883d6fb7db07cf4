package supervisor

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/http"
	"os"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"golang.org/x/sys/unix"

	"github.com/berthd/berth/accounting"
	"github.com/berthd/berth/luaapi"
	"github.com/berthd/berth/probes"
	"github.com/berthd/berth/supervisor/clock"
	"github.com/berthd/berth/supervisor/ctlsock"
	"github.com/berthd/berth/supervisor/runner"
	"github.com/berthd/berth/supervisor/store"
	"github.com/berthd/berth/supervisor/units"
	"github.com/berthd/berth/supervisor/watch"
)

// Config is what the daemon is started with; cmd/berth fills it from flags,
// the environment and the probed machine.
type Config struct {
	JobsDir  string
	StateDir string
	// Listener is the control socket, already bound; the daemon serves it.
	Listener net.Listener
	Machine  probes.Inventory
	Logger   hclog.Logger
	// Notify sends one sd_notify message; nil when not under systemd.
	Notify func(state string) error
	// Watchdog is how often to send WATCHDOG=1 (half WATCHDOG_USEC); zero
	// when systemd does not watch.
	Watchdog time.Duration
	// Environ is the daemon's own environment, the base of every job's.
	Environ []string
	// JournalSocket is journald's stream socket when the daemon runs under
	// journald, else "": children's output then goes to files under StateDir.
	JournalSocket string
	// LogBytes caps each job's log file when there is no journald.
	LogBytes int64
	// Evaluator evaluates job files, in a child the kernel bounds; required.
	Evaluator *Evaluator
	// EvalShare is the wall-clock time one person's files may take in a
	// reload before the rest of theirs wait for the next (Evaluator's
	// evaluate); zero takes DefaultEvalShare.
	EvalShare time.Duration
	// Quiet is the watcher's debounce; zero takes its default.
	Quiet time.Duration
	// Clock is the real clock except in tests: every "since" and every
	// timer that decides about a job (timeouts, restart delays) reads it.
	Clock clock.Clock
	// ControlLimits caps the control socket's connections; zero: chosen
	// from the limit on open files (ctlsock.Current).
	ControlLimits ctlsock.Limits
	// MetricsListener, when set, is a TCP address already bound
	// (--metrics) on which the daemon serves GET /metrics and nothing
	// else; the control socket serves GET /metrics either way.
	MetricsListener net.Listener
	// Units, when set, runs each run as a transient systemd unit that
	// enforces its grant and outlives the daemon; nil runs them as the
	// daemon's own children.
	Units *units.Runner
	// UserJobs, when set, is the directory under which each member of
	// Group has a job directory of their own (people.go); "" has none.
	UserJobs string
	// Group's members may use the daemon and, with UserJobs, declare jobs
	// of their own; "" means DefaultGroup. AdminGroup's members have root's
	// rights over every job; "" means DefaultAdminGroup.
	Group, AdminGroup string
	// SocketAccess, when set, gives the control socket to Group and opens
	// it to AdminGroup as they are now: it runs at each reload, so that a
	// group made after the daemon started takes effect at the next one.
	SocketAccess func() error
	// Relisten, when set, binds the control socket at Listener's path
	// again, as it was bound first: the daemon calls it when it finds the
	// path removed, and serves what it gives in Listener's place.
	Relisten func() (net.Listener, error)
	// Version is the daemon's own version, as the status shows it.
	Version string
	// Cards, when set, reads what the cards hold now (NVML), every few
	// seconds: a card a process berth did not start uses is off for the
	// books (cards.go). Nil: the cards are only as probed.
	Cards probes.CardReader
	// ForeignLimit is how much card memory a process berth did not start
	// may hold before its card is given to no job whole; zero means
	// DefaultForeignLimit.
	ForeignLimit int64
	// PersonJobs is how many jobs one person's files may declare in all,
	// an array's indices counted: each costs the daemon memory, and
	// nothing else bounds what a person may declare. Zero means
	// DefaultPersonJobs.
	PersonJobs int

	// afterCommit, set by tests, runs on the store's writer after each
	// commit, before the writes of the commit are told they are on disk:
	// one that blocks holds the news of every write back.
	afterCommit func()
	// handBack and settleAfter, set by tests, stand in for handing memory
	// back when the daemon is quiet (settled), and for how long it waits.
	handBack    func() (again time.Duration)
	settleAfter time.Duration
	// bornHold, set by tests, replaces bornHoldBound: a test that checks
	// the order jobs born together are placed in does not want a slow
	// goroutine on a loaded machine to end the hold early.
	bornHold time.Duration
	// checkBodyTime, set by tests, is how long a check's request may take
	// to arrive whole; zero means defaultCheckBodyTime.
	checkBodyTime time.Duration
	// replyWriteTime, set by tests, is how long a reply may take to be
	// written; zero means defaultReplyWriteTime.
	replyWriteTime time.Duration
}

// Daemon supervises the jobs of one jobs directory.
type Daemon struct {
	// envDir is unitEnvDir's, made once.
	envDirOnce sync.Once
	envDir     string
	envDirErr  error

	cfg     Config
	log     hclog.Logger
	clock   clock.Clock
	now     func() time.Time // clock.Now
	store   *store.Store
	later   store.Later // the store's writes that nothing waits for
	placer  *accounting.Placer
	book    *accounting.Book
	scanner *watch.Scanner
	watcher *watch.Watcher
	environ map[string]string
	// environKeys are environ's keys in order, and environKV its entries
	// as "KEY=value" in the same order, made once: the most of every
	// run's environment (environOver).
	environKeys []string
	environKV   []string
	changed     signal
	// feed tells GET /v1/events readers that changed was raised, at the
	// pace STATUS= is sent.
	feed *changeFeed
	// tails are the requests for last lines under way, by caller.
	tails tailSlots
	// calls bound the lines of a person's refused calls (logRefused), and
	// accepted those of their calls let in (logCaller).
	calls, accepted callLog
	// replies are the replies each person has under way (boundReplies).
	replies perCaller
	meters  *meters // Prometheus's: counted as things happen (metrics.go)

	// unaccounted is the number of declared jobs with cpus = 0, for the
	// fair share of threads; written by the loop, read by jobs spawning.
	unaccounted atomic.Int64
	// deps is the graph of dependencies in force, nil when no job has
	// any; written by the loop at each reload, read by jobs.
	deps      atomic.Pointer[depGraph]
	localRuns atomic.Uint64
	// activity is what the loop is doing, for an abort's log line.
	activity loopActivity
	// shareOf is the memory of each card a share is a part of, for the
	// frameworks told it (probes.Inventory.CardShareOf).
	shareOf []int64
	// bin is the daemon's executable, to see it replaced; nil when unknown.
	bin *binary
	// coresByAffinity: runs as units have their cores as an affinity
	// alone (units.CoresByAffinityOnly), read once at the start.
	coresByAffinity bool
	// sock binds the control socket again should its path be removed;
	// nil where it cannot.
	sock *socketKeeper
	// logTrouble is why the last run's log file could not be opened, nil
	// when it could (status: logs_unwritable).
	logTrouble atomic.Pointer[logTrouble]
	// cuts are the jobs whose last run's output was cut short (status:
	// logs_unwritable), each until a run of it is written whole.
	cuts outputCuts
	// headers are the runs' headers written last, by job (runLines.later).
	headers runHeaders
	started time.Time
	// loaded: the reloads at start have read every file (the first, or
	// those that follow it at once for files it left). Before, the socket
	// answers, but not every job is known yet: the status says so, and
	// berth show does not take a job it cannot find for one gone. Closed
	// then (isLoaded, awaitLoaded).
	loaded chan struct{}

	// Owned by the loop goroutine.
	latest  map[string]*luaapi.File // the latest version of each file, as evaluated
	good    map[string]*luaapi.File // the version of each file in force
	refused map[string]string       // files refused for their owner or mode, and why
	// refusedDirs are the directories (the administrators', people's)
	// the last reload's scan refused.
	refusedDirs map[string]bool
	// dirsBack are the directories back from being refused or missing,
	// and since when: they settle (dirSettle) before a file not in them
	// is taken to be gone.
	dirsBack map[string]time.Time
	fileErrs map[string][]Problem   // why a file's latest version is not in force
	logged   map[loggedProblem]bool // the problems in force, each logged once per version of its file
	set      *luaapi.Set
	requests chan request
	// writing are the files the last scan found being saved, and
	// writingWait how long the watcher was asked to wait before it
	// signals again (noteWriting).
	writing     map[string]bool
	writingWait time.Duration
	// reloading is the reload whose files are being evaluated, nil when
	// none; again is one asked for meanwhile.
	reloading *reloadRun
	// protectNext: the last reload left others' files to the next one
	// (reloadRun.protected).
	protectNext bool
	again       reloadAgain
	// evaluated hands an evaluation back to the loop; capacity 1, as one
	// is in flight at most, so that it never blocks on a loop that ended.
	evaluated chan evaluated
	// evalCtx ends the evaluation in flight at shutdown; evaluations
	// waits for it.
	evalCtx     context.Context
	evaluations sync.WaitGroup
	// loopDone is closed when the loop has ended: a call or a reload
	// waiting for it then has its answer.
	loopDone chan struct{}
	// shutdownHeld: starts are held while the machine shuts down
	// (holdWhileShuttingDown), and parked are the waits of jobs that need
	// no grant, held meanwhile (park); parkMu guards both changing.
	shutdownHeld atomic.Bool
	// leavingWithMachine: the daemon stops as the machine shuts down, so
	// no unit is started (a stop's SIGKILL is not handed to one).
	leavingWithMachine atomic.Bool
	parkMu             sync.Mutex
	parked             []*job
	// bg waits for the goroutines Run starts besides the jobs, and those
	// they start.
	bg sync.WaitGroup
	// settle fires once the daemon has done no work for settleAfter, to
	// hand memory back to the system (settled). work counts what was done
	// (worked); settleArmed says settle is armed, and settleWork is what
	// work counted when it was last armed. settleAfter is defaultSettle,
	// and freeMemory a handBack's run, but in tests. gcs counts the Go
	// runtime's own collections as work while the loop runs.
	settle      *time.Timer
	settleAfter time.Duration
	settleArmed atomic.Bool
	settleWork  atomic.Uint64
	work        atomic.Uint64
	freeMemory  func() (again time.Duration)
	gcs         *gcWatch
	// kept keeps a copy of each job file's version in force (kept.go);
	// nil where its directory could not be made.
	kept *keptFiles
	// jobsCtx ends every job at shutdown; jobsWG waits for them (it counts
	// jobs, whose goroutines may sleep meanwhile: job.start).
	jobsCtx context.Context
	jobsWG  sync.WaitGroup
	// workers run the jobs' goroutines.
	workers *workers

	// leftAsks are the stops waiting to learn which processes of their
	// runs left their groups (leftGroup), by run; sweeping says a sweep
	// is under way, which answers them all with one scan of /proc (a
	// reload that removes a thousand jobs makes a few scans, not a
	// thousand).
	leftMu   sync.Mutex
	leftAsks map[string][]chan<- []runner.Tagged
	sweeping bool
	// stoppingAll: the daemon stops every job. The first stop to ask
	// then scans for the processes of every run (lastScan), which answers
	// the others too: the daemon's stop makes one scan.
	stoppingAll bool
	lastScan    sync.Once
	lastFound   map[string][]runner.Tagged

	// quotas are the quotas in force, by name ("*": everyone else's), for
	// a reload to say which it changed. Owned by the loop.
	quotas map[string]accounting.Quota

	// adopted are the runs a previous daemon left running as units, by
	// job, with their grants already back in the books; the first reload
	// hands each to its job. Owned by the loop.
	adopted map[string]adoptedRun
	// orphansSaid are the runs of adopted that no job claimed, kept while
	// a file that may declare their jobs has errors (orphans), each
	// logged once. Owned by the loop.
	orphansSaid map[string]bool

	// bornCount is how many jobs were born here (job.order); owned by the
	// loop.
	bornCount int

	// lastChange is what the last reload that changed something changed
	// (ReloadResult.Earlier): of every job (""), and of each person's
	// own, for them; owned by the loop.
	lastChange map[string]*ReloadChange

	// people are the members of the group with a job directory, by name
	// (people.go); owned by the loop.
	people map[string]*person
	// checks holds a token for each POST /v1/check evaluating now.
	checks chan struct{}
	// checkers holds each caller to one check evaluating at a time, so
	// that one person's many checks do not take every place of checks.
	checkers perCaller

	// draining are the jobs removed whose goroutine may still be stopping
	// their run, by name; owned by the loop, which changes it under mu
	// (Status reads it).
	draining map[string]*job

	// cards is what the cards held when last read (cards.go), by the
	// books' index; nil before the first read or without a reader.
	// runCards is what each run's processes held on them then, by run.
	cards     atomic.Pointer[[]cardState]
	runCards  atomic.Pointer[map[uint64]runCards]
	cardReads cardReads

	mu   sync.Mutex // guards jobs, arrays, problems and failing for readers outside the loop
	jobs map[string]*job
	// arrays are the arrays in force, by name; their indices are jobs, in
	// jobs by their own names (NAME[INDEX]).
	arrays   map[string]*array
	problems []Problem // every configuration problem in force, as shown
	// failing are the job files whose latest version is refused, what
	// was in force of them staying (berth show says so).
	failing map[string]bool
}

// request is a call into the loop from another goroutine.
type request struct {
	do    func() any
	reply chan any
}

// Open opens the state and prepares the daemon; Run starts it.
func Open(cfg Config) (*Daemon, error) {
	if cfg.Evaluator == nil {
		return nil, errors.New("open daemon: no Evaluator for the job files")
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.Real
	}
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	if cfg.LogBytes == 0 {
		cfg.LogBytes = 16 << 20
	}
	// logs/ holds jobs' output when there is no journald.
	if err := os.MkdirAll(filepath.Join(cfg.StateDir, "logs"), 0o750); err != nil {
		// What to do (a read-only mount, a full disk, another's
		// directory) is the caller's to say, as for the state file.
		return nil, fmt.Errorf("make the state directory %s and its logs: %w", cfg.StateDir, err)
	}
	log := cfg.Logger
	changed := newSignal()
	meters := newMeters()
	onCommit := meters.committed
	if cfg.afterCommit != nil {
		onCommit = func(took time.Duration, err error) {
			meters.committed(took, err)
			cfg.afterCommit()
		}
	}
	st, err := store.Open(filepath.Join(cfg.StateDir, "state.db"), store.Options{Clock: cfg.Clock, OnCommit: onCommit, OnHealth: func(err error) {
		if err != nil {
			log.Error("cannot record the state: jobs go on, but what they do is not on disk until it can be; should the daemon stop first, a job shown done meanwhile runs again at its next start", "error", err)
		} else {
			log.Info("recording the state again")
		}
	}, OnGone: func(g *store.GoneError) {
		// Said once each time it changes; berth status says it for as
		// long as it lasts.
		switch {
		case g == nil:
			log.Info("the state file is back at its path", "path", filepath.Join(cfg.StateDir, "state.db"))
		case g.Replaced:
			log.Error("the state file was replaced while the daemon runs: it records into the file it opened, which is lost when it stops", "path", g.Path)
		default:
			log.Error("the state file was removed while the daemon runs: what it records is lost when it stops", "path", g.Path)
		}
		changed.raise()
	}})
	if err != nil {
		return nil, err
	}
	if t := st.NameTaken(); t != nil {
		log.Warn("the name the state directory is also locked by is held by a process that is no daemon of this user's: the directory is locked by its lock file alone, which a removal of the directory takes away (ps -p PID -f shows the process)",
			"pid", t.PID, "uid", t.UID, "dir", cfg.StateDir)
	}
	if st.Created() {
		// A first start, or a state removed: said, so that the log tells
		// why the jobs done before run again, and the history is new.
		log.Info("no state file: beginning a new state (batch jobs done under an earlier one run again)", "path", filepath.Join(cfg.StateDir, "state.db"))
	}
	if n := st.IntentsUnread(); n > 0 {
		log.Warn("lines of runs.intents in the state directory could not be read, and were dropped: the runs they noted may be missing from the history (berth history shows what is recorded); berth alone writes in that file, so should this come again, look for what else does (fuser -v, auditctl -w)", "lines", n, "dir", cfg.StateDir)
	}
	if err := st.IntentsProblem(); err != nil {
		log.Warn("runs are not noted beside the state before they start: a run that ends before its record commits is run again if the daemon is killed then (remove what is in the way of runs.intents in the state directory, and restart)", "error", err)
	}
	d := &Daemon{
		replies:    perCaller{n: repliesPerUID},
		cfg:        cfg,
		log:        cfg.Logger,
		clock:      cfg.Clock,
		now:        cfg.Clock.Now,
		store:      st,
		placer:     accounting.NewPlacer(cfg.Clock.Now),
		environ:    environMap(cfg.Environ),
		changed:    changed,
		feed:       newChangeFeed(),
		meters:     meters,
		latest:     map[string]*luaapi.File{},
		good:       map[string]*luaapi.File{},
		refused:    map[string]string{},
		dirsBack:   map[string]time.Time{},
		fileErrs:   map[string][]Problem{},
		set:        &luaapi.Set{},
		requests:   make(chan request),
		evaluated:  make(chan evaluated, 1),
		loopDone:   make(chan struct{}),
		jobs:       map[string]*job{},
		arrays:     map[string]*array{},
		draining:   map[string]*job{},
		failing:    map[string]bool{},
		settle:     time.NewTimer(time.Hour),
		freeMemory: cfg.handBack,
		gcs:        new(gcWatch),
		loaded:     make(chan struct{}),
		workers:    newWorkers(),
		checks:     make(chan struct{}, concurrentChecks),
		bin:        runningBinary(),
		started:    cfg.Clock.Now(),
	}
	d.settle.Stop()
	if cfg.Units != nil {
		if d.coresByAffinity = units.CoresByAffinityOnly(); d.coresByAffinity {
			d.log.Warn("runs' cores are their CPU affinity alone, which a job may widen: the machine's cgroups give systemd no cpuset (cgroup v1)")
		}
	}
	if d.kept, err = openKept(cfg.StateDir); err != nil {
		d.log.Warn("cannot keep copies of the job files in force: a file broken at the daemon's next start will have its jobs missing until it is fixed", "error", err)
	}
	d.gcs.seen = func(own bool) {
		if !own {
			d.worked()
		}
	}
	if d.freeMemory == nil {
		d.freeMemory = newHandBack(cfg.Logger, d.gcs.collect).run
	}
	d.settleAfter = cmp.Or(cfg.settleAfter, defaultSettle)
	for i := range cfg.Machine.GPUs {
		d.shareOf = append(d.shareOf, cfg.Machine.CardShareOf(i))
	}
	d.environKeys = slices.Sorted(maps.Keys(d.environ))
	d.environKV = environList(d.environ)
	d.later = st.Later(d.recordFailed)
	d.book = d.placer.AddMachine(CapacityOf(cfg.Machine))
	d.scanner = watch.NewScanner(cfg.JobsDir, watch.ScanOptions{DaemonUID: os.Getuid()})
	meters.reg.MustRegister(stateCollector{d})
	return d, nil
}

// logTrouble is why the jobs' log directory cannot take a run's output.
type logTrouble struct {
	dir string
	err error
}

// noteLogTrouble records why a run's log directory could not take its
// output; the first trouble is logged.
func (d *Daemon) noteLogTrouble(t *logTrouble) {
	if was := d.logTrouble.Swap(t); was == nil {
		d.log.Error(msgLogsUnwritable(t.dir, t.err))
	}
}

// noteLogsFine records that a run's log file could be opened in dir: the
// trouble of that directory, if it was the one said, is over.
func (d *Daemon) noteLogsFine(dir string) {
	if was := d.logTrouble.Load(); was != nil && was.dir == dir && d.logTrouble.CompareAndSwap(was, nil) {
		d.log.Info("the jobs' log directory can be written again", "dir", dir)
	}
}

// outputCut is a run's output that its log file could not take whole (a
// full disk).
type outputCut struct {
	job, dir string
	at       time.Time
	err      error
}

// outputCuts are the jobs whose last run's output was cut short.
type outputCuts struct {
	mu    sync.Mutex // guards byJob; taken before Daemon.mu where both are
	byJob map[string]outputCut
}

// noteOutputCut records how the output of a run of job, in dir, was
// written: cut short by err (not a descendant that kept the output
// open, which is the job's doing), or whole (err nil), which ends what
// was said of the job's runs before.
func (d *Daemon) noteOutputCut(job, dir string, err error) {
	c := &d.cuts
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case err == nil:
		if _, was := c.byJob[job]; was {
			delete(c.byJob, job)
			d.jobLog(job).Info("a run's output was written whole again", "dir", dir)
		}
	case !errors.Is(err, context.DeadlineExceeded):
		if c.byJob == nil {
			c.byJob = map[string]outputCut{}
		}
		if pe, ok := errors.AsType[*os.PathError](err); ok {
			err = pe.Err // the path is the log file's, which the words name
		}
		c.byJob[job] = outputCut{job: job, dir: dir, at: d.now(), err: err}
	}
}

// of says when the last run of job had its output cut short, if it did.
func (c *outputCuts) of(job string) (time.Time, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	cut, ok := c.byJob[job]
	return cut.at, ok
}

// outputCutProblem is the status's word on the output cut short: the
// latest cut of the jobs in force (known), and how many others' were; false
// when none was.
func (d *Daemon) outputCutProblem(known func(job string) bool) (Problem, bool) {
	c := &d.cuts
	c.mu.Lock()
	defer c.mu.Unlock()
	var cuts []outputCut
	for job, cut := range c.byJob {
		if !known(job) {
			delete(c.byJob, job) // gone from the files: nothing more to say of it
			continue
		}
		cuts = append(cuts, cut)
	}
	if len(cuts) == 0 {
		return Problem{}, false
	}
	// The latest first, the others named after it.
	slices.SortFunc(cuts, func(a, b outputCut) int { return cmp.Or(b.at.Compare(a.at), strings.Compare(a.job, b.job)) })
	others := make([]string, 0, len(cuts)-1)
	for _, c := range cuts[1:] {
		others = append(others, c.job)
	}
	latest := cuts[0]
	return Problem{Code: ProblemLogsUnwritable, File: latest.dir, Job: latest.job, Text: msgOutputCut(latest.job, latest.dir, latest.at, latest.err, others)}, true
}

// discardOutput is a run's output thrown away, for why its log directory
// dir cannot take it.
func (d *Daemon) discardOutput(dir string, why error) (output, error) {
	d.noteLogTrouble(&logTrouble{dir: dir, err: why})
	f, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		return output{}, err
	}
	return output{file: f, release: func() { f.Close() }, finish: func() {}}, nil
}

// closeStore closes the state as the daemon stops, and says what it
// could not record: the next daemon does not know of it.
func (d *Daemon) closeStore() {
	switch g := d.store.Gone(); {
	case g == nil:
	case g.Replaced:
		d.log.Error("stopped with the state file replaced under the daemon: what it recorded is lost, and the next start reads the file now there", "path", g.Path)
	default:
		d.log.Error("stopped with the state file removed under the daemon: what it recorded is lost, and the next start begins an empty state (batch jobs done before run again, jobs stopped with berth stop start again)", "path", g.Path)
	}
	err := d.store.Close()
	if u, ok := errors.AsType[*store.UnrecordedError](err); ok {
		d.log.Error(msgUnrecordedAtStop(d.cfg.StateDir, u), "jobs", strings.Join(u.Jobs, " "), "runs", u.Runs, "error", u.Err)
	} else if err != nil {
		d.log.Error("cannot close the state", "error", err)
	}
}

// notRecorded logs a write to the state that failed. While commits fail
// the store has said so once (OnHealth); each write is then not worth more
// than a debug line.
func (d *Daemon) notRecorded(log hclog.Logger, msg string, kv ...any) {
	if d.store.Failing() != nil {
		log.Debug(msg, kv...)
		return
	}
	log.Error(msg, kv...)
}

// recordFailed is told of each deferred write that failed.
func (d *Daemon) recordFailed(err error) {
	d.notRecorded(d.log, "cannot record", "error", err)
}

// CapacityOf is the books' view of the probed machine: with each card's
// memory where it is known, and the NUMA node of each core and card where
// the topology says it for at least one card (a machine of one node says
// it for none, and places as before). berth check places by it too.
func CapacityOf(inv probes.Inventory) accounting.Capacity {
	c := accounting.Capacity{Name: "local", CPUIDs: inv.CPUIDs, GPUs: len(inv.GPUs),
		RAMBytes: inv.RAM.Bytes, RAMKnown: inv.RAM.Known, GPUMem: inv.GPUMem}
	gpuNodes := make([]int, len(inv.GPUs))
	known := false
	for i, name := range inv.GPUs {
		gpuNodes[i] = -1
		if card, ok := inv.Topology.CardNamed(name); ok && card.NUMANode >= 0 {
			gpuNodes[i], known = card.NUMANode, true
		}
	}
	if !known {
		return c
	}
	c.GPUNodes = gpuNodes
	c.CPUNodes = make([]int, len(inv.CPUIDs))
	for i, id := range inv.CPUIDs {
		c.CPUNodes[i] = inv.Topology.NodeOfCPU(id)
	}
	return c
}

func environMap(environ []string) map[string]string {
	m := make(map[string]string, len(environ))
	for _, kv := range environ {
		if k, v, ok := cutEnv(kv); ok {
			m[k] = v
		}
	}
	return m
}

func cutEnv(kv string) (string, string, bool) {
	for i := 0; i < len(kv); i++ {
		if kv[i] == '=' {
			return kv[:i], kv[i+1:], i > 0
		}
	}
	return "", "", false
}

// Run reconciles what a previous daemon left, serves the socket, loads every
// file (on the loop, which answers meanwhile), tells systemd it is ready
// once they are loaded, and supervises until ctx ends; then it
// stops every job (each with its own signal and timeout, in parallel) and
// returns. It closes the state.
func (d *Daemon) Run(ctx context.Context) error {
	d.activity.begin(loopStarting)
	storeOpen := true
	defer func() {
		if storeOpen {
			d.closeStore()
		}
	}()
	if err := d.reconcile(); err != nil {
		return err
	}
	w, err := watch.NewWatcher(d.cfg.JobsDir, watch.WatchOptions{Quiet: d.cfg.Quiet, Rescan: watch.DefaultRescan, Logf: d.logf})
	if err != nil {
		return fmt.Errorf("watch %s: %w", d.cfg.JobsDir, err)
	}
	d.watcher = w
	watchCtx, stopWatch := context.WithCancel(context.Background())
	d.bg.Go(func() {
		if err := w.Run(watchCtx); err != nil && !errors.Is(err, context.Canceled) {
			d.log.Error("watching the jobs directory failed", "error", err)
		}
	})

	if d.bin != nil {
		d.bg.Go(func() { d.lookForUpgrades(watchCtx) })
	}
	d.bg.Go(func() { d.pruneLogsEvery(watchCtx) })
	if d.cfg.Cards != nil && len(d.cfg.Machine.GPUs) > 0 {
		d.bg.Go(func() { d.watchCards(watchCtx) })
	}

	jobsCtx, stopJobs := context.WithCancel(context.Background())
	d.jobsCtx = jobsCtx
	// An idle connection is closed after a while: a client that leaves
	// its connections open must not hold the daemon's descriptors for ever.
	srv := &http.Server{Handler: d.api(), ConnContext: withPeer, ReadHeaderTimeout: 5 * time.Second, IdleTimeout: 30 * time.Second}
	if d.cfg.Listener != nil {
		ctl := d.controlListener()
		srv.ConnState = ctl.ConnState
		d.bg.Go(func() {
			if err := srv.Serve(ctl); err != nil && !errors.Is(err, http.ErrServerClosed) {
				d.log.Error("control socket failed", "error", err)
			}
		})
		if d.sock = keptSocket(ctl, d.cfg.Relisten); d.sock != nil {
			d.bg.Go(func() { every(watchCtx, socketCheckEvery, func() bool { d.keepSocket(); return false }) })
		}
	}
	var metricsSrv *http.Server
	if d.cfg.MetricsListener != nil {
		metricsSrv = d.serveMetrics(d.cfg.MetricsListener, d.bg.Go)
	}
	evalCtx, stopEval := context.WithCancel(context.Background())
	d.evalCtx = evalCtx
	if d.kept != nil {
		d.bg.Go(func() {
			d.kept.run(func(path string, err error) {
				d.log.Warn("cannot keep a copy of a job file in force; were it broken at the daemon's next start, its jobs would be missing until it is fixed", "file", path, "error", err)
			})
		})
	}
	// The first reload; its end says READY=1 (finishReload).
	d.reload(true, true)

	d.gcs.start()
	lost := d.loop(ctx)
	d.gcs.stop()
	close(d.loopDone)
	d.feed.publish(ChangeStopping)
	if lost {
		d.log.Error("lost the connection to systemd: exiting, so that systemd starts berth again, which takes the jobs' units back; they go on meanwhile")
	}

	d.notify("STOPPING=1")
	// An evaluation still running is of no use now: its child is killed.
	stopEval()
	d.evaluations.Wait()
	if d.cfg.Units != nil {
		d.log.Info("leaving the jobs' units running; the next daemon takes them back")
		if down, err := d.cfg.Units.ShuttingDown(); !lost && err == nil && down {
			d.leavingWithMachine.Store(true)
			d.markShutdownLost()
		}
	} else {
		d.log.Info("stopping every job")
	}
	// The watcher goes first. Closing inotify waits for the kernel to let
	// go of its watches (tens of milliseconds here), which is better spent
	// while the jobs stop than after.
	stopWatch()
	d.leftMu.Lock()
	d.stoppingAll = true
	d.leftMu.Unlock()
	stopJobs()
	d.jobsWG.Wait()
	d.workers.stop()
	// Shutdown waits for requests to end: the events streams end first.
	d.feed.end()
	shutdownCtx, cancel := context.WithTimeout(context.Background(), time.Second)
	if srv.Shutdown(shutdownCtx) != nil {
		// Streams still open (berth logs -f) end now.
		_ = srv.Close()
	}
	if metricsSrv != nil && metricsSrv.Shutdown(shutdownCtx) != nil {
		_ = metricsSrv.Close()
	}
	cancel()
	if d.kept != nil {
		d.kept.end() // what the last reload asked to keep is on disk
	}
	d.bg.Wait()
	storeOpen = false
	d.closeStore() // what it could not record is said before "stopped"
	d.log.Info("stopped")
	if lost {
		return ErrLostSystemd
	}
	return nil
}

// ErrLostSystemd is returned by Run when the connection to systemd, which
// runs the jobs as units, was lost: no end of a run could be learnt any
// more. Its units go on; a daemon started again takes them back.
var ErrLostSystemd = errors.New("lost the connection to systemd")

// shutdownPoll is how often a daemon that holds its placements while the
// machine shuts down asks whether it still does.
const shutdownPoll = time.Second

// holdWhileShuttingDown holds every start once the machine's shutdown was
// seen (a run's unit stopped by it, a start it refused): the runs it
// stops are lost and run again at the next boot, waiting on record
// meanwhile, where a start now would be refused and count as a failed
// one. The placer holds the jobs that wait for a grant, and park those
// that need none. A shutdown called off (systemctl cancel) lets them
// start within shutdownPoll. The daemon's own stop comes with the
// shutdown; it leaves the hold as it is.
func (d *Daemon) holdWhileShuttingDown() {
	d.parkMu.Lock()
	defer d.parkMu.Unlock()
	if d.shutdownHeld.Load() {
		return
	}
	d.shutdownHeld.Store(true)
	release := d.placer.Hold()
	d.log.Warn("the machine is shutting down: no job is started until it is back; the runs it stops run again then")
	d.bg.Go(func() {
		for {
			t := d.clock.NewTimer(shutdownPoll)
			select {
			case <-d.loopDone:
				t.Stop()
				return
			case <-t.C():
			}
			if down, err := d.cfg.Units.ShuttingDown(); err != nil || down {
				continue
			}
			d.log.Info("the machine's shutdown was called off: jobs are started again")
			d.parkMu.Lock()
			parked := d.parked
			d.parked = nil
			d.shutdownHeld.Store(false)
			d.parkMu.Unlock()
			release()
			for _, j := range parked {
				j.in.post(jobMessage{unpark: true})
			}
			return
		}
	})
}

// markShutdownLost notes on each run in progress, as the daemon stops
// with the machine's shutdown, that it goes down with the machine: the
// next daemon, finding its unit gone, records it lost and runs its job
// again, where a unit gone would read as a person's stop (a soft reboot
// keeps PID 1, whose start tells a boot).
func (d *Daemon) markShutdownLost() {
	open, err := d.store.OpenRuns()
	if err != nil {
		d.log.Warn("cannot note that the runs in progress go down with the machine", "error", err)
		return
	}
	for _, r := range open {
		if r.Stopping == 0 {
			d.later.StopRun(r.ID, store.ReasonLost, msgLostShuttingDown, time.Time{})
		}
	}
}

// park parks the wait of j, which needs no grant, while the machine shuts
// down (holdWhileShuttingDown); false where it does not.
func (d *Daemon) park(j *job) bool {
	if !d.shutdownHeld.Load() {
		return false // the way of every start, but as the machine shuts down
	}
	d.parkMu.Lock()
	defer d.parkMu.Unlock()
	if !d.shutdownHeld.Load() {
		return false
	}
	d.parked = append(d.parked, j)
	return true
}

// loop is the daemon's one owner of its tables. It returns when ctx ends,
// or, true, when the connection to systemd that runs the jobs is lost.
func (d *Daemon) loop(ctx context.Context) (lost bool) {
	var unitsLost <-chan struct{}
	if d.cfg.Units != nil {
		unitsLost = d.cfg.Units.Lost()
	}
	var watchdog <-chan time.Time
	if d.cfg.Watchdog > 0 {
		t := time.NewTicker(d.cfg.Watchdog)
		defer t.Stop()
		watchdog = t.C
	}
	// STATUS= is sent, and GET /v1/events told, at most every
	// statusEvery, so a storm of job events costs systemd one message and
	// each watching client a few a second.
	const statusEvery = 250 * time.Millisecond
	var statusTimer <-chan time.Time
	lastStatus := ""
	d.activity.end()
	for {
		select {
		case <-ctx.Done():
			return false
		case <-unitsLost:
			return true
		case <-d.watcher.Changes():
			d.activity.begin(loopReload)
			d.reload(false, false)
		case r := <-d.requests:
			d.activity.begin(loopCall)
			r.reply <- r.do()
		case ev := <-d.evaluated:
			d.activity.begin(loopEvaluated)
			d.evaluatedFiles(ev)
		case <-d.changed:
			if statusTimer == nil {
				statusTimer = time.After(statusEvery)
			}
		case <-statusTimer:
			d.activity.begin(loopStatus)
			statusTimer = nil
			d.feed.publish(ChangeStatus)
			if s := d.statusLine(); s != lastStatus {
				lastStatus = s
				d.notify("STATUS=" + s)
			}
		case <-d.settle.C:
			d.activity.begin(loopSettle)
			d.settled()
		case <-watchdog:
			d.activity.begin(loopWatchdog)
			// Sent from the loop itself: a wedged loop stops the pings and
			// systemd restarts the daemon.
			// Noted first: whoever hears the ping may stop the daemon at
			// once (a test, with SIGSTOP), and then asks when it was.
			d.activity.lastPing.Store(time.Now().UnixNano())
			d.notify("WATCHDOG=1")
		}
		// Work is counted where it starts: a reload, a call, files
		// evaluated. Not a change noted and its status, which the cards'
		// reads make every 5 s while jobs use them, nor the loop's upkeep.
		switch loopTask(d.activity.task.Load()) {
		case loopReload, loopCall, loopEvaluated:
			d.worked()
		}
		d.activity.end()
	}
}

// call runs f on the loop and returns its result; ctx bounds the wait.
// A loop that has ended answers ErrStopping.
func (d *Daemon) call(ctx context.Context, f func() any) (any, error) {
	r := request{do: f, reply: make(chan any, 1)}
	select {
	case d.requests <- r:
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-d.loopDone:
		return nil, ErrStopping
	}
	select {
	case v := <-r.reply:
		return v, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-d.loopDone:
		return nil, ErrStopping
	}
}

// ErrStopping is returned by calls into a daemon whose loop has ended.
var ErrStopping = errors.New("the daemon is stopping")

func (d *Daemon) notify(state string) {
	if d.cfg.Notify == nil {
		return
	}
	if err := d.cfg.Notify(state); err != nil {
		d.log.Warn("cannot notify systemd", "error", err)
	}
}

func (d *Daemon) logf(msg string, kv ...any) { d.log.Info(msg, kv...) }

// reconcile deals with the runs a previous daemon left open. Under systemd
// a run whose unit is still there is taken back (adopt); whatever else of
// them still runs is killed, and each is recorded as lost: their jobs run
// again. So are the runs it started and was killed before it recorded,
// found by the processes they left (a child that escaped its group, or
// survived its leader): killed, then recorded lost.
func (d *Daemon) reconcile() error {
	open, err := d.store.OpenRuns()
	if err != nil {
		return fmt.Errorf("read the runs a previous daemon left: %w", err)
	}
	if d.cfg.Units != nil {
		if open, err = d.adopt(open); err != nil {
			return err
		}
	}
	if len(open) == 0 && d.store.LeftNothing() {
		// The state is new, or its last daemon closed it, its runs ended
		// and recorded (or, as units, taken back): nothing to look for,
		// and a scan of every process is not paid at each start.
		return nil
	}
	// Every process of a run carries BERTH_RUN: this finds a run whose pid
	// was never recorded, descendants that outlived their leader, and runs
	// never recorded at all.
	tagged, err := runner.FindTagged(d.runMark(), "BERTH_RUN", "BERTH_JOB")
	if err != nil {
		d.log.Warn("cannot look for what lost runs left running", "error", err)
	}
	byRun := map[string][]runner.Tagged{}
	for _, p := range tagged {
		byRun[p.Values[0]] = append(byRun[p.Values[0]], p)
	}
	// Lost runs, by when they ended and why: the end of a run that went
	// down with the machine is bounded by the boot, that of one gone with
	// the daemon only by now.
	type lostAs struct {
		end   time.Time
		cause string
	}
	lost := map[lostAs][]uint64{}
	for _, r := range open {
		run := strconv.FormatUint(r.ID, 10)
		killed := 0
		if r.PID > 0 && r.StartTicks > 0 {
			ok, err := runner.KillLeftover(r.PID, r.StartTicks)
			if err != nil {
				d.jobLog(r.Job).Warn("cannot check a lost run's process", "run", r.ID, "pid", r.PID, "error", err)
			}
			if ok {
				killed++
			}
		}
		killed += d.killTagged(byRun[run])
		delete(byRun, run)
		reason, cause := r.Stopping, r.Cause
		// Noted by a daemon that stopped with the machine's shutdown
		// (markShutdownLost): lost, whatever its job's record says.
		shutDown := reason == store.ReasonLost
		if shutDown {
			reason = 0
		} else if reason == 0 {
			reason, cause = stoppingAtCrash(d.store, r), ""
		}
		if reason != 0 {
			// A stop on record before the daemon went away in its
			// stop_timeout: the run ended as it would have, and the job
			// rests where its record says.
			if err := d.store.EndWithoutExit(r.ID, d.now(), reason, finishedStop(cause)); err == nil {
				d.meters.ended(reason)
				d.jobLog(r.Job).Info("a run's stop finished: the daemon went away while it stopped", "run", r.ID, "reason", reason.String(), "pid", r.PID, "killed_leftovers", killed)
				continue
			}
		}
		as := lostAs{d.now(), msgLostWithDaemon}
		if killed > 0 {
			as.cause = msgLostLeftovers
		}
		if d.cfg.Units != nil {
			as.cause = msgLostUnit
			if booted := d.unitsBooted(); !booted.IsZero() && !r.Start.After(booted) {
				as = lostAs{booted, msgLostWithMachine}
			} else if shutDown {
				as.cause = msgLostShuttingDown
			}
		}
		lost[as] = append(lost[as], r.ID)
		d.jobLog(r.Job).Warn("run lost: "+as.cause, "run", r.ID, "pid", r.PID, "killed_leftovers", killed)
	}
	for as, ids := range lost {
		for range ids {
			d.meters.ended(store.ReasonLost)
		}
		if err := d.store.MarkLost(ids, as.end, as.cause); err != nil {
			return fmt.Errorf("record lost runs: %w", err)
		}
	}
	return d.reconcileUnrecorded(byRun)
}

// reconcileUnrecorded stops the processes of runs that no record has, and
// records those runs lost: a previous daemon numbered and started them, and
// was killed before their records were on disk (never shown, then, but
// their processes outlived it). byRun are the processes left of runs
// neither open nor taken back, by BERTH_RUN; those of runs on record, which
// ended before the daemon went away, are left alone, as they would have
// been by the daemon that ran them.
func (d *Daemon) reconcileUnrecorded(byRun map[string][]runner.Tagged) error {
	var found []store.RunRecord
	for run, procs := range byRun {
		id, err := strconv.ParseUint(run, 10, 64)
		if err != nil || id == 0 {
			continue
		}
		r := store.RunRecord{ID: id, Job: procs[0].Values[1], PID: procs[0].PID}
		for _, p := range procs {
			if p.StartTicks == 0 || d.cfg.Machine.Booted.IsZero() {
				continue
			}
			at := probes.StartedAt(d.cfg.Machine.Booted, p.StartTicks)
			if r.Start.IsZero() || at.Before(r.Start) {
				r.Start, r.PID = at, p.PID
			}
		}
		if claimed := procs[0]; r.Job != "" && !d.mayClaim(claimed.UID, r.Job) {
			// A process says what it likes of itself: one of a person may
			// not put a run into another's history (nor an
			// administrators'). Stopped, as a leftover, and not recorded.
			d.killTagged(procs)
			d.jobLog(r.Job).Warn("a process claims a run of a job that is not its user's: stopped, and not recorded", "run", id, "pid", claimed.PID, "uid", claimed.UID)
			continue
		}
		if isLocalRunID(id) {
			// A run the state could not record in the previous life: its
			// id is not one to record under. Stopped all the same.
			d.killTagged(procs)
			d.jobLog(r.Job).Warn("killed what a run that was never recorded left running", "run", id, "pids", len(procs))
			continue
		}
		if r.Job != "" {
			found = append(found, r)
		}
	}
	if len(found) == 0 {
		return nil
	}
	lost, err := d.store.Unrecorded(found)
	if err != nil {
		return fmt.Errorf("read the runs a previous daemon left: %w", err)
	}
	if len(lost) == 0 {
		return nil
	}
	// Killed before they are recorded: a run recorded lost with its
	// processes alive would be left to them by the next daemon, if this
	// one died in between.
	for _, r := range lost {
		killed := d.killTagged(byRun[strconv.FormatUint(r.ID, 10)])
		d.jobLog(r.Job).Warn("run lost before it was recorded: the daemon went away as it started", "run", r.ID, "pid", r.PID, "killed_leftovers", killed)
		d.meters.ended(store.ReasonLost)
	}
	if _, err := d.store.RecordLost(lost, d.now(), msgLostUnrecorded); err != nil {
		return fmt.Errorf("record lost runs: %w", err)
	}
	return nil
}

// mayClaim says whether a process of uid may be a run of job: a person's
// job's processes are that person's; an administrators' job's are not a
// person's (the people are those with a job directory).
func (d *Daemon) mayClaim(uid int, job string) bool {
	if uid < 0 {
		return false
	}
	if owner := ownerOf(job); owner != "" {
		u, err := user.Lookup(owner)
		return err == nil && u.Uid == strconv.Itoa(uid)
	}
	if uid == 0 || uid == os.Getuid() || d.cfg.UserJobs == "" {
		return true
	}
	u, err := user.LookupId(strconv.Itoa(uid))
	if err != nil {
		return true // no login, no person
	}
	_, err = os.Lstat(filepath.Join(d.cfg.UserJobs, u.Username))
	return err != nil
}

// killTagged sends SIGKILL to each of procs and counts those it reached.
func (d *Daemon) killTagged(procs []runner.Tagged) int {
	killed := 0
	for _, p := range procs {
		if unix.Kill(p.PID, unix.SIGKILL) == nil {
			killed++
		}
	}
	return killed
}

// stoppingAtCrash is the reason run r ended with where the previous
// daemon went away while it stopped it, for a run whose stop is not on
// its own record (Stopping: written by a daemon before it was, or not
// committed before the crash): the job's record, written since
// the run began, says where the stop leaves the job (life.recorded),
// stopped for a person's stop, failed or backoff for a timeout (as the
// restart policy has it). Zero: the run was not being stopped (a record
// from before the run is where the job rested before it was started
// again), or its job is unknown.
func stoppingAtCrash(st *store.Store, r store.RunRecord) store.Reason {
	rec, ok, err := st.Job(r.Job)
	switch {
	case err != nil || !ok || rec.Changed.Before(r.Start):
		return 0
	case rec.State == store.StateStopped:
		return store.ReasonStopped
	case rec.State == store.StateFailed, rec.State == store.StateBackoff:
		return store.ReasonTimedOut
	}
	return 0
}

// finishedStopCause is said of a run whose stop the daemon that began it
// did not see through: no exit status of it is known.
const finishedStopCause = "its daemon went away during the stop, and the next one finished it"

// finishedStop is the cause of a run whose stop the next daemon finished:
// why it was stopped, where known, and finishedStopCause.
func finishedStop(why string) string {
	return withStopCause(why, finishedStopCause)
}

// seenThroughCause is said of a run whose stop the daemon that began it
// did not see through, and the next one did, from its unit: its exit
// status is known.
const seenThroughCause = "its daemon went away during the stop, and the next one saw it through"

// withStopCause is why a stop was asked for, then how it ended (one of
// finishedStopCause, seenThroughCause), said once however many daemons
// went away during it.
func withStopCause(why, how string) string {
	if why = stopAskedWhy(why); why == "" {
		return how
	}
	return why + "; " + how
}

// stopAskedWhy is a stop's cause without what a daemon that went away
// during it added: why the stop was asked for.
func stopAskedWhy(cause string) string {
	for _, how := range []string{finishedStopCause, seenThroughCause} {
		cause = strings.TrimSuffix(strings.TrimSuffix(cause, how), "; ")
	}
	return cause
}

// isLoaded says whether the reloads at start have read every file
// (Daemon.loaded).
func (d *Daemon) isLoaded() bool {
	select {
	case <-d.loaded:
		return true
	default:
		return false
	}
}

// runMark is what, besides BERTH_RUN, every process of this berth's runs
// carries: run ids are only unique within one state file.
func (d *Daemon) runMark() map[string]string {
	return map[string]string{"BERTH_INSTANCE": d.store.Instance()}
}

// leftGroup is runner.Spec.LeftGroup for run: the processes that carry
// its BERTH_RUN once a stop of its group has ended it, which left the
// group (setsid, a daemonising fork). The stop sends them its signal and
// gives them the rest of its stop_timeout, so that the run ends, and its
// grant goes back, only once they are gone. A run that ends on its own is
// not searched (a /proc scan per run would be most of a short job's
// cost); under systemd the unit's cgroup holds such processes. While the
// daemon stops every job, one scan answers all (stoppingAll): made as the
// first group ends, it finds the others' groups too, which are left out
// (trial AX: a run's own leader, still saving its work then, was named
// as outside its group).
func (d *Daemon) leftGroup(job string, run uint64) func(group int) []runner.Tagged {
	id := strconv.FormatUint(run, 10)
	asked := false
	return func(group int) []runner.Tagged {
		var found []runner.Tagged
		d.leftMu.Lock()
		if d.stoppingAll && !asked {
			// The stop asks again once those found are gone, for what
			// they started meanwhile: that is scanned for afresh.
			asked = true
			d.leftMu.Unlock()
			d.lastScan.Do(func() { d.lastFound = d.findLeft(nil) })
			found = d.lastFound[id]
		} else {
			asked = true
			reply := make(chan []runner.Tagged, 1)
			if d.leftAsks == nil {
				d.leftAsks = map[string][]chan<- []runner.Tagged{}
			}
			d.leftAsks[id] = append(d.leftAsks[id], reply)
			start := !d.sweeping
			d.sweeping = true
			d.leftMu.Unlock()
			if start {
				go d.sweep()
			}
			found = <-reply
		}
		found = slices.DeleteFunc(slices.Clone(found), func(t runner.Tagged) bool { return t.PGID == group })
		d.logLeft(job, run, found)
		return found
	}
}

// logLeft says which processes of job's run had left its group as it was
// stopped (or were started by those that had, since).
func (d *Daemon) logLeft(job string, run uint64, found []runner.Tagged) {
	if len(found) == 0 {
		return
	}
	pids := make([]int, len(found))
	for i, t := range found {
		pids[i] = t.PID
	}
	d.jobLog(job).Warn("processes of a run being stopped are outside its process group: they are stopped as it is (its stop signal, its stop_timeout), and it ends once they are gone", "run", run, "pids", pids)
}

// findLeft finds the processes of the runs asked (nil: of every run) by
// the BERTH_RUN they carry.
func (d *Daemon) findLeft(asked map[string][]chan<- []runner.Tagged) map[string][]runner.Tagged {
	tagged, err := runner.FindTagged(d.runMark(), "BERTH_RUN")
	if err != nil {
		d.log.Warn("cannot look for processes that left their job's process group", "error", err)
	}
	found := map[string][]runner.Tagged{}
	for _, t := range tagged {
		if _, ok := asked[t.Values[0]]; ok || asked == nil {
			found[t.Values[0]] = append(found[t.Values[0]], t)
		}
	}
	return found
}

// sweep answers the stops waiting in leftAsks, one scan of /proc for all
// those waiting when it begins, until none is left.
func (d *Daemon) sweep() {
	for {
		d.leftMu.Lock()
		asks := d.leftAsks
		d.leftAsks = nil
		if len(asks) == 0 {
			d.sweeping = false
			d.leftMu.Unlock()
			return
		}
		d.leftMu.Unlock()
		found := d.findLeft(asks)
		for run, replies := range asks {
			for _, reply := range replies {
				reply <- found[run]
			}
		}
	}
}

// localRunID numbers a run the state could not record: from the top of the
// range, where the store's own sequence never reaches.
func (d *Daemon) localRunID() uint64 { return 1<<63 | d.localRuns.Add(1) }

func isLocalRunID(id uint64) bool { return id&(1<<63) != 0 }

// cardNames maps the books' card indices to the names jobs see.
func (d *Daemon) cardNames(indices []int) []string {
	names := make([]string, len(indices))
	for i, index := range indices {
		if index < len(d.cfg.Machine.GPUs) {
			names[i] = d.cfg.Machine.GPUs[index]
		} else {
			names[i] = strconv.Itoa(index)
		}
	}
	return names
}

// runEnv is the environment of a run of def, as the list a process
// starts with: the daemon's own, then what the run lays over it (runOver).
func (d *Daemon) runEnv(name string, def *luaapi.Job, index int, login map[string]string, run string, grant accounting.Grant) []string {
	return d.environOver(d.runOver(name, def, index, login, run, grant))
}

// runOver is what a run of def lays over the daemon's environment
// (accounting.EnvOver), then BERTH_INSTANCE, set after the job's own env,
// which may not move a run out of reach of reconciliation and of the sweep.
// name is the job's (NAME[INDEX] for an index of an array, which index
// is then the index).
func (d *Daemon) runOver(name string, def *luaapi.Job, index int, login map[string]string, run string, grant accounting.Grant) map[string]string {
	var arr *accounting.ArrayIndex
	if def.Array != nil {
		arr = &accounting.ArrayIndex{Index: index, Size: def.Array.Size()}
	}
	env := accounting.EnvOver(accounting.EnvInput{
		Daemon:          d.environ,
		Login:           login,
		Job:             name,
		Run:             run,
		Dir:             def.Dir,
		Array:           arr,
		Grant:           grant,
		Unaccounted:     def.Resources.Unaccounted(),
		MachineCPUs:     d.cfg.Machine.CPUs,
		UnaccountedJobs: int(d.unaccounted.Load()),
		Cards:           d.cfg.Machine.GPUs,
		CardMem:         d.shareOf,
		HasCards:        d.cfg.Machine.CardsSeen > 0,
		Declared:        def.Env,
	})
	env["BERTH_INSTANCE"] = d.store.Instance()
	return env
}

// start spawns run of j, which began at began, with the environment its
// grant implies.
func (d *Daemon) start(j *job, run uint64, began time.Time) (process, func(), error) {
	def := j.def
	cred, login, err := jobCredentials(def.User, def.Group)
	if err != nil {
		return nil, nil, err
	}
	if d.cfg.Units != nil {
		// systemd would start the unit and fail it at its chdir, saying
		// why only in its journal: a directory that is not there is said
		// here, as the direct runner says it.
		if err := runner.MissingDir(def.Dir, cred); err != nil {
			return nil, nil, err
		}
		return d.startUnit(j, run, login, cred)
	}
	// The run's start as its record has it, to the second: berth logs
	// --run tells the run's header from a job's line like it by it (a
	// clock read again here could fall in the next second).
	header := runner.RunHeader(run, began)
	// Noted before it is written: a follow of the run before tells it
	// from a job's line like it (runLines.later).
	d.headers.note(j.name, header)
	out, err := d.output(j.name, header)
	if err != nil {
		return nil, nil, err
	}
	over := d.runOver(j.name, def, j.index, login, strconv.FormatUint(run, 10), j.grant)
	if _, set := over["JOURNAL_STREAM"]; !set && out.journal != "" {
		// The child's own stream, so that a journald-aware program sees
		// its stderr is the journal (sd_journal_stream_fd's contract).
		// It replaces the daemon's own; one the job declares stands.
		over["JOURNAL_STREAM"] = out.journal
	}
	spec := runner.Spec{Argv: def.Cmd, Dir: def.Dir, Env: d.environOver(over), Stdout: out.file, Credential: cred, LeftGroup: d.leftGroup(j.name, run)}
	proc, err := runner.Start(spec)
	// The child has its own copy of the output; the daemon's must go, or
	// the log's reader never sees the end of it.
	out.release()
	if err != nil {
		out.finish()
		return nil, nil, err
	}
	// The child started at oom_score_adj 0 (Spec.OOMScoreAdj), never at
	// the daemon's protected value; the daemon took its own back.
	if err := proc.DaemonOOMScoreAdjErr(); err != nil {
		j.log.Warn("cannot take back the daemon's oom_score_adj after starting a job", "pid", proc.PID(), "error", err)
	}
	return proc, out.finish, nil
}

// output is where one run's stdout and stderr go.
type output struct {
	file *os.File
	// journal is the stream's "device:inode" when it is a journal stream.
	journal string
	release func() // drop the daemon's copy, once the child has its own
	finish  func() // after the run was reaped
}

// output opens a run's output: its own journal stream, named after the job,
// or a size-capped file under the state directory, where the run's output
// starts with header (runner.RunHeader).
func (d *Daemon) output(name, header string) (output, error) {
	if d.cfg.JournalSocket != "" {
		f, err := runner.JournalStream(d.cfg.JournalSocket, name, 6)
		if err == nil {
			var st unix.Stat_t
			id := ""
			if unix.Fstat(int(f.Fd()), &st) == nil {
				id = fmt.Sprintf("%d:%d", st.Dev, st.Ino)
			}
			return output{file: f, journal: id, release: func() { f.Close() }, finish: func() {}}, nil
		}
		d.jobLog(name).Warn("cannot open a journal stream; writing to a file", "error", err)
	}
	// A person's job logs under its owner's name: logs/alice/train.log.
	logs := filepath.Join(d.cfg.StateDir, "logs")
	dir, short := logs, name
	if owner, rest, ok := strings.Cut(name, "/"); ok {
		dir, short = filepath.Join(logs, owner), rest
	}
	sink, err := runner.OpenLog(dir, short, d.cfg.LogBytes, header)
	if errors.Is(err, os.ErrNotExist) {
		// A person's directory is made at their first run, and the
		// jobs' again should someone have removed it (to free space),
		// rather than at each run.
		if err := os.Mkdir(logs, 0o750); err == nil {
			d.log.Warn("the jobs' log directory was removed; made it again", "dir", logs)
		}
		if err := os.Mkdir(dir, 0o750); err != nil && !errors.Is(err, os.ErrExist) {
			return d.discardOutput(dir, err)
		}
		sink, err = runner.OpenLog(dir, short, d.cfg.LogBytes, header)
	}
	// Where the directory cannot take it (unwritable, not a directory, the
	// state directory gone), the run goes on, its output thrown away, and
	// the status says why, for the machine rather than for each job.
	if pe, ok := errors.AsType[*os.PathError](err); ok && pe.Op == "access" {
		return d.discardOutput(dir, pe.Err)
	}
	if err != nil {
		return output{}, err
	}
	d.noteLogsFine(dir)
	return output{
		file:    sink.File(),
		release: func() { _ = sink.CloseWriter() },
		finish: func() {
			// A descendant that left the group may hold the pipe open for
			// ever: do not wait on it past a bound.
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			err := sink.CloseContext(ctx)
			switch {
			case errors.Is(err, context.DeadlineExceeded):
				// All the run wrote is kept; a process it left behind
				// holds the pipe (trial AX: "not fully written").
				d.jobLog(name).Warn("a process a run left behind holds its output open: what it writes from now on is not kept, and its next write fails")
			case err != nil:
				d.jobLog(name).Warn("job output not fully written", "error", err)
			}
			d.noteOutputCut(name, dir, err)
		},
	}, nil
}

func environList(env map[string]string) []string {
	keys := slices.Sorted(maps.Keys(env))
	out := make([]string, len(keys))
	for i, k := range keys {
		out[i] = k + "=" + env[k]
	}
	return out
}

// environOver is environList of the daemon's environment with over laid
// on it: a run's environment, from the daemon's own entries, sorted once,
// and the run's few. Building the whole environment as a map and sorting
// it for every run was a tenth of the daemon's allocations in a stream of
// short runs.
func (d *Daemon) environOver(over map[string]string) []string {
	keys := slices.Sorted(maps.Keys(over))
	out := make([]string, 0, len(d.environKV)+len(keys))
	i := 0 // the next of the daemon's entries
	for _, k := range keys {
		for i < len(d.environKeys) && d.environKeys[i] < k {
			out = append(out, d.environKV[i])
			i++
		}
		if i < len(d.environKeys) && d.environKeys[i] == k {
			i++ // replaced
		}
		out = append(out, k+"="+over[k])
	}
	return append(out, d.environKV[i:]...)
}
