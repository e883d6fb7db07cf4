package watch

import (
	"time"
)

// debouncer decides when a burst of events is over. It reads no clock: the
// caller passes the time of each event, so tests drive it with made-up
// times.
//
// The trade-off it encodes: a save must reach the daemon within tens of
// milliseconds, but a scan in the middle of a save sees a state that was
// never meant (vim renames f.lua away before it writes the new one). The
// dangerous middle states are the ones where a job file is missing, since
// the daemon would stop its jobs; a half-written file only fails to
// evaluate and keeps the previous version in force, but an empty one (the
// moment after `echo > f.lua` truncates) is valid Lua that declares nothing.
// So the wait after the last event is short (quiet) unless a job file or
// the directory went away, or a job file is empty, and has not come back;
// then it is longer (grace): a save is fast, a removal can wait. The grace
// is long enough for a writer that truncates a file and writes it a moment
// later from another open (a script's `: > f.lua` then its generator, an
// interpreter starting), where the file system gives no lease to see it
// open for writing meanwhile.
type debouncer struct {
	quiet   time.Duration // after the last event
	grace   time.Duration // after the last event, while something is gone
	maxWait time.Duration // after the first event of the burst, whatever follows

	pending     bool
	first, last time.Time
	gone        map[string]struct{} // names last seen absent in this burst
}

func newDebouncer(quiet, grace, maxWait time.Duration) *debouncer {
	return &debouncer{quiet: quiet, grace: grace, maxWait: maxWait, gone: make(map[string]struct{})}
}

// presence is what an event says about the name it concerns.
type presence uint8

const (
	unknown presence = iota // nothing (a chmod, or an event about no job file)
	absent                  // the name is gone, or an empty file: a state no save ends in
	present                 // the name is there with content
)

// note records an event at now. name is the job file or directory the event
// is about, or "" when it is about nothing whose absence matters (vim's
// 4913, a swap file, a "..data" symlink, an overflow).
func (d *debouncer) note(now time.Time, name string, p presence) {
	if !d.pending {
		d.pending, d.first = true, now
	}
	d.last = now
	if name == "" {
		return
	}
	switch p {
	case absent:
		d.gone[name] = struct{}{}
	case present:
		delete(d.gone, name)
	}
}

// deadline is when to signal; meaningful only while pending.
func (d *debouncer) deadline() time.Time {
	wait, bound := d.quiet, d.maxWait
	if len(d.gone) > 0 {
		// The grace holds however long a stream of other events goes on.
		wait, bound = d.grace, max(d.maxWait, d.grace)
	}
	at := d.last.Add(wait)
	if b := d.first.Add(bound); at.After(b) {
		at = b
	}
	return at
}

// fired starts a new burst: the scan that follows the signal sees whatever
// is gone, so there is nothing left to wait for.
func (d *debouncer) fired() {
	d.pending = false
	clear(d.gone)
}
