package ctlsock

import (
	"context"
	"io"
	"log"
	"net"
	"net/http"
	"sync"
	"time"
)

// Refusal is why a connection was refused: what a Refuse handler words.
type Refusal struct {
	UID uint32
	// Open is how many connections the uid held when it was refused.
	Open int
	// Limit is the cap that refused it: the uid's own (PerUID), or, when
	// Total is true, the one of all uids together.
	Limit int
	Total bool
}

func (r Refusal) scope() string {
	if r.Total {
		return "all"
	}
	return "uid"
}

type refusalKey struct{}

// RefusalOf is the Refusal of the connection a Refuse handler answers.
func RefusalOf(ctx context.Context) (Refusal, bool) {
	r, ok := ctx.Value(refusalKey{}).(Refusal)
	return r, ok
}

// refuseWithin is how long a refused connection is given to send its
// request and read the answer. A client sends its request as it connects;
// one that has sent nothing within a second is owed no answer, and its
// place among Limits.Refusing is wanted.
const refuseWithin = time.Second

// maxRefusedHeader bounds what is read of a refused request: only its
// request line matters, and the refusal must cost little.
const maxRefusedHeader = 16 << 10

// refuser answers refused connections with an http.Server of its own:
// without keep-alives, with short timeouts, and with the Refuse handler.
type refuser struct {
	srv     *http.Server
	in      *handoff
	serving sync.WaitGroup // srv.Serve
}

func startRefuser(addr net.Addr, h http.Handler) *refuser {
	if h == nil {
		h = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, "too many connections", http.StatusServiceUnavailable)
		})
	}
	r := &refuser{in: &handoff{addr: addr, conns: make(chan net.Conn), done: make(chan struct{})}}
	r.srv = &http.Server{
		Handler:           h,
		ReadHeaderTimeout: refuseWithin,
		ReadTimeout:       refuseWithin,
		WriteTimeout:      refuseWithin,
		MaxHeaderBytes:    maxRefusedHeader,
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			if rc, ok := c.(*refusedConn); ok {
				ctx = context.WithValue(ctx, refusalKey{}, rc.refusal)
			}
			return ctx
		},
		// A client that hangs up before its answer is no news.
		ErrorLog: log.New(io.Discard, "", 0),
	}
	r.srv.SetKeepAlivesEnabled(false)
	r.serving.Go(func() { _ = r.srv.Serve(r.in) })
	return r
}

// hand gives c to the refuser; false when it is closed.
func (r *refuser) hand(c *refusedConn) bool {
	select {
	case r.in.conns <- c:
		return true
	case <-r.in.done:
		return false
	}
}

func (r *refuser) close() {
	_ = r.srv.Close() // closes r.in and the connections being answered
	r.serving.Wait()
}

// refusedConn is a refused connection: its place among Limits.Refusing is
// given back when it closes.
type refusedConn struct {
	net.Conn
	l       *Listener
	refusal Refusal
	once    sync.Once
}

func (c *refusedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() {
		c.l.mu.Lock()
		c.l.refusing--
		c.l.refused.Broadcast()
		c.l.mu.Unlock()
	})
	return err
}

// handoff is the refuser's listener: Accept returns what hand sends.
type handoff struct {
	addr  net.Addr
	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
}

func (h *handoff) Accept() (net.Conn, error) {
	select {
	case c := <-h.conns:
		return c, nil
	case <-h.done:
		return nil, net.ErrClosed
	}
}

func (h *handoff) Close() error {
	h.once.Do(func() { close(h.done) })
	return nil
}

func (h *handoff) Addr() net.Addr { return h.addr }
