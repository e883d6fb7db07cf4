package supervisor

import (
	"cmp"
	"net/http"
	"strings"
	"time"

	"github.com/berthd/berth/supervisor/ctlsock"
)

// A reply is built whole before it is written: a status of many jobs is
// megabytes, held until the client has read it. A client that asks and
// never reads would hold it for as long as it keeps the connection (trial
// AL: a person's 64 connections that asked for a 4 MB status and read
// nothing took the daemon from 156 MB to 1 GB, and held 430 MB). So each
// reply has a time to be written, and each person a bound on the views
// they have in the making or being written at once. The streams (the
// events, a job's output) are bounded on their own (their tails and
// their followers).

// defaultReplyWriteTime is how long a reply may take to be written, from
// its first byte: a client on the same machine that has not read it by
// then is not reading, and its connection is closed.
const defaultReplyWriteTime = 30 * time.Second

// repliesPerUID bounds the views (GET) one uid has in the making or being
// written at once; more wait their turn. Root and the daemon's own user
// are not bounded.
const repliesPerUID = 4

// boundReplies gives each reply but the streams its time to be written,
// and holds each person to repliesPerUID of them at once.
func (d *Daemon) boundReplies(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// (The server clears a reply's deadline once it has been
		// written: the next request on the connection has none.)
		if streams(r) {
			next.ServeHTTP(w, r)
			return
		}
		// Only a view is held to the bound: a call that changes something
		// (a stop) has a small answer, and must not wait behind the
		// caller's own views (trial AN: a stop waited 27 s behind four
		// statuses nobody read).
		if p, ok := r.Context().Value(peerKey{}).(ctlsock.Peer); ok && r.Method == http.MethodGet && !rootOrDaemon(p.Uid) {
			release, ok := d.replies.take(r.Context(), p.Uid)
			if !ok {
				return // gone while it waited
			}
			defer release()
		}
		next.ServeHTTP(&timedReply{ResponseWriter: w, rc: http.NewResponseController(w), within: cmp.Or(d.cfg.replyWriteTime, defaultReplyWriteTime)}, r)
	})
}

// streams says whether r asks for a stream: the events, or a job's output
// (followed, or its last lines, which are bounded on their own). The path
// as sent: a job named logs, or alice/logs (%2F), asks for no stream (the
// review).
func streams(r *http.Request) bool {
	if r.Method != http.MethodGet {
		return false
	}
	p := r.URL.EscapedPath()
	if p == APIVersion+"/events" {
		return true
	}
	job, ok := strings.CutPrefix(p, APIVersion+"/jobs/")
	if !ok {
		return false
	}
	job, ok = strings.CutSuffix(job, "/logs")
	return ok && job != "" && !strings.Contains(job, "/")
}

// timedReply sets the connection's write deadline as the reply's first
// byte is written: the time a handler takes to make it (a reload's) is
// not the client's.
type timedReply struct {
	http.ResponseWriter
	rc      *http.ResponseController
	within  time.Duration
	started bool
}

func (t *timedReply) start() {
	if !t.started {
		t.started = true
		_ = t.rc.SetWriteDeadline(time.Now().Add(t.within))
	}
}

func (t *timedReply) WriteHeader(code int) {
	t.start()
	t.ResponseWriter.WriteHeader(code)
}

func (t *timedReply) Write(b []byte) (int, error) {
	t.start()
	return t.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection's writer.
func (t *timedReply) Unwrap() http.ResponseWriter { return t.ResponseWriter }
