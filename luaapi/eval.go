package luaapi

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"maps"
	"math/rand/v2"
	"runtime"
	"runtime/metrics"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	lua "github.com/yuin/gopher-lua"
	"github.com/yuin/gopher-lua/parse"
)

const (
	// defaultGrace is how long past its budget a file's result is still
	// awaited. A pure-Lua loop stops within milliseconds of the deadline;
	// only a long builtin overruns, and that one is abandoned.
	defaultGrace = 100 * time.Millisecond
	// defaultHeapLimit bounds how far one file may grow the heap. A normal
	// file needs well under a MiB; this is generous enough never to trip on
	// a real file and small enough that a runaway one cannot take the box.
	defaultHeapLimit = 256 << 20
	// heapSampleEvery is how often the heap guard looks. Reading one metric
	// costs about a microsecond; a doubling string can grow by hundreds of
	// MiB in tens of milliseconds.
	heapSampleEvery = 2 * time.Millisecond
	// confirmEvery bounds how often the heap guard collects garbage to see
	// whether the heap's growth is live.
	confirmEvery = 50 * time.Millisecond
	// maxSourceBytes bounds a job file; 1 MiB of Lua declares thousands of
	// jobs.
	maxSourceBytes = 1 << 20
	// maxDeclsPerFile bounds the jobs and flavors of one file, an array's
	// indices counted: a sweep of a few thousand is a job file, a loop to
	// a million is not.
	maxDeclsPerFile = 10000
	// maxErrorsPerFile keeps a loop over a mistake from flooding the log.
	maxErrorsPerFile = 50
)

// The causes with which the guards cancel an evaluation.
var (
	errHeapLimit   = errors.New("heap grew past the bound")
	errBudgetSpent = errors.New("CPU budget spent")
	errWallSpent   = errors.New("wall-clock bound passed")
)

// WallFactor bounds a file's wall-clock time to this many times its CPU
// budget: a file that gets less than a tenth of a core (a machine far past
// busy), or that waits on something, is stopped all the same.
const WallFactor = 10

// evalMu serialises evaluations. The heap guard measures the whole process,
// so two files evaluated at once could be blamed for each other's growth.
// An abandoned evaluation releases it when it is abandoned, not when its
// goroutine ends, so one stuck builtin cannot stall every later load.
var evalMu sync.Mutex

// running counts the goroutines that run a file, abandoned ones included:
// Serve ends its process while one was abandoned and still runs, and tests
// wait until none lingers (an abandoned builtin still growing the heap
// would be blamed on the next file by the heap guard).
var running atomic.Int32

// Eval evaluates one file's source in a fresh sandbox. path names the chunk
// and appears in every message. It never panics and always returns within
// the budget plus a short grace.
func Eval(path string, src []byte, opts Options) *File {
	sum := sha256.Sum256(src)
	f := &File{Path: path, Hash: hex.EncodeToString(sum[:])}
	if len(src) > maxSourceBytes {
		f.Errors = []*Error{errFileTooLarge(path, len(src), maxSourceBytes)}
		return f
	}
	budget := opts.Budget
	if budget <= 0 {
		budget = DefaultBudget
	}
	grace := opts.grace
	if grace <= 0 {
		grace = defaultGrace
	}
	heapLimit := opts.heapLimitBytes
	if heapLimit <= 0 {
		heapLimit = defaultHeapLimit
	}
	logger := opts.Logger
	if logger == nil {
		logger = hclog.NewNullLogger()
	}
	ev := &evaluator{
		path:       path,
		src:        src,
		seed:       sum,
		machine:    opts.Machine,
		owner:      opts.Owner,
		hold:       opts.hold,
		logger:     logger,
		budget:     budget,
		heapLimit:  heapLimit,
		raised:     make(map[string]bool),
		unrecorded: make(map[string]*Error),
		seen:       make(map[string]int),
	}

	evalMu.Lock()
	defer evalMu.Unlock()

	// The budget is CPU time, so that a file's fate does not depend on how
	// busy the machine is; the guards below stop the file by cancelling
	// ctx, with the cause saying which limit it crossed.
	ctx, stop := context.WithCancelCause(context.Background())
	defer stop(nil)

	baseline := heapBytes()
	cpuStart, wallStart := processCPUTime(), time.Now()
	var collected collection
	done := make(chan outcome, 1) // buffered: an abandoned evaluation must not block on sending
	running.Add(1)
	go func() {
		out := ev.run(ctx)
		// Counted out before the result is handed over, so that a caller
		// that has the result never sees this goroutine as still running.
		running.Add(-1)
		done <- out
	}()

	tick := time.NewTicker(heapSampleEvery)
	defer tick.Stop()
	// abandon fires once the file has been told to stop and has not: it is
	// in a builtin that does not look at ctx.
	abandon := time.NewTimer(time.Hour)
	abandon.Stop()
	defer abandon.Stop()
	for {
		select {
		case out := <-done:
			if len(out.errs) > 0 {
				f.Errors, f.Partial = capErrors(path, out.errs), out.partial
				return f
			}
			f.Flavors, f.Jobs, f.Quotas = out.flavors, out.jobs, out.quotas
			return f
		case <-tick.C:
			switch {
			case ctx.Err() != nil:
			case time.Since(wallStart) >= WallFactor*budget:
				// Looked at first: when both bounds have passed, the
				// file had at most a tenth of a core, and what CPU time
				// the process spent meanwhile was more the runtime's
				// and this guard's than the file's.
				stop(errWallSpent)
				abandon.Reset(grace)
			case processCPUTime()-cpuStart >= budget:
				// What it holds, not garbage an endless loop churns: the
				// last collection found much of it live too. (No
				// collection here: the file runs on until stopped.)
				if grown := heapBytes() - baseline; liveHeapBytes()-baseline >= heapLimit/16 {
					ev.grownAtBudget.Store(grown)
				}
				stop(errBudgetSpent)
				abandon.Reset(grace)
			default:
				if overHeap(baseline, heapLimit, &collected) {
					stop(errHeapLimit)
					abandon.Reset(grace)
				}
			}
		case <-abandon.C:
			// The evaluation is stuck in a builtin. Leave it to finish on its
			// own: its result goes into the buffered channel and is dropped.
			f.Errors = []*Error{ev.stopped(context.Cause(ctx), 0)}
			return f
		}
	}
}

// stopped is the error for a file that a guard stopped, cause saying which.
func (ev *evaluator) stopped(cause error, line int) *Error {
	switch cause {
	case errHeapLimit:
		return errMemory(ev.path, line, ev.heapLimit)
	case errWallSpent:
		return errWallBudget(ev.path, line, WallFactor*ev.budget, ev.budget)
	}
	return errBudget(ev.path, line, ev.budget, ev.grownAtBudget.Load(), ev.heapLimit)
}

func capErrors(path string, errs []*Error) []*Error {
	if len(errs) <= maxErrorsPerFile {
		return errs
	}
	out := append([]*Error(nil), errs[:maxErrorsPerFile]...)
	return append(out, errTruncated(path, len(errs)-maxErrorsPerFile))
}

// heapBytes is the heap occupied by objects, live or not yet swept. It is
// cheap, so the guard reads it on every tick.
func heapBytes() int64 { return readMetric("/memory/classes/heap/objects:bytes") }

// liveHeapBytes is what the last completed collection found live.
func liveHeapBytes() int64 { return readMetric("/gc/heap/live:bytes") }

// farOver is how many times its bound a file's growth must be for the heap
// guard to stop it without asking the collector: the collector keeps
// garbage below about the live heap (GOGC=100), so growth that large is
// held, not churned.
const farOver = 4

// collection is the heap guard's collection in flight, if any.
type collection struct {
	running atomic.Bool
	last    time.Time
}

// overHeap reports whether the file has grown the heap past limit since
// baseline. Past the limit, the growth may be garbage a busy collector has
// not swept yet (an endless loop of arithmetic churns through boxed
// numbers), which must not be mistaken for a file that holds the memory:
// the guard then starts a collection, at most every confirmEvery, and asks
// again on later ticks what it found live. The collection runs beside the
// guard, never in it: a guard waiting for the collector while a string
// doubles in the file would let it reach gigabytes.
func overHeap(baseline, limit int64, c *collection) bool {
	grown := heapBytes() - baseline
	switch {
	case grown <= limit:
		return false
	case grown > farOver*limit, liveHeapBytes()-baseline > limit:
		return true
	}
	if !c.running.Load() && time.Since(c.last) >= confirmEvery {
		c.last = time.Now()
		c.running.Store(true)
		go func() {
			runtime.GC()
			c.running.Store(false)
		}()
	}
	return false
}

func readMetric(name string) int64 {
	s := []metrics.Sample{{Name: name}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return int64(s[0].Value.Uint64())
}

// outcome is what an evaluation hands back to Eval.
type outcome struct {
	errs    []*Error
	flavors []Flavor
	jobs    []Job
	quotas  []Quota
	partial *Partial // with errs, where the file ran to its end
}

// evaluator is one file's evaluation. It is owned by the goroutine that
// runs it; Eval only reads the outcome it sends.
type evaluator struct {
	path      string
	src       []byte
	seed      [32]byte
	machine   Machine
	owner     string // the person whose file it is; "" for an administrator's
	logger    hclog.Logger
	budget    time.Duration
	heapLimit int64
	hold      <-chan struct{}
	// grownAtBudget is what the file had grown the heap by when its
	// budget ran out.
	grownAtBudget atomic.Int64

	errs []*Error
	// raised holds the sentences of errors that were both recorded and
	// raised into Lua, so the same mistake is not reported again when it
	// ends the file.
	raised map[string]bool
	// unrecorded holds errors raised but not recorded (a file may catch
	// them); if one ends the file it is reported as itself.
	unrecorded map[string]*Error
	flavors    []Flavor
	jobs       []Job
	quotas     []Quota
	// seen maps kind and name to the line of the first declaration.
	seen map[string]int
	// fieldLines are the lines of the named fields of the table
	// constructors of the file, by the line each opens on (rewriter).
	fieldLines map[int]map[string]int
	decls      []*decl
	// indices are the jobs the arrays declared so far stand for beyond
	// one each: a job of the daemon's per index, and counted as such.
	indices int
	prints  int
	rng     *rand.Rand
}

func (ev *evaluator) add(e *Error) { ev.errs = append(ev.errs, e) }

// fail records e, then raises it into Lua so the file stops there. Recording
// first means a file that wraps the offence in pcall is still rejected.
func (ev *evaluator) fail(L *lua.LState, e *Error) {
	ev.add(e)
	msg := raisedText(e)
	ev.raised[msg] = true
	L.RaiseError("%s", msg)
}

// raisedText is the message an error carries inside Lua: the sentence
// without the position, which Lua adds itself.
func raisedText(e *Error) string {
	if e.Kind != "" {
		return e.Kind + " " + quote(e.Name) + ": " + e.Detail
	}
	return e.Detail
}

func (ev *evaluator) run(ctx context.Context) (out outcome) {
	defer func() {
		if r := recover(); r != nil {
			out = outcome{errs: []*Error{errInternal(ev.path, r)}}
		}
	}()
	L := ev.newState()
	defer L.Close()

	fn, err := ev.load(L)
	if err != nil {
		return outcome{errs: []*Error{ev.syntaxError(err)}}
	}
	L.SetContext(ctx)
	L.Push(fn)
	err = L.PCall(0, lua.MultRet, nil)
	var partial *Partial
	switch {
	case context.Cause(ctx) == errHeapLimit, err != nil && ctx.Err() != nil && ev.stoppedBy(ctx, err):
		ev.add(ev.stopped(context.Cause(ctx), ev.lineOf(err)))
	case err != nil:
		// Also when the deadline passed while a builtin ran and the
		// builtin then failed: its own error is the one to report.
		ev.runtimeError(err)
	default:
		for _, d := range ev.decls {
			if !d.done && !d.broken {
				ev.add(errFormNoTable(d.subject()))
				d.failed = true
			}
		}
		if len(ev.errs) > 0 {
			partial = ev.partial()
		}
	}
	if len(ev.errs) > 0 {
		// In line order, as a person reads the file; errors about the file
		// as a whole (line 0) last. The sort is stable, so a loop's errors
		// stay in the order its iterations ran.
		sort.SliceStable(ev.errs, func(i, j int) bool {
			li, lj := ev.errs[i].Pos.Line, ev.errs[j].Pos.Line
			if li == 0 || lj == 0 {
				return lj == 0 && li != 0
			}
			return li < lj
		})
		return outcome{errs: ev.errs, partial: partial}
	}
	return outcome{flavors: ev.flavors, jobs: ev.jobs, quotas: ev.quotas}
}

// partial is what of a file with errors had none of its own.
func (ev *evaluator) partial() *Partial {
	p := &Partial{}
	failed := map[string]bool{}
	for _, d := range ev.decls {
		if d.failed && !d.broken {
			name := d.name
			if d.kind == "job" && ev.owner != "" {
				name = ev.owner + "/" + name // as its jobs are named
			}
			failed[d.kind+" "+name] = true
		}
	}
	p.Broken = slices.Sorted(maps.Keys(failed))
	for _, fl := range ev.flavors {
		if !failed["flavor "+fl.Name] {
			p.Flavors = append(p.Flavors, fl)
		}
	}
	for _, j := range ev.jobs {
		if !failed["job "+j.Name] {
			p.Jobs = append(p.Jobs, j)
		}
	}
	return p
}

func (ev *evaluator) syntaxError(err error) *Error {
	var cause error = err
	if ae, ok := err.(*lua.ApiError); ok && ae.Cause != nil {
		// ApiError has no Unwrap, so errors.As cannot reach the cause.
		cause = ae.Cause
	}
	switch c := cause.(type) {
	case *parse.Error:
		if c.Pos.Line == parse.EOF {
			return errSyntaxEOF(ev.path, lastLine(ev.src))
		}
		line := c.Pos.Line
		if c.Message == "unterminated string" && endsString(ev.src, line-1, c.Token) {
			// The lexer counted the newline that ended it: the string
			// is on the line before.
			line--
		}
		var hint string
		if c.Message == "syntax error" {
			hint = syntaxHint(chunkSource(ev.src), line, c.Pos.Column, c.Token)
		}
		return errSyntax(ev.path, line, c.Message, c.Token, hint)
	case *lua.CompileError:
		return errCompile(ev.path, c.Line, c.Message)
	case *repeatedFieldError:
		return errRepeatedField(ev.path, c)
	}
	return errSyntax(ev.path, 0, err.Error(), "", "")
}

func (ev *evaluator) runtimeError(err error) {
	ae, ok := err.(*lua.ApiError)
	if !ok {
		ev.add(errRuntime(ev.path, 0, err.Error()))
		return
	}
	if ae.Type == lua.ApiErrorPanic {
		ev.add(errPanicInBuiltin(ev.path, ae.Object.String()))
		return
	}
	var msg string
	switch o := ae.Object.(type) {
	case lua.LString:
		msg = string(o)
	case lua.LNumber:
		msg = o.String()
	default:
		// No message to say where: the traceback does (trial AF).
		ev.add(errRuntimeValue(ev.path, lineInTrace(ae.StackTrace, ev.path), ae.Object.Type().String()))
		return
	}
	line, text := ev.splitWhere(msg)
	if line == 0 {
		// error(42), or a message raised at level 0: none says where.
		line = lineInTrace(ae.StackTrace, ev.path)
	}
	if ev.raised[text] {
		return // recorded when it was raised
	}
	if e, ok := ev.unrecorded[text]; ok {
		c := *e
		c.Pos.Line = line
		ev.add(&c)
		return
	}
	ev.add(errRuntime(ev.path, line, text))
}

// lineInTrace is the line of path the innermost frame of a traceback in
// it is at ("\tjobs.d/x.lua:3: in main chunk"), 0 where none is.
func lineInTrace(trace, path string) int {
	for l := range strings.Lines(trace) {
		rest, ok := strings.CutPrefix(strings.TrimSpace(l), path+":")
		if !ok {
			continue
		}
		digits, _, _ := strings.Cut(rest, ":")
		if n, err := strconv.Atoi(digits); err == nil && n > 0 {
			return n
		}
	}
	return 0
}

// stoppedBy reports whether err is the interpreter stopping the file
// because ctx is done. Once it is, every instruction raises that error again,
// so it is what a file stopped by its budget ends with, pcall or not.
func (ev *evaluator) stoppedBy(ctx context.Context, err error) bool {
	ae, ok := err.(*lua.ApiError)
	if !ok {
		return false
	}
	s, ok := ae.Object.(lua.LString)
	if !ok {
		return false
	}
	_, text := ev.splitWhere(string(s))
	return text == ctx.Err().Error()
}

func (ev *evaluator) lineOf(err error) int {
	if ae, ok := err.(*lua.ApiError); ok {
		if s, ok := ae.Object.(lua.LString); ok {
			line, _ := ev.splitWhere(string(s))
			return line
		}
	}
	return 0
}

// splitWhere takes the "path:line: " that Lua puts before a message apart.
func (ev *evaluator) splitWhere(msg string) (int, string) {
	rest, ok := strings.CutPrefix(msg, ev.path+":")
	if !ok {
		return 0, msg
	}
	i := 0
	for i < len(rest) && rest[i] >= '0' && rest[i] <= '9' {
		i++
	}
	if i == 0 || !strings.HasPrefix(rest[i:], ": ") {
		return 0, msg
	}
	line, err := strconv.Atoi(rest[:i])
	if err != nil {
		return 0, msg
	}
	return line, rest[i+2:]
}

// endsString reports whether line n of src (from 1) ends in a string
// opened with a quote whose text so far is text.
func endsString(src []byte, n int, text string) bool {
	if n < 1 {
		return false
	}
	lines := bytes.SplitN(src, []byte("\n"), n+1)
	if len(lines) < n+1 {
		return false // no newline ends line n
	}
	l := bytes.TrimSuffix(lines[n-1], []byte("\r"))
	return bytes.HasSuffix(l, []byte(`"`+text)) || bytes.HasSuffix(l, []byte(`'`+text))
}

func lastLine(src []byte) int {
	n := bytes.Count(src, []byte("\n"))
	if len(src) > 0 && src[len(src)-1] != '\n' {
		n++
	}
	return max(n, 1)
}

// callerLine is the line of the Lua code that called the running Go
// function; Go frames in between (pcall) are skipped.
func callerLine(L *lua.LState) int {
	for level := 0; level < 64; level++ {
		dbg, ok := L.GetStack(level)
		if !ok {
			return 0
		}
		if _, err := L.GetInfo("l", dbg, lua.LNil); err != nil {
			return 0
		}
		if dbg.CurrentLine > 0 {
			return dbg.CurrentLine
		}
	}
	return 0
}

// decl is one `job "name"`, `flavor "name"` or `quota "name"` call,
// waiting for its table.
type decl struct {
	kind   string
	name   string
	pos    Pos
	broken bool // the name was not a string: nothing more can be said
	done   bool // the table came
	failed bool // it has an error of its own (Partial leaves it out)
}

func (d *decl) subject() subject { return subject{pos: d.pos, kind: d.kind, name: d.name} }

// declare is the Go side of `job` and `flavor`: it takes the name and
// returns the function that takes the table. Mistakes are recorded, never
// raised, so that one run reports them all and pcall cannot hide them.
func (ev *evaluator) declare(kind string) lua.LGFunction {
	return func(L *lua.LState) int {
		d := &decl{kind: kind, pos: Pos{File: ev.path, Line: callerLine(L)}}
		if len(ev.decls)+ev.indices >= maxDeclsPerFile {
			// Each job is a goroutine and a record in the daemon: a loop
			// must not make a hundred thousand of them.
			ev.fail(L, errTooManyDecls(ev.path, d.pos.Line, maxDeclsPerFile))
		}
		ev.decls = append(ev.decls, d)
		if name, ok := L.Get(1).(lua.LString); ok {
			d.name = string(name)
			ev.checkName(d)
		} else {
			d.broken = true
			ev.add(errFormName(fileSubject(ev.path, d.pos.Line), kind, L.Get(1)))
		}
		L.Push(L.NewFunction(func(L *lua.LState) int {
			ev.body(L, d)
			return 0
		}))
		return 1
	}
}

func (ev *evaluator) checkName(d *decl) {
	s := d.subject()
	switch {
	case d.kind == "flavor" && !flavorNameShape.MatchString(d.name):
		ev.add(errBadFlavorName(s))
		d.failed = true
		return
	case d.kind == "quota" && d.name != "*" && !userNameShape.MatchString(d.name):
		ev.add(errBadQuotaName(s))
		d.failed = true
		return
	case d.kind == "job" && !jobNameShape.MatchString(d.name):
		ev.add(errBadJobName(s))
		d.failed = true
		return
	}
	key := d.kind + "\x00" + d.name
	if first, dup := ev.seen[key]; dup {
		ev.add(errDuplicateInFile(s, first))
		d.failed = true
		return
	}
	ev.seen[key] = d.pos.Line
}

func (ev *evaluator) body(L *lua.LState, d *decl) {
	if d.done {
		if !d.broken {
			ev.add(errFormTwice(d.subject()))
		}
		return
	}
	d.done = true
	if d.broken {
		return
	}
	s := d.subject()
	// A table written where it is declared says where each field is.
	s.fields = ev.fieldLines[d.pos.Line]
	tbl, ok := L.Get(1).(*lua.LTable)
	if !ok {
		ev.add(errFormTable(s, L.Get(1)))
		return
	}
	before := len(ev.errs)
	defer func() { d.failed = d.failed || len(ev.errs) > before }()
	if ev.owner != "" && d.kind != "job" {
		// Sizes and quotas are the machine's, for its administrators to say.
		ev.add(errNotAdmin(s, ev.owner))
		return
	}
	switch d.kind {
	case "flavor":
		fl, errs := decodeFlavor(s, tbl)
		ev.errs = append(ev.errs, errs...)
		if len(ev.errs) == before {
			ev.flavors = append(ev.flavors, fl)
		}
	case "quota":
		q, errs := decodeQuota(s, tbl)
		ev.errs = append(ev.errs, errs...)
		if len(ev.errs) == before {
			ev.quotas = append(ev.quotas, q)
		}
	default:
		j, errs := decodeJob(s, tbl, ev.owner)
		j.Lines = fieldLinesOf(s.fields)
		for _, e := range errs {
			e.Owner = ev.owner
		}
		ev.errs = append(ev.errs, errs...)
		if len(ev.errs) == before {
			ev.jobs = append(ev.jobs, j)
		}
		if j.Array != nil {
			// Ten arrays of the most indices each are a hundred
			// thousand jobs.
			if ev.indices += j.Array.Size() - 1; len(ev.decls)+ev.indices > maxDeclsPerFile {
				ev.fail(L, errTooManyDecls(ev.path, d.pos.Line, maxDeclsPerFile))
			}
		}
	}
}
