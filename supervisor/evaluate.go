package supervisor

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"os/user"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
	"golang.org/x/sys/unix"

	"github.com/berthd/berth/luaapi"
)

// Evaluator evaluates job files in a short-lived child process, so that no
// file can stall or kill the daemon: the child runs berth's hidden eval
// command, which sets its own kernel limits (memory, CPU time, no new
// privileges, an unprivileged user) before it reads a byte of Lua, and
// answers file by file (luaapi.Serve). A file that kills the child, or
// that the child does not finish in time, is refused with the limit it
// crossed; the files after it go to a new child.
type Evaluator struct {
	// Command is the child's argv before the limits: cmd/ gives berth's
	// own binary and its hidden eval command.
	Command []string
	// Env is the child's environment; nil inherits the daemon's (Lua
	// cannot read it: the sandbox has no os).
	Env []string
	// UID and GID are who the child becomes before it reads a file, when
	// the daemon is root; -1 keeps the daemon's.
	UID, GID int
	// MemoryBytes bounds the child's data (RLIMIT_DATA).
	MemoryBytes int64
	// Budget is each file's CPU time; zero means luaapi.DefaultBudget.
	Budget time.Duration
	// Deadline bounds one Evaluate; the files whose turn has not come by
	// then are refused as not evaluated.
	Deadline time.Duration
	// CheckDeadline bounds one Evaluate of files sent to be checked
	// (DefaultCheckDeadline where 0).
	CheckDeadline time.Duration
	// Log receives the child's log: print from job files, warnings.
	Log hclog.Logger

	spareMu sync.Mutex
	spare   *evalChild // Prestart's, for the next Evaluate's first batch
}

// evalChild is a started child and its pipes, waiting for its request.
type evalChild struct {
	cmd            *exec.Cmd
	stdin          io.WriteCloser
	stdout, stderr io.ReadCloser
	uid, gid       int
}

// Defaults for an Evaluator's limits.
const (
	// DefaultEvalMemory leaves room above luaapi's own heap guard (256 MiB
	// of growth, which reports the file's line) for the runtime.
	DefaultEvalMemory = 512 << 20
	// DefaultEvalDeadline is how long one reload may evaluate. The
	// daemon keeps answering meanwhile; it bounds how stale a reload's
	// view can get when many hostile files arrive at once.
	DefaultEvalDeadline = 60 * time.Second
	// DefaultCheckDeadline bounds the evaluation of one check (berth
	// submit, berth edit, POST /v1/check): two people's checks of files
	// that loop to their budget held everyone's berth submit for the
	// reload's 60 s.
	DefaultCheckDeadline = 10 * time.Second
	// DefaultEvalShare is a reload's share for each person (Config.
	// EvalShare): far more than hundreds of ordinary files take, and short
	// enough that one person's looping files delay another person's submit
	// by seconds, not the Deadline.
	DefaultEvalShare = 2 * time.Second
)

// Exit codes of the eval command that the parent tells apart.
const (
	// EvalExitAbandoned: a file had to be stopped (abandoned in a builtin,
	// or at its budget or memory bound); its result was sent, and the
	// process ended so that the builtin stops and its memory goes.
	EvalExitAbandoned = 3
)

// evalWallSlack is added to a file's wall-clock bound in the parent, past
// the child's own (luaapi's ten times the budget, plus its grace): the
// child normally reports a slow file itself, with its line.
const evalWallSlack = 2 * time.Second

// Evaluate evaluates srcs, in order, and returns one File per source, in
// the same order. It never fails: what went wrong is in the files' errors.
// Once ctx is done (the caller called it off) it returns at once the files
// evaluated so far, the first of srcs, and kills the child evaluating the
// next.
func (e *Evaluator) Evaluate(ctx context.Context, m luaapi.Machine, srcs []luaapi.Source) []*luaapi.File {
	return e.evaluate(ctx, m, srcs, 0)
}

// evaluate is Evaluate, each person's files held to share of wall-clock
// time, so that nobody's files hold back everyone else's reload: once a
// person's files have taken it, their child stops after the file in hand
// (at least one is always evaluated), and the rest of theirs are refused
// as not evaluated yet, for the next reload. Each owner's files come
// together in srcs (evalOrder), as their time counts from their first
// file on. Zero: no share; the administrators' files (owner "") have none.
func (e *Evaluator) evaluate(ctx context.Context, m luaapi.Machine, srcs []luaapi.Source, share time.Duration) []*luaapi.File {
	budget := e.Budget
	if budget <= 0 {
		budget = luaapi.DefaultBudget
	}
	deadline := e.Deadline
	if deadline <= 0 {
		deadline = DefaultEvalDeadline
	}
	notEvaluated, stopped := luaapi.ErrNotEvaluated, luaapi.ErrReloadDeadline
	checked, _ := ctx.Value(checkingKey{}).(bool)
	if checked {
		// A check holds one of the few places checks have, and others
		// wait for it: its files get less time than a reload's.
		deadline = min(deadline, cmp.Or(e.CheckDeadline, DefaultCheckDeadline))
		notEvaluated, stopped = luaapi.ErrCheckTimeUp, luaapi.ErrCheckDeadline
	}
	calledOff := ctx
	ctx, cancel := context.WithTimeout(ctx, deadline)
	defer cancel()
	// Prestart's child serves the first batch if it is theirs; it serves
	// no later one.
	spare := e.takeSpare()
	defer func() { spare.discard() }()
	out := make([]*luaapi.File, 0, len(srcs))
	shareBegan := map[string]time.Time{} // each person's first batch
	inHand := ""                         // the file the last child was stopped during
	for rest := srcs; len(rest) > 0; {
		if calledOff.Err() != nil {
			break
		}
		if ctx.Err() != nil {
			// The first file took the whole reload: it is charged, so
			// that the reloads after this one get further. A check is
			// not tried again: the file it was on is said to be stopped.
			if len(out) == 0 || checked && inHand == rest[0].Path {
				out = append(out, failed(rest[0].Path, stopped(rest[0].Path, deadline)))
				rest = rest[1:]
			}
			for _, s := range rest {
				out = append(out, &luaapi.File{Path: s.Path, Errors: []*luaapi.Error{notEvaluated(s.Path, deadline)}})
			}
			break
		}
		b := batch(rest)
		owner := b[0].Owner
		var shareLeft time.Duration
		if owner != "" && share > 0 {
			began, seen := shareBegan[owner]
			if !seen {
				began = time.Now()
				shareBegan[owner] = began
			}
			shareLeft = share - time.Since(began)
			if seen && shareLeft <= 0 {
				// Theirs had their turn (a file at least): the rest wait
				// for the next Evaluate, after everyone else's.
				n := 0
				for n < len(rest) && rest[n].Owner == owner {
					out = append(out, &luaapi.File{Path: rest[n].Path, Errors: []*luaapi.Error{luaapi.ErrShareSpent(rest[n].Path, owner, share)}})
					n++
				}
				rest = rest[n:]
				continue
			}
			shareLeft = max(shareLeft, time.Nanosecond) // their first file is evaluated all the same
		}
		uid, gid, err := e.credentialsOf(owner)
		if err != nil {
			// Theirs cannot be evaluated as anyone else: refused until
			// the account is fixed.
			for _, s := range b {
				out = append(out, failed(s.Path, luaapi.ErrEvaluator(s.Path, err.Error())))
			}
			rest = rest[len(b):]
			continue
		}
		var started *evalChild
		if spare != nil && spare.uid == uid && spare.gid == gid {
			started = spare
		} else {
			spare.discard()
		}
		spare = nil
		var done []*luaapi.File
		var broken string
		done, inHand, broken = e.child(ctx, m, budget, shareLeft, started, uid, gid, b)
		out = append(out, done...)
		rest = rest[len(done):]
		if broken != "" {
			// It would fail the same way for every file after: those of
			// its owner. A person's child may have been killed by that
			// person (it runs as them): the others' files go on.
			upTo := len(rest)
			if owner != "" {
				upTo = len(b) - len(done)
			}
			for _, s := range rest[:upTo] {
				out = append(out, failed(s.Path, luaapi.ErrEvaluator(s.Path, broken)))
			}
			rest = rest[upTo:]
			if owner == "" {
				break
			}
		}
	}
	return out
}

// evalBatchBytes bounds the sources one child is handed: the request is
// read whole, under the child's memory limit.
const evalBatchBytes = 32 << 20

// batch is the first files of srcs that one child takes: at least one,
// all of one owner, and no more than evalBatchBytes of source.
func batch(srcs []luaapi.Source) []luaapi.Source {
	n, size := 1, len(srcs[0].Src)
	for n < len(srcs) && srcs[n].Owner == srcs[0].Owner && size+len(srcs[n].Src) <= evalBatchBytes {
		size += len(srcs[n].Src)
		n++
	}
	return srcs[:n]
}

// evalOrder orders a reload's sources for Evaluate: the administrators'
// first, then each person's together, the person with the fewest first
// (by name among equals), each owner's in their path order. A person's
// many files, or slow ones, come after everyone else's, and their share
// (Config.EvalShare) sends what is left of them to the next reload.
func evalOrder(srcs []luaapi.Source) {
	count := map[string]int{}
	for _, s := range srcs {
		count[s.Owner]++
	}
	slices.SortStableFunc(srcs, func(a, b luaapi.Source) int {
		if a.Owner == b.Owner {
			return 0
		}
		if a.Owner == "" {
			return -1
		}
		if b.Owner == "" {
			return 1
		}
		return cmp.Or(cmp.Compare(count[a.Owner], count[b.Owner]), strings.Compare(a.Owner, b.Owner))
	})
}

// inForceFirst orders each owner's sources, as evalOrder left them, so
// that those inForce says were in force when the last daemon stopped come
// first. At a daemon's start every file is evaluated again, and files that
// failed before (an endless loop takes its whole budget) would otherwise
// hold back the good ones after them, past the reload's deadline (trial
// AF: fifteen such files kept a good one out for 15 s).
func inForceFirst(srcs []luaapi.Source, inForce func(luaapi.Source) bool) {
	group := map[string]int{} // each owner's place, as evalOrder put them
	for _, s := range srcs {
		if _, ok := group[s.Owner]; !ok {
			group[s.Owner] = len(group)
		}
	}
	known := make(map[string]bool, len(srcs))
	for _, s := range srcs {
		known[s.Path] = inForce(s)
	}
	rank := func(s luaapi.Source) int {
		if known[s.Path] {
			return 0
		}
		return 1
	}
	slices.SortStableFunc(srcs, func(a, b luaapi.Source) int {
		return cmp.Or(cmp.Compare(group[a.Owner], group[b.Owner]), cmp.Compare(rank(a), rank(b)))
	})
}

// Prestart starts the child that is to evaluate the administrators' files
// (owner "") in the next Evaluate, so that its start, which is mostly the
// Go runtime's start in a large binary, overlaps the caller's own: the
// daemon's probes and state. The child takes its limits and its user at
// once, then waits for its request; an Evaluate whose first batch is
// someone else's, and Discard, end it.
func (e *Evaluator) Prestart() {
	c, err := e.start(e.UID, e.GID)
	if err != nil {
		return // Evaluate starts its own, and says why it cannot
	}
	e.spareMu.Lock()
	old := e.spare
	e.spare = c
	e.spareMu.Unlock()
	old.discard()
}

// Discard ends Prestart's child if no Evaluate has taken it.
func (e *Evaluator) Discard() { e.takeSpare().discard() }

func (e *Evaluator) takeSpare() *evalChild {
	e.spareMu.Lock()
	defer e.spareMu.Unlock()
	c := e.spare
	e.spare = nil
	return c
}

// start starts a child that becomes uid and gid under the Evaluator's
// limits; its request follows on its stdin.
func (e *Evaluator) start(uid, gid int) (*evalChild, error) {
	argv := append(append([]string(nil), e.Command...),
		"--memory", strconv.FormatInt(e.memory(), 10),
		"--uid", strconv.Itoa(uid), "--gid", strconv.Itoa(gid),
		"--parent", strconv.Itoa(os.Getpid()))
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = e.Env
	cmd.Dir = "/"
	// Its own group, so that a kill reaches anything it became; and it
	// dies with the daemon.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	c := &evalChild{cmd: cmd, uid: uid, gid: gid}
	var err error
	if c.stdin, err = cmd.StdinPipe(); err != nil {
		return nil, err
	}
	if c.stdout, err = cmd.StdoutPipe(); err != nil {
		return nil, err
	}
	if c.stderr, err = cmd.StderrPipe(); err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("cannot start it: %w", err)
	}
	return c, nil
}

// discard kills a child that was never handed a request, and waits for it.
func (c *evalChild) discard() {
	if c == nil {
		return
	}
	_ = syscall.Kill(-c.cmd.Process.Pid, syscall.SIGKILL)
	_ = c.cmd.Wait()
}

// child runs one child over srcs, started (Prestart's, for uid and gid)
// or a new one, and returns the files it dealt with, in order: every file
// it answered, then, if it died during one, that file refused with the
// cause. It returns at least one file unless ctx ended (then inHand is
// the file the child was on, if any), or broken: why no child can
// evaluate anything (it cannot start, or dies before its first file).
// Once share has passed (if above zero) it stops the child after the file
// in hand.
func (e *Evaluator) child(ctx context.Context, m luaapi.Machine, budget, share time.Duration, started *evalChild, uid, gid int, srcs []luaapi.Source) (done []*luaapi.File, inHand, broken string) {
	// The kernel's CPU limit is for the whole batch, with room to spare:
	// each file is held to its own budget by the child, and to a wall
	// bound by the timer below. The child sets it once it has read the
	// request, before it evaluates a byte.
	cpuSeconds := int64((time.Duration(len(srcs))*budget*3/2)/time.Second) + 2
	req, err := json.Marshal(luaapi.EvalRequest{Machine: m, Budget: budget, CPUSeconds: uint64(cpuSeconds), Files: srcs})
	if err != nil {
		started.discard()
		return nil, "", err.Error()
	}
	c := started
	if c == nil {
		if c, err = e.start(uid, gid); err != nil {
			return nil, "", err.Error()
		}
	}
	cmd, stdout, stderr := c.cmd, c.stdout, c.stderr

	var relay sync.WaitGroup
	relay.Go(func() {
		// A child that does not read it all ends this write when it dies
		// (EPIPE): it is killed below before the relay is waited for.
		_, _ = c.stdin.Write(req)
		_ = c.stdin.Close()
	})
	tail := &stderrTail{}
	relay.Go(func() { e.relayLog(ctx, stderr, tail) })
	replies := make(chan luaapi.EvalReply)
	readErr := make(chan error, 1)
	relay.Go(func() {
		defer close(replies)
		// A child is berth's own code, but it has run hostile Lua: each
		// line of its answer is read with a bound, so that no file
		// brings more into the daemon than evalReplyLimit.
		br := bufio.NewReader(stdout)
		for {
			line, err := readReply(br)
			if err != nil {
				if !errors.Is(err, io.EOF) {
					readErr <- err
				}
				return
			}
			var r luaapi.EvalReply
			if err := json.Unmarshal(line, &r); err != nil {
				readErr <- err
				return
			}
			replies <- r
		}
	})

	current := ""
	wall := luaapi.WallFactor*budget + evalWallSlack
	timer := time.NewTimer(wall)
	defer timer.Stop()
	killed := ""
	ended := ctx.Done()
	var shareEnds time.Time
	if share > 0 {
		shareEnds = time.Now().Add(share)
	}
	kill := func(why string) {
		if killed == "" {
			killed = why
			ended = nil // told once is enough; wait for its output to close
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		}
	}
	for replies != nil {
		select {
		case r, ok := <-replies:
			switch {
			case !ok:
				replies = nil
			case killed != "" && killed != calledOff:
				// Past trusting: what it says now is not taken. (Called
				// off, it did nothing wrong: what it wrote before the kill
				// and the daemon has not read yet is still taken, in turn.)
			case r.Begin != "":
				current = r.Begin
				timer.Reset(wall)
			case r.File != nil && r.File.Path == current && len(done) < len(srcs) && srcs[len(done)].Path == current:
				done = append(done, r.File)
				current = ""
				if !shareEnds.IsZero() && !time.Now().Before(shareEnds) {
					kill(calledOff)
				}
			case killed == calledOff:
				killed = "it answered out of turn" // and nothing more is taken
			default:
				kill("it answered out of turn")
			}
		case <-timer.C:
			if current != "" {
				kill("wall")
			}
		case <-ended:
			kill(calledOff)
		}
	}
	// The reader sends its error before it closes replies.
	tooLarge := false
	select {
	case err := <-readErr:
		tooLarge = errors.Is(err, errReplyTooLarge)
		if killed == "" {
			killed = "its answer could not be read: " + err.Error()
		}
	default:
	}
	// It has closed its output, so it is ending, or it is past trusting:
	// either way its group goes (a signal to a group that has exited
	// changes nothing), and what is left of its output is thrown away.
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	_, _ = io.Copy(io.Discard, stdout)
	relay.Wait()
	werr := cmd.Wait()

	if len(done) == len(srcs) {
		return done, "", ""
	}
	path := srcs[len(done)].Path
	if current != "" && current != path {
		killed = "it answered out of turn"
	}
	switch {
	case tooLarge:
		return append(done, failed(path, luaapi.ErrDeclaresTooMuch(path, evalReplyLimit))), "", ""
	case killed == calledOff:
		if current == path {
			inHand = path
		}
		return done, inHand, "" // Evaluate refuses the rest as not evaluated
	case killed == "wall":
		return append(done, failed(path, luaapi.ErrWallLimit(path, wall, budget))), "", ""
	case killed != "":
		return append(done, failed(path, luaapi.ErrEvaluator(path, killed))), "", ""
	case current == "" && len(done) == 0:
		// It died before its first file: its start failed (a limit it
		// could not set, a user it could not become), and would again.
		why := firstLine(tail.String())
		if why == "" && werr != nil {
			why = werr.Error()
		}
		if why == "" {
			why = "it ended without answering"
		}
		return nil, "", why
	case current == "":
		// It ended after answering for a file and before beginning the
		// next: by design after a file it had to stop, otherwise in a way
		// no file is to blame for. Either way the rest go to a new child.
		if cmd.ProcessState.ExitCode() != EvalExitAbandoned {
			e.logger().Warn("the process that evaluates job files ended between two files", "next", path, "error", firstLine(tail.String()))
		}
		return done, "", ""
	}
	return append(done, failed(path, e.cause(path, cmd.ProcessState, tail.String(), budget, cpuSeconds))), "", ""
}

// calledOff is why a child was stopped that did nothing wrong: its
// Evaluate's deadline came, its caller called it off, or its owner's share
// was spent.
const calledOff = "called off"

// credentialsOf is who the child evaluating owner's files becomes: the
// person themselves (so that their file can reach nothing they could not),
// or, for the administrators' files (owner ""), the Evaluator's UID and
// GID. A daemon that is not root cannot become anyone: its children keep
// its own uid.
func (e *Evaluator) credentialsOf(owner string) (uid, gid int, err error) {
	if owner == "" || e.UID < 0 {
		return e.UID, e.GID, nil
	}
	u, err := user.Lookup(owner)
	if err != nil {
		return 0, 0, fmt.Errorf("cannot evaluate it as its owner: %w", err)
	}
	uid, _ = strconv.Atoi(u.Uid)
	gid, _ = strconv.Atoi(u.Gid)
	if uid == 0 {
		return 0, 0, fmt.Errorf("cannot evaluate it as its owner %s, who is root", owner)
	}
	return uid, gid, nil
}

// evalReplyLimit bounds one line of a child's answer, so one file's
// declarations: a file of a thousand jobs sends a few hundred KiB.
const evalReplyLimit = 8 << 20

// errReplyTooLarge is a line of a child's answer past evalReplyLimit.
var errReplyTooLarge = errors.New("a reply larger than the bound")

// readReply reads one line of a child's answer, without its newline, and
// no more than evalReplyLimit of it.
func readReply(br *bufio.Reader) ([]byte, error) {
	var line []byte
	for {
		chunk, err := br.ReadSlice('\n')
		line = append(line, chunk...)
		switch {
		case len(line) > evalReplyLimit:
			return nil, errReplyTooLarge
		case err == bufio.ErrBufferFull:
			continue
		case err != nil:
			if err == io.EOF && len(line) > 0 {
				return nil, io.ErrUnexpectedEOF
			}
			return nil, err
		}
		return line[:len(line)-1], nil
	}
}

// cause says why a child ended before it answered for path; began says
// whether it had begun path (or died before reading any file).
func (e *Evaluator) cause(path string, ps *os.ProcessState, stderr string, budget time.Duration, cpuSeconds int64) *luaapi.Error {
	ws, _ := ps.Sys().(syscall.WaitStatus)
	switch {
	case ws.Signaled() && ws.Signal() == syscall.SIGXCPU:
		return luaapi.ErrCPULimit(path, budget)
	case ws.Signaled() && ws.Signal() == syscall.SIGKILL && ps.UserTime()+ps.SystemTime() >= time.Duration(cpuSeconds)*time.Second:
		return luaapi.ErrCPULimit(path, budget) // the hard limit
	case ws.Signaled():
		return luaapi.ErrEvaluator(path, "killed by "+unix.SignalName(ws.Signal())+", by neither berth nor its limits (the kernel's out-of-memory killer?)")
	case ws.ExitStatus() == 2 && (strings.Contains(stderr, "out of memory") || strings.Contains(stderr, "cannot allocate memory")):
		// The Go runtime's fatal error when RLIMIT_DATA refuses it memory
		// for its heap or for a goroutine's stack.
		return luaapi.ErrMemoryLimit(path, e.memory())
	case ws.ExitStatus() == 2 && (strings.HasPrefix(strings.TrimSpace(stderr), "SIGSEGV: segmentation violation") ||
		strings.Contains(stderr, "pthread_create failed")):
		// The same limit, said otherwise. A thread's stack (8 MiB, as cgo
		// makes them) is data too, and refused, fails pthread_create. And
		// a fault inside the runtime itself, not a Go panic (which starts
		// "panic:"): Go 1.26's garbage collector can fault on memory it
		// was refused (runtime.(*spanQueue).tryDrain) instead of saying
		// "out of memory". Each was seen in about 1 run of 5 of
		// TestEvaluatorMemoryLimit under load; berth's own code can do
		// neither.
		return luaapi.ErrMemoryLimit(path, e.memory())
	}
	return luaapi.ErrEvaluator(path, fmt.Sprintf("exit %d: %s", ws.ExitStatus(), firstLine(stderr)))
}

// firstLine is the first line of s that says something.
func firstLine(s string) string {
	line, _, _ := strings.Cut(strings.TrimSpace(s), "\n")
	return strings.TrimSpace(line)
}

func failed(path string, err *luaapi.Error) *luaapi.File {
	return &luaapi.File{Path: path, Errors: []*luaapi.Error{err}}
}

func (e *Evaluator) memory() int64 {
	if e.MemoryBytes > 0 {
		return e.MemoryBytes
	}
	return DefaultEvalMemory
}

// relayLog passes the child's log lines (hclog JSON: print from job files)
// to the daemon's log, and keeps the tail of anything else it writes (a Go
// runtime's fatal error) for the cause of its death.
func (e *Evaluator) relayLog(ctx context.Context, r io.Reader, tail *stderrTail) {
	log := e.logger()
	if checked, _ := ctx.Value(checkingKey{}).(bool); checked {
		// Not a file loaded: one sent to be checked (berth submit,
		// berth edit), which may never be written.
		log = log.With("checked", true)
	}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), 64<<10)
	for sc.Scan() {
		var entry map[string]any
		if json.Unmarshal(sc.Bytes(), &entry) != nil {
			_, _ = tail.Write(append(sc.Bytes(), '\n'))
			continue
		}
		msg, _ := entry["@message"].(string)
		level, _ := entry["@level"].(string)
		var kv []any
		for _, k := range slices.Sorted(maps.Keys(entry)) {
			if !strings.HasPrefix(k, "@") {
				kv = append(kv, k, entry[k])
			}
		}
		log.Log(hclog.LevelFromString(level), msg, kv...)
	}
	// A line past the scanner's bound ends the relay; what follows is
	// only kept for the cause.
	_, _ = io.Copy(tail, r)
}

// stderrTail keeps the first and the last bytes written to it: a Go
// runtime that dies says why first ("fatal error: out of memory"), then
// dumps every goroutine.
type stderrTail struct {
	mu   sync.Mutex // guards head and tail
	head []byte
	tail []byte
}

const stderrKeepBytes = 2048

func (t *stderrTail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := len(p)
	if room := stderrKeepBytes - len(t.head); room > 0 {
		k := min(room, len(p))
		t.head = append(t.head, p[:k]...)
		p = p[k:]
	}
	t.tail = append(t.tail, p...)
	if len(t.tail) > stderrKeepBytes {
		t.tail = append(t.tail[:0], t.tail[len(t.tail)-stderrKeepBytes:]...)
	}
	return n, nil
}

func (t *stderrTail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.head) + string(t.tail)
}

// checkingKey marks the context of an evaluation of files sent to be
// checked (POST /v1/check), whose prints are logged as such.
type checkingKey struct{}

func (e *Evaluator) logger() hclog.Logger {
	if e.Log == nil {
		return hclog.NewNullLogger()
	}
	return e.Log
}
