package supervisor

import (
	"encoding/json"
	"net/http"
	"sync"
)

// Change is one line of GET /v1/events: the daemon's picture (what GET
// /v1/status answers) changed. It carries no job's facts, only that and
// when, so any caller allowed on the socket may follow it, and a reader
// asks for the picture it wants (its own jobs, all of them) itself.
type Change struct {
	// Seq grows with each change published. A reader slower than the
	// changes skips to the latest one, so numbers may jump; they never
	// repeat within one daemon's life.
	Seq  uint64     `json:"seq"`
	Kind ChangeKind `json:"kind"`
}

// ChangeKind says what a Change is about.
type ChangeKind string

const (
	// ChangeStatus: jobs, the books or the configuration changed.
	ChangeStatus ChangeKind = "status"
	// ChangeStopping: the daemon is stopping; the stream ends once it has
	// stopped its jobs (or left them running as units).
	ChangeStopping ChangeKind = "stopping"
)

// changeFeed is the broadcast behind GET /v1/events. The loop publishes;
// each stream waits on the channel that came with the latest change, which
// the next publish closes and replaces. Publishing costs the same whatever
// the number of streams, and never waits for one of them: the loop never
// blocks on a reader, and no goroutine of the daemon exists per reader
// beyond the server's own for its connection.
type changeFeed struct {
	mu    sync.Mutex    // guards last, next and ended
	last  Change        // the latest change, sent first to a new reader
	next  chan struct{} // closed by the publish after last, or by end
	ended bool          // end was called: next is closed for good
}

func newChangeFeed() *changeFeed {
	return &changeFeed{last: Change{Seq: 1, Kind: ChangeStatus}, next: make(chan struct{})}
}

// publish makes kind the latest change and wakes every reader.
func (f *changeFeed) publish(kind ChangeKind) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.ended {
		return
	}
	f.last = Change{Seq: f.last.Seq + 1, Kind: kind}
	close(f.next)
	f.next = make(chan struct{})
}

// end ends every stream, those open and those to come: the daemon is
// about to shut its server down, which waits for them.
func (f *changeFeed) end() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.ended {
		f.ended = true
		close(f.next)
	}
}

// latest is the latest change and the channel closed after it; ended is
// true once the feed is over.
func (f *changeFeed) latest() (c Change, next <-chan struct{}, ended bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.last, f.next, f.ended
}

// serveEvents is GET /v1/events: newline-delimited JSON, one Change at
// once (so that a client draws without waiting for the first change),
// then one each time the picture changes, coalesced as STATUS= is (four a second
// at most, whatever the storm of job events), until the caller hangs up or the daemon stops.
//
// Like a followed log it is one long request: the connection is active
// (not idle) all along, so the control socket never reclaims it as idle
// and the server's idle timeout does not apply; it counts against its
// user's connections like any other.
func (d *Daemon) serveEvents(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/x-ndjson")
	rc := http.NewResponseController(w)
	enc := json.NewEncoder(w)
	var sent uint64
	for {
		// The last change is sent even once the feed has ended: the
		// "stopping" published just before the end is the stream's last
		// word, whichever of the two the reader wakes to.
		c, next, ended := d.feed.latest()
		if c.Seq > sent {
			if enc.Encode(c) != nil || rc.Flush() != nil {
				return // the caller hung up
			}
			sent = c.Seq
		}
		if ended {
			return
		}
		select {
		case <-r.Context().Done():
			return
		case <-next:
		}
	}
}
