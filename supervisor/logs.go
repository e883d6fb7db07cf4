package supervisor

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"os/user"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/berthd/berth/supervisor/runner"
	"github.com/berthd/berth/supervisor/store"
	"github.com/berthd/berth/supervisor/units"
)

// HeaderLines is the header of a job's output sent as its last lines
// (?lines=N): a daemon that sends the whole output lacks it.
const HeaderLines = "Berth-Lines"

// serveLogs is GET /v1/jobs/{name}/logs: the job's output, streamed to a
// caller entitled to it (its owner, root, the admin group), from journald
// or from its log file. The daemon reads it for them: a person needs no
// journal group (which would open the whole system journal to them) and
// no right on the state directory. ?run=N gives one run's output (from a
// file, the lines after its header); ?lines=N only its last N lines;
// ?follow=1 keeps sending what the job writes until the caller hangs up.
func (d *Daemon) serveLogs(w http.ResponseWriter, r *http.Request) {
	c := d.callerOf(r)
	name := d.resolveName(c, r.PathValue("name"))
	if a, isArray := d.resolveArray(c, name); isArray {
		span := *a.snapshot().def.Array
		if span.From != span.To {
			writeError(w, http.StatusBadRequest, CodeIsArray, msgLogsOfArray(a.name, span))
			return
		}
		name = memberName(a.name, span.From) // its one index's: no other output is there to mean
	}
	js, declared := d.jobStatus(name)
	if !declared {
		if runs, err := d.store.Runs(name, 1); err != nil || len(runs) == 0 {
			writeError(w, http.StatusNotFound, CodeNoSuchJob, d.msgNoSuch(c, name))
			return
		}
	}
	owner := ownerOf(name)
	if d.refuseNotOwner(w, c, "logs", name, owner, "read its output") {
		return
	}
	if at, cut := d.cuts.of(name); cut && r.URL.Query().Get("run") == "" {
		// Its last run's output stops short (a full disk): what is sent,
		// which ends with that run, is not all it wrote; the client says
		// so. (Of one run asked for, not said: it may be another.)
		w.Header().Set(HeaderOutputCut, at.UTC().Format(time.RFC3339))
	}
	q := r.URL.Query()
	follow := q.Get("follow") == "1"
	if follow && !declared {
		// Its earlier runs' output, then nothing until a job of that
		// name is declared again: the client says so, not silence.
		w.Header().Set(HeaderNotDeclared, "1")
	}
	if follow && declared && q.Get("run") == "" && restingName(js.State) {
		// Nothing more comes until it runs again (trial AH: a follow of
		// a job done waited in silence).
		w.Header().Set(HeaderAtRest, js.State)
	}
	var run uint64
	if v := q.Get("run"); v != "" {
		var err error
		if run, err = strconv.ParseUint(v, 10, 64); err != nil || run == 0 {
			writeError(w, http.StatusBadRequest, CodeBadRequest, msgBadRun(v))
			return
		}
	}
	lines := -1 // all
	if v := q.Get("lines"); v != "" {
		var err error
		if lines, err = strconv.Atoi(v); err != nil || lines < 0 {
			writeError(w, http.StatusBadRequest, CodeBadRequest, msgBadLineCount(v))
			return
		}
		w.Header().Set(HeaderLines, strconv.Itoa(lines))
	}
	release := func() {}
	if lines > 0 {
		var ok bool
		if release, ok = d.tails.take(c.uid); !ok {
			writeError(w, http.StatusTooManyRequests, CodeTooManyTails, msgTooManyTails(maxTailsPerUser))
			return
		}
		defer release()
	}
	var rec store.RunRecord
	var next time.Time
	if run != 0 {
		var ok bool
		if rec, next, ok = d.runOf(name, run); !ok {
			writeError(w, http.StatusNotFound, CodeNoSuchRun, msgNoSuchRun(name, run))
			return
		}
	}
	if d.logsOf(name) != "journal" {
		var only *runLines
		if run != 0 {
			// A run begun since is not among the runs on record that
			// tell its header from the job's lines (runStartsOf): the
			// daemon's note of the header it wrote last does (trial AT:
			// --run N -f went on into run N+1, begun at once).
			only = &runLines{run: run, later: func(line []byte) bool { return d.headers.wrote(name, line) }}
			// A run that has ended writes nothing more: nothing to follow.
			follow = follow && rec.End.IsZero()
		}
		var ended chan struct{}
		if follow && only != nil {
			// Followed to its end, not for ever: a batch job's last run
			// has no later run's header to end it.
			ctx, cancel := context.WithCancel(r.Context())
			defer cancel()
			ended = make(chan struct{})
			go d.endWithRun(ctx, func() { close(ended) }, name, run)
		}
		d.streamFile(w, r, d.logPath(name), follow, only, lines, release, ended, d.runStartsOf(name))
		return
	}
	// Said, for the client's words where there is none: journald, not a
	// log directory, keeps it.
	w.Header().Set(HeaderOutputFrom, "journal")
	// --quiet: journalctl's own notes ("-- No entries --") are not the
	// job's output; the client says when there is none.
	args := []string{"--no-pager", "--quiet", "--all", "-o", "short-iso"}
	matches := d.journalMatches(name, owner, d.cfg.Units == nil)
	if len(matches) == 0 {
		// No match would be the whole journal: nothing of it is known
		// to be the job's.
		w.WriteHeader(http.StatusOK)
		return
	}
	// A run is its entries (a unit's carry BERTH_RUN), or, for the
	// daemon's own children, its time window.
	var window []string
	ctx := r.Context()
	if run != 0 {
		switch {
		case !rec.End.IsZero():
			follow = false // it writes nothing more, as with a log file
		case follow:
			var cancel context.CancelFunc
			ctx, cancel = context.WithCancel(ctx)
			defer cancel()
			go d.endWithRun(ctx, cancel, name, run)
		}
		if d.cfg.Units != nil {
			for i := range matches {
				matches[i] = append(matches[i], "BERTH_RUN="+strconv.FormatUint(run, 10))
			}
		} else {
			window = journalWindow(rec, next)
		}
	}
	for i, m := range matches {
		if i > 0 {
			args = append(args, "+") // or
		}
		args = append(args, m...)
	}
	journalctl, err := exec.LookPath("journalctl")
	if err != nil {
		writeError(w, http.StatusInternalServerError, CodeInternal, msgNoJournalctl(err))
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	out := &flushWriter{w: w, rc: http.NewResponseController(w)}
	read := func(args []string, stdout io.Writer) bool {
		cmd := exec.CommandContext(ctx, journalctl, args...)
		// It ends with the caller's connection, and with the daemon.
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		cmd.Stdout = stdout
		var stderr limitedBuffer
		cmd.Stderr = &stderr
		err := cmd.Run()
		if err != nil && ctx.Err() == nil {
			d.jobLog(name).Warn("journalctl failed reading a job's output", "error", err, "stderr", stderr.String())
			if !out.wrote {
				writeError(w, http.StatusInternalServerError, CodeInternal, msgJournalctlFailed(err, stderr.String()))
			}
		}
		return err == nil
	}
	switch {
	case lines >= 0 && window != nil:
		// journalctl before 254 counts --lines from --since, or gives
		// nothing with --until: the last lines are taken here. Followed,
		// what comes is read after the last entry shown.
		tail := &lastLines{n: lines + 1} // and the cursor's line
		if !read(append(append(slices.Clip(args), window...), "--show-cursor"), tail) {
			return
		}
		kept := tail.kept()
		var shown [][]byte
		for _, k := range kept {
			shown = append(shown, k.shown())
		}
		cursor := ""
		if n := len(shown); n > 0 {
			if c, ok := bytes.CutPrefix(shown[n-1], []byte("-- cursor: ")); ok {
				shown, kept, cursor = shown[:n-1], kept[:n-1], string(bytes.TrimSpace(c))
			}
		}
		tail.leftOut(w.Header(), kept[max(0, len(kept)-lines):])
		err := writeLines(out, shown[max(0, len(shown)-lines):])
		release()
		if err != nil || !follow {
			return
		}
		if cursor != "" {
			read(append(args, "--after-cursor="+cursor, "--follow"), out)
		} else {
			read(append(append(args, window...), "--follow"), out)
		}
	default:
		args = append(args, window...)
		switch {
		case lines >= 0:
			args = append(args, "--lines="+strconv.Itoa(lines))
		case follow:
			args = append(args, "--lines=all") // as from a file: all of it, then what comes
		}
		if follow {
			args = append(args, "--follow")
		}
		read(args, out)
	}
}

// journalMatches are the journal matches, any one of them, for what job
// name's units wrote, owner its owner. A process elsewhere may log under
// any identifier it likes, so the identifier alone is not enough: _UID and
// _SYSTEMD_UNIT are journald's own. The lines are those its units wrote,
// by their names (its last runs on record), and, for a run that ended
// before journald read its lines (which then have no unit), those written
// by the user the job runs as (systemd opens a unit's stream as the
// unit's user): only a process of that user could have. berth's slice is
// not enough: the people's jobs run in it too (trial AW: a person's job
// wrote lines into an administrators' job's output with logger -t); nor
// is the user alone, which a job's edit may change (trial AY: the runs
// made as the user before were shown as having written nothing).
//
// Where that user is not known (the job removed, or its account gone),
// its units' lines alone; nil where it has none on record. Where it is
// root, its units' lines alone too (by name, or by the BERTH_JOB they
// carry, for runs before the last 100): root's other programs log under
// names an administrators' job may have (systemd, sudo: trial BC, PID 1's
// log shown as a job's output).
//
// The daemon's own children (direct: --runner direct) have no unit:
// their lines are those written under the job's name by the user it runs
// as (journald takes the writer's, trial BC: the daemon's alone showed a
// person none of their own), root's included, and the daemon's user's for
// a job removed; and those of its units, run before a change of runner.
func (d *Daemon) journalMatches(name, owner string, direct bool) [][]string {
	ident := "SYSLOG_IDENTIFIER=" + name
	var matches [][]string
	uid, known := d.runsAs(name, owner)
	if !known && direct {
		uid, known = strconv.Itoa(os.Geteuid()), true
	}
	switch {
	case known && (direct || uid != "0"):
		matches = append(matches, []string{ident, "_UID=" + uid})
	case known:
		// Root's, of its units (LogExtraFields), however many ran: only
		// root could write the field otherwise.
		matches = append(matches, []string{ident, "_UID=0", "BERTH_JOB=" + name})
	}
	runs, err := d.store.Runs(name, 100)
	if err != nil {
		return matches
	}
	for _, r := range runs {
		matches = append(matches, []string{ident, "_SYSTEMD_UNIT=" + units.Name(name, r.ID)})
	}
	return matches
}

// runsAs is the user ID that job name's runs run as: its owner's for a
// person's job, whatever it says, otherwise its user's or the daemon's;
// known is false for a job removed or an account gone.
func (d *Daemon) runsAs(name, owner string) (uid string, known bool) {
	account := owner
	if account == "" {
		d.mu.Lock()
		j, ok := d.jobs[name]
		d.mu.Unlock()
		if !ok {
			return "", false
		}
		if account = j.view().Def.User; account == "" {
			return strconv.Itoa(os.Geteuid()), true
		}
	}
	u, err := user.Lookup(account)
	if err != nil {
		return "", false
	}
	return u.Uid, true
}

// journalWindow is the time a run's output has in the journal: from its
// start to a second past its end, which journald may take to read the
// run's last lines, but not into the next run (next, zero if none).
// Microseconds, as journalctl reads them.
func journalWindow(rec store.RunRecord, next time.Time) []string {
	const stamp = "2006-01-02 15:04:05.000000"
	w := []string{"--since", rec.Start.Local().Format(stamp)}
	if !rec.End.IsZero() {
		until := rec.End.Add(journalLag)
		if !next.IsZero() && next.Before(until) {
			until = next
		}
		w = append(w, "--until", until.Local().Format(stamp))
	}
	return w
}

// journalLag is how long journald may take to read a run's last lines
// after its end.
const journalLag = time.Second

// endWithRun calls cancel once run of job has ended (or the daemon is
// stopping) and journald has had journalLag to read its last lines: a run
// followed is followed to its end, not forever. It returns then, or when
// ctx ends first.
func (d *Daemon) endWithRun(ctx context.Context, cancel context.CancelFunc, job string, run uint64) {
	for {
		_, next, stopping := d.feed.latest()
		d.mu.Lock()
		j := d.jobs[job]
		d.mu.Unlock()
		if stopping || j == nil || j.view().Run != run { // its job runs it no more
			select {
			case <-time.After(journalLag):
				cancel()
			case <-ctx.Done():
			}
			return
		}
		select {
		case <-next:
		case <-ctx.Done():
			return
		}
	}
}

// runOf finds run id among job's last hundred, and when the job's next
// run started (zero if none has).
func (d *Daemon) runOf(job string, id uint64) (rec store.RunRecord, next time.Time, ok bool) {
	runs, err := d.store.Runs(job, 100)
	if err != nil {
		return store.RunRecord{}, time.Time{}, false
	}
	for _, r := range runs {
		switch {
		case r.ID == id:
			rec, ok = r, true
		case r.ID > id && (next.IsZero() || r.Start.Before(next)):
			next = r.Start
		}
	}
	return rec, next, ok
}

// streamFile sends a log file, after the one it rotated to (PATH.1),
// and, with follow, what is appended to it (and to the file that replaces
// it when it is rotated) until the caller hangs up. A file not written yet
// is empty. With only, just the lines of that run are sent, followed
// until ended is closed (the run has ended) or a later run's header comes;
// with lines 0 or more, only that many of the last lines of what is there
// already.
func (d *Daemon) streamFile(w http.ResponseWriter, r *http.Request, path string, follow bool, only *runLines, lines int, release func(), ended <-chan struct{}, starts runStarts) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	flushed := &flushWriter{w: w, rc: http.NewResponseController(w)}
	// What is there already goes through the filter of a run, then the
	// tail; what comes later, past the tail.
	var sink io.Writer = flushed
	var tail *lastLines
	if lines >= 0 {
		// The runs' headers are not lines (a run's filter drops them).
		tail = &lastLines{n: lines, runs: only == nil, starts: starts}
		sink = tail
	}
	out := sink
	if only != nil {
		only.w, only.head, only.starts = sink, w.Header(), starts
		out = only
	}
	// Of what is there, none is shown: not read (-n 0).
	none := lines == 0 && only == nil
	var readOld os.FileInfo // PATH.1 as read here, if it was there
	if old, err := os.Open(path + ".1"); err == nil {
		readOld, _ = old.Stat()
		if !none {
			_, err = io.Copy(out, old)
		}
		old.Close()
		if err != nil {
			return
		}
	}
	// readRotated reads PATH.1 whole where it is none of seen (a file
	// read already, or the one about to be), and returns it (nil where
	// it read none); false where the caller has hung up.
	readRotated := func(seen ...os.FileInfo) (os.FileInfo, bool) {
		mid, err := os.Open(path + ".1")
		if err != nil {
			return nil, true
		}
		defer mid.Close()
		st, err := mid.Stat()
		if err != nil || slices.ContainsFunc(seen, func(fi os.FileInfo) bool { return fi != nil && os.SameFile(fi, st) }) {
			return nil, true
		}
		_, err = io.Copy(out, mid)
		return st, err == nil
	}
	var file *os.File
	var br *bufio.Reader
	open := func() bool {
		f, err := os.Open(path)
		if err != nil {
			if !errors.Is(err, os.ErrNotExist) {
				d.log.Warn("cannot read a job's log file", "path", path, "error", err)
			}
			return false
		}
		if file != nil {
			file.Close()
		}
		file, br = f, bufio.NewReader(f)
		return true
	}
	defer func() {
		if file != nil {
			file.Close()
		}
	}()
	if open() {
		if none {
			if _, err := file.Seek(0, io.SeekEnd); err != nil {
				return
			}
		} else if _, err := io.Copy(out, br); err != nil {
			return
		}
	}
	over := !follow || only != nil && only.past
	if over && only != nil {
		only.end()
	}
	if tail != nil {
		kept := tail.kept()
		tail.leftOut(w.Header(), kept)
		err := tail.writeTo(flushed, kept)
		release()
		if err != nil {
			return
		}
		if only != nil {
			only.w = flushed
		} else {
			out = flushed
		}
	}
	if over {
		if !flushed.wrote {
			if only != nil && only.gone() {
				w.Header().Set(HeaderOutputGone, "1")
			}
			w.WriteHeader(http.StatusOK)
		}
		return
	}
	flushed.Flush()
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-r.Context().Done():
			return
		case <-tick.C:
		}
		if file == nil {
			// The first output may have filled a file and been rotated
			// before this look: PATH.1, made since, is read first.
			st, ok := readRotated(readOld)
			if !ok {
				return
			}
			if st != nil {
				readOld = st
			}
			if !open() {
				continue
			}
		}
		if _, err := io.Copy(out, br); err != nil || only != nil && only.past {
			return // with only, the run's output ended with the next's header
		}
		// The daemon rotates a full log to PATH.1: what was written to it
		// before the rename is read to its end, then the new file. Where
		// it was rotated twice since the last look, PATH.1 is a file it
		// has not read, whole: read before the new one.
		if now, err := os.Stat(path); err == nil {
			if was, err := file.Stat(); err == nil && !os.SameFile(was, now) {
				if _, err := io.Copy(out, br); err != nil {
					return
				}
				if _, ok := readRotated(was, now); !ok {
					return
				}
				open()
			}
		}
		if ended != nil && only != nil {
			select {
			case <-ended:
				// The run followed has ended: what it wrote is all read.
				if _, err := io.Copy(out, br); err == nil {
					only.end()
				}
				return
			default:
			}
		}
	}
}

// runLines passes on to w the lines of one run's output in a log file:
// those after its header (runner.RunHeader) and before the next run's.
// A line cut by a write is held until its end comes, or until it is too
// long to be a header (lineSplitter).
type runLines struct {
	w     io.Writer
	run   uint64
	in    bool   // between the run's header and the next
	past  bool   // a later run's header came after the run's: it is over
	found bool   // the run's header came
	first uint64 // the run of the first header that came
	// head is the answer's header, to say that the run's output begins
	// with its header continued: its start was rotated away.
	head  http.Header
	lines lineSplitter
	mid   bool // within a line passed on in pieces
	// starts are the job's runs on record and their starts as their
	// headers give them: a line like a header that names another run, or
	// another start, is the job's own output (nil: every header is
	// taken).
	starts runStarts
	// later, where not nil, reports whether a line like a header that
	// starts does not take is the header the daemon wrote last of the
	// job: a run begun after starts were read.
	later func(line []byte) bool
}

// runHeaders are the header the daemon wrote last of each job's runs,
// until the job is removed and its goroutine has ended (forget).
type runHeaders struct {
	mu sync.Mutex        // guards m
	m  map[string]string // job → its header, without its newline
}

// note keeps header as the one written last of job's runs.
func (h *runHeaders) note(job, header string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.m == nil {
		h.m = map[string]string{}
	}
	h.m[job] = strings.TrimSuffix(header, "\n")
}

// forget lets go of job's header: the job is gone.
func (h *runHeaders) forget(job string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.m, job)
}

// wrote reports whether line is the header written last of job's runs.
func (h *runHeaders) wrote(job string, line []byte) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	last, ok := h.m[job]
	return ok && string(bytes.TrimRight(line, "\n")) == last
}

// runStarts are a job's runs on record, and their starts as their headers
// give them (runner.RunStart).
type runStarts map[uint64]string

// header reads line as a run's header berth wrote: one of a run of the
// job, with the start its run had.
func (rs runStarts) header(line []byte) (run uint64, continued, ok bool) {
	run, start, continued, ok := runner.ParseRunHeaderStart(line)
	if ok && rs != nil && rs[run] != start {
		return 0, false, false
	}
	return run, continued, ok
}

// runStartsOf are job name's runs on record, for telling its headers from
// its output.
func (d *Daemon) runStartsOf(name string) runStarts {
	runs, err := d.store.Runs(name, 0)
	if err != nil {
		return nil
	}
	rs := make(runStarts, len(runs))
	for _, r := range runs {
		rs[r.ID] = runner.RunStart(r.Start)
	}
	return rs
}

// gone says that the run's output is not in the files, which begin with a
// later run's: what it wrote, if anything, was rotated away. (A run later
// than the first whose header is there, and with none of its own, wrote
// nothing: its header would be there.)
func (l *runLines) gone() bool { return !l.found && l.first != 0 && l.run < l.first }

func (l *runLines) Write(p []byte) (int, error) {
	err := l.lines.split(p, func(piece []byte, more bool) error {
		if !l.mid && !more {
			run, continued, ok := l.starts.header(piece)
			if !ok && l.later != nil && l.later(piece) {
				run, continued, ok = runner.ParseRunHeader(piece)
			}
			if ok {
				if l.first == 0 {
					l.first = run
				}
				if run == l.run && !l.found && continued && l.head != nil {
					// Its own header was rotated away, with the start of
					// its output: said before any of it is written.
					l.head.Set(HeaderOutputStartGone, "1")
				}
				l.past = l.past || l.in && run != l.run
				l.in = run == l.run
				l.found = l.found || l.in
				return nil
			}
		}
		l.mid = more
		if l.in {
			_, err := l.w.Write(piece)
			return err
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	return len(p), nil
}

// end passes on the run's last line, if the file ends without its
// newline.
func (l *runLines) end() {
	if l.in && len(l.lines.held) > 0 {
		_, _ = l.w.Write(l.lines.held)
	}
}

// maxTailBytes bounds what a request for the last lines of a job's output
// holds in memory, each line counted with lineCost more: the lines asked
// for past it are left out, the earliest first, and a line longer than it
// is kept by its end. Streamed whole, output costs no memory; a person
// asking for the last 10⁸ lines of every job at once otherwise took the
// daemon's memory to what the logs hold, times the requests.
var maxTailBytes = 2 << 20

// lineCost is what a line kept costs besides its text.
const lineCost = 64

// maxTailsPerUser is how many requests for last lines one caller may have
// under way at once, each holding up to maxTailBytes until its lines are
// written (a followed one goes on holding nothing).
const maxTailsPerUser = 4

// tailSlots counts the requests for last lines under way, by caller.
type tailSlots struct {
	mu    sync.Mutex
	taken map[uint32]int
}

// take takes one of uid's slots; release gives it back (at most once
// counts). ok is false where uid has none left.
func (t *tailSlots) take(uid uint32) (release func(), ok bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.taken[uid] >= maxTailsPerUser {
		return nil, false
	}
	if t.taken == nil {
		t.taken = map[uint32]int{}
	}
	t.taken[uid]++
	return sync.OnceFunc(func() {
		t.mu.Lock()
		defer t.mu.Unlock()
		if t.taken[uid]--; t.taken[uid] == 0 {
			delete(t.taken, uid)
		}
	}), true
}

// HeaderOutputGone says, in an answer of one run's output from a log file
// (?run=N) that has none, that the files begin after that run: what it
// wrote was rotated away, not nothing.
const HeaderOutputGone = "Berth-Output-Gone"

// HeaderOutputCut says, in an answer of a job's output, when its last
// run's output was cut short (a full log disk): the file ends there.
const HeaderOutputCut = "Berth-Output-Cut"

// HeaderOutputFrom says, in an answer of a job's output that journald
// keeps, "journal"; absent where the daemon's log files keep it.
const HeaderOutputFrom = "Berth-Output-From"

// HeaderAtRest says, in an answer that follows a job's output, how the
// job rests ("done", "failed", "stopped"…): nothing more comes until it
// runs again.
const HeaderAtRest = "Berth-At-Rest"

// HeaderNotDeclared says, in an answer that follows a job's output, that
// no job of that name is declared now: what is sent is its earlier runs'
// output, and more comes only from a job declared again under the name.
const HeaderNotDeclared = "Berth-Not-Declared"

// HeaderOutputStartGone says, in an answer of one run's output from a log
// file, that the files begin within that run: the start of what it wrote
// was rotated away, and what is sent is the rest.
const HeaderOutputStartGone = "Berth-Output-Start-Gone"

// HeaderLinesLeftOut and HeaderBytesLeftOut say, in an answer of the last
// lines (?lines=N), how many of the lines asked for were left out to stay
// within what the daemon holds of them (the earliest), and how many bytes
// were left out of the start of the first line shown, longer than that.
const (
	HeaderLinesLeftOut = "Berth-Lines-Left-Out"
	HeaderBytesLeftOut = "Berth-Bytes-Left-Out"
)

// lastLines keeps the last n lines written to it, and a line whose end has
// not come yet, until writeTo, within maxTailBytes.
type lastLines struct {
	n int
	// runs says the lines are a log file's: its runs' headers
	// (runner.RunHeader) are not counted as lines, and are written as they
	// are in the file, before the first line of their run.
	runs   bool
	starts runStarts  // with runs, the job's runs on record (runLines.starts)
	header []byte     // with runs, the header of the run the lines now come from
	fresh  bool       // no line of that run has come yet
	lines  []keptLine // at most n, oldest first
	cost   int        // of lines: their texts, and lineCost each
	seen   int        // lines written, headers not counted
	split  lineSplitter
	mid    bool // the last line kept has not ended yet
}

// keptLine is a line kept, and the header of its run (nil: none known),
// which is written before it if it is the run's first (first). Of text,
// only text[off:] is kept: cut bytes were left out of its start (off of
// them still in text) for maxTailBytes.
type keptLine struct {
	header, text []byte
	first        bool
	off, cut     int
}

func (k *keptLine) shown() []byte { return k.text[k.off:] }

func (l *lastLines) Write(p []byte) (int, error) {
	_ = l.split.split(p, l.take)
	return len(p), nil
}

// take keeps a line, or a piece of one, which more says has not ended.
func (l *lastLines) take(piece []byte, more bool) error {
	if !l.mid {
		if l.runs && !more {
			if _, _, ok := l.starts.header(piece); ok {
				l.header, l.fresh = slices.Clone(piece), true
				return nil
			}
		}
		k := keptLine{header: l.header, first: l.fresh}
		l.fresh = false
		l.seen++
		if l.n > 0 {
			l.lines = append(l.lines, k)
			l.cost += lineCost
			if len(l.lines) > l.n {
				l.drop()
			}
		}
	}
	l.mid = more
	if l.n == 0 {
		return nil
	}
	last := &l.lines[len(l.lines)-1]
	last.text = append(last.text, piece...)
	l.cost += len(piece)
	l.trim()
	return nil
}

// trim keeps the lines within maxTailBytes: the earliest go, and the
// earliest left is cut to its end where less than all of it is over. A line is cut in place, and its bytes moved only once half of it is
// cut, so that lines coming one by one after a long one do not each copy
// it.
func (l *lastLines) trim() {
	for l.cost > maxTailBytes {
		first := &l.lines[0]
		excess := l.cost - maxTailBytes
		if len(l.lines) > 1 && excess >= len(first.shown()) {
			l.drop()
			continue
		}
		n := min(excess, len(first.shown()))
		if n == 0 {
			return // a line's own cost, which no cut lowers
		}
		first.off += n
		first.cut += n
		l.cost -= n
		if first.off > maxHeldLine && first.off > len(first.text)/2 {
			first.text = append(first.text[:0], first.text[first.off:]...)
			first.off = 0
		}
	}
}

// drop forgets the oldest line kept.
func (l *lastLines) drop() {
	l.cost -= lineCost + len(l.lines[0].shown())
	l.lines[0] = keptLine{}
	l.lines = l.lines[1:]
}

// kept returns the lines kept, oldest first; a last line without its end
// yet counts as one of them.
// It is called once, when nothing more is written.
func (l *lastLines) kept() []keptLine {
	if held := l.split.held; len(held) > 0 {
		l.split.held = nil
		_ = l.take(held, true)
	}
	return slices.Clone(l.lines)
}

// leftOut says, in the headers of an answer, what of the last lines asked
// for was left out for maxTailBytes; it is called before the first write.
func (l *lastLines) leftOut(h http.Header, kept []keptLine) {
	// Of the last n lines there were, those not kept: a line the bound of
	// n would have dropped anyway is not left out.
	if left := min(l.seen, l.n) - len(l.lines); left > 0 {
		h.Set(HeaderLinesLeftOut, strconv.Itoa(left))
	}
	if len(kept) > 0 && kept[0].cut > 0 {
		h.Set(HeaderBytesLeftOut, strconv.Itoa(kept[0].cut))
	}
}

// writeTo writes the lines kept, oldest first, with runs each under its
// run's header where the run's first line is among them.
func (l *lastLines) writeTo(w io.Writer, kept []keptLine) error {
	for _, k := range kept {
		if l.runs && k.first && k.header != nil {
			if _, err := w.Write(k.header); err != nil {
				return err
			}
		}
		if _, err := w.Write(k.shown()); err != nil {
			return err
		}
	}
	return nil
}

func writeLines(w io.Writer, lines [][]byte) error {
	for _, line := range lines {
		if _, err := w.Write(line); err != nil {
			return err
		}
	}
	return nil
}

// maxHeldLine is how much of a line whose end has not come is held before
// it is passed on in pieces: far more than a run's header.
const maxHeldLine = 64 << 10

// lineSplitter cuts what is written into lines, holding the start of a
// line whose end has not come until it comes; a line longer than
// maxHeldLine is passed on in pieces as it comes, so that no line, however
// long, is held whole.
type lineSplitter struct{ held []byte }

// split calls each with the lines of p, the start of one held from the
// last call joined to its end; more says a piece of a line whose end has
// not come, whose next piece follows. A piece is each's only for the call.
func (s *lineSplitter) split(p []byte, each func(piece []byte, more bool) error) error {
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			s.held = append(s.held, p...)
			if len(s.held) < maxHeldLine {
				return nil
			}
			piece := s.held
			s.held = s.held[:0]
			return each(piece, true)
		}
		line := p[:i+1]
		if len(s.held) > 0 {
			line = append(s.held, line...)
			s.held = s.held[:0]
		}
		p = p[i+1:]
		if err := each(line, false); err != nil {
			return err
		}
	}
	return nil
}

// flushWriter sends each write to the caller at once.
type flushWriter struct {
	w     http.ResponseWriter
	rc    *http.ResponseController
	wrote bool
}

func (f *flushWriter) Write(p []byte) (int, error) {
	f.wrote = true
	n, err := f.w.Write(p)
	if err == nil {
		err = f.rc.Flush()
	}
	return n, err
}

func (f *flushWriter) Flush() {
	f.wrote = true
	_ = f.rc.Flush()
}

// limitedBuffer keeps the first 4 KiB written to it: journalctl's
// complaint, for the log.
type limitedBuffer struct{ b []byte }

func (l *limitedBuffer) Write(p []byte) (int, error) {
	if room := 4096 - len(l.b); room > 0 {
		l.b = append(l.b, p[:min(room, len(p))]...)
	}
	return len(p), nil
}

func (l *limitedBuffer) String() string { return string(l.b) }
