package supervisor

import (
	"cmp"
	"context"
	"errors"
	"io/fs"
	"maps"
	"os"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/berthd/berth/accounting"
	"github.com/berthd/berth/luaapi"
	"github.com/berthd/berth/supervisor/store"
	"github.com/berthd/berth/supervisor/watch"
)

// ReloadResult is what one reload did, for the log and `berth reload`.
type ReloadResult struct {
	// Files counts the job files there are: those in force, and those
	// with errors or refused (a version kept in force counted once).
	Files   int      `json:"files"`
	Added   []string `json:"added"`
	Changed []string `json:"changed"`
	Removed []string `json:"removed"`
	// Quotas are the quotas the reload declared, changed or took away,
	// by the name they are declared for ("*": everyone else's).
	Quotas []string `json:"quotas"`
	Errors []string `json:"errors"`
	// Problems are Errors as facts.
	Problems []Problem `json:"problems"`
	// Writing are the job files someone had open for writing as the
	// reload looked: each is read once it is closed, what was in force of
	// it staying meanwhile.
	Writing  []string `json:"writing"`
	Duration string   `json:"duration"`
	// Earlier, for a reload that changed nothing, is the daemon's last
	// reload that did, when that was in the last two minutes: the file
	// saved a moment ago was read as it was saved, and this says it was
	// taken.
	Earlier *ReloadChange `json:"earlier,omitempty"`
	// earlierBy is Earlier for each person: their own jobs' last change
	// ("" for an administrator: every job's).
	earlierBy map[string]*ReloadChange
	// unfit are the problems of jobs in force that only starting them
	// would find otherwise (Daemon.unfit, an unknown user or group).
	unfit []Problem
}

// earlierWithin is how recent the last reload that changed something is
// for a reload that changed nothing to say it (ReloadResult.Earlier): the
// file a person saved a moment before berth reload, not someone else's
// edit of hours ago.
const earlierWithin = 2 * time.Minute

// noteChange keeps what res changed, for the reloads after it that change
// nothing (ReloadResult.Earlier): all of it, and each person's own.
func (d *Daemon) noteChange(res ReloadResult) {
	now := d.now()
	if d.lastChange == nil {
		d.lastChange = map[string]*ReloadChange{}
	}
	d.lastChange[""] = &ReloadChange{At: now, Added: slices.Clone(res.Added), Changed: slices.Clone(res.Changed), Removed: slices.Clone(res.Removed), Quotas: slices.Clone(res.Quotas)}
	theirs := map[string]*ReloadChange{}
	for i, names := range [][]string{res.Added, res.Changed, res.Removed} {
		for _, name := range names {
			owner := ownerOf(name)
			if owner == "" {
				continue
			}
			c := theirs[owner]
			if c == nil {
				// Their lists are [], never null.
				c = &ReloadChange{At: now, Added: []string{}, Changed: []string{}, Removed: []string{}, Quotas: []string{}}
				theirs[owner] = c
			}
			lists := [...]*[]string{&c.Added, &c.Changed, &c.Removed}
			*lists[i] = append(*lists[i], name)
		}
	}
	for _, name := range res.Quotas {
		// Everyone's quota ("*") is each person's too; theirs is theirs.
		for owner := range d.people {
			if name != "*" && name != owner {
				continue
			}
			c := theirs[owner]
			if c == nil {
				c = &ReloadChange{At: now, Added: []string{}, Changed: []string{}, Removed: []string{}, Quotas: []string{}}
				theirs[owner] = c
			}
			c.Quotas = append(c.Quotas, name)
		}
	}
	maps.Copy(d.lastChange, theirs)
}

// ReloadChange is what a reload changed, and when.
type ReloadChange struct {
	At      time.Time `json:"at"`
	Added   []string  `json:"added"`
	Changed []string  `json:"changed"`
	Removed []string  `json:"removed"`
	Quotas  []string  `json:"quotas"`
}

// reloadRun is one reload: its scan, taken on the loop, while its changed
// files are evaluated off it.
type reloadRun struct {
	first   bool // the daemon's first: READY=1 follows it
	began   time.Time
	scan    watch.Scan
	people  peopleScan
	scanErr error
	// settling are the directories back a moment ago (forgetWhileRefused):
	// what was in force from them stays until they have settled.
	settling map[string]bool
	waiters  []chan<- ReloadResult
	// previous are the versions in force of files changed since, at the
	// daemon's first reload (evaluated.previous).
	previous []*luaapi.File
	// earlier is what the reload before this one did, when this one's
	// waiters asked while that one was being evaluated: it was applied
	// after they asked, so what they are told covers both.
	earlier *ReloadResult
	// evaluating are the files handed to the Evaluator, in order; stop
	// calls it off. partial: it was called off before the last of them.
	evaluating []string
	stop       context.CancelFunc
	partial    bool
	// askers are the people (not administrators) who wait for it, where
	// only people do: the others' files go to the reload that follows.
	// protected: it follows one that left others' files to it, and is
	// neither called off nor leaves any to the next (see personAsks).
	askers    map[string]bool
	protected bool
	// unread: files it was to evaluate were left to the next reload (a
	// deadline, a share, called off): not every job is known yet.
	unread bool
}

// filesGone reports whether a file being evaluated was removed since its
// scan: what it declares is of no use any more, and the CPU its evaluation
// takes (up to its budget, for each file of the batch) is wasted.
func (r *reloadRun) filesGone() bool {
	for _, path := range r.evaluating {
		if _, err := os.Lstat(path); errors.Is(err, os.ErrNotExist) {
			return true
		}
	}
	return false
}

// dirRefused reports whether the scan refused the directory path is in
// (the administrators' or a person's), or found no administrators'
// directory: what was in force from it stays in force until it is fixed
// or back. (A directory gone a moment, for an rm -rf and a git clone, or
// a remount, would otherwise restart every service of the machine.)
func (r *reloadRun) dirRefused(path string) bool {
	if r.people.refused[filepath.Dir(path)] != nil || r.settling[filepath.Dir(path)] {
		return true
	}
	return (r.scan.DirRefused != nil || r.scan.DirMissing) && !r.people.holds(path)
}

// writing are the files the scan found open for writing, sorted.
func (r *reloadRun) writing() []string {
	return append([]string{}, slices.Sorted(maps.Keys(r.scan.Writing))...)
}

// refusedDirs are the directories the scan refused, or found missing.
func (r *reloadRun) refusedDirs(jobsDir string) map[string]bool {
	dirs := map[string]bool{}
	if r.scan.DirRefused != nil || r.scan.DirMissing {
		dirs[filepath.Clean(jobsDir)] = true
	}
	for dir := range r.people.refused {
		dirs[dir] = true
	}
	return dirs
}

// dirSettle is how long a directory back from being refused or missing
// is given to fill before a file the daemon held from it, and that is not
// in it, is taken to be gone: a git clone makes the directory before it
// writes the files, a restore from a backup writes them one by one.
const dirSettle = 2 * time.Second

// forgetWhileRefused forgets the files removed from a directory while it
// was refused or missing: what was in force from it stayed in force, and
// the scanner reported their removal then (watch.Scan's DirRefused). Once
// the directory has been back for dirSettle, a file the daemon holds from
// it that is not there has gone. (A job whose file went while its
// directory was group-writable for a moment ran on until the daemon's
// restart.) Until then the directory settles (r.settling): nothing of it
// is forgotten, and the daemon looks again when it has settled.
func (d *Daemon) forgetWhileRefused(r *reloadRun) {
	now := r.refusedDirs(d.cfg.JobsDir)
	for dir := range d.refusedDirs {
		if !now[dir] {
			d.dirsBack[dir] = d.now()
		}
	}
	for dir := range now {
		delete(d.dirsBack, dir) // refused or missing again
	}
	d.refusedDirs = now
	settled := map[string]bool{}
	for dir, at := range d.dirsBack {
		left := dirSettle - d.now().Sub(at)
		if left <= 0 {
			settled[dir] = true
			delete(d.dirsBack, dir)
			continue
		}
		r.settling[dir] = true
		if d.watcher != nil {
			if d.writingWait > 0 {
				left = min(left, d.writingWait)
			}
			d.watcher.Recheck(left)
		}
	}
	if len(settled) == 0 {
		return
	}
	known := slices.Concat(slices.Collect(maps.Keys(d.latest)), slices.Collect(maps.Keys(d.good)), slices.Collect(maps.Keys(d.refused)))
	for _, path := range known {
		if !settled[filepath.Dir(path)] {
			continue
		}
		if _, err := os.Lstat(path); errors.Is(err, fs.ErrNotExist) {
			d.forget(path)
		}
	}
}

// evaluated is a reload's evaluation, handed back to the loop.
type evaluated struct {
	r     *reloadRun
	files []*luaapi.File
	// previous, at the first reload, are the kept copies (kept.go) of the
	// files changed since they were in force, evaluated: their versions in
	// force.
	previous []*luaapi.File
}

// reload rescans the jobs directory, has the files that changed evaluated,
// and, once they are, applies the difference to the running jobs. Runs on
// the loop, and never waits there for a file: the evaluation runs in a
// child (Evaluator), and the loop goes on answering meanwhile. A file that
// fails keeps its previous version in force; its error stays shown until
// the file is fixed or removed. The result goes to each of waiters.
//
// asked is false when the watcher (an event, or its periodic safety rescan)
// prompted it rather than a person or systemd. Such a reload that finds
// nothing new does nothing at all: no RELOADING=1, no log line, no diff of
// every job. A reload asked for while another is being evaluated runs once
// that one is done, for everyone who asked meanwhile.
func (d *Daemon) reload(first, asked bool, waiters ...chan<- ReloadResult) {
	d.reloadAfter(nil, first, reloadAgain{asked: asked, waiters: waiters, others: len(waiters) > 0})
}

// personAsks is reload for a person's berth submit, edit or reload (as
// reload(false, true, done) is an administrator's): what they wait for
// is their own files, and nobody's slow files are to keep them waiting.
// A reload the watcher began is called off for them, what it evaluated
// kept; and a reload only people wait for evaluates the administrators'
// files and theirs, and leaves the others' changed files to the reload
// that follows at once. That one is protected: it is not called off, and
// evaluates everyone's, so that a stream of submits cannot keep a slow
// person's files from ever being read.
func (d *Daemon) personAsks(person string, done chan<- ReloadResult) {
	if d.people[person] == nil {
		d.reload(false, true, done)
		return
	}
	if r := d.reloading; r != nil && len(r.waiters) == 0 && !r.first && !r.protected && !r.partial {
		d.log.Info("a person waits for a reload: the one being evaluated is called off, what it evaluated kept, and goes on after theirs", "person", person)
		r.partial = true
		r.stop()
	}
	d.reloadAfter(nil, false, reloadAgain{asked: true, waiters: []chan<- ReloadResult{done}, askers: []string{person}})
}

// reloadAfter is reload as req asks, for waiters who asked while the
// reload that did earlier was being evaluated.
func (d *Daemon) reloadAfter(earlier *ReloadResult, first bool, req reloadAgain) {
	asked, waiters := req.asked, req.waiters
	if d.reloading != nil {
		d.again.pending = true
		d.again.asked = d.again.asked || asked
		d.again.waiters = append(d.again.waiters, waiters...)
		d.again.askers = append(d.again.askers, req.askers...)
		d.again.others = d.again.others || req.others
		if !d.reloading.first && d.reloading.filesGone() {
			// The reload that follows evaluates what is still there;
			// what was evaluated already is kept. (Not the first: the
			// daemon is READY once every file was evaluated, and the
			// runs it took back wait for their files.)
			d.log.Info("files being evaluated were removed: calling the evaluation off")
			d.reloading.stop()
		}
		return
	}
	r := &reloadRun{first: first, began: d.now(), waiters: waiters, earlier: earlier, settling: map[string]bool{}, protected: d.protectNext}
	d.protectNext = false
	if !first && !r.protected {
		r.askers = req.onlyPeople()
	}
	d.keepSocket() // systemctl reload berth is what an operator tries
	if d.cfg.SocketAccess != nil {
		if err := d.cfg.SocketAccess(); err != nil {
			d.log.Warn("cannot give the control socket to its groups", "group", d.group(), "admin_group", d.adminGroup(), "error", err)
		}
	}
	gone, peopleErr := d.refreshPeople()
	r.scan, r.people, r.scanErr = d.scan(gone)
	if peopleErr != nil && r.scanErr == nil {
		r.scanErr = peopleErr
	}
	d.noteWriting(r)
	if !first && !asked && r.scanErr == nil && d.nothingNew(r) {
		d.reply(r, ReloadResult{Writing: r.writing()})
		return
	}
	if !first {
		d.notify(reloadingMessage())
	}
	if r.scanErr != nil {
		d.log.Error("cannot scan the job directories: what is in force stays, and nothing is stopped for want of its file", "error", r.scanErr)
	}
	srcs := make([]luaapi.Source, 0, len(r.scan.Changed))
	for _, path := range slices.Sorted(maps.Keys(r.scan.Changed)) {
		src := luaapi.Source{Path: path, Src: r.scan.Changed[path]}
		if p := d.personOf(path); p != nil {
			src.Owner = p.name
		}
		srcs = append(srcs, src)
	}
	evalOrder(srcs)
	if first && d.kept != nil {
		inForceFirst(srcs, func(s luaapi.Source) bool { return d.kept.holds(s.Path, s.Src) })
	}
	// At the first reload, a file refused falls back on its kept copy: what
	// was in force of it when the last daemon stopped; so do the files of
	// a directory refused or missing (trial AY: every job of a jobs
	// directory made writable by others went): those whose copies say
	// their path, and those its jobs' records name, whose copy a daemon
	// older than those files may have kept.
	var refused []luaapi.Source
	if first && d.kept != nil {
		paths := slices.Sorted(maps.Keys(r.scan.Refused))
		if dirs := r.refusedDirs(d.cfg.JobsDir); len(dirs) > 0 {
			files, err := d.store.JobFiles()
			if err != nil {
				d.log.Warn("cannot read which files the jobs were declared in: a file of a directory refused that a daemon before this version kept is missing until it is fixed", "error", err)
				files = map[string]bool{}
			}
			for _, path := range d.kept.pathsIn(dirs) {
				files[path] = true
			}
			for _, path := range slices.Sorted(maps.Keys(files)) {
				if dirs[filepath.Dir(path)] && !slices.Contains(paths, path) {
					paths = append(paths, path)
				}
			}
		}
		for _, path := range paths {
			if !d.kept.has(path) {
				continue
			}
			src := luaapi.Source{Path: path}
			if p := d.personOf(path); p != nil {
				src.Owner = p.name
			} else if owner, ok := d.ownerOfDir(filepath.Dir(path)); ok {
				src.Owner = owner
			}
			refused = append(refused, src)
		}
	}
	if len(srcs) == 0 && len(refused) == 0 {
		if first {
			// The child started for the first files has none to read.
			d.cfg.Evaluator.Discard()
		}
		d.finishReload(r, nil)
		return
	}
	d.reloading = r
	machine := luaMachine(d.cfg)
	ctx, stop := context.WithCancel(d.evalCtx)
	r.stop = stop
	mine := len(srcs)
	if r.askers != nil {
		// The administrators' files and the askers', in their order;
		// then the others', left to the next reload as a reload called
		// off leaves the files after the one in hand.
		theirs := func(s luaapi.Source) bool { return s.Owner != "" && !r.askers[s.Owner] }
		slices.SortStableFunc(srcs, func(a, b luaapi.Source) int {
			switch {
			case theirs(a) == theirs(b):
				return 0
			case theirs(b):
				return -1
			}
			return 1
		})
		mine = slices.IndexFunc(srcs, theirs)
		if mine < 0 {
			mine = len(srcs)
		} else {
			d.protectNext = true
		}
	}
	for _, s := range srcs {
		r.evaluating = append(r.evaluating, s.Path)
	}
	kept := d.kept
	srcs = srcs[:mine]
	d.evaluations.Go(func() {
		defer stop()
		files := d.cfg.Evaluator.evaluate(ctx, machine, srcs, cmp.Or(d.cfg.EvalShare, DefaultEvalShare))
		var previous []*luaapi.File
		if first && kept != nil {
			// They were in force before: each is evaluated, whoever's
			// share it takes.
			prev := append(previousVersions(kept, srcs, files), keptVersions(kept, refused)...)
			evalOrder(prev)
			previous = d.cfg.Evaluator.Evaluate(ctx, machine, prev)
		}
		d.evaluated <- evaluated{r: r, files: files, previous: previous}
	})
}

// noteWriting deals with the job files being saved as the scan looked
// (watch.Scan.Writing): each is left as it was until it is read whole. The
// scanner keeps what it read of one before; one that was refused stays
// refused, now for this, and so does one the first reload finds being
// written, which falls back on its kept copy meanwhile. Closing a file
// raises no event, so the watcher is asked to signal again soon, at
// 20 ms, then twice as long each time up to a second, while any stays
// open.
func (d *Daemon) noteWriting(r *reloadRun) {
	for _, path := range slices.Sorted(maps.Keys(r.scan.Writing)) {
		if !d.writing[path] {
			d.log.Info("a job file is open for writing: it is read once it is closed", "file", path)
		}
		if _, was := d.refused[path]; was || r.first {
			r.scan.Refused[path] = r.scan.Writing[path]
		}
	}
	d.writing = make(map[string]bool, len(r.scan.Writing))
	for path := range r.scan.Writing {
		d.writing[path] = true
	}
	if len(r.scan.Writing) == 0 {
		d.writingWait = 0
		return
	}
	d.writingWait = min(max(2*d.writingWait, 20*time.Millisecond), time.Second)
	if d.watcher != nil {
		d.watcher.Recheck(d.writingWait)
	}
}

// evaluatedFiles takes a reload's evaluation back on the loop, then runs
// the reload that was asked for meanwhile, if any.
func (d *Daemon) evaluatedFiles(ev evaluated) {
	d.reloading = nil
	for _, path := range ev.r.evaluating[len(ev.files):] {
		// Called off before its turn: read again by the next reload,
		// which follows at once, if it is still there.
		d.forgetScanned(path)
		d.again.pending = true
		ev.r.partial, ev.r.unread = true, true
	}
	ev.r.previous = ev.previous
	res := d.finishReload(ev.r, ev.files)
	if again := d.again; again.pending {
		d.again = reloadAgain{}
		d.reloadAfter(&res, false, again)
	}
}

// refusedBy reports whether f was refused for problem p.
func refusedBy(f *luaapi.File, p luaapi.Problem) bool {
	return len(f.Errors) == 1 && f.Errors[0].Problem == p
}

// reloadAgain is a reload asked for while another was being evaluated.
type reloadAgain struct {
	pending bool
	asked   bool
	waiters []chan<- ReloadResult
	// askers are the people among those who wait; others: someone else
	// waits too (an administrator, systemd).
	askers []string
	others bool
}

// onlyPeople are the people who wait for the reload, where nobody else
// does; nil otherwise.
func (a *reloadAgain) onlyPeople() map[string]bool {
	if a.others || len(a.askers) == 0 {
		return nil
	}
	m := make(map[string]bool, len(a.askers))
	for _, p := range a.askers {
		m[p] = true
	}
	return m
}

// reply hands a reload's result to those who asked for it.
func (d *Daemon) reply(r *reloadRun, res ReloadResult) {
	if r.earlier != nil && len(r.waiters) > 0 {
		res = r.earlier.then(res)
	}
	for _, w := range r.waiters {
		w <- res
	}
}

// then is what r and then next did, as one reload: a job added by one
// and removed by the other was neither; one removed and added again was
// changed. The rest (files, errors) is as next left it.
func (r *ReloadResult) then(next ReloadResult) ReloadResult {
	in := func(names []string) map[string]bool {
		m := make(map[string]bool, len(names))
		for _, n := range names {
			m[n] = true
		}
		return m
	}
	added, changed, removed := in(r.Added), in(r.Changed), in(r.Removed)
	for _, n := range next.Added {
		if removed[n] {
			delete(removed, n)
			changed[n] = true
		} else {
			added[n] = true
		}
	}
	for _, n := range next.Changed {
		if !added[n] {
			changed[n] = true
		}
	}
	for _, n := range next.Removed {
		if added[n] {
			delete(added, n)
		} else {
			delete(changed, n)
			removed[n] = true
		}
	}
	sorted := func(m map[string]bool) []string {
		if len(m) == 0 {
			return nil
		}
		return slices.Sorted(maps.Keys(m))
	}
	next.Added, next.Changed, next.Removed = sorted(added), sorted(changed), sorted(removed)
	quotas := in(r.Quotas)
	for _, q := range next.Quotas {
		quotas[q] = true
	}
	next.Quotas = sorted(quotas)
	if len(added)+len(changed)+len(removed)+len(quotas) > 0 {
		next.Earlier, next.earlierBy = nil, nil // said only of a reload that changed nothing
	}
	return next
}

// finishReload applies a reload whose files have been evaluated, and
// returns what it did.
func (d *Daemon) finishReload(r *reloadRun, files []*luaapi.File) ReloadResult {
	scan, began, first := r.scan, r.began, r.first
	for _, f := range files {
		d.latest[f.Path] = f
		delete(d.refused, f.Path)
		switch {
		case refusedBy(f, luaapi.NotEvaluated):
			// Its turn had not come: read it again, and go on at once
			// with another reload (each evaluates some files, so the
			// queue of them shortens).
			d.forgetScanned(f.Path)
			d.again.pending = true
			r.unread = true
		case refusedBy(f, luaapi.EvalFailed):
			// The evaluating process failed for a cause not the file's
			// own (killed from outside, could not start): the next
			// reload tries it again.
			d.forgetScanned(f.Path)
		}
	}
	if r.scanErr == nil {
		d.forgetWhileRefused(r)
	}
	renamed := d.renamed(scan)
	movedTo := make(map[string]string, len(renamed))
	for to, from := range renamed {
		movedTo[from] = to
	}
	for _, path := range scan.Removed {
		// A file that became refused, or a refused directory, is not a
		// removal: what was in force stays in force until it is fixed.
		if _, refused := scan.Refused[path]; refused || r.dirRefused(path) {
			if !refused && r.settling[filepath.Dir(path)] {
				d.unsay(path)
			}
			continue
		}
		if to, ok := movedTo[path]; ok {
			d.moveInForce(path, to)
		}
		d.forget(path)
	}
	if r.scanErr == nil {
		// A refused file the scan no longer mentions is gone (the scanner
		// reported its removal when it was first refused).
		for path := range d.refused {
			_, still := scan.Refused[path]
			_, back := scan.Changed[path]
			switch {
			case still || back:
			case !r.dirRefused(path):
				d.forget(path)
			case r.settling[filepath.Dir(path)]:
				d.unsay(path)
			}
		}
	}
	for path, err := range scan.Refused {
		d.refused[path] = err.Error()
	}
	for _, f := range r.previous {
		if len(f.Errors) > 0 {
			continue
		}
		d.good[f.Path] = f
		if _, read := d.latest[f.Path]; !read && r.dirRefused(f.Path) {
			// Of a directory refused at the start: its version in force
			// is the one kept, until the directory is fixed or back.
			d.latest[f.Path] = f
		}
	}
	set := d.inForce(renamed)
	if first && d.kept != nil && r.scanErr == nil && len(r.refusedDirs(d.cfg.JobsDir)) == 0 {
		// A fresh scan reports as changed or refused every file there is:
		// the copies of the others, removed while the daemon was down,
		// go, or a file of that name written later could fall back on them.
		there := map[string]bool{}
		for path := range scan.Changed {
			there[path] = true
		}
		for path := range scan.Refused {
			there[path] = true
		}
		d.kept.do([]keptOp{{only: there}})
	}
	d.keep(scan.Changed)
	res := d.apply(set, first)
	res.Files = len(set.Files)
	res.Writing = r.writing()
	if len(d.fileErrs) > 0 {
		inForce := make(map[string]bool, len(set.Files))
		for _, f := range set.Files {
			inForce[f.Path] = true
		}
		for path := range d.fileErrs {
			if !inForce[path] {
				res.Files++ // none of its versions in force
			}
		}
	}
	res.Duration = d.now().Sub(began).Round(time.Microsecond).String()

	d.mu.Lock()
	d.problems = d.problems[:0]
	clear(d.failing)
	for _, path := range slices.Sorted(maps.Keys(d.fileErrs)) {
		d.problems = append(d.problems, d.fileErrs[path]...)
		d.failing[path] = true
	}
	// A job's mistakes that leave its file in force (a parent or a flavor
	// not declared, a cycle, after and after_any naming one job) hold the
	// job or make it invalid; each is shown here too, with its file and
	// line, as the file's errors are.
	for _, p := range jobProblems(set) {
		if _, failing := d.fileErrs[p.File]; failing {
			// Of the version in force, whose lines are not the file's
			// on disk any more.
			p.Text = msgOfVersionInForce(p.Text)
		}
		d.problems = append(d.problems, p)
	}
	d.problems = append(d.problems, res.unfit...)
	d.problems = append(d.problems, QuotaProblems(set, slices.Sorted(maps.Keys(d.people)))...)
	switch {
	case scan.DirRefused != nil:
		d.problems = append(d.problems, Problem{Code: ProblemDirRefused, File: d.cfg.JobsDir, Text: scan.DirRefused.Error()})
	case scan.DirMissing && d.cfg.JobsDir != "" && r.scanErr == nil:
		held := false
		for path := range d.good {
			held = held || filepath.Dir(path) == filepath.Clean(d.cfg.JobsDir)
		}
		d.problems = append(d.problems, Problem{Code: ProblemDirMissing, File: d.cfg.JobsDir, Text: msgJobsDirMissing(d.cfg.JobsDir, held)})
	}
	for _, dir := range slices.Sorted(maps.Keys(r.people.refused)) {
		d.problems = append(d.problems, Problem{Code: ProblemDirRefused, File: dir, Text: r.people.refused[dir].Error()})
	}
	var orphans []string
	if len(d.adopted) > 0 {
		// No file in force declares these jobs any more. Where a file
		// that may declare one is not in force as written, the job may
		// only be missing for now: a long run is not stopped for a typo,
		// and is shown, as it holds its grant. Where not every file was
		// read, those kept stay so.
		if !r.partial && r.scanErr == nil {
			orphans = d.orphans(r)
		}
		d.problems = append(d.problems, d.keptOrphans()...)
	}
	SortProblems(d.problems)
	res.Problems = append([]Problem{}, d.problems...)
	d.mu.Unlock()
	d.stopOrphans(orphans)
	for _, p := range res.Problems {
		res.Errors = append(res.Errors, p.Text)
	}
	// A file is refused anew when a problem of its own is logged: saved
	// with an error, not merely still broken at another file's reload.
	refusedAnew := 0
	for path := range d.logProblems(res.Problems) {
		if _, ok := d.fileErrs[path]; ok {
			refusedAnew++
		}
	}
	if first {
		d.log.Info("loaded", "files", res.Files, "jobs", len(set.Jobs), "errors", len(res.Errors),
			"duration_ms", d.now().Sub(began).Milliseconds())
		d.notify("READY=1")
		d.log.Info("ready", "cpus", d.cfg.Machine.CPUs, "gpus", len(d.cfg.Machine.GPUs), "jobs_dir", d.cfg.JobsDir)
	} else {
		kv := []any{"files", res.Files, "added", len(res.Added), "changed", len(res.Changed),
			"removed", len(res.Removed), "errors", len(res.Errors), "duration_ms", d.now().Sub(began).Milliseconds()}
		// Which jobs, so that the log alone says what a reload did.
		for _, l := range []struct {
			key   string
			names []string
		}{{"added_jobs", res.Added}, {"changed_jobs", res.Changed}, {"removed_jobs", res.Removed}, {"changed_quotas", res.Quotas}} {
			if len(l.names) > 0 {
				kv = append(kv, l.key, someNames(l.names))
			}
		}
		d.log.Info("reloaded", kv...)
		d.notify("READY=1")
		if len(res.Added)+len(res.Changed)+len(res.Removed)+len(res.Quotas) > 0 {
			d.noteChange(res)
		} else {
			res.earlierBy = map[string]*ReloadChange{}
			now := d.now()
			for who, c := range d.lastChange {
				if now.Sub(c.At) < earlierWithin {
					res.earlierBy[who] = c
				}
			}
			res.Earlier = res.earlierBy[""]
		}
	}
	if !d.isLoaded() && !r.unread {
		// Every file read (not one left for the next reload: a person's
		// past their share, the deadline's): the jobs are all known.
		close(d.loaded)
		d.meters.ready.Set(1)
	}
	d.meters.reloaded(d.now().Sub(began), len(d.fileErrs), refusedAnew)
	d.changed.raise()
	d.worked()
	d.reply(r, res)
	return res
}

// logProblems logs each configuration problem once per version of its
// file: when it appears, and again when its file is saved with the problem
// still in it, but not at every other reload while it stands (an editor's
// save can make two, and every other file's change makes one). It says
// when a file that had problems has none left. berth status shows what is
// in force. It returns the files of the problems it logged.
func (d *Daemon) logProblems(problems []Problem) (logged map[string]bool) {
	now := make(map[loggedProblem]bool, len(problems))
	files := map[string]bool{}
	logged = map[string]bool{}
	for _, p := range problems {
		if p.Code == ProblemOrphanKept {
			continue // not a file's: said as it is kept (orphans)
		}
		k := loggedProblem{p, d.versionOf(p.File)}
		now[k] = true
		files[p.File] = true
		if d.logged[k] {
			continue
		}
		logged[p.File] = true
		kv := []any{"file", strings.ToValidUTF8(p.File, "\uFFFD")} // a name not text is refused, and said escaped
		if p.Line > 0 {
			kv = append(kv, "line", p.Line)
		}
		if p.Job != "" {
			kv = append(kv, "job", p.Job)
		} else if person := d.personOf(p.File); person != nil {
			kv = append(kv, "owner", person.name) // trial BC: a syntax error's line had none
		}
		d.log.Error("configuration error", withOwner(append(kv, "code", p.Code, "error", p.Text))...)
	}
	fixed := map[string]bool{}
	for k := range d.logged {
		if !files[k.File] {
			fixed[k.File] = true
		}
	}
	for _, file := range slices.Sorted(maps.Keys(fixed)) {
		kv := []any{"file", file}
		if person := d.personOf(file); person != nil {
			kv = append(kv, "owner", person.name)
		}
		d.log.Info("a file's configuration errors are gone", kv...)
	}
	d.logged = now
	return logged
}

// loggedProblem is a problem as it was logged: with the version (hash) of
// the file it is in, "" where it is in none evaluated.
type loggedProblem struct {
	Problem
	version string
}

// versionOf is the hash of the latest version of the job file at path, ""
// when none was evaluated (a refused file, a directory).
func (d *Daemon) versionOf(path string) string {
	if f, ok := d.latest[path]; ok {
		return f.Hash
	}
	return ""
}

// nothingNew reports whether a scan changes nothing the daemon knows: no
// file changed or went, and the same files are refused for the same reasons.
func (d *Daemon) nothingNew(r *reloadRun) bool {
	scan := r.scan
	if len(scan.Changed) > 0 || len(scan.Removed) > 0 || scan.DirRefused != nil || len(r.people.refused) > 0 || len(scan.Refused) != len(d.refused) ||
		len(d.dirsBack) > 0 { // a directory settles, and is looked at once it has
		return false
	}
	// A directory refused or missing at the last reload, and fine now
	// with nothing in it to read, is news all the same: its problem goes
	// (a person's emptied directory, fixed, was refused until a file came).
	d.mu.Lock()
	dirWas := slices.ContainsFunc(d.problems, func(p Problem) bool { return p.Code == ProblemDirRefused || p.Code == ProblemDirMissing })
	d.mu.Unlock()
	if dirWas {
		return false
	}
	for path, err := range scan.Refused {
		if d.refused[path] != err.Error() {
			return false
		}
	}
	return true
}

// moveInForce carries the version in force of file from, renamed to to as
// it was, over to it where to fails as from did: renaming a file with a
// mistake in it (a git mv) leaves its jobs as they were, now declared at
// to. Its kept copy goes with it. from is forgotten next.
func (d *Daemon) moveInForce(from, to string) {
	good, latest := d.good[from], d.latest[to]
	if good == nil || latest == nil || len(latest.Errors) == 0 || d.good[to] != nil {
		return
	}
	d.good[to] = good.Moved(to)
	if d.kept != nil {
		d.kept.do([]keptOp{{path: to, from: from}})
	}
}

// unsay drops what is said of a file that is not there while its
// directory, back a moment ago, settles (forgetWhileRefused): what was in
// force of it stays until then, but its refusal or errors are of a file
// that someone removed, and told to fix it, they could not.
func (d *Daemon) unsay(path string) {
	delete(d.refused, path)
	if g := d.good[path]; g != nil {
		d.latest[path] = g
	} else {
		d.forget(path)
	}
}

// forget drops everything known of a file that is gone.
func (d *Daemon) forget(path string) {
	delete(d.latest, path)
	delete(d.good, path)
	delete(d.refused, path)
	if d.kept != nil {
		d.kept.do([]keptOp{{path: path, forget: true}})
	}
}

// keep keeps a copy of each changed file whose latest version is in force
// now (kept.go).
func (d *Daemon) keep(changed map[string][]byte) {
	if d.kept == nil {
		return
	}
	var ops []keptOp
	for path, src := range changed {
		if f := d.latest[path]; f != nil && d.good[path] == f {
			ops = append(ops, keptOp{path: path, hash: f.Hash, src: src})
		}
	}
	d.kept.do(ops)
}

// previousVersions are the kept copies of the files changed since they
// were last in force (files, evaluated from srcs), as sources to evaluate:
// what was in force of each before. A file that fails falls back on it,
// and so does one that the rules across files refuse (a name another file
// holds, a person's files past what they may declare), as at a reload. A
// file refused for a cause not its own (its turn did not come, the
// evaluation itself failed) is read again anyway.
func previousVersions(kept *keptFiles, srcs []luaapi.Source, files []*luaapi.File) []luaapi.Source {
	var out []luaapi.Source
	for i, f := range files {
		if refusedBy(f, luaapi.NotEvaluated) || refusedBy(f, luaapi.EvalFailed) {
			continue
		}
		if src, ok := kept.previous(f.Path, f.Hash); ok {
			prev := srcs[i]
			prev.Src = src
			out = append(out, prev)
		}
	}
	return out
}

// keptVersions are the kept copies of files refused as they are now
// (their mode, their owner): what was in force of each before, when the
// daemon last accepted them.
func keptVersions(kept *keptFiles, refused []luaapi.Source) []luaapi.Source {
	var out []luaapi.Source
	for _, src := range refused {
		if copied, ok := kept.copyOf(src.Path); ok {
			src.Src = copied
			out = append(out, src)
		}
	}
	return out
}

// inForce decides which version of each file is in force, and why any
// latest version is not: a file that fails keeps its previous version in
// force, and so does one refused by the cross-file rules (a name another
// file declares) — the file that changed is the one refused, never the one
// already running. A file whose latest version is not in force is tried
// again at every reload, so fixing the other file is enough.
func (d *Daemon) inForce(renamed map[string]string) *luaapi.Set {
	fileErrs := map[string][]Problem{}
	candidates := map[string]*luaapi.File{}
	var changed []string
	for path, refusal := range d.refused {
		// Refused from the start, a file has no evaluated version; its
		// refusal is shown all the same.
		if _, evaluated := d.latest[path]; !evaluated {
			fileErrs[path] = []Problem{refusedFile(path, refusal)}
			if g := d.good[path]; g != nil {
				candidates[path] = g
			}
		}
	}
	for path, f := range d.latest {
		var why []Problem
		if refusal, ok := d.refused[path]; ok {
			why = []Problem{refusedFile(path, refusal)}
		} else if len(f.Errors) > 0 {
			why = problemsOf(f.Errors)
		}
		if why != nil {
			fileErrs[path] = why
			if g := d.good[path]; g != nil {
				candidates[path] = g
			}
			continue
		}
		candidates[path] = f
		if d.good[path] != f {
			changed = append(changed, path)
		}
	}
	set := luaapi.Combine(slices.Collect(maps.Values(candidates)))
	if rejectsFiles(set) || OverPersonJobs(slices.Collect(maps.Values(candidates)), d.personJobs()) {
		// Admit what was in force, then each changed file: first those
		// that held one of their job names before, then the others in
		// lexical order. After a restart nothing is in force yet, and
		// every file is changed: the state's records then say which file
		// held a name, so that the same file wins it again.
		admitted := maps.Clone(candidates)
		for _, path := range changed {
			delete(admitted, path)
		}
		slices.Sort(changed)
		held := d.heldNames(changed, renamed)
		rank := func(path string) int {
			switch {
			case d.kept.keeps(path, d.latest[path].Hash):
				return 0
			case held[path]:
				return 1
			}
			return 2
		}
		slices.SortStableFunc(changed, func(a, b string) int { return cmp.Compare(rank(a), rank(b)) })
		for _, path := range changed {
			why := d.admit(admitted, path, d.latest[path])
			if why == nil {
				continue
			}
			fileErrs[path] = why
			if g := d.good[path]; g != nil && d.admit(admitted, path, g) == nil {
				continue
			}
			delete(admitted, path)
		}
		candidates = admitted
		set = luaapi.Combine(slices.Collect(maps.Values(candidates)))
	}
	d.good = candidates
	d.fileErrs = fileErrs
	for path, why := range fileErrs {
		// What of a refused version had no error of its own is checked
		// beside what is in force, as berth check has it, so that every
		// mistake of the file is said at once.
		f := d.latest[path]
		if _, refused := d.refused[path]; refused || f == nil {
			continue
		}
		lenient := f.Lenient()
		if lenient == nil {
			continue
		}
		more, _ := d.checkBeside([]*luaapi.File{lenient}, map[string]*luaapi.Partial{path: f.Partial}, nil, nil)
		fileErrs[path] = append(why, more...)
	}
	return set
}

// admit is AdmitFile under the bounds of what one person may declare,
// which do not hold a version of a file that was in force when the last
// daemon stopped: a daemon started again with a lower --person-jobs loads
// the files it found in force, as a reload keeps them, and refuses only
// what is new or changed (trial AS: under units, the runs of the jobs of
// a file left out would have been stopped as declared by no file).
func (d *Daemon) admit(admitted map[string]*luaapi.File, path string, f *luaapi.File) []Problem {
	why := AdmitFile(admitted, path, f, d.personJobs())
	if len(why) == 0 || why[0].Code != ProblemTooManyJobs || !d.kept.keeps(path, f.Hash) {
		return why
	}
	if AdmitFile(admitted, path, f, 0) != nil {
		return why
	}
	owner, _ := declaredBy(f)
	// Said as what it is, not in the refusal's words (trial AV: "is
	// loaded", and then "so this file is not loaded").
	d.log.Warn("a person's file in force when the daemon last stopped declares more than one person's files may now (berth daemon --person-jobs): it stays loaded as it was, and a new or changed file of theirs is refused until they declare less",
		"file", path, "owner", owner, "person_jobs", d.personJobs())
	return nil
}

// renamed maps each file of scan new to the daemon to the removed file it
// was renamed from: the same content, under another name (a git mv, a
// renumbering). The caller has not forgotten the removed files yet.
func (d *Daemon) renamed(scan watch.Scan) map[string]string {
	gone := map[string]string{} // by hash
	for _, path := range scan.Removed {
		if f := d.latest[path]; f != nil && f.Hash != "" {
			gone[f.Hash] = path
		}
	}
	if len(gone) == 0 {
		return nil
	}
	out := map[string]string{}
	for path := range scan.Changed {
		if f := d.latest[path]; f != nil {
			if was, ok := gone[f.Hash]; ok {
				out[path] = was
			}
		}
	}
	return out
}

// heldNames says which of paths declared, when it was last in force, a job
// name that its latest version declares: the daemon's own jobs say it,
// and for a name no job has yet (the first reload after a restart) the
// state's record of the job. A file renamed (renamed) holds what the file
// it was held.
func (d *Daemon) heldNames(paths []string, renamed map[string]string) map[string]bool {
	held := map[string]bool{}
	for _, path := range paths {
		was := cmp.Or(renamed[path], path)
		for _, def := range d.latest[path].Jobs {
			if j, ok := d.jobs[def.Name]; ok { // on the loop, which writes jobs
				if j.seenDef.Pos.File == path || j.seenDef.Pos.File == was {
					held[path] = true
					break
				}
				continue
			}
			if rec, ok, err := d.store.Job(def.Name); err == nil && ok && (rec.File == path || rec.File == was) {
				held[path] = true
				break
			}
		}
	}
	return held
}

// DefaultPersonJobs is how many jobs one person's files may declare in
// all, an array's indices counted, unless --person-jobs says otherwise: a
// declared job costs the daemon a few KiB whether it runs or not, and a
// person's one-line array of 100 000 indices took it to 900 MiB.
const DefaultPersonJobs = 10000

func (d *Daemon) personJobs() int { return cmp.Or(d.cfg.PersonJobs, DefaultPersonJobs) }

// personDefinitionBytes bounds what one person's jobs' definitions cost
// the daemon in all (Job.HeldBytes; luaapi bounds one job's at 1 MiB):
// the daemon keeps each definition, twice over, and a person's files of
// a few large commands, or of many short arguments, took it to gigabytes.
// Ten thousand jobs whose cmd is a line of 200 bytes (run as /bin/sh -c
// LINE) come to 3.4 MiB.
var personDefinitionBytes = 16 << 20

// personDependencies bounds the names in one person's jobs' after and
// after_any, an array's counted once for each index: each waiting job
// keeps what it knows of each parent, and looks at them all whenever one
// changes. 100 jobs each after 3 000 took a daemon to 700 MB and every
// berth status to 7 s.
var personDependencies = 50000

// declared is what one file, or one person's files, declare: jobs, an
// array's indices counted; what their definitions come to (an array's
// once: its indices share it); and the names in their after and
// after_any, once for each index of an array.
type declared struct{ jobs, bytes, deps int }

func (a declared) plus(b declared) declared {
	return declared{a.jobs + b.jobs, a.bytes + b.bytes, a.deps + b.deps}
}

// declaredBy is whose jobs f declares ("" for an administrator's file, or
// one that declares none), and what.
func declaredBy(f *luaapi.File) (owner string, d declared) {
	for i := range f.Jobs {
		j := &f.Jobs[i]
		owner = j.Owner
		n := 1
		if j.Array != nil {
			n = j.Array.Size()
		}
		d.jobs += n
		d.bytes += j.HeldBytes()
		d.deps += n * (len(j.After) + len(j.AfterAny))
	}
	return owner, d
}

// past says whether d is past what one person may declare, bound jobs.
func (d declared) past(bound int) bool {
	return d.jobs > bound || d.bytes > personDefinitionBytes || d.deps > personDependencies
}

// OverPersonJobs says whether any person's files among files declare
// more than bound jobs, or more than personDefinitionBytes of them, or
// personDependencies (berth check asks it too).
func OverPersonJobs(files []*luaapi.File, bound int) bool {
	count := map[string]declared{}
	for _, f := range files {
		if owner, d := declaredBy(f); owner != "" {
			c := count[owner].plus(d)
			if count[owner] = c; c.past(bound) {
				return true
			}
		}
	}
	return false
}

// AdmitFile adds f to the admitted files unless the cross-file rules refuse
// it, or it would make its owner's files declare more than personJobs jobs
// in all (0: no bound); it returns why they do, as sentences about f:
// Combine blames the file that sorts later, which may be the one already
// in force. It is the rule of a reload (the file that changed is the one
// refused, never the one in force), and so of berth check beside a daemon.
func AdmitFile(admitted map[string]*luaapi.File, path string, f *luaapi.File, personJobs int) []Problem {
	if owner, mine := declaredBy(f); owner != "" && personJobs > 0 {
		var others declared
		for p, g := range admitted {
			if o, d := declaredBy(g); o == owner && p != path {
				others = others.plus(d)
			}
		}
		var why string
		switch all := mine.plus(others); {
		case all.jobs > personJobs:
			why = msgTooManyJobs(path, owner, mine.jobs, others.jobs, personJobs)
		case all.bytes > personDefinitionBytes:
			why = msgTooManyBytes(path, owner, mine.bytes, others.bytes)
		case all.deps > personDependencies:
			why = msgTooManyDeps(path, owner, mine.deps, others.deps)
		}
		if why != "" {
			delete(admitted, path)
			return []Problem{{Code: ProblemTooManyJobs, File: path, Kind: "file", Text: why}}
		}
	}
	admitted[path] = f
	set := luaapi.Combine(slices.Collect(maps.Values(admitted)))
	var why []Problem
	for _, rf := range set.Files {
		for _, e := range rf.Errors {
			if rf.Path == path {
				why = append(why, ProblemOf(e))
				continue
			}
			// The other file is blamed for a name f declares too.
			at := declaredAt(f, e)
			why = append(why, Problem{Code: ProblemNameTaken, File: at.File, Line: at.Line, Kind: e.Kind, Job: e.Name,
				Text: msgNameTaken(at, kindOf(e), e.Name, e.Pos)})
		}
	}
	if why != nil {
		delete(admitted, path)
	}
	return why
}

// declaredAt is where f declares the name an error is about.
func declaredAt(f *luaapi.File, e *luaapi.Error) luaapi.Pos {
	for _, j := range f.Jobs {
		if j.Name == e.Name {
			return j.Pos
		}
	}
	for _, fl := range f.Flavors {
		if fl.Name == e.Name {
			return fl.Pos
		}
	}
	return luaapi.Pos{File: f.Path}
}

func kindOf(e *luaapi.Error) string {
	if e.Kind == "" {
		return "name"
	}
	return e.Kind
}

// rejectsFiles reports whether Combine refused any file whole.
func rejectsFiles(set *luaapi.Set) bool {
	for _, f := range set.Files {
		if len(f.Errors) > 0 {
			return true
		}
	}
	return false
}

// ProblemOf is a job file's mistake as facts.
func ProblemOf(e *luaapi.Error) Problem {
	name := e.Name
	if e.Owner != "" && e.Kind == "job" && !strings.Contains(name, "/") {
		name = e.Owner + "/" + name // as the job is named everywhere else
	}
	return Problem{Code: strings.ReplaceAll(e.Problem.String(), " ", "_"), File: e.Pos.File, Line: e.Pos.Line,
		Kind: e.Kind, Job: name, Field: e.Field, Text: e.Error()}
}

func problemsOf(errs []*luaapi.Error) []Problem {
	out := make([]Problem, len(errs))
	for i, e := range errs {
		out[i] = ProblemOf(e)
	}
	return out
}

func refusedFile(path, why string) Problem {
	return Problem{Code: ProblemFileRefused, File: path, Text: why}
}

// apply makes the jobs match a newly combined set: new jobs start, changed
// ones are told what changed, removed ones stop. Unchanged jobs are not
// touched.
func (d *Daemon) apply(set *luaapi.Set, first bool) ReloadResult {
	res := ReloadResult{Added: []string{}, Changed: []string{}, Removed: []string{}, Errors: []string{}}
	problems := map[string]string{}
	for _, p := range set.Problems {
		if p.Problem == luaapi.UnknownJob && !waitsForItself(set, p.Name) {
			// A parent that is not declared (its file removed, refused,
			// or not written yet) holds the job at the gate, as a parent
			// that has not run does: a run keeps running, a done job
			// stays done. The problem is still the files' to show.
			continue
		}
		problems[p.Name] = p.Error()
	}
	var unaccounted int64
	// seen are the jobs of the set, an array's indices included, and
	// arrays the arrays: a name that turns from a job into an array (or
	// back) is the old one's removal.
	seen, arrays := map[string]bool{}, map[string]bool{}
	// born are the jobs new in this set; their goroutines start once the
	// graph of the set is in force, so that their first wait looks at
	// their parents in it.
	var born []*job
	diffs := map[*luaapi.Job]defDiff{}

	d.mu.Lock()
	defer d.mu.Unlock()
	if changed := d.applyQuotas(set); !first {
		res.Quotas = changed
	}
	for i := range set.Jobs {
		def := &set.Jobs[i]
		invalid := problems[def.Name]
		// A disabled job is not to run: what would keep it from running
		// is said once it is enabled.
		if invalid == "" && def.Enabled && (def.User != "" || def.Group != "") {
			if _, _, err := jobCredentials(def.User, def.Group); err != nil {
				invalid = MsgCredentials(def.Pos, def.Name, err)
				res.unfit = append(res.unfit, CredentialsProblem(def, err))
			}
		}
		if invalid == "" && def.Enabled {
			// It waits, saying so, for a larger machine or quota; the
			// reload says it at once, as berth check does.
			if p, unfit := UnfitProblem(d.placer, def, set); unfit {
				res.unfit = append(res.unfit, p)
			}
		}
		// The fair share divides the cores among the unaccounted jobs
		// that can run: an invalid one (a flavor that does not exist
		// leaves its resources zero) never shares them.
		if invalid == "" && def.Resources.Unaccounted() {
			unaccounted++
			if def.Array != nil {
				// Each index that may run at once is one.
				unaccounted += int64(min(def.Array.Size(), cmp.Or(def.MaxParallel, def.Array.Size()))) - 1
			}
		}
		if def.Array != nil {
			arrays[def.Name] = true
			d.declareArray(def, invalid, first, set, &res, seen, &born)
			continue
		}
		seen[def.Name] = true
		d.declare(def.Name, def, invalid, first, set, &res, &born, diffs, nil, 0)
	}
	for name, j := range d.draining {
		if jobEnded(j.done) {
			delete(d.draining, name)
			if _, again := d.jobs[name]; !again {
				d.headers.forget(name) // what a removed job leaves: a name's worth
			}
		}
	}
	for name, j := range d.jobs {
		if !seen[name] {
			var why string
			if j.arr != nil && arrays[j.arr.name] {
				why = "its array's range no longer includes it"
			} else {
				why = d.ownerNotRead(j.view().Def.Owner)
			}
			j.in.post(jobMessage{remove: true, removedWhy: why})
			delete(d.jobs, name)
			d.draining[name] = j
			if j.arr != nil {
				j.arr.forget(j.index)
			}
			if j.arr == nil {
				// An array's indices are one job to the reader: its
				// removal is the array's, below; a shrink, a change.
				res.Removed = append(res.Removed, name)
			}
		}
	}
	for name := range d.arrays {
		if !arrays[name] {
			delete(d.arrays, name)
			res.Removed = append(res.Removed, name)
		}
	}
	d.unaccounted.Store(unaccounted)
	d.set = set
	if g := d.buildDeps(set); g != nil || d.deps.Load() != nil {
		d.deps.Store(g)
		if g == nil {
			g = &depGraph{jobs: d.jobs, arrays: d.arrays}
		}
		// The graph may have changed under every job that has
		// dependencies: each looks at its parents again.
		for i := range set.Jobs {
			if set.Jobs[i].HasDeps() {
				g.post(set.Jobs[i].Name, jobMessage{deps: true})
			}
		}
	}
	if g := d.deps.Load(); g != nil {
		for _, j := range born {
			name := j.name
			if j.arr != nil {
				name = j.arr.name
			}
			if named := len(g.dependants[name]) > 0; j.life.state == store.StateFailed && (named || j.def.HasDeps()) {
				j.readLastRun(named)
			}
		}
	}
	// Each job's place among all born here, in the order they are
	// declared, those born later after: the placer's tie-break for jobs
	// that began to wait at one instant (those one parent lets run: the
	// review found one added by a later edit placed first, as 0).
	inOrder := slices.Clone(born)
	slices.SortStableFunc(inOrder, func(a, b *job) int {
		return cmp.Or(strings.Compare(a.def.Pos.File, b.def.Pos.File), cmp.Compare(a.def.Order, b.def.Order), cmp.Compare(a.index, b.index))
	})
	for i, j := range inOrder {
		j.order = d.bornCount + i
	}
	d.bornCount += len(inOrder)
	if len(born) > 1 {
		// Born together (the daemon's start, a new file of several jobs),
		// they queue together: none is placed until each has had its
		// first look at what it should do, so that the placer's order
		// (priority, then how long each has waited, in the last daemon
		// too) decides, not the order their goroutines ran in. Bounded,
		// should one be slow to look (it waits for a job of its name
		// still stopping).
		//
		// Those new to the line arrive at one instant, in the order they
		// are declared: a file's jobs of one priority start in the
		// order the file gives them.
		now := d.now()
		for _, j := range inOrder {
			if j.life.state == 0 && j.waitedBefore.IsZero() && j.waitedFor == 0 {
				// (A wait an edit broke off in the last daemon goes on
				// instead, once it can run: waitedFor.)
				j.waitedBefore = now
			}
		}
		release := d.placer.Hold()
		bound := time.AfterFunc(cmp.Or(d.cfg.bornHold, bornHoldBound), release)
		var left atomic.Int64
		left.Store(int64(len(born)))
		for _, j := range born {
			j.looked = func() {
				if left.Add(-1) == 0 {
					bound.Stop()
					release()
				}
			}
			// One that was told nothing (at rest, done) looks too.
			j.in.post(jobMessage{})
		}
	}
	for _, j := range born {
		if st := j.life.state; st == store.StateFailed || st == store.StateStopped || st == store.StateBackoff {
			j.restoreWhy()
		}
		j.start(d.jobsCtx)
	}
	slices.Sort(res.Added)
	slices.Sort(res.Changed)
	slices.Sort(res.Removed)
	return res
}

// jobEnded reports whether done, a job's, is closed: its goroutine has
// ended.
func jobEnded(done <-chan struct{}) bool {
	select {
	case <-done:
		return true
	default:
		return false
	}
}

// bornHoldBound bounds how long jobs born together hold the placer.
const bornHoldBound = time.Second

// declare brings job name of definition def into the set in force: a job
// new to the daemon is made (taking back a run the previous daemon left,
// and waiting for a job of that name still stopping); a known one is told
// what changed. arr, for index i of an array, is the array. diffs keeps
// the comparisons of definitions made in this reload, which the indices of
// an array share. The caller holds d.mu.
func (d *Daemon) declare(name string, def *luaapi.Job, invalid string, first bool, set *luaapi.Set, res *ReloadResult, born *[]*job,
	diffs map[*luaapi.Job]defDiff, arr *array, i int) *job {
	j, ok := d.jobs[name]
	if !ok {
		m := d.remembered(name, def, set)
		initial := m.initial
		if invalid != "" && initial.state == 0 && !m.invalidSince.IsZero() {
			// Invalid still: since it first was, not since this daemon
			// (trial AI).
			initial = life{state: store.StateInvalid, since: m.invalidSince, restarts: initial.restarts}
		}
		j = d.newJob(name, def, invalid, initial, m.doneFP)
		if m.settled && initial.state != store.StateInvalid {
			j.persistSettled()
		}
		j.waitedBefore = m.waited
		j.waitedFor = m.waitedFor
		j.stoppedAll = m.stoppedAll
		if m.ran {
			// Its place in line is kept, but the wait the metrics and the
			// log measure begins now: it ran meanwhile.
			j.waitMeasured = d.now()
		}
		if arr != nil {
			// Before it takes a run back: the run holds one of the
			// array's places.
			arr.join(i, j)
		}
		if old, ok := d.draining[name]; ok && !jobEnded(old.done) {
			// Declared again while the job of that name removed a
			// moment ago still stops its run: this one starts once
			// that one has ended, so that a job never has two runs.
			// (One that has ended, not yet let go of, holds nothing:
			// a job resting stopped rests so since its stop, not since
			// now, trial AO.)
			j.after = old.done
			j.life.since = d.now()
			j.publish() // shown waiting for it, since now
		}
		processChanged := false
		if a, ok := d.adopted[name]; ok {
			delete(d.adopted, name)
			j.takeAdopted(a)
			began := a.rec.StopBegan
			if began.IsZero() {
				// Recorded before a stop's start was kept: its SIGKILL
				// comes a stop_timeout from now, and an end by SIGKILL
				// is not taken for the deadline's (reaped).
				began = d.now()
			}
			switch {
			case a.rec.Stopping == store.ReasonTimedOut:
				// The run's timeout was being seen to: its stop is seen
				// through, and the run recorded timed out, whoever asked
				// for more meanwhile (step); what a person asked stands.
				d.jobLog(name).Info("stopping a run taken back that outlived its timeout", "run", a.rec.ID)
				processChanged = a.rec.Fingerprint != def.ProcessFingerprint()
				j.resumeTimeout(a.rec, began, m.counted)
				switch m.recorded {
				case store.StateStopped: // berth stop meanwhile
					j.apply(event{kind: evStop})
				case store.StateStopping: // berth start or restart meanwhile
					j.apply(event{kind: evRestart})
				}
			case initial.state == store.StateStopped:
				// A person's stop was under way when the last daemon
				// went: it is seen through, and the job rests stopped.
				d.jobLog(name).Info("stopping a run taken back whose job was being stopped", "run", a.rec.ID)
				j.resumeStop(a.rec, initial.since, evStop)
			case a.rec.Stopping == store.ReasonStopped:
				// Another stop was under way (a restart, an edit, a
				// disable): seen through as begun, the job to run again
				// once it ends, unless the definition read now says
				// otherwise (edited or disabled meanwhile).
				d.jobLog(name).Info("stopping a run taken back that was being stopped", "run", a.rec.ID, "why", a.rec.Cause)
				processChanged = a.rec.Fingerprint != def.ProcessFingerprint()
				j.resumeStop(a.rec, began, evRestart)
			default:
				// Edited while the daemon was away: a new definition
				// restarts the run, as an edit would have.
				processChanged = a.rec.Fingerprint != def.ProcessFingerprint()
			}
		} else if !m.retryAt.IsZero() {
			j.resumeBackoff(m.retryAt)
		}
		d.jobs[name] = j
		*born = append(*born, j)
		j.in.post(jobMessage{def: def, invalid: invalid, processChanged: processChanged})
		if !first && arr == nil {
			res.Added = append(res.Added, name)
		}
		return j
	}
	old := j.seenDef
	if old == def && invalid == j.seenInvalid {
		return j
	}
	diff, ok := diffs[old]
	if !ok {
		diff = defDiff{process: old.ProcessFingerprint() != def.ProcessFingerprint(), policy: old.PolicyFingerprint() != def.PolicyFingerprint()}
		diffs[old] = diff
	}
	processChanged, policyChanged := diff.process, diff.policy
	if processChanged || policyChanged || old.Resources != def.Resources || old.Pos != def.Pos || invalid != j.seenInvalid {
		// Whether it can run changed too (trial AX: an account made since
		// let an invalid job run, and the reload said nothing changed).
		validity := invalid != j.seenInvalid
		j.seenDef, j.seenInvalid = def, invalid
		requeue := old.Resources != def.Resources || old.Priority != def.Priority ||
			old.Timeout != def.Timeout || old.StopTimeout != def.StopTimeout
		if arr != nil && processChanged && invalid == "" && def.Enabled {
			if st := j.view().State; st == store.StateDone || st == store.StateFailed {
				// It runs the new definition: in line now, lowest index
				// first, as their goroutines read it in any order.
				arr.expect(i)
			}
		}
		if processChanged {
			j.redefining()
		}
		j.in.post(jobMessage{def: def, invalid: invalid, processChanged: processChanged, requeue: requeue, redefined: processChanged})
		if arr == nil && (processChanged || policyChanged || old.Resources != def.Resources || validity) {
			res.Changed = append(res.Changed, name)
		}
	} else {
		// The same definition anew (another file's reload): kept, so that
		// the next reload compares pointers first.
		j.seenDef = def
	}
	return j
}

// defDiff is how a definition differs from the one before it.
type defDiff struct{ process, policy bool }

// declareArray brings an array into the set in force: an index job for
// each index of its range, named NAME[INDEX], and the array's gate. The
// caller holds d.mu.
func (d *Daemon) declareArray(def *luaapi.Job, invalid string, first bool, set *luaapi.Set, res *ReloadResult, seen map[string]bool, born *[]*job) {
	a, ok := d.arrays[def.Name]
	if !ok {
		a = newArray(def)
		d.arrays[def.Name] = a
		if !first {
			res.Added = append(res.Added, def.Name)
		}
	} else if old := a.def; old != def {
		a.redefine(def)
		if old.ProcessFingerprint() != def.ProcessFingerprint() || old.PolicyFingerprint() != def.PolicyFingerprint() ||
			old.Resources != def.Resources {
			res.Changed = append(res.Changed, def.Name)
		}
	}
	diffs := map[*luaapi.Job]defDiff{}
	var fresh []int
	for i := def.Array.From; i <= def.Array.To; i++ {
		name := memberName(def.Name, i)
		seen[name] = true
		j := d.declare(name, def, invalid, first, set, res, born, diffs, a, i)
		if n := len(*born); n > 0 && (*born)[n-1] == j && j.life.state == 0 {
			fresh = append(fresh, i)
		}
	}
	// In line only once every index has joined: the runs taken back
	// after a restart hold their places before a new index is let in.
	for _, i := range fresh {
		a.expect(i)
	}
	a.mu.Lock()
	a.admitNext()
	a.mu.Unlock()
}

// applyQuotas hands the quotas in force to the placer, and says which it
// declared, changed or took away, by name. Of a person whose
// quota changed, an unplaceable job that fits the quota now waits again,
// a waiting one now larger than it is unplaceable, saying so, and a
// running one says whether it will run again. The caller holds d.mu.
func (d *Daemon) applyQuotas(set *luaapi.Set) (changed []string) {
	byOwner, fallback := set.QuotaLimits()
	declared := maps.Clone(byOwner)
	if fallback != accounting.NoQuota {
		declared["*"] = fallback
	}
	for name, q := range declared {
		if was, ok := d.quotas[name]; !ok || was != q {
			changed = append(changed, name)
		}
	}
	for name := range d.quotas {
		if _, ok := declared[name]; !ok {
			changed = append(changed, name)
		}
	}
	slices.Sort(changed)
	d.quotas = declared
	old := d.placer.QuotaOf
	was := map[string]accounting.Quota{}
	for _, j := range d.jobs {
		if owner := j.seenDef.Owner; owner != "" {
			if _, ok := was[owner]; !ok {
				was[owner] = old(owner)
			}
		}
	}
	d.placer.SetQuotas(byOwner, fallback)
	for _, j := range d.jobs {
		owner := j.seenDef.Owner
		if owner == "" || d.placer.QuotaOf(owner) == was[owner] {
			continue
		}
		// Only where the answer changed: a waiting job asked again would
		// go to the back of the queue (the placer re-examines those that
		// may wait on, itself).
		fits := d.placer.Placeable(requestOf(j.name, j.seenDef)) == nil
		switch st := j.view().State; {
		case st == store.StateWaiting && !fits || st == store.StateUnplaceable && fits:
			j.in.post(jobMessage{def: j.seenDef, invalid: j.seenInvalid, requeue: true})
		case st == store.StateRunning || st == store.StateStarting:
			// Its run goes on either way; whether it runs again is said
			// (trial AR: a quota lowered under it said nothing; the
			// review: nor under one starting).
			j.in.post(jobMessage{refit: true})
		}
	}
	return changed
}

// memory is what a job new to this daemon takes from the last one's record.
type memory struct {
	initial life
	doneFP  string // the definition whose last run ended done
	// waited is when the wait began that the job was in when the last
	// daemon stopped: it waits on from then, keeping its place in line.
	// ran: a run of it began since (its record is not written again as
	// a run starts), so that the wait it waits now began only here.
	waited time.Time
	ran    bool
	// retryAt is when the restart delay that the job was waiting out ends
	// (initial is then in backoff): the delay goes on, so that a crash
	// loop is not sped up by a daemon that restarts.
	retryAt time.Time
	// stoppedAll: it rests stopped by a stop of every job (job.stoppedAll).
	stoppedAll bool
	// waitedFor is how long it had waited when an edit left it unable to
	// run (job.waitedFor): a wait that goes on once it can.
	waitedFor time.Duration
	// invalidSince is when it became invalid, where it was when the last
	// daemon stopped: one invalid still has been so since then.
	invalidSince time.Time
	// counted: initial's restarts, going on, count the restart that the
	// record says the job is on its way to (backoff), which the timeout
	// of a run being stopped leads to (resumeTimeout).
	counted bool
	// recorded is the state its record says, 0 for none: where a stop
	// under way was to leave it (life.recorded).
	recorded store.State
	// settled: initial is a rest its record does not say yet
	// (endedUnrested), which the job records as it is made.
	settled bool
}

// remembered is where a job starts its life in this daemon: a batch job
// whose last run of this very definition ended done stays done (a job runs
// to completion once per definition), and so does one that failed for
// good; one a person stopped stays stopped, whatever its definition now;
// anything else runs, after what is left of its restart delay, and a wait
// goes on.
func (d *Daemon) remembered(name string, def *luaapi.Job, set *luaapi.Set) memory {
	rec, ok, err := d.store.Job(name)
	if err != nil || !ok {
		return memory{}
	}
	m := memory{doneFP: rec.DoneFingerprint, recorded: rec.State}
	if rec.State == store.StateInvalid || rec.State == store.StateUnplaceable {
		m.waitedFor = rec.WaitedFor
	}
	if rec.State == store.StateInvalid {
		m.invalidSince = rec.Changed
	}
	if rec.State == store.StateWaiting || rec.State == store.StateStarting || rec.State == store.StateRunning {
		// Waiting, or on its way from a wait (job.record).
		m.waited = rec.Changed
		if runs, err := d.store.Runs(name, 1); err == nil && len(runs) == 1 && !runs[0].Start.Before(rec.Changed) {
			m.ran = true
		}
	}
	fp := def.ProcessFingerprint()
	stillDone := func() bool {
		done, _ := stillDone(rec.DoneFingerprint, fp, d.storedParents(def, set))
		return done
	}
	now := d.now()
	if ended, ok := d.endedUnrested(name, rec, def, set, fp); ok {
		ended.recorded = rec.State
		return ended
	}
	switch {
	case rec.State == store.StateDone && stillDone():
		// Its restarts are shown as they were ("done, 2 restarts"), as
		// a failed job's are.
		return memory{initial: life{state: store.StateDone, since: rec.Changed, restarts: rec.Restarts}, doneFP: rec.DoneFingerprint, recorded: rec.State}
	case rec.State == store.StateStopped:
		// A person's stop holds whatever the definition is now, as it
		// does in the daemon that took it: an edit, made then or while
		// no daemon ran, does not start the job (trial AE: it ran again
		// after systemctl restart berth, and after every upgrade).
		return memory{initial: life{state: rec.State, since: rec.Changed, restarts: rec.Restarts}, doneFP: rec.DoneFingerprint, stoppedAll: rec.StoppedAll, recorded: rec.State}
	case rec.Fingerprint == fp && rec.State == store.StateFailed:
		return memory{initial: life{state: rec.State, since: rec.Changed, restarts: rec.Restarts, failed: true}, doneFP: rec.DoneFingerprint, recorded: rec.State}
	case rec.Fingerprint == fp && rec.Restarts > 0 && !resting(rec.State) && now.Sub(rec.Changed) < healthyRun:
		// In a crash loop (its record, written at each restart, younger
		// than a healthy run): the count goes on where it was, or a job
		// that fails at once would run for ever, max_restarts afresh at
		// every start of the daemon. A run that had lasted resets it, as
		// its end would have.
		m.initial = life{restarts: rec.Restarts, delay: delayAfter(rec.Restarts)}
		m.counted = rec.State == store.StateBackoff
		if rec.State == store.StateBackoff {
			// The delay armed when it entered backoff is the one before
			// the restart it counted (decideRestart).
			if at := rec.Changed.Add(delayAfter(rec.Restarts - 1)); at.After(now) {
				m.initial.state, m.initial.since = store.StateBackoff, rec.Changed
				m.initial.failed = true // as far as anyone can tell now
				m.retryAt = at
			}
		}
	}
	return m
}

// endedUnrested is where a job whose record says it was on its way (a
// passing state) comes to rest, when the run of this definition it was on
// its way to ended before the last daemon went away, yet the job's resting
// state was not recorded: a batch job whose run exited 0 is done, one
// with restart "no" whose run failed is failed, as they would have been.
// (The run's end may come from the intents, the file the last daemon
// appended it to as it queued it: store.Intend.) Otherwise false: the job
// runs again.
func (d *Daemon) endedUnrested(name string, rec store.JobRecord, def *luaapi.Job, set *luaapi.Set, fp string) (memory, bool) {
	if resting(rec.State) || rec.Fingerprint != fp || def.Restart == luaapi.RestartAlways {
		return memory{}, false
	}
	runs, err := d.store.Runs(name, 1)
	if err != nil || len(runs) == 0 {
		return memory{}, false
	}
	run := runs[0]
	// The run the job was on its way to began after the record's passing
	// state did; one before it ended before the job was asked to run again.
	if run.End.IsZero() || run.Fingerprint != fp || run.Start.Before(rec.Changed) {
		return memory{}, false
	}
	life := life{since: run.End, restarts: rec.Restarts}
	switch {
	case run.Reason == store.ReasonExited:
		// Done, unless a batch parent ran a new definition since.
		doneFP := cmp.Or(run.Mark, run.Fingerprint)
		if done, _ := stillDone(doneFP, fp, d.storedParents(def, set)); !done {
			return memory{}, false
		}
		life.state = store.StateDone
		return memory{initial: life, doneFP: doneFP, settled: true}, true
	case def.Restart == luaapi.RestartNo && (run.Reason == store.ReasonFailed || run.Reason == store.ReasonTimedOut || run.Reason == store.ReasonOOM):
		life.state = store.StateFailed
		return memory{initial: life, doneFP: rec.DoneFingerprint, settled: true}, true
	}
	return memory{}, false
}

// storedParents are the done records, as stored, of the batch parents in
// def's after: a dependant stays done across a restart only if none of
// them ran a new definition since its run. A parent with no record has
// none ("").
func (d *Daemon) storedParents(def *luaapi.Job, set *luaapi.Set) map[string]string {
	parents, _ := parentRecords(def, func(n string) (string, bool, bool) {
		i, found := slices.BinarySearchFunc(set.Jobs, n, func(j luaapi.Job, n string) int { return strings.Compare(j.Name, n) })
		if found && set.Jobs[i].Restart == luaapi.RestartAlways {
			return "", true, true
		}
		if !found {
			// No file declares it: not known, as the daemon's graph has
			// it (parentRecords), whatever its old record says (the
			// review: a job done came back waiting at a restart).
			return "", false, false
		}
		def := &set.Jobs[i]
		if def.Array != nil {
			return spanned(d.storedArrayRecord(def, set), *def.Array), false, true
		}
		return d.storedDone(n, def, set), false, true
	})
	return parents
}

// storedDone is the done record of job name (of definition def) as
// stored: its record's, or, where the record is on
// its way and the run it was on its way to ended done (endedUnrested),
// that run's, which this daemon records as it makes the job.
func (d *Daemon) storedDone(name string, def *luaapi.Job, set *luaapi.Set) string {
	rec, ok, err := d.store.Job(name)
	if err != nil || !ok {
		return ""
	}
	if !resting(rec.State) {
		if m, ended := d.endedUnrested(name, rec, def, set, def.ProcessFingerprint()); ended && m.initial.state == store.StateDone {
			return m.doneFP
		}
	}
	return rec.DoneFingerprint
}

// storedArrayRecord is the done record, as stored, of the array def
// declares (array.doneRecord): "" unless every index of its range has one.
func (d *Daemon) storedArrayRecord(def *luaapi.Job, set *luaapi.Set) string {
	records := make([]string, 0, def.Array.Size())
	fp, parents := def.ProcessFingerprint(), d.storedParents(def, set)
	for i := def.Array.From; i <= def.Array.To; i++ {
		done := d.storedDone(memberName(def.Name, i), def, set)
		if done == "" || recordFP(done) != fp || parentsMoved(done, parents) {
			return "" // as job.arrayRecord: not all run to done as declared, after their parents as they are
		}
		records = append(records, done)
	}
	return arrayRecord(records)
}

// jobProblems are the job-level mistakes of set that leave their files in
// force, in file and line order.
func jobProblems(set *luaapi.Set) []Problem {
	var out []Problem
	for _, p := range set.Problems {
		out = append(out, ProblemOf(p))
	}
	SortProblems(out)
	return out
}

// someNames is names for a log line: the first ten, and how many more.
func someNames(names []string) string {
	const shown = 10
	if len(names) <= shown {
		return strings.Join(names, " ")
	}
	return strings.Join(names[:shown], " ") + " and " + strconv.Itoa(len(names)-shown) + " more"
}

// UnfitProblem is the problem of def, if it fits no machine or its
// owner's quota in placer: a reload, the daemon's check of submitted files
// and berth check say it at once. An unaccounted job of the
// administrators' holds nothing and fits anywhere; a person's may escape
// their quota.
//
// set, where given, is the set def is of: its flavor's declaration is
// named.
func UnfitProblem(placer *accounting.Placer, def *luaapi.Job, set *luaapi.Set) (Problem, bool) {
	if def.Resources.Unaccounted() && def.Owner == "" {
		return Problem{}, false
	}
	var ue *accounting.UnplaceableError
	if !errors.As(placer.Placeable(requestOf(def.Name, def)), &ue) {
		return Problem{}, false
	}
	field := "flavor" // a flavor's size is said on the job's flavor
	if def.Flavor == "" {
		field = unfitField(ue)
	}
	at := def.Pos
	at.Line = def.FieldLine(field)
	return Problem{Code: ProblemUnplaceable, File: at.File, Line: at.Line, Kind: "job", Job: def.Name,
		Text: msgUnplaceableAt(at, def.Name, def.Flavor, flavorAt(set, def.Flavor), ue)}, true
}

// flavorAt is where the flavor name is declared in set; zero where set is
// nil or does not declare it.
func flavorAt(set *luaapi.Set, name string) luaapi.Pos {
	if set == nil || name == "" {
		return luaapi.Pos{}
	}
	for _, f := range set.Flavors {
		if f.Name == name {
			return f.Pos
		}
	}
	return luaapi.Pos{}
}

// CredentialsProblem is the problem of def, whose user or group cannot
// be had (err), naming the field it is in.
func CredentialsProblem(def *luaapi.Job, err error) Problem {
	field := "group"
	var unknown *UnknownUserError
	switch {
	case errors.As(err, &unknown):
		field = unknown.Kind
	case def.User != "":
		field = "user"
	}
	at := def.Pos
	at.Line = def.FieldLine(field)
	return Problem{Code: ProblemCredentials, File: at.File, Line: at.Line, Kind: "job", Job: def.Name, Field: field,
		Text: MsgCredentials(at, def.Name, err)}
}

// unfitField is the field of a job's request that ue finds past what
// any machine has, or its owner's quota allows: the first of them; ""
// where none alone is.
func unfitField(ue *accounting.UnplaceableError) string {
	a := ue.Asked
	if q := ue.Quota; q != nil {
		switch {
		case q.CPUs >= 0 && (a.Unaccounted() || a.CPUs > q.CPUs):
			return "cpus"
		case q.RAMBytes >= 0 && (a.RAMBytes == 0 || a.RAMBytes > q.RAMBytes):
			return "ram"
		case q.GPUs >= 0 && a.GPUs > q.GPUs:
			return "gpus"
		case a.GPUMemBytes > 0:
			return "gpu_mem"
		}
		return ""
	}
	switch {
	case a.CPUs > ue.Largest.CPUs():
		return "cpus"
	case a.GPUs > ue.Largest.GPUs:
		return "gpus"
	case ue.Largest.RAMKnown && a.RAMBytes > ue.Largest.RAMBytes:
		return "ram"
	case a.Shares():
		return "gpu_mem"
	}
	return ""
}

// QuotaProblems are the problems of the quotas of set that name no
// account: the person an administrator meant would be left unbounded, and
// nothing else would say so. people are the names to suggest.
func QuotaProblems(set *luaapi.Set, people []string) []Problem {
	var out []Problem
	for _, q := range set.Quotas {
		if q.Name == "*" {
			continue
		}
		if _, err := user.Lookup(q.Name); err == nil {
			continue
		}
		out = append(out, Problem{Code: ProblemCredentials, File: q.Pos.File, Line: q.Pos.Line, Kind: "quota", Job: q.Name,
			Text: MsgQuotaNoAccount(q.Pos, q.Name, luaapi.Suggest(q.Name, people))})
	}
	return out
}

// waitsForItself reports whether job name of set names itself in after or
// after_any: a mistake no other file can mend, so the job cannot run.
func waitsForItself(set *luaapi.Set, name string) bool {
	i, found := slices.BinarySearchFunc(set.Jobs, name, func(j luaapi.Job, n string) int { return strings.Compare(j.Name, n) })
	if !found {
		return false
	}
	def := &set.Jobs[i]
	return slices.Contains(def.After, name) || slices.Contains(def.AfterAny, name)
}

// reloadingMessage carries MONOTONIC_USEC in the same message as
// RELOADING=1: without it, systemctl reload can hang on newer systemd.
func reloadingMessage() string {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return "RELOADING=1\nMONOTONIC_USEC=" + strconv.FormatInt(ts.Nano()/1000, 10)
}

func luaMachine(cfg Config) luaapi.Machine {
	return luaapi.Machine{CPUs: cfg.Machine.CPUs, GPUs: len(cfg.Machine.GPUs), RAMBytes: cfg.Machine.RAM.Bytes,
		RAMKnown: cfg.Machine.RAM.Known, Hostname: cfg.Machine.Hostname}
}
