package supervisor

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"maps"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/berthd/berth/accounting"
	"github.com/berthd/berth/luaapi"
	"github.com/berthd/berth/supervisor/watch"
)

// Me is GET /v1/me: who the caller is to the daemon, and where their job
// files go (berth submit, berth edit).
type Me struct {
	User string `json:"user"`
	// Admin: root, the daemon's own user or a member of the admin group,
	// with rights over every job.
	Admin bool `json:"admin"`
	// JobsDir is where the caller's job files go: their own directory, or
	// the administrators' for root and the daemon's own user; "" when they
	// have none.
	JobsDir string `json:"jobs_dir"`
	// Owner is the owner their files' jobs get ("" for the
	// administrators').
	Owner string `json:"owner"`
	// Group is the daemon's group: its members have a job directory.
	Group string `json:"group"`
	// DaemonUser is the account the daemon runs as, "" where it has no
	// name: the jobs without an owner are that account's.
	DaemonUser string `json:"daemon_user"`
	// NameRefused: the caller is of the group, but their login cannot
	// name a person's jobs and directory (an upper-case letter, say).
	NameRefused bool `json:"name_refused,omitempty"`
	// Quota, for a person under one, is their quota and what their jobs
	// hold now (each -1 where the quota does not bound it).
	Quota *QuotaView `json:"quota,omitempty"`
}

// CheckRequest is POST /v1/check: job files to check as the caller's, as
// if they were in Me.JobsDir under their names.
type CheckRequest struct {
	Files []CheckFile `json:"files"`
}

// CheckFile is one file of a CheckRequest.
type CheckFile struct {
	Name string `json:"name"`
	// Src is the file's bytes as they are (base64 in the JSON): what is
	// checked is what is written.
	Src []byte `json:"src"`
}

// CheckResult is what POST /v1/check found: the jobs the files declare, and
// every problem the daemon would have with them, against the files in
// force (names taken, flavors and quotas, what the machine has).
type CheckResult struct {
	Jobs     []string  `json:"jobs"`
	Problems []Problem `json:"problems"`
}

// checkBytes bounds a check's request: a job file is at most
// watch.DefaultMaxFileBytes, and a few go at once (base64: 4/3 of that).
const checkBytes = 12 * watch.DefaultMaxFileBytes

// defaultCheckBodyTime is how long a check's request may take to arrive
// whole.
const defaultCheckBodyTime = 30 * time.Second

// concurrentChecks is how many checks evaluate at once.
const concurrentChecks = 2

// perCaller lets each caller have at most n things under way at once (one
// where n is 0): the others of theirs wait.
type perCaller struct {
	n    int
	mu   sync.Mutex
	held map[uint32]chan struct{} // by uid; one for each caller seen
}

// take waits until uid's turn has come, and returns its end; ok is false
// where ctx ended first.
func (o *perCaller) take(ctx context.Context, uid uint32) (release func(), ok bool) {
	o.mu.Lock()
	if o.held == nil {
		o.held = map[uint32]chan struct{}{}
	}
	turn, seen := o.held[uid]
	if !seen {
		turn = make(chan struct{}, max(1, o.n))
		o.held[uid] = turn
	}
	o.mu.Unlock()
	select {
	case turn <- struct{}{}:
		if ctx.Err() != nil {
			// Both were ready, and select chose at random: a caller gone
			// does not take the turn (its reply would be made for none).
			<-turn
			return nil, false
		}
		return func() { <-turn }, true
	case <-ctx.Done():
		return nil, false
	}
}

// me is the caller as the daemon sees them. Runs on the loop, which owns
// the people. Someone who joined the group since the last reload is
// taken in by one now, which makes their job directory: they need not
// know to run berth reload before their first berth submit.
func (d *Daemon) me(c caller) Me {
	m := Me{User: c.name, Admin: c.admin, Group: d.group(), DaemonUser: d.account()}
	if d.cfg.UserJobs != "" && !rootOrDaemon(c.uid) && d.people[c.name] == nil && d.reloading == nil {
		if names, err := d.members(); err == nil && slices.Contains(names, c.name) {
			d.reload(false, false)
		}
	}
	switch {
	case rootOrDaemon(c.uid):
		m.JobsDir = d.cfg.JobsDir
	case d.people[c.name] != nil:
		m.JobsDir, m.Owner = d.people[c.name].dir, c.name
		if q, held := d.placer.QuotaHeld(c.name); q != accounting.NoQuota {
			m.Quota = &QuotaView{Held: sizeOf(held), Quota: quotaSize(q), CardBytes: d.placer.CardMem()}
		}
	case d.cfg.UserJobs != "" && !validUserName(c.name):
		if names, err := d.members(); err == nil && slices.Contains(names, c.name) {
			m.NameRefused = true
		}
	}
	return m
}

func (d *Daemon) serveMe(w http.ResponseWriter, r *http.Request) {
	c := d.callerOf(r)
	v, err := d.call(r.Context(), func() any { return d.me(c) })
	if err != nil {
		writeNoAnswer(w, err)
		return
	}
	writeJSON(w, http.StatusOK, v.(Me))
}

// maxFileName bounds a job file's name sent to be checked or submitted:
// NAME_MAX, less what the client's temporary file beside it adds (a dot
// before, ".tmp-" and ten digits after), which would otherwise fail to be
// made with "file name too long" (trial AL).
const maxFileName = 255 - len(".") - len(".tmp-") - 10

// serveCheck is POST /v1/check: the files are evaluated as the caller's
// (in a child with their uid, as a reload would), then checked against
// what is in force. Nothing is written, nothing changes.
func (d *Daemon) serveCheck(w http.ResponseWriter, r *http.Request) {
	c := d.callerOf(r)
	var req CheckRequest
	// The body comes at once from berth submit; one trickled in a byte at
	// a time would hold its connection, never idle, for as long as its
	// sender liked.
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(time.Now().Add(cmp.Or(d.cfg.checkBodyTime, defaultCheckBodyTime)))
	err := json.NewDecoder(http.MaxBytesReader(w, r.Body, checkBytes)).Decode(&req)
	if err != nil {
		w.Header().Set("Connection", "close") // what is left of its body is not waited for
		if _, tooLarge := errors.AsType[*http.MaxBytesError](err); tooLarge {
			writeError(w, http.StatusRequestEntityTooLarge, CodeBadRequest, msgCheckRequestTooLarge(checkBytes, watch.DefaultMaxFileBytes))
			return
		}
		writeError(w, http.StatusBadRequest, CodeBadRequest, msgBadCheck(err))
		return
	}
	_ = rc.SetReadDeadline(time.Time{})
	v, err := d.call(r.Context(), func() any { return d.me(c) })
	if err != nil {
		writeNoAnswer(w, err)
		return
	}
	me := v.(Me)
	if me.JobsDir == "" {
		writeError(w, http.StatusForbidden, CodeNotPermitted, msgNoJobsDir(c.name, d.group()))
		return
	}
	srcs := make([]luaapi.Source, 0, len(req.Files))
	for _, f := range req.Files {
		if !watch.IsJobFile(f.Name) || strings.ContainsAny(f.Name, "/\x00") || len(f.Name) > maxFileName {
			writeError(w, http.StatusBadRequest, CodeBadRequest, msgBadFileName(f.Name, maxFileName))
			return
		}
		if len(f.Src) > watch.DefaultMaxFileBytes {
			// The scanner would refuse it: so does the check.
			writeError(w, http.StatusBadRequest, CodeBadRequest, msgCheckTooLarge(f.Name, len(f.Src), watch.DefaultMaxFileBytes))
			return
		}
		srcs = append(srcs, luaapi.Source{Path: filepath.Join(me.JobsDir, f.Name), Src: f.Src, Owner: me.Owner})
	}
	// Each check is a child of up to Evaluator.MemoryBytes: a few at a
	// time, one of each caller's; the others wait their turn (or give up
	// with their connection). One person's dozen checks of files that
	// loop to their budget kept everyone's berth submit waiting a minute.
	mine, ok := d.checkers.take(r.Context(), c.uid)
	if !ok {
		return
	}
	defer mine()
	select {
	case d.checks <- struct{}{}:
		defer func() { <-d.checks }()
	case <-r.Context().Done():
		return
	}
	// All of them, with no reload's share (Config.EvalShare): the person
	// waits for their own files alone.
	files := d.cfg.Evaluator.Evaluate(context.WithValue(r.Context(), checkingKey{}, true), luaMachine(d.cfg), srcs)
	v, err = d.call(r.Context(), func() any { return d.checkInForce(files) })
	if err != nil {
		writeNoAnswer(w, err)
		return
	}
	writeJSON(w, http.StatusOK, v.(CheckResult))
}

// checkInForce is what the daemon would make of files were they in force
// beside the others: their own errors, the cross-file rules, and the
// checks before a start (flavors, quotas, the machine, users). Runs on the
// loop; changes nothing.
func (d *Daemon) checkInForce(files []*luaapi.File) CheckResult {
	res := CheckResult{Jobs: []string{}, Problems: []Problem{}}
	res.Problems, res.Jobs = d.checkBeside(files, nil, res.Problems, res.Jobs)
	// A file with errors is refused whole; what of it had none is checked
	// beside the rest all the same, for its own problems (the others are
	// checked without it, as they would be loaded), so that one check says
	// every mistake.
	if lenient, partials := luaapi.LenientFiles(files); len(partials) > 0 {
		more, _ := d.checkBeside(lenient, partials, nil, nil)
		for _, p := range more {
			if _, refused := partials[p.File]; refused {
				res.Problems = append(res.Problems, p)
			}
		}
	}
	return res
}

// checkBeside adds to problems and jobs what checkInForce finds of files
// beside those in force; a problem of a refused file's partial (in
// partials) that names what the file declares with a mistake of its own is
// none.
func (d *Daemon) checkBeside(files []*luaapi.File, partials map[string]*luaapi.Partial, problems []Problem, jobs []string) ([]Problem, []string) {
	admitted := maps.Clone(d.good)
	checked := map[string]bool{}
	for _, f := range files {
		checked[f.Path] = true
		if len(f.Errors) > 0 {
			problems = append(problems, problemsOf(f.Errors)...)
			delete(admitted, f.Path)
			continue
		}
		problems = append(problems, AdmitFile(admitted, f.Path, f, d.personJobs())...)
	}
	set := luaapi.Combine(slices.Collect(maps.Values(admitted)))
	for _, e := range set.Problems {
		if checked[e.Pos.File] && !partials[e.Pos.File].Excuses(e) {
			problems = append(problems, ProblemOf(e))
		}
	}
	for i := range set.Jobs {
		def := &set.Jobs[i]
		if !checked[def.Pos.File] {
			continue
		}
		jobs = append(jobs, def.Name)
		if p, unfit := UnfitProblem(d.placer, def, set); unfit && !set.Unsized(def.Name) {
			problems = append(problems, p)
		}
		if def.User != "" || def.Group != "" {
			if _, _, err := jobCredentials(def.User, def.Group); err != nil {
				problems = append(problems, CredentialsProblem(def, err))
			}
		}
	}
	return problems, jobs
}
