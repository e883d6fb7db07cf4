package watch

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/fsnotify/fsnotify"
)

// DefaultQuiet is the trailing debounce when WatchOptions.Quiet is 0.
//
// Measured on a 2-CPU VM (BenchmarkQuiet, TestSaveLatency): the scripted
// saves (truncate+write, vim's rename dance, write-then-rename, a ConfigMap
// swap) never showed a scan in the middle of a save even at 1 ms, loaded or
// not. Real vim, which truncates and then writes in place, did under four
// CPU-bound processes per CPU: without the longer wait while a file is
// empty or gone, 1 scan in 400 saw the empty file at 5 ms and at 10 ms;
// with it, none in 400 at 2, 5 or 10 ms, and 2 in 400 at 1 ms. A save is
// seen 0.2–0.6 ms after the quiet period (p90 +2–4 ms under that load), so
// 10 ms gives several times the margin that was needed and leaves most of
// berth's 50 ms from save to running for evaluating and starting.
const DefaultQuiet = 10 * time.Millisecond

// RemovalGrace is the least wait after the last event while a job file or
// the directory is gone, or a job file is empty (debouncer): a removal is
// seen this late, and a file emptied and written again within it never
// stops its jobs.
const RemovalGrace = time.Second

// DefaultRescan is the period of the safety-net signal that the daemon
// should pass as WatchOptions.Rescan. inotify can lose events (queue
// overflow is reported, but a change to a symlink's target outside the
// watched directories is not seen at all), so the daemon looks again now
// and then regardless.
const DefaultRescan = 30 * time.Second

// WatchOptions configure a Watcher.
type WatchOptions struct {
	// Quiet is the trailing debounce: Changes receives a value this long
	// after the last event of a burst. 0 means DefaultQuiet. While a job
	// file or the directory is gone, or a job file is empty, the wait is
	// 5×Quiet or RemovalGrace, the longer (a save passes through those
	// states for microseconds, a slow writer for longer; a removal can
	// wait). No burst delays a signal by more than 10×Quiet, or that
	// wait, after its first event, so a steady stream of events still
	// yields signals.
	Quiet time.Duration
	// Rescan is the period of a signal sent whatever happened (use
	// DefaultRescan); 0 disables it.
	Rescan time.Duration
	// Logf, if set, is told what a person may want to know, with a constant
	// message and key/value pairs: hclog's Info or Warn fit.
	Logf func(msg string, kv ...any)
	// Poll is the period of the scans that stand in for inotify while it
	// cannot watch the directory (out of instances or watches); 0 means
	// DefaultPoll.
	Poll time.Duration

	// newInotify replaces fsnotify.NewWatcher in tests.
	newInotify func() (*fsnotify.Watcher, error)
}

// DefaultPoll is how often the jobs directory is scanned while inotify
// cannot watch it.
const DefaultPoll = 2 * time.Second

// Watcher turns filesystem events on the jobs directory into a coalesced
// "something changed" signal. It watches the directory and its parent, so
// it sees the directory removed, re-created or swapped (a symlinked
// directory pointed elsewhere) and re-adds its watch; if the parent is
// missing too it watches the nearest ancestor that exists.
//
// What only the periodic Rescan catches: a change behind a symlink to a
// file in a directory that is not watched (the target edited in place,
// chmod'ed or chown'ed; a ConfigMap's files are in such a subdirectory, but
// it replaces them by swapping "..data", which is seen), and a symlinked
// jobs directory whose target is removed and re-created under it.
type Watcher struct {
	dir   string // absolute and clean, so that event names compare exactly
	quiet time.Duration
	// more are the other directories watched alike (people's job
	// directories), absolute and clean; set through SetDirs, read by Run.
	more    []string
	setDirs chan []string
	recheck chan time.Duration
	rescan  time.Duration
	logf    func(msg string, kv ...any)
	poll    time.Duration
	fsw     *fsnotify.Watcher // nil when inotify could not be had: polling only
	changes chan struct{}

	// Touched by NewWatcher, then only by Run's goroutine.
	watched map[string]fileID // paths added to fsw, with what they were when added
	missing bool              // the directory was missing when last armed (to log changes once)
	blind   bool              // the directory exists but could not be watched: poll
}

// SetDirs makes the Watcher watch dirs too, besides its own directory, and
// no others: each with its parent, alike, an event in any of them a
// change. (The daemon watches each person's job directory so.) It returns
// at once; Run takes the set up, then signals a change, so that what the
// new directories hold already is scanned. Only the latest set counts.
func (w *Watcher) SetDirs(dirs []string) {
	var abs []string
	for _, d := range dirs {
		if a, err := filepath.Abs(d); err == nil && a != w.dir {
			abs = append(abs, a)
		}
	}
	// One set not yet taken up is replaced.
	select {
	case <-w.setDirs:
	default:
	}
	w.setDirs <- abs
}

// Recheck has Changes receive a value after d, whatever happens meanwhile:
// for what no event will announce, such as a job file the scan found open
// for writing (Writing), whose closing raises none. It returns at once;
// only the latest Recheck counts.
func (w *Watcher) Recheck(d time.Duration) {
	select {
	case <-w.recheck:
	default:
	}
	w.recheck <- d
}

// NewWatcher starts watching dir, which need not exist. Events from this
// moment on are kept for Run, so the daemon should create the Watcher before
// its first scan. Run releases the inotify descriptor; a Watcher must be
// run. Without inotify (the user is out of instances) it scans every
// Poll instead, and says so. The error is a path that cannot be made
// absolute.
func NewWatcher(dir string, opts WatchOptions) (*Watcher, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("watch jobs directory %s: %w", dir, err)
	}
	w := &Watcher{
		dir:     abs,
		quiet:   opts.Quiet,
		rescan:  opts.Rescan,
		logf:    opts.Logf,
		poll:    opts.Poll,
		changes: make(chan struct{}, 1),
		setDirs: make(chan []string, 1),
		recheck: make(chan time.Duration, 1),
		watched: make(map[string]fileID),
	}
	if w.quiet <= 0 {
		w.quiet = DefaultQuiet
	}
	if w.poll <= 0 {
		w.poll = DefaultPoll
	}
	if w.logf == nil {
		w.logf = func(string, ...any) {}
	}
	newInotify := opts.newInotify
	if newInotify == nil {
		newInotify = fsnotify.NewWatcher
	}
	if w.fsw, err = newInotify(); err != nil {
		w.logf("cannot use inotify; scanning the jobs directory at intervals instead",
			"dir", w.dir, "every", w.poll.String(), "error", err, "hint", "raise fs.inotify.max_user_instances with sysctl")
		return w, nil
	}
	w.arm()
	return w, nil
}

// Changes receives a value when the jobs directory may have changed: scan
// now. Any number of changes before the receive count as one (capacity 1,
// sends never block), so a slow scan never holds the watcher back.
func (w *Watcher) Changes() <-chan struct{} { return w.changes }

// Run delivers events as signals on Changes until ctx ends, then closes the
// inotify watcher and returns nil. Call it once, from the goroutine that
// owns the Watcher. It returns an error only if fsnotify stops by itself.
func (w *Watcher) Run(ctx context.Context) error {
	var events <-chan fsnotify.Event
	var errs <-chan error
	if w.fsw != nil {
		defer w.fsw.Close()
		events, errs = w.fsw.Events, w.fsw.Errors
	}
	poll := time.NewTicker(w.poll)
	defer poll.Stop()

	d := newDebouncer(w.quiet, max(5*w.quiet, RemovalGrace), 10*w.quiet)
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	recheck := time.NewTimer(time.Hour)
	recheck.Stop()
	defer recheck.Stop()
	var tick <-chan time.Time
	if w.rescan > 0 {
		t := time.NewTicker(w.rescan)
		defer t.Stop()
		tick = t.C
	}

	for {
		select {
		case <-ctx.Done():
			return nil

		case ev, ok := <-events:
			if !ok {
				return errors.New("watch jobs directory: fsnotify closed its event channel")
			}
			name := filepath.Clean(ev.Name)
			var (
				key string
				p   presence
			)
			switch w.classify(name) {
			case unrelated:
				continue
			case inside:
				if IsJobFile(filepath.Base(name)) {
					key, p = name, presenceOf(name, ev.Op)
				}
			case structural:
				// The directory or a path above it was created, removed,
				// renamed or swapped: the watch may be on the wrong inode.
				w.arm()
				key, p = name, presenceOf(name, ev.Op)
			}
			now := time.Now()
			d.note(now, key, p)
			timer.Reset(d.deadline().Sub(now))

		case err, ok := <-errs:
			if !ok {
				return errors.New("watch jobs directory: fsnotify closed its error channel")
			}
			if !errors.Is(err, fsnotify.ErrEventOverflow) {
				w.logf("watch error", "dir", w.dir, "error", err)
				continue
			}
			// Events were lost, possibly the ones that moved the directory:
			// re-arm, and let the scan that follows find what changed.
			w.logf("watch overflow; rescanning", "dir", w.dir)
			w.arm()
			now := time.Now()
			d.note(now, "", unknown)
			timer.Reset(d.deadline().Sub(now))

		case <-timer.C:
			// Once per burst, make sure the watches are where they belong
			// before the daemon scans: some losses raise no event of their
			// own (a symlinked directory's target removed under it).
			w.arm()
			d.fired()
			w.signal()

		case <-tick:
			w.arm()
			w.signal()

		case d := <-w.recheck:
			recheck.Reset(d)

		case <-recheck.C:
			w.signal()

		case dirs := <-w.setDirs:
			// A directory new to the set may hold files already: the
			// signal has the daemon scan it, once it is watched.
			w.more = dirs
			w.arm()
			w.signal()

		case <-poll.C:
			// Scans stand in for the events inotify cannot give.
			if w.fsw == nil || w.blind {
				w.arm()
				w.signal()
			}
		}
	}
}

func (w *Watcher) signal() {
	select {
	case w.changes <- struct{}{}:
	default: // a signal is pending already; the scan it causes sees this change too
	}
}

type eventKind uint8

const (
	unrelated  eventKind = iota // a sibling of the directory, or of an ancestor
	inside                      // an entry of the jobs directory
	structural                  // the jobs directory itself, or a path on the way to it
)

func (w *Watcher) classify(name string) eventKind {
	kind := classifyIn(w.dir, name)
	for _, d := range w.more {
		kind = max(kind, classifyIn(d, name))
	}
	return kind
}

// classifyIn is what name is to the directory dir.
func classifyIn(dir, name string) eventKind {
	switch {
	case name == dir:
		return structural
	case filepath.Dir(name) == dir:
		return inside
	case name == "/" || strings.HasPrefix(dir, name+"/"):
		return structural
	}
	return unrelated
}

// arm makes the watches match the filesystem: the directory (if it exists)
// and its nearest existing ancestor, each on the inode the path names now.
// It repeats until nothing moves, because a directory created between a
// stat and the Add on its parent raises no event; once the parent's watch
// is in place, anything later does.
func (w *Watcher) arm() {
	if w.fsw == nil {
		return
	}
	want := w.wanted()
	for range 8 {
		w.apply(want)
		again := w.wanted()
		if maps.Equal(want, again) {
			break
		}
		want = again
	}
	// The directory is there when it exists, watched or not (a watch the
	// kernel refused is said by apply).
	_, present := want[w.dir]
	switch {
	case !present && !w.missing:
		w.missing = true
		if fi, err := os.Stat(w.dir); err == nil && !fi.IsDir() {
			// Not missing: a file where the directory should be (a job
			// file given as --jobs?), which the scan refuses, saying so.
			w.logf("jobs directory is not a directory; waiting for one there", "dir", w.dir)
		} else {
			w.logf("jobs directory missing; waiting for it", "dir", w.dir)
		}
	case present && w.missing:
		w.missing = false
		w.logf("jobs directory is back; watching it", "dir", w.dir)
	}
}

// wanted is the set of paths to watch, and what each names now: each
// directory, and its nearest existing ancestor.
func (w *Watcher) wanted() map[string]fileID {
	want := make(map[string]fileID, 2+len(w.more))
	for _, dir := range append([]string{w.dir}, w.more...) {
		if id, ok := dirID(dir); ok {
			want[dir] = id
		}
		for p := filepath.Dir(dir); ; p = filepath.Dir(p) {
			if id, ok := dirID(p); ok {
				want[p] = id
				break
			}
			if p == filepath.Dir(p) {
				break
			}
		}
	}
	return want
}

func (w *Watcher) apply(want map[string]fileID) {
	// fsnotify drops a watch by itself when its directory is deleted or
	// moved; WatchList says which are still in place.
	live := make(map[string]bool, len(w.watched))
	for _, p := range w.fsw.WatchList() {
		live[p] = true
	}
	for p, id := range w.watched {
		if got, ok := want[p]; ok && got == id && live[p] {
			continue
		}
		_ = w.fsw.Remove(p) // fails when the kernel dropped it already, which is the same outcome
		delete(w.watched, p)
	}
	blind := false
	for p, id := range want {
		if _, ok := w.watched[p]; ok {
			continue
		}
		if err := w.fsw.Add(p); err != nil {
			// Gone again since the stat: the event on its parent re-arms.
			// Anything else (the inotify watch limit) is for a person, and
			// until a later arm succeeds, scans every poll stand in.
			if !errors.Is(err, fs.ErrNotExist) {
				blind = true
				if !w.blind {
					w.logf("cannot watch directory; scanning the jobs directory at intervals instead",
						"path", p, "every", w.poll.String(), "error", err, "hint", "raise fs.inotify.max_user_watches with sysctl")
				}
			}
			continue
		}
		w.watched[p] = id
	}
	if w.blind && !blind {
		w.logf("watching the jobs directory again", "dir", w.dir)
	}
	w.blind = blind
}

// presenceOf says whether the event leaves name in a state a save ends in.
// It stats rather than trusting the event: by the time the event is read
// the file may have moved on, and what matters is the state a scan would see
// now. A stat per event is cheap next to the scan that follows.
func presenceOf(name string, op fsnotify.Op) presence {
	if !op.Has(fsnotify.Create) && !op.Has(fsnotify.Write) && !op.Has(fsnotify.Remove) && !op.Has(fsnotify.Rename) {
		return unknown // chmod: says nothing about content
	}
	fi, err := os.Stat(name)
	if err != nil || (fi.Mode().IsRegular() && fi.Size() == 0) {
		return absent
	}
	return present
}

// dirID stats p the way inotify_add_watch resolves it (following symlinks).
func dirID(p string) (fileID, bool) {
	fi, err := os.Stat(p)
	if err != nil || !fi.IsDir() {
		return fileID{}, false
	}
	return idOf(fi), true
}
