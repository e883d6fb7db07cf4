package supervisor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/user"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/berthd/berth/accounting"
	"github.com/berthd/berth/luaapi"
	"github.com/berthd/berth/supervisor/ctlsock"
	"github.com/berthd/berth/supervisor/store"
)

// APIVersion is the path prefix of the control socket's API. A client that
// finds no such path talks to a daemon too old for it.
const APIVersion = "/v1"

// APIError is the body of every 4xx and 5xx answer.
type APIError struct {
	// Code is one of the Code* constants: what a client branches on.
	Code  string `json:"code"`
	Error string `json:"error"`
}

func (d *Daemon) api() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+APIVersion+"/status", func(w http.ResponseWriter, r *http.Request) {
		d.checkBinary() // a person asking is told of an upgrade at once
		writeStatus(w, d.readerOf(r).status(d.Status()))
	})
	mux.HandleFunc("GET "+APIVersion+"/jobs", func(w http.ResponseWriter, r *http.Request) {
		d.sayLoading(w)
		writeJobs(w, d.readerOf(r).jobs(d.Status().Jobs))
	})
	mux.HandleFunc("GET "+APIVersion+"/jobs/{name}", func(w http.ResponseWriter, r *http.Request) {
		name := r.PathValue("name")
		c := d.callerOf(r)
		var detail JobDetail
		j, ok := d.resolve(c, name)
		if ok {
			detail, ok = d.detail(j)
		} else if a, isArray := d.resolveArray(c, name); isArray {
			detail, ok = d.arrayDetail(a)
		} else if j := d.lookupRemoved(c, name); j != nil {
			if detail, ok = d.detail(j); ok {
				detail.Removed, detail.NextEnv = true, []string{}
			}
		}
		if !ok {
			writeError(w, http.StatusNotFound, CodeNoSuchJob, d.msgNoSuch(c, name))
			return
		}
		if !detail.Removed {
			d.mu.Lock()
			detail.FileRefused = d.failing[detail.Definition.File]
			d.mu.Unlock()
		}
		detail = d.readerOf(r).detail(detail)
		if owner := detail.Status.Owner; !c.mayControl(owner) {
			// The environment holds what the job's owner put there
			// (tokens) and the daemon's own: theirs alone.
			detail.Definition.Env = map[string]string{}
			detail.NextEnv = []string{}
			detail.EnvHidden = msgEnvHidden(detail.Status.Name, owner, d.adminGroup())
		}
		writeJSON(w, http.StatusOK, detail)
	})
	mux.HandleFunc("GET "+APIVersion+"/jobs/{name}/logs", d.serveLogs)
	mux.HandleFunc("GET "+APIVersion+"/events", d.serveEvents)
	mux.HandleFunc("GET "+APIVersion+"/history", func(w http.ResponseWriter, r *http.Request) {
		c := d.callerOf(r)
		job := d.resolveName(c, r.URL.Query().Get("job"))
		n := 20
		if v := r.URL.Query().Get("n"); v != "" {
			var err error
			if n, err = strconv.Atoi(v); err != nil || n < 1 {
				writeError(w, http.StatusBadRequest, CodeBadRequest, msgBadRunCount(v))
				return
			}
		}
		var runs []store.RunRecord
		var err error
		owners, byOwner := r.URL.Query()["owner"]
		switch _, isArray := d.resolveArray(d.callerOf(r), job); {
		case isArray:
			runs, err = d.store.RunsOfPrefix(job+"[", n)
		case job == "" && byOwner:
			// Only the runs of these owners' jobs ("" the administrators').
			runs, err = d.store.RunsWhere(func(job string) bool { return slices.Contains(owners, ownerOf(job)) }, n)
		default:
			runs, err = d.store.Runs(job, n)
			if _, known := d.jobStatus(job); err == nil && len(runs) == 0 && !known && job != "" {
				// An array no longer declared: its indices' runs.
				runs, err = d.store.RunsOfPrefix(job+"[", n)
			}
		}
		if err != nil {
			writeError(w, http.StatusInternalServerError, CodeInternal, msgCannotReadHistory(err))
			return
		}
		if _, known := d.jobStatus(job); job != "" && !known && len(runs) == 0 {
			writeError(w, http.StatusNotFound, CodeNoSuchJob, d.msgNoSuch(c, job))
			return
		}
		views := make([]RunView, len(runs))
		for i, run := range runs {
			views[i] = runViewOf(run)
		}
		views = d.readerOf(r).runs(views, func(job string) string {
			st, _ := d.jobStatus(job)
			return st.File
		})
		writeJSON(w, http.StatusOK, views)
	})
	mux.HandleFunc("GET "+APIVersion+"/me", d.serveMe)
	mux.HandleFunc("POST "+APIVersion+"/check", d.serveCheck)
	mux.HandleFunc("GET "+APIVersion+"/flavors", func(w http.ResponseWriter, r *http.Request) {
		d.sayLoading(w)
		writeJSON(w, http.StatusOK, d.flavors())
	})
	mux.HandleFunc("POST "+APIVersion+"/reload", func(w http.ResponseWriter, r *http.Request) {
		person := ""
		if c := d.callerOf(r); !c.admin {
			person = c.name
		}
		v, err := d.reloadAs(r.Context(), person)
		d.logCaller(r, err != nil || len(v.Added)+len(v.Changed)+len(v.Removed)+len(v.Quotas) > 0, "reload")
		if err != nil {
			writeNoAnswer(w, err)
			return
		}
		// Errors are the problems' sentences (finishReload).
		rd := d.readerOf(r)
		v.Problems = rd.problems(v.Problems)
		// A name is seen by whoever may list its directory.
		v.Writing = slices.DeleteFunc(v.Writing, func(path string) bool { return !rd.all && !rd.canRead(filepath.Dir(path)) })
		v.Errors = make([]string, len(v.Problems))
		for i, p := range v.Problems {
			v.Errors[i] = p.Text
		}
		writeJSON(w, http.StatusOK, v)
	})
	for _, verb := range []struct {
		name string
		ev   eventKind
	}{{"start", evStart}, {"stop", evStop}, {"restart", evRestart}} {
		mux.HandleFunc("POST "+APIVersion+"/jobs/{name}/"+verb.name, func(w http.ResponseWriter, r *http.Request) {
			name := r.PathValue("name")
			c := d.callerOf(r)
			j, ok := d.resolve(c, name)
			if !ok {
				if a, isArray := d.resolveArray(c, name); isArray {
					d.controlArray(w, r, c, a, verb.name, verb.ev)
					return
				}
				if verb.ev == evStop && d.controlOrphan(w, r, c, name) {
					return
				}
				d.logCaller(r, false, verb.name, "job", name)
				if j := d.lookupRemoved(c, name); j != nil {
					d.controlRemoved(w, c, j, verb.name, r.URL.Query().Get("all") == "1")
					return
				}
				writeError(w, http.StatusNotFound, CodeNoSuchJob, d.msgNoSuch(c, name))
				return
			}
			name = j.name
			v := j.view()
			if verb.ev == evRestart && r.URL.Query().Get("failed") == "1" {
				writeError(w, http.StatusBadRequest, CodeNotArray, msgNotArray(name))
				return
			}
			if d.refuseNotOwner(w, c, verb.name, name, v.Def.Owner, verb.name+" it") {
				return
			}
			if d.refuseStopping(w, verb.name, name) {
				return
			}
			ignoreDeps := verb.ev == evStart && r.URL.Query().Get("ignore_deps") == "1"
			// Logged as answered: whether it changed something.
			changed := false
			logged := []any{"job", name}
			if ignoreDeps {
				logged = append(logged, "ignore_deps", true)
			}
			defer func() { d.logCaller(r, changed, verb.name, logged...) }()
			all := r.URL.Query().Get("all") == "1" // berth stop --all, start --all
			left := ControlAnswer{Job: name, Requested: "start stopped", Already: v.State.String()}
			if verb.ev == evStart && all && !v.StoppedAll {
				// Of every job, only one a stop of every job stopped: one a
				// person stopped on their own stays so.
				writeJSON(w, http.StatusOK, left)
				return
			}
			v.Unfit = d.unfitToStart(verb.ev, name, v)
			if rf := admit(verb.ev, v.State, v.Invalid != "", !v.Def.Enabled, v.Unfit != ""); rf != refuseNone {
				if all {
					// One of every job that cannot be started or stopped
					// now (disabled while stop --all stopped it) is left
					// as it is: the others are not (the review).
					writeJSON(w, http.StatusOK, ControlAnswer{Job: name, Requested: verb.name, Already: v.State.String()})
					return
				}
				writeError(w, http.StatusConflict, rf.code(), msgRefused(verb.name, name, rf, refusedWhy(rf, v)))
				return
			}
			if verb.ev == evStart && r.URL.Query().Get("stopped") == "1" && v.State != store.StateStopped {
				// Only if stopped (start --stopped of one index, or of a
				// job that is not an array): a job done is not run again.
				writeJSON(w, http.StatusOK, left)
				return
			}
			if verb.ev == evStop && v.RestsStopped && (all || !v.StoppedAll) {
				// A stop under way already, to rest stopped (trial AJ: a
				// second stop --all said "then stopped on request" of it).
				// A person's own stop of a job stop --all stops is taken:
				// start --all leaves it then.
				writeJSON(w, http.StatusOK, ControlAnswer{Job: name, Requested: verb.name, Already: v.State.String()})
				return
			}
			msg := jobMessage{ev: &event{kind: verb.ev}, ignoreDeps: ignoreDeps, all: all}
			// A job at rest that runs after others may be held by them
			// once it is started again: the answer waits to say so (it
			// said "requested", and nothing ran).
			gated := (verb.ev == evStart && !ignoreDeps || verb.ev == evRestart) && resting(v.State) &&
				len(v.Def.After)+len(v.Def.AfterAny) > 0
			// A stop is answered once the job took it: what it did is
			// the job's to decide (a job done stops only where it is to
			// run again), and a request answered is one in force (a run
			// that ends next is judged with it).
			if gated || verb.ev == evStop && !v.AfterRemoved {
				// (One declared again while its name's removed job stops
				// reads no request until that one has ended.)
				msg.done = make(chan struct{})
			}
			j.in.post(msg)
			ans := ControlAnswer{Job: name, Requested: verb.name}
			var after *jobView // the job once it took the request
			if msg.done != nil {
				select {
				case <-msg.done:
					w := j.view()
					after = &w
				case <-time.After(2 * time.Second):
				case <-r.Context().Done():
				}
			}
			if gated && after != nil && after.State == store.StateWaiting && after.After != nil {
				ans.HeldBy, ans.File, ans.Gated = after.After, after.Def.Pos.File, true
			}
			// (A stop of an invalid or disabled job is kept for when it
			// may run, and one of an unplaceable job stops it: both
			// change something.)
			if verb.ev == evStart && (v.State == store.StateStarting || v.State == store.StateRunning) ||
				(verb.ev == evStart && !ignoreDeps || verb.ev == evRestart) && v.State == store.StateWaiting && v.After == nil {
				ans.Already = v.State.String()
			}
			if verb.ev == evStop {
				ans.Already, ans.HeldFromRerun = stopAnswer(v.State, after, func() bool { return d.outdated(name, v) })
				switch {
				case ans.Already != "":
				case v.State == store.StateDisabled:
					ans.RestsStoppedOnce = "enabled"
				case v.State == store.StateInvalid:
					ans.RestsStoppedOnce = "fixed"
				}
			}
			held := heldAtGate(verb.ev, ignoreDeps, v)
			if held {
				// Held at the gate: the start or restart changes
				// nothing, and the client says what does.
				ans.HeldBy, ans.File = v.After, v.Def.Pos.File
			}
			changed = ans.Already == "" && !held
			writeJSON(w, http.StatusOK, ans)
		})
	}
	mux.HandleFunc("GET "+APIVersion+"/debug/runtime", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("gc") == "1" {
			runtime.GC() // so that heap_bytes is what is live
		}
		writeJSON(w, http.StatusOK, runtimeFigures())
	})
	// Outside /v1: where Prometheus looks, in its own format (metrics.go).
	mux.Handle("GET /metrics", d.meters.handler(d))
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		// A path the daemon serves, asked with another method: 405, and
		// the methods it takes, as a mux without this pattern would.
		var allow []string
		for _, m := range []string{http.MethodGet, http.MethodPost} {
			if _, pattern := mux.Handler(&http.Request{Method: m, URL: r.URL, Host: r.Host}); pattern != "/" && pattern != "" {
				allow = append(allow, m)
			}
		}
		if len(allow) > 0 && !slices.Contains(allow, r.Method) {
			header := allow
			if slices.Contains(allow, http.MethodGet) {
				header = append(slices.Clone(allow), http.MethodHead) // a GET's pattern takes HEAD too
			}
			w.Header().Set("Allow", strings.Join(header, ", "))
			writeError(w, http.StatusMethodNotAllowed, CodeNoSuchCall, msgWrongMethod(r.Method, r.URL.Path, allow))
			return
		}
		writeError(w, http.StatusNotFound, CodeNoSuchCall, msgNoSuchCall(r.Method, r.URL.Path))
	})
	return d.authorize(d.afterLoad(d.boundReplies(d.asWork(mux))))
}

// refuseNotOwner refuses call (what it would do: "stop it") of job, owned
// by owner, to a caller who may not control it, logs the refusal, and
// says so; false lets the call on.
func (d *Daemon) refuseNotOwner(w http.ResponseWriter, c caller, call, job, owner, what string) bool {
	if c.mayControl(owner) {
		return false
	}
	d.logRefused(c.uid, "control request refused: not the job's owner", "call", call, "job", job, "uid", c.uid)
	admins := d.adminGroup()
	if _, err := user.LookupGroup(admins); err != nil {
		admins = "" // no one to send them to (trial AS)
	}
	writeError(w, http.StatusForbidden, CodeNotPermitted, msgNotYours(job, owner, what, admins))
	return true
}

// controlOrphan answers a stop of a run taken back at start that no file
// in force declares, kept while a file that may declare it has errors
// (Daemon.orphans): it is stopped, where c may; false where name is no
// such run.
func (d *Daemon) controlOrphan(w http.ResponseWriter, r *http.Request, c caller, name string) bool {
	names := []string{name}
	if c.name != "" && !strings.Contains(name, "/") {
		names = append([]string{c.name + "/" + name}, names...) // theirs first, as resolve
	}
	for _, n := range names {
		if !d.isOrphan(n) {
			continue
		}
		if d.refuseNotOwner(w, c, "stop", n, ownerOf(n), "stop it") {
			return true
		}
		v, err := d.call(r.Context(), func() any { return d.stopOrphan(n, nil, msgStopRequested) })
		if err != nil {
			writeNoAnswer(w, err)
			return true
		}
		if v.(bool) {
			d.logCaller(r, true, "stop", "job", n, "orphan", true)
			writeJSON(w, http.StatusOK, ControlAnswer{Job: n, Requested: "stop"})
			return true
		}
	}
	return false
}

// isOrphan reports whether a run of name, taken back at start, is kept
// though no file in force declares its job (Daemon.orphans).
func (d *Daemon) isOrphan(name string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.ContainsFunc(d.problems, func(p Problem) bool { return p.Code == ProblemOrphanKept && p.Job == name })
}

// controlRemoved answers a start, stop or restart of a job no job file
// declares any more whose run is still being stopped: a stop finds it
// stopping already; a start or restart has nothing to run.
func (d *Daemon) controlRemoved(w http.ResponseWriter, c caller, j *job, verb string, all bool) {
	v := j.view()
	if d.refuseNotOwner(w, c, verb, j.name, v.Def.Owner, verb+" it") {
		return
	}
	if verb == "stop" || all {
		// Of every job, one going away is left to go (the review).
		writeJSON(w, http.StatusOK, ControlAnswer{Job: j.name, Requested: verb, Already: store.StateStopping.String()})
		return
	}
	writeError(w, http.StatusConflict, CodeRemoved, msgRemovedStopping(verb, j.name, v.Def.Pos.File))
}

// stopAnswer is what a stop of a job found in state did: already, the
// state it rests in that no stop made, and heldFromRerun, a job done held
// stopped from running again. after is the job once it took the stop, nil
// where it did not say in time; outdated then guesses (Daemon.outdated).
func stopAnswer(was store.State, after *jobView, outdated func() bool) (already string, heldFromRerun bool) {
	atRest := was == store.StateDone || was == store.StateFailed || was == store.StateStopped
	switch {
	case after == nil && atRest:
		if was == store.StateDone && outdated() {
			return "", true
		}
		return was.String(), false
	case after == nil:
		return "", false
	case atRest && after.State == was:
		return was.String(), false
	case was == store.StateDone && after.State == store.StateStopped:
		return "", true
	case !atRest && (after.State == store.StateDone || after.State == store.StateFailed):
		// Come to rest by itself before it took the stop (a run that
		// ended done, or failed for good): nothing was stopped.
		return after.State.String(), false
	}
	return "", false
}

// heldAtGate says whether a start (without ignore_deps) or a restart of a
// job in view v changes nothing: it waits for the jobs it runs after.
func heldAtGate(ev eventKind, ignoreDeps bool, v jobView) bool {
	return (ev == evStart && !ignoreDeps || ev == evRestart) && v.State == store.StateWaiting && v.After != nil
}

// refuseStopping refuses a start, stop or restart of job name once the
// daemon is shutting down, and says so: the jobs' goroutines take no
// request then, and one answered as taken would be lost (a stop that did
// not hold at the next start, a restart that never ran).
func (d *Daemon) refuseStopping(w http.ResponseWriter, verb, name string) bool {
	select {
	case <-d.loopDone:
		writeError(w, http.StatusServiceUnavailable, CodeStopping, MsgStopping("berth "+verb+" "+name))
		return true
	default:
		return false
	}
}

// writeNoAnswer says that the daemon's loop did not answer a call: it is
// stopping, or did not answer in time.
func writeNoAnswer(w http.ResponseWriter, err error) {
	if errors.Is(err, ErrStopping) {
		writeError(w, http.StatusServiceUnavailable, CodeStopping, MsgStopping(""))
		return
	}
	writeError(w, http.StatusServiceUnavailable, CodeUnavailable, msgNoAnswer(err))
}

// unfitToStart is why job name, in view v, fits no machine or its owner's
// quota: for a run going on, as the job said it (v.Unfit); for a start or
// a restart of one at rest, or of one whose run is being stopped, as it
// would be found at once (trial AS; the review: a start during the stop
// was taken, and the job came to rest unplaceable).
func (d *Daemon) unfitToStart(ev eventKind, name string, v jobView) string {
	if ev == evStop || !resting(v.State) && v.State != store.StateStopping || v.Invalid != "" || v.Unfit != "" {
		return v.Unfit
	}
	return d.unfit(name, v.Def)
}

// code is the API's error code for a refusal.
func (r refusal) code() string {
	switch r {
	case refuseInvalid:
		return CodeInvalid
	case refuseUnplaceable:
		return CodeUnplaceable
	}
	return CodeDisabled
}

// refusedWhy is what msgRefused says of a job in view v refused for r.
func refusedWhy(r refusal, v jobView) string {
	switch r {
	case refuseUnplaceable:
		switch {
		case v.Unfit != "" && v.State == store.StateRunning:
			return msgRunsOn(v.Unfit)
		case v.Unfit != "":
			return v.Unfit
		}
		return v.Why
	case refuseDisabled:
		return msgDisabledAt(v.Def.Pos, v.Def.Name, v.Def.Owner != "")
	}
	return v.Invalid
}

// controlArray is a start, stop or restart of every index of array a;
// restart with failed=1 restarts its failed indices alone.
func (d *Daemon) controlArray(w http.ResponseWriter, r *http.Request, c caller, a *array, verb string, ev eventKind) {
	def := a.snapshot().def
	if d.refuseNotOwner(w, c, verb, a.name, def.Owner, verb+" it") {
		return
	}
	if d.refuseStopping(w, verb, a.name) {
		return
	}
	failedOnly := ev == evRestart && r.URL.Query().Get("failed") == "1"
	stoppedOnly := ev == evStart && r.URL.Query().Get("stopped") == "1"
	all := r.URL.Query().Get("all") == "1" // berth stop --all, start --all
	ignoreDeps := ev == evStart && r.URL.Query().Get("ignore_deps") == "1"
	ans := ControlAnswer{Job: a.name, Requested: verb, Array: true}
	defer func() {
		d.logCaller(r, ans.Indices > 0, verb, "job", a.name, "failed_only", failedOnly, "stopped_only", stoppedOnly, "ignore_deps", ignoreDeps)
	}()
	var refused refusal
	var invalid string
	// Of a stop: how the indices rest (stopped: or will), and how many
	// of those it stops were done, held from their rerun.
	rests, held := map[store.State]int{}, 0
	jobs := a.jobs()
	for _, j := range jobs {
		v := j.view()
		if ev == evStop && resting(v.State) {
			rests[v.State]++
		} else if ev == evStop && v.RestsStopped {
			rests[store.StateStopped]++
		}
		switch {
		case failedOnly && v.State != store.StateFailed,
			// Of every job, a stopping index that rests stopped once
			// its run has ended is one to start again (then), as a job
			// is; --stopped alone starts those stopped.
			stoppedOnly && v.State != store.StateStopped && !(all && v.RestsStopped),
			ev == evStart && all && !v.StoppedAll,
			ev == evStop && (resting(v.State) && !d.outdated(j.name, v) || v.RestsStopped && (all || !v.StoppedAll)):
			continue // nothing for this request to do to it
		case heldAtGate(ev, ignoreDeps, v):
			// Its parents hold it: nothing changes, and the client says
			// what does.
			if ans.HeldBy == nil {
				ans.HeldBy, ans.File = v.After, v.Def.Pos.File
			}
			continue
		case ev == evStart && !resting(v.State) && !(all && v.RestsStopped) && !(ignoreDeps && v.After != nil):
			continue // under way already
		}
		v.Unfit = d.unfitToStart(ev, j.name, v)
		if rf := admit(ev, v.State, v.Invalid != "", !v.Def.Enabled, v.Unfit != ""); rf != refuseNone {
			refused, invalid = rf, refusedWhy(rf, v)
			continue
		}
		if ev != evStop && !holdsPlace(v.State) {
			// In line now, lowest index first: their goroutines read
			// the start in any order.
			a.expect(j.index)
		}
		j.in.post(jobMessage{ev: &event{kind: ev}, ignoreDeps: ignoreDeps, all: all})
		ans.Indices++
		if ev == evStop && v.State == store.StateDone {
			held++ // done, and to run again after its parents (the others done are left)
		}
	}
	// As of a job (trial BA): held from its rerun where every index it
	// stops was, and already at rest where all rest alike ("no index to
	// stop" said neither).
	ans.HeldFromRerun = ans.Indices > 0 && held == ans.Indices
	for state, n := range rests {
		if ans.Indices == 0 && n == len(jobs) && (state == store.StateDone || state == store.StateFailed || state == store.StateStopped) {
			ans.Already = state.String()
		}
	}
	if ans.Indices == 0 && refused != refuseNone && !all {
		writeError(w, http.StatusConflict, refused.code(), msgRefused(verb, a.name, refused, invalid))
		return
	}
	switch {
	case failedOnly:
		ans.Requested = "restart failed"
	case stoppedOnly:
		ans.Requested = "start stopped"
	}
	writeJSON(w, http.StatusOK, ans)
}

// HeaderLoading, on a list of jobs or flavors, says that the daemon is
// still reading its job files, as it does at start: the list is not all
// there is yet.
const HeaderLoading = "Berth-Loading"

// sayLoading sets HeaderLoading on w while the daemon has not read its
// job files.
func (d *Daemon) sayLoading(w http.ResponseWriter) {
	if !d.isLoaded() {
		w.Header().Set(HeaderLoading, "1")
	}
}

// loadedWait bounds how long a request about jobs waits for the daemon
// to read its job files at start (awaitLoaded).
const loadedWait = time.Minute

// afterLoad holds a request about jobs (their lists, one, its history,
// logs or control; the flavors) until the daemon has read its job files at
// start, for at most loadedWait: a job not known yet is not answered as
// one that does not exist, nor a list as all there is (trial AT: a
// script's berth start right after systemctl restart berth was told
// no_such_job, and berth jobs --json an empty list). Where the wait is
// cut short, the request is answered as things are, and says so. It waits
// before the caller's share of replies is taken (boundReplies): their
// berth status, which does not wait, is answered meanwhile (the review).
func (d *Daemon) afterLoad(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if p := r.URL.Path; strings.HasPrefix(p, APIVersion+"/jobs") || p == APIVersion+"/history" || p == APIVersion+"/flavors" {
			d.awaitLoaded(r)
		}
		next.ServeHTTP(w, r)
	})
}

// awaitLoaded waits until the daemon has read its job files at start, the
// request has gone, or loadedWait has passed (afterLoad).
func (d *Daemon) awaitLoaded(r *http.Request) {
	if d.isLoaded() {
		return
	}
	t := time.NewTimer(loadedWait)
	defer t.Stop()
	select {
	case <-d.loaded:
	case <-r.Context().Done():
	case <-d.loopDone:
	case <-t.C:
	}
}

// msgNoSuch says there is no job of that name, or, for an index of an
// array that does not have it, which indices the array has.
func (d *Daemon) msgNoSuch(c caller, name string) string {
	if !d.isLoaded() {
		return msgNotLoadedYet(name)
	}
	for _, n := range []string{c.name + "/" + name, name} {
		if d.isOrphan(n) {
			return msgNoJobRunKept(n) // trial AY: said as if none ran
		}
	}
	arr, i, member := splitMember(name)
	if member {
		// The array or job a caller's bare name means: theirs first.
		switch j, a := d.lookup(c, arr); {
		case a != nil:
			if r := *a.snapshot().def.Array; i >= r.From && i <= r.To {
				// It has that index, written otherwise ("sweep[01]").
				return msgNoSuchJob(name, fmt.Sprintf("%s[%d]", arr, i), 0)
			}
			return msgNoSuchIndex(a.name, i, *a.snapshot().def.Array)
		case j != nil:
			return msgNotArrayIndex(j.name, i)
		}
	}
	d.mu.Lock()
	// A file whose latest version is refused may declare it; one in force
	// whose jobs cannot run (unplaceable, a flavor not declared) declares
	// what it has, which is listed; another person's cannot declare a
	// name of the caller's.
	files := 0
	whose := c.name // the person whose name space it is in
	if owner, _, ok := strings.Cut(name, "/"); ok {
		whose = owner
	}
	for path := range d.failing {
		if whose == "" || !d.othersFile(whose, path) {
			files++
		}
	}
	names := d.namesForLocked(c)
	d.mu.Unlock()
	// In order, so that of two names as near the same is told each time.
	slices.Sort(names)
	meant := d.meant(c, name, names)
	if _, known, err := d.store.Job(name); err == nil && known && files == 0 {
		runs, err := d.store.Runs(name, 1)
		return msgJobGone(name, err != nil || len(runs) > 0)
	}
	return msgNoSuchJob(name, meant, files)
}

// meant is the name near name that c may have meant, among names (sorted),
// or "": an index of an array whose name is near ("swep[1]": sweep[1]),
// and another person's job of that very name ("prep": alice/prep).
func (d *Daemon) meant(c caller, name string, names []string) string {
	if arr, i, ok := splitMember(name); ok {
		near := luaapi.Suggest(arr, names)
		if _, a := d.lookup(c, near); a != nil && near != "" {
			if r := *a.snapshot().def.Array; i >= r.From && i <= r.To {
				return fmt.Sprintf("%s[%d]", near, i)
			}
		}
		return ""
	}
	if near := luaapi.Suggest(name, names); near != "" {
		return near
	}
	for _, n := range names {
		if _, bare, ok := strings.Cut(n, "/"); ok && bare == name {
			return n
		}
	}
	return ""
}

// othersFile reports whether path is in the job directory of another
// person than person: a file there declares no job in person's name
// space ("" for the administrators').
func (d *Daemon) othersFile(person, path string) bool {
	if d.cfg.UserJobs == "" {
		return false
	}
	rel, err := filepath.Rel(d.cfg.UserJobs, filepath.Dir(path))
	return err == nil && !strings.Contains(rel, "/") && rel != "." && rel != ".." && rel != person
}

// namesForLocked is every name c may give a job or an array by: the whole
// names, and a person's own by their bare names. d.mu is held.
func (d *Daemon) namesForLocked(c caller) []string {
	names := make([]string, 0, len(d.jobs)+len(d.arrays))
	add := func(n string) {
		names = append(names, n)
		if own, ok := strings.CutPrefix(n, c.name+"/"); c.name != "" && ok {
			names = append(names, own)
		}
	}
	for n, j := range d.jobs {
		if j.arr == nil {
			add(n)
		}
	}
	for n := range d.arrays {
		add(n)
	}
	return names
}

// arrayDetail is `berth show ARRAY`: the array's line, its definition, its
// indices by state, the environment of its first index's next run, and
// the last runs of its indices.
func (d *Daemon) arrayDetail(a *array) (JobDetail, bool) {
	st, ok := d.jobStatus(a.name)
	if !ok {
		return JobDetail{}, false
	}
	def := a.snapshot().def
	first := memberName(a.name, def.Array.From)
	out := JobDetail{Status: st, Definition: DefinitionOf(def), NextEnv: d.previewEnv(st, first, def, def.Array.From),
		Logs: d.logsOf(first), Runs: []RunView{}, Indices: map[string]string{}}
	byState := map[store.State][]int{}
	for _, j := range a.jobs() {
		s := j.view().State
		byState[s] = append(byState[s], j.index)
	}
	for s, indices := range byState {
		out.Indices[s.String()] = accounting.Ranges(indices)
	}
	out.Parents, out.Dependants = d.relatives(a.name, def)
	if runs, err := d.store.RunsOfPrefix(a.name+"[", 10); err == nil {
		for _, r := range runs {
			out.Runs = append(out.Runs, runViewOf(r))
		}
	}
	return out, true
}

// detail is `berth show JOB`.
func (d *Daemon) detail(j *job) (JobDetail, bool) {
	name := j.name
	st, ok := d.jobStatus(name)
	if !ok {
		return JobDetail{}, false
	}
	def := j.view().Def
	out := JobDetail{Status: st, Definition: DefinitionOf(def), NextEnv: d.previewEnv(st, name, def, j.index), Logs: d.logsOf(name), Runs: []RunView{}}
	out.Parents, out.Dependants = d.relatives(name, def)
	if runs, err := d.store.Runs(name, 10); err == nil {
		for _, r := range runs {
			out.Runs = append(out.Runs, runViewOf(r))
			if r.ID == st.Run && r.End.IsZero() && r.Fingerprint != "" {
				out.Outdated = r.Fingerprint != def.ProcessFingerprint()
			}
		}
	}
	return out, true
}

// flavors lists the flavors in force and the jobs that use each.
func (d *Daemon) flavors() []FlavorView {
	d.mu.Lock()
	set := d.set
	d.mu.Unlock()
	usedBy := map[string][]string{}
	for _, j := range set.Jobs {
		if j.Flavor != "" {
			usedBy[j.Flavor] = append(usedBy[j.Flavor], j.Name)
		}
	}
	out := make([]FlavorView, len(set.Flavors))
	for i, f := range set.Flavors {
		out[i] = FlavorOf(f, usedBy[f.Name])
	}
	return out
}

// authorize lets in root, the daemon's own user, and members of the group
// berth, whatever the socket's mode says: a loosened chmod must not open the
// daemon to everyone on the machine. A caller whose credentials cannot be
// read is nobody's, and is refused.
func (d *Daemon) authorize(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		cred, ok := r.Context().Value(peerKey{}).(ctlsock.Peer)
		if !ok {
			d.logRefused(noUID, "control request refused: the caller's credentials cannot be read", "path", r.URL.Path)
			writeError(w, http.StatusForbidden, CodeNotPermitted, msgNoCredentials())
			return
		}
		if !d.allowed(cred) {
			d.logRefused(cred.Uid, "control request refused", "uid", cred.Uid, "pid", cred.Pid, "path", r.URL.Path)
			writeError(w, http.StatusForbidden, CodeNotPermitted, msgNotPermitted(cred.Uid, d.group(), d.adminGroup()))
			return
		}
		next.ServeHTTP(w, r)
	})
}

// allowed says whether the caller may use the daemon at all: root, its
// own user, the members of its group and of the admin group.
func (d *Daemon) allowed(c ctlsock.Peer) bool {
	if rootOrDaemon(c.Uid) {
		return true
	}
	var gids []string
	for _, name := range []string{d.group(), d.adminGroup()} {
		if g, err := user.LookupGroup(name); err == nil {
			gids = append(gids, g.Gid)
		}
	}
	if len(gids) == 0 {
		return false
	}
	// Of the group as it connected (newgrp, sg), or as its account lists
	// it (someone added since they logged in).
	in := func(g uint32) bool { return slices.Contains(gids, strconv.Itoa(int(g))) }
	return in(c.Gid) || slices.ContainsFunc(c.Groups, in) || slices.ContainsFunc(accountGroups(c.Uid), in)
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, status int, code, msg string) {
	writeJSON(w, status, APIError{Code: code, Error: msg})
}

type peerKey struct{}

// withPeer remembers the caller's credentials for each connection, as the
// kernel recorded them when it was made (ctlsock.Peer), for its rights
// and for the log of who made each call.
func withPeer(ctx context.Context, c net.Conn) context.Context {
	if p, ok := ctlsock.PeerOf(c); ok { // read as it was admitted
		return context.WithValue(ctx, peerKey{}, p)
	}
	p, err := ctlsock.ReadPeer(c)
	if err != nil {
		return ctx
	}
	return context.WithValue(ctx, peerKey{}, p)
}

// logCaller logs a call let in, with who made it: every call that
// changes something. One that changes nothing (changed false: a stop of
// a job stopped already, a reload that finds nothing new) is logged
// within its caller's share of such lines (callLog), those left out
// counted in the next (trial AL: a person stopping their own stopped job
// in a loop wrote 1 160 lines a second, past journald's rate limit, which
// then drops the daemon's lines about everyone's jobs); root's and the
// daemon's own user's are all logged.
func (d *Daemon) logCaller(r *http.Request, changed bool, call string, kv ...any) {
	kv = append([]any{"call", call}, kv...)
	if cred, ok := r.Context().Value(peerKey{}).(ctlsock.Peer); ok {
		kv = append(kv, "uid", cred.Uid, "pid", cred.Pid)
		if !changed && !rootOrDaemon(cred.Uid) {
			ok, left := d.accepted.take(cred.Uid, time.Now())
			if !ok {
				return
			}
			if left > 0 {
				kv = append(kv, "calls_left_out", left)
			}
		}
	}
	d.log.Info("control request", withOwner(cutNames(kv))...)
}

// logRefused logs a request refused, unless that caller has written their
// share of such lines for now (callLog).
func (d *Daemon) logRefused(uid uint32, msg string, kv ...any) {
	ok, left := d.calls.take(uid, time.Now())
	if !ok {
		return
	}
	kv = withOwner(cutNames(kv))
	if left > 0 {
		kv = append(kv, "lines_left_out", left)
	}
	d.log.Warn(msg, kv...)
}

// cutNames cuts a job's name and a path, whatever the caller put in them,
// to maxLoggedName, and makes them valid UTF-8 (trial AL: a name of bytes
// 0xFF 0xFE made the log a binary file to grep).
func cutNames(kv []any) []any {
	for i := 0; i+1 < len(kv); i += 2 {
		s, isString := kv[i+1].(string)
		if !isString || kv[i] != "job" && kv[i] != "path" {
			continue
		}
		if len(s) > maxLoggedName {
			// Cut where a character begins, not inside one.
			n := maxLoggedName
			for n > 0 && !utf8.RuneStart(s[n]) {
				n--
			}
			s = s[:n] + "…"
		}
		kv[i+1] = strings.ToValidUTF8(s, "\uFFFD")
	}
	return kv
}

// maxLoggedName bounds a job's name as a request's line gives it: a name
// in force is 64 bytes at most, OWNER/ and [INDEX] added.
const maxLoggedName = 200

// noUID stands for a caller whose credentials cannot be read.
const noUID = ^uint32(0)

// callLog bounds the lines one caller's requests write to the
// daemon's log, callLogLines in each callLogWindow: a person calling in a
// loop (a stop of another's job) wrote a thousand lines a second, and
// under journald its rate limit then drops the daemon's lines about
// everyone's jobs. The first line after a window where some were left
// out says how many.
type callLog struct {
	mu sync.Mutex
	by map[uint32]*callWindow
}

type callWindow struct {
	start       time.Time
	lines, left int
}

const (
	callLogLines  = 20
	callLogWindow = 10 * time.Second
)

// take says whether a line of uid's goes to the log now, and how many of
// theirs were left out in the window before, to be said with it.
func (l *callLog) take(uid uint32, now time.Time) (ok bool, leftBefore int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	w := l.by[uid]
	if w == nil || now.Sub(w.start) >= callLogWindow {
		if w != nil {
			leftBefore = w.left
		}
		if l.by == nil || len(l.by) >= 4096 {
			l.by = map[uint32]*callWindow{} // callers of long ago
		}
		w = &callWindow{start: now}
		l.by[uid] = w
	}
	if w.lines >= callLogLines {
		w.left++
		return false, 0
	}
	w.lines++
	return true, leftBefore
}

// Reload asks the loop to reload (SIGHUP does this) and waits for the
// result: of a reload that began after the call.
func (d *Daemon) Reload(ctx context.Context) (ReloadResult, error) { return d.reloadAs(ctx, "") }

// reloadAs is Reload for person ("": an administrator), whose own files
// go first (personAsks).
func (d *Daemon) reloadAs(ctx context.Context, person string) (ReloadResult, error) {
	done := make(chan ReloadResult, 1)
	if _, err := d.call(ctx, func() any {
		if person != "" {
			d.personAsks(person, done)
		} else {
			d.reload(false, true, done)
		}
		return nil
	}); err != nil {
		return ReloadResult{}, err
	}
	select {
	case res := <-done:
		if person != "" {
			// Their own last change, not someone else's (trial AI), and
			// of the quotas theirs and everyone's, not a colleague's.
			res.Earlier = res.earlierBy[person]
			res.Quotas = slices.DeleteFunc(res.Quotas, func(q string) bool { return q != person && q != "*" })
		}
		// Lists are [], never null, whichever reload it joined.
		for _, l := range []*[]string{&res.Added, &res.Changed, &res.Removed, &res.Quotas, &res.Errors} {
			if *l == nil {
				*l = []string{}
			}
		}
		if res.Problems == nil {
			res.Problems = []Problem{}
		}
		return res, nil
	case <-ctx.Done():
		return ReloadResult{}, ctx.Err()
	case <-d.loopDone:
		return ReloadResult{}, ErrStopping
	}
}

// RuntimeFigures is GET /v1/debug/runtime: what the daemon process holds,
// for finding leaks (the fault tests compare them before and after).
type RuntimeFigures struct {
	Goroutines int    `json:"goroutines"`
	OpenFiles  int    `json:"open_files"`  // -1 when /proc/self/fd cannot be read
	HeapBytes  uint64 `json:"heap_bytes"`  // live and not yet swept objects
	StackBytes uint64 `json:"stack_bytes"` // goroutine stacks
}

func runtimeFigures() RuntimeFigures {
	f := RuntimeFigures{Goroutines: runtime.NumGoroutine(), OpenFiles: -1}
	if fds, err := os.ReadDir("/proc/self/fd"); err == nil {
		f.OpenFiles = len(fds) - 1 // less the directory being read
	}
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}, {Name: "/memory/classes/heap/stacks:bytes"}}
	metrics.Read(s)
	if s[0].Value.Kind() == metrics.KindUint64 {
		f.HeapBytes = s[0].Value.Uint64()
	}
	if s[1].Value.Kind() == metrics.KindUint64 {
		f.StackBytes = s[1].Value.Uint64()
	}
	return f
}
