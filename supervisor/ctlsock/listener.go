package ctlsock

import (
	"math"
	"net"
	"net/http"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
)

// Options are what Wrap needs besides the listener.
type Options struct {
	Limits Limits
	// Logger receives the caps chosen and, once a minute per uid at most,
	// a warning that its connections are being refused. nil: none.
	Logger hclog.Logger
	// Refuse answers the request of a connection over a cap;
	// RefusalOf(r.Context()) says which cap and by how much. The
	// connection is closed after the answer. nil: a plain-text 503.
	Refuse http.Handler
	// Privileged are the uids allowed Limits.Privileged more connections.
	// nil: root and this process's own uid.
	Privileged []uint32
	// Now is the clock of the warnings' rate and of IdleAtLimit. nil: the
	// real one.
	Now func() time.Time

	// peer reads a connection's credentials; nil: ReadPeer. Tests name
	// their peers by the address they bind instead, to be several uids.
	peer func(net.Conn) (Peer, error)
}

// unknownUID stands for a peer whose credentials cannot be read. It is
// (uid_t)-1, which no user has (the kernel uses it for "no uid"); such
// peers share one uid's cap, and are never privileged.
const unknownUID = math.MaxUint32

// warnEvery is how often the refusals of one uid are logged at most: a
// client that opens connections in a loop would otherwise write a line per
// connection into the journal.
const warnEvery = time.Minute

// Listener is the control socket with its caps. Serve it with an
// http.Server whose ConnState is the Listener's ConnState, so that idle
// connections are known.
type Listener struct {
	// inner is the socket accepted from; Replace swaps it (guarded by mu).
	inner      net.Listener
	lim        Limits
	log        hclog.Logger
	privileged []uint32
	peer       func(net.Conn) (Peer, error)
	now        func() time.Time
	refuser    *refuser

	mu       sync.Mutex                    // guards inner, byUID, shared, total, priv, refusing, closing, warned, and each conn's idleSince
	byUID    map[uint32]map[*conn]struct{} // the admitted connections open, by the peer's uid
	shared   map[uint32]int                // of those, how many each uid holds in the shared pool (PerUID caps these)
	total    int                           // admitted connections that count against Limits.Total
	priv     int                           // admitted connections on the privileged allowance
	refusing int                           // refused connections not yet closed
	refused  sync.Cond                     // signalled, on mu, as refusing falls
	closing  bool                          // Close has begun: refuse without an answer
	warned   map[uint32]*warning           // the rate of each uid's warnings

	closeOnce sync.Once
	closeErr  error
}

// warning is where a uid's refusals stand since its last warning.
type warning struct {
	last       time.Time // when the last line was logged; zero: never
	refused    int       // refusals since, the present one included
	unanswered int       // of those, closed without an answer (Refusing was full)
}

// pool is what an admitted connection counts against.
type pool int

const (
	poolShared     pool = iota + 1 // PerUID and Total
	poolPrivileged                 // the privileged allowance
)

// Wrap caps the connections l accepts. It logs the caps chosen. Close the
// Listener (http.Server.Serve does when it returns) to stop answering
// refused connections.
func Wrap(l net.Listener, opts Options) *Listener {
	cl := &Listener{
		inner:      l,
		lim:        opts.Limits,
		log:        opts.Logger,
		privileged: opts.Privileged,
		peer:       opts.peer,
		now:        opts.Now,
		byUID:      map[uint32]map[*conn]struct{}{},
		shared:     map[uint32]int{},
		warned:     map[uint32]*warning{},
	}
	cl.refused.L = &cl.mu
	if cl.log == nil {
		cl.log = hclog.NewNullLogger()
	}
	if cl.privileged == nil {
		cl.privileged = []uint32{0, uint32(os.Getuid())}
	}
	if cl.peer == nil {
		cl.peer = ReadPeer
	}
	if cl.now == nil {
		cl.now = time.Now
	}
	cl.refuser = startRefuser(l.Addr(), opts.Refuse)
	lim := cl.lim
	cl.log.Info("control socket limits", "nofile", lim.NoFile, "reserve", lim.Reserve, "per_uid", lim.PerUID,
		"total", lim.Total, "privileged", lim.Privileged, "idle_at_limit_ms", lim.IdleAtLimit.Milliseconds())
	return cl
}

// Accept returns the next connection within the caps. A connection over
// them is handed to the refuser, or closed, and never returned.
func (l *Listener) Accept() (net.Conn, error) {
	for {
		l.mu.Lock()
		inner := l.inner
		l.mu.Unlock()
		nc, err := inner.Accept()
		if err != nil {
			l.mu.Lock()
			replaced := l.inner != inner && !l.closing
			l.mu.Unlock()
			if replaced {
				continue // closed by Replace: accept from its successor
			}
			return nil, err
		}
		if c := l.admit(nc); c != nil {
			return c, nil
		}
	}
}

// Addr is the address of the socket accepted from.
func (l *Listener) Addr() net.Addr {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.inner.Addr()
}

// Replace accepts from next from now on, in place of the socket before,
// which it closes: a control socket whose path was removed, bound again
// there. The one before, a unix socket, is closed without removing the
// path, which is next's now. Once the Listener is closed, next is closed
// and an error returned.
func (l *Listener) Replace(next net.Listener) error {
	l.mu.Lock()
	if l.closing {
		l.mu.Unlock()
		next.Close()
		return net.ErrClosed
	}
	old := l.inner
	l.inner = next
	l.mu.Unlock()
	if ul, ok := old.(*net.UnixListener); ok {
		ul.SetUnlinkOnClose(false)
	}
	return old.Close()
}

// Close stops accepting, closes the connections being refused and waits
// until each of them is closed. It leaves the admitted connections to
// their server.
func (l *Listener) Close() error {
	l.closeOnce.Do(func() {
		l.mu.Lock()
		l.closing = true
		inner := l.inner
		l.mu.Unlock()
		l.closeErr = inner.Close()
		l.refuser.close()
		// A refusal being handed over when the refuser closed is closed by
		// the Accept that handed it; one its server took in just as it
		// closed is closed by that server within refuseWithin.
		l.mu.Lock()
		for l.refusing > 0 {
			l.refused.Wait()
		}
		l.mu.Unlock()
	})
	return l.closeErr
}

// admit counts nc against its caps and returns it wrapped, or refuses it
// and returns nil.
func (l *Listener) admit(nc net.Conn) *conn {
	cred, err := l.peer(nc)
	known := err == nil
	uid := cred.Uid
	if !known {
		uid = unknownUID
	}
	now := l.now()

	l.mu.Lock()
	open := len(l.byUID[uid])
	var p pool
	switch {
	case l.shared[uid] < l.lim.PerUID && l.total < l.lim.Total:
		p = poolShared
		l.total++
		l.shared[uid]++
	case known && slices.Contains(l.privileged, uid) && l.priv < l.lim.Privileged:
		p = poolPrivileged
		l.priv++
	}
	if p == 0 {
		r := Refusal{UID: uid, Open: open, Limit: l.lim.PerUID}
		if l.shared[uid] < l.lim.PerUID {
			r.Total, r.Limit = true, l.lim.Total
		}
		reclaimed := 0
		if !r.Total {
			reclaimed = l.reclaimLocked(uid, now)
		}
		answer := !l.closing && l.refusing < l.lim.Refusing
		if answer {
			l.refusing++
		}
		w, due := l.warnLocked(uid, now, answer)
		l.mu.Unlock()
		if due {
			l.log.Warn("control connections refused: over the limit", "uid", uid, "open", r.Open, "limit", r.Limit,
				"limit_of", r.scope(), "refused", w.refused, "unanswered", w.unanswered, "reclaimed_idle", reclaimed)
		}
		if !answer {
			nc.Close()
			return nil
		}
		if rc := (&refusedConn{Conn: nc, l: l, refusal: r}); !l.refuser.hand(rc) {
			rc.Close()
		}
		return nil
	}
	c := &conn{Conn: nc, l: l, uid: uid, cred: cred, credKnown: known, pool: p, idleSince: now}
	set := l.byUID[uid]
	if set == nil {
		set = map[*conn]struct{}{}
		l.byUID[uid] = set
	}
	set[c] = struct{}{}
	l.mu.Unlock()
	return c
}

// reclaimLocked closes uid's connections that have been idle IdleAtLimit
// or longer, and says how many. A server goroutine waiting on one for a
// request sees its read fail and ends; the slot is free at once.
func (l *Listener) reclaimLocked(uid uint32, now time.Time) int {
	n := 0
	for c := range l.byUID[uid] {
		if c.idleSince.IsZero() || now.Sub(c.idleSince) < l.lim.IdleAtLimit {
			continue
		}
		// Closed, not given a past deadline: the server sets its idle
		// deadline just after it marks the connection idle, and would
		// overwrite one set in between.
		c.Conn.Close()
		l.releaseLocked(c)
		n++
	}
	return n
}

// warnLocked counts a refusal of uid and says whether a warning is due,
// with the counts it reports.
func (l *Listener) warnLocked(uid uint32, now time.Time, answered bool) (warning, bool) {
	w := l.warned[uid]
	if w == nil {
		w = &warning{}
		l.warned[uid] = w
	}
	w.refused++
	if !answered {
		w.unanswered++
	}
	if !w.last.IsZero() && now.Sub(w.last) < warnEvery {
		return warning{}, false
	}
	out := *w
	w.last, w.refused, w.unanswered = now, 0, 0
	// Forget the uids that have not been refused since their last line
	// a while ago, so that the table holds only the uids refused lately.
	for u, o := range l.warned {
		if o.refused == 0 && now.Sub(o.last) >= warnEvery {
			delete(l.warned, u)
		}
	}
	return out, true
}

// ConnState is for http.Server.ConnState: it keeps when each connection
// went idle, which IdleAtLimit is measured from.
func (l *Listener) ConnState(nc net.Conn, s http.ConnState) {
	c, ok := nc.(*conn)
	if !ok {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	switch s {
	case http.StateActive:
		c.idleSince = time.Time{}
	case http.StateIdle:
		c.idleSince = l.now()
	}
}

// releaseLocked gives back c's slot; it does nothing the second time.
func (l *Listener) releaseLocked(c *conn) {
	set := l.byUID[c.uid]
	if _, ok := set[c]; !ok {
		return
	}
	delete(set, c)
	if len(set) == 0 {
		delete(l.byUID, c.uid)
	}
	switch c.pool {
	case poolShared:
		l.total--
		if l.shared[c.uid]--; l.shared[c.uid] == 0 {
			delete(l.shared, c.uid)
		}
	case poolPrivileged:
		l.priv--
	}
}

// conn is an admitted connection: its slot is given back when it closes.
type conn struct {
	net.Conn
	l         *Listener
	uid       uint32
	cred      Peer
	credKnown bool
	pool      pool
	// idleSince is when the connection last went idle (or was accepted,
	// before its first request); zero while a request is being served.
	// Guarded by l.mu.
	idleSince time.Time
}

func (c *conn) Close() error {
	err := c.Conn.Close()
	c.l.mu.Lock()
	c.l.releaseLocked(c)
	c.l.mu.Unlock()
	return err
}

// PeerOf is the credentials of a connection this package admitted, as the
// kernel gave them when it was accepted; false for any other connection,
// or where they could not be read.
func PeerOf(nc net.Conn) (Peer, bool) {
	c, ok := nc.(*conn)
	if !ok || !c.credKnown {
		return Peer{}, false
	}
	return c.cred, true
}
