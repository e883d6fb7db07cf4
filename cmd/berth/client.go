package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/berthd/berth/supervisor"
)

// client talks to the daemon over its control socket.
type client struct {
	// sockets are where it looks for the daemon, in order; socket is the
	// one it talks to, the first that answered (or the last tried).
	sockets []string
	once    sync.Once
	socket  string
	// stale is the first of sockets whose file is there but nothing
	// listens on (the daemon went away, or is starting again); "" where
	// none is, or one answered.
	stale string
	// notSocket is the first of sockets that is there but is no socket
	// (a wrong --socket or BERTH_SOCKET), and notSocketKind what it is.
	notSocket, notSocketKind string

	http *http.Client
	// timeout bounds a one-shot request, its answer read whole, and
	// reloadTimeout a reload (berth reload, submit, edit), which takes
	// longer: a script is not held for ever by a daemon that took its
	// request and never answers (stopped with kill -STOP, stuck).
	timeout, reloadTimeout time.Duration
}

// Bounds on a one-shot request (client.timeout, reloadTimeout). A reload
// is answered once the reload under way when it was asked, then its own,
// have been evaluated, each within the daemon's deadline for one; at the
// daemon's start the first also evaluates the versions in force when the
// last daemon stopped, within another: three deadlines, and a minute more
// to apply them, in which a reload may take its time without being given up.
const (
	requestTimeout = 2 * time.Minute
	reloadTimeout  = 3*supervisor.DefaultEvalDeadline + time.Minute
)

// newClient talks to the daemon on the first of sockets that answers, in
// order: a person's own daemon before the system's.
func newClient(sockets ...string) *client {
	cl := &client{sockets: sockets, socket: sockets[len(sockets)-1]}
	cl.http = &http.Client{
		Transport: &http.Transport{
			DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
				var d net.Dialer
				var first net.Conn
				cl.once.Do(func() { first = cl.pick(ctx) })
				if first != nil {
					return first, nil
				}
				return d.DialContext(ctx, "unix", cl.socket)
			},
			// Below the daemon's idle timeout (30 s), so that a request
			// never goes out on a connection the daemon is closing.
			IdleConnTimeout: 10 * time.Second,
		},
	}
	cl.timeout, cl.reloadTimeout = requestTimeout, reloadTimeout
	return cl
}

// pick settles which socket the client talks to: the first that takes a
// connection, which it returns for the first request; else the first that
// refused this user (the daemon is there: say so), else the last.
func (cl *client) pick(ctx context.Context) net.Conn {
	var d net.Dialer
	denied, stale := "", ""
	for _, s := range cl.sockets {
		conn, err := d.DialContext(ctx, "unix", s)
		if err == nil {
			cl.socket = s
			return conn
		}
		switch {
		case errors.Is(err, syscall.EACCES) && denied == "":
			denied = s
		case errors.Is(err, syscall.ECONNREFUSED) && stale == "":
			if kind := notSocket(s); kind == "" {
				stale = s
			} else if cl.notSocket == "" {
				cl.notSocket, cl.notSocketKind = s, kind
			}
		}
	}
	if denied != "" {
		cl.socket = denied
	}
	cl.stale = stale
	return nil
}

// notSocket names what path is where it is not a socket ("directory",
// "regular file"), "" where it is one or cannot be looked at.
func notSocket(path string) string {
	fi, err := os.Stat(path)
	switch {
	case err != nil || fi.Mode().Type() == fs.ModeSocket:
		return ""
	case fi.IsDir():
		return "directory"
	case fi.Mode().IsRegular():
		return "regular file"
	}
	return "file that is not a socket"
}

// deniedError is returned when the socket refused the caller.
type deniedError struct {
	socket string
	group  string // the socket's group, "" where it cannot be read
	// blocked is the directory on the way to the socket that the caller
	// may not enter, where there is one: the socket's group is not why.
	blocked string
}

// denied is the refusal of socket, with what the caller can be told of
// why.
func denied(socket string) *deniedError {
	return &deniedError{socket: socket, group: socketGroup(socket), blocked: blockedOnTheWay(socket)}
}

// blockedOnTheWay is the first directory on the way to socket that the
// caller may not search, its links followed as the kernel follows them
// (the directory named is the one the link leads into), "" where there is
// none.
func blockedOnTheWay(socket string) string {
	abs, err := filepath.Abs(socket)
	if err != nil {
		return ""
	}
	todo := strings.Split(strings.TrimPrefix(abs, "/"), "/")
	cur := "/"
	for links := 0; len(todo) > 0; {
		name := todo[0]
		todo = todo[1:]
		switch name {
		case "", ".":
			continue
		case "..":
			cur = filepath.Dir(cur)
			continue
		}
		if err := unix.Access(cur, unix.X_OK); errors.Is(err, unix.EACCES) {
			return cur
		}
		next := filepath.Join(cur, name)
		fi, err := os.Lstat(next)
		if err != nil {
			return ""
		}
		if fi.Mode()&os.ModeSymlink == 0 {
			cur = next
			continue
		}
		target, err := os.Readlink(next)
		if links++; err != nil || links > 40 {
			return ""
		}
		if filepath.IsAbs(target) {
			cur = "/"
		}
		todo = append(strings.Split(target, "/"), todo...)
	}
	return ""
}

// socketGroup names the group that owns socket, which the daemon answers
// (--group), or "" where it cannot be told.
func socketGroup(socket string) string {
	fi, err := os.Stat(socket)
	if err != nil {
		return ""
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok || st.Gid == 0 {
		return ""
	}
	if g, err := user.LookupGroupId(strconv.FormatUint(uint64(st.Gid), 10)); err == nil {
		return g.Name
	}
	return ""
}

// errDaemonGone: the daemon ended a stream (a followed log) by going away.
var errDaemonGone = errors.New("the daemon stopped")

// wentAway reports whether err says that the daemon went away while it
// was asked something: no daemon to dial any more, or the connection
// closed before the whole answer came.
func wentAway(err error) bool {
	var nd *noDaemonError
	var na *noAnswerError
	return errors.As(err, &nd) || errors.Is(err, errDaemonGone) || errors.As(err, &na) && na.timeout == 0 ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET)
}

func (e *deniedError) Error() string { return "permission denied on " + e.socket }

// noAnswerError is returned when a daemon took a request and gave no
// answer: it went away (killed, crashed) before answering, or did not
// answer within the time it had (timeout, not 0). A request that changes
// something may or may not have been done.
type noAnswerError struct {
	method, path string
	socket       string
	timeout      time.Duration
	err          error
}

func (e *noAnswerError) Error() string { return e.err.Error() }
func (e *noAnswerError) Unwrap() error { return e.err }

// asked is what the request asked the daemon to do, in words ("the
// start of train", "the reload"), "" for a request that changes nothing.
func (e *noAnswerError) asked() string {
	if e.method != http.MethodPost {
		return ""
	}
	if rest, ok := strings.CutPrefix(e.path, "/jobs/"); ok {
		if i := strings.LastIndex(rest, "/"); i >= 0 {
			job, err := url.PathUnescape(rest[:i])
			if err != nil {
				job = rest[:i]
			}
			return "the " + rest[i+1:] + " of " + job
		}
	}
	switch e.path {
	case "/reload":
		return "the reload"
	case "/check":
		return "" // a check changes nothing
	}
	return "POST " + supervisor.APIVersion + e.path
}

// goneBeforeAnswer reports whether err, a request's, says the daemon
// closed the connection before its answer began: it went away.
func goneBeforeAnswer(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

type noDaemonError struct {
	sockets []string // every socket tried
	stale   string   // client.stale
	// notSocket and notSocketKind are client's.
	notSocket, notSocketKind string
	err                      error
}

func (e *noDaemonError) Error() string { return e.err.Error() }

// apiError is a daemon's 4xx or 5xx answer.
type apiError struct {
	status int
	code   string // the daemon's code for it (supervisor.Code…), if it sent one
	msg    string
}

func (e *apiError) Error() string { return e.msg }

// call makes one request; out, when not nil, receives the JSON answer.
func (c *client) call(method, path string, query url.Values, out any) error {
	return c.do(method, path, query, nil, out)
}

// send makes one request with a JSON body.
func (c *client) send(method, path string, body []byte, out any) error {
	return c.do(method, path, nil, body, out)
}

func (c *client) do(method, path string, query url.Values, body []byte, out any) error {
	return c.doContext(context.Background(), method, path, query, body, out)
}

func (c *client) doContext(ctx context.Context, method, path string, query url.Values, body []byte, out any) error {
	_, err := c.doHeader(ctx, method, path, query, body, out)
	return err
}

// doHeader is doContext, returning the answer's header too.
func (c *client) doHeader(ctx context.Context, method, path string, query url.Values, body []byte, out any) (http.Header, error) {
	limit := c.timeout
	if method == http.MethodPost && path == "/reload" {
		limit = c.reloadTimeout
	}
	bounded, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	// The time ran out, not the caller's context: the daemon did not
	// answer within it (trial AT: Go's "Client.Timeout exceeded", exit 1).
	late := func(err error) error {
		if ctx.Err() == nil && errors.Is(bounded.Err(), context.DeadlineExceeded) {
			return &noAnswerError{method: method, path: path, socket: c.socket, timeout: limit, err: err}
		}
		return err
	}
	resp, err := c.open(bounded, c.http, method, path, query, body)
	if err != nil {
		return nil, late(err)
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if errors.Is(err, syscall.ECONNRESET) {
		err = fmt.Errorf("%w: %w", io.ErrUnexpectedEOF, err) // cut, as by an end of file
	}
	if err != nil {
		return nil, late(err)
	}
	if out == nil {
		return resp.Header, nil
	}
	if err := json.Unmarshal(answer, out); err != nil {
		return nil, fmt.Errorf("read the daemon's answer: %w", err)
	}
	return resp.Header, nil
}

// stream makes a GET whose answer is a stream (a job's output), copying it
// to w as it comes, until the daemon ends it or ctx does. A daemon whose
// answer lacks the header needs (when not "") did not do what was asked:
// it is older than the client, and nothing is copied. It returns how many
// bytes it copied.
func (c *client) stream(ctx context.Context, path string, query url.Values, w io.Writer, needs string, head func(http.Header)) (int64, error) {
	// No overall timeout: a followed log lasts as long as the person wants.
	hc := &http.Client{Transport: c.http.Transport}
	resp, err := c.open(ctx, hc, http.MethodGet, path, query, nil)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if needs != "" && resp.Header.Get(needs) == "" {
		return 0, &apiError{status: http.StatusNotImplemented, msg: msgDaemonTooOld(c.socket, "GET "+supervisor.APIVersion+path+" with "+needs)}
	}
	if head != nil {
		head(resp.Header)
	}
	n, err := io.Copy(w, resp.Body)
	if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET) {
		// The daemon closed the connection mid-stream: it stopped.
		return n, errDaemonGone
	}
	return n, err
}

// changes follows GET /v1/events, calling each for every change the
// daemon sends, until the daemon ends the stream (nil), ctx ends, or the
// connection fails (errDaemonGone where the daemon went away). A daemon without the call answers an *apiError whose
// status is 404.
func (c *client) changes(ctx context.Context, each func(supervisor.Change)) error {
	hc := &http.Client{Transport: c.http.Transport} // no overall timeout: a stream
	resp, err := c.open(ctx, hc, http.MethodGet, "/events", nil, nil)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		var ch supervisor.Change
		if err := json.Unmarshal(sc.Bytes(), &ch); err != nil {
			return fmt.Errorf("read the daemon's changes: %w", err)
		}
		each(ch)
	}
	if err := sc.Err(); errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET) {
		// The daemon closed the connection mid-stream: it went away
		// (killed: one that stops ends the stream itself).
		return errDaemonGone
	}
	return sc.Err()
}

// open sends one request and returns a 2xx answer; any other is an
// *apiError, saying what the daemon said.
func (c *client) open(ctx context.Context, hc *http.Client, method, path string, query url.Values, body []byte) (*http.Response, error) {
	u := "http://berth" + supervisor.APIVersion + path
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	var r io.Reader
	if body != nil {
		r = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, r)
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := hc.Do(req)
	if err != nil {
		var op *net.OpError
		if errors.Is(err, syscall.EACCES) {
			return nil, denied(c.socket)
		}
		if errors.As(err, &op) && op.Op == "dial" {
			return nil, &noDaemonError{sockets: c.sockets, stale: c.stale, notSocket: c.notSocket, notSocketKind: c.notSocketKind, err: err}
		}
		if ctx.Err() == nil && goneBeforeAnswer(err) {
			// It took the request and closed the connection before
			// answering (trial AT: Go's bare "EOF", exit 1).
			return nil, &noAnswerError{method: method, path: path, socket: c.socket, err: err}
		}
		return nil, err
	}
	if resp.StatusCode < 400 {
		return resp, nil
	}
	defer resp.Body.Close()
	answer, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	var e supervisor.APIError
	if json.Unmarshal(answer, &e) != nil || e.Error == "" {
		e.Error = fmt.Sprintf("the daemon answered %s", resp.Status)
	}
	if resp.StatusCode == http.StatusNotFound && e.Code != supervisor.CodeNoSuchJob && e.Code != supervisor.CodeNoSuchRun {
		// The call itself is unknown: the daemon predates this client.
		e.Error = msgDaemonTooOld(c.socket, method+" "+supervisor.APIVersion+path)
	}
	return nil, &apiError{status: resp.StatusCode, code: e.Code, msg: e.Error}
}

func (c *client) get(path string, query url.Values, out any) error {
	return c.call(http.MethodGet, path, query, out)
}

func (c *client) post(path string, out any) error {
	return c.call(http.MethodPost, path, nil, out)
}

// codeNoAnswer is the --json code of a request a daemon took and did not
// answer (noAnswerError).
const codeNoAnswer = "no_answer"

// fail prints what went wrong with a call and returns the exit code.
func (c *cli) fail(err error) int {
	var nd *noDaemonError
	var ae *apiError
	var de *deniedError
	var na *noAnswerError
	switch {
	case errors.As(err, &de):
		c.failCode = "denied"
		if de.blocked != "" {
			fmt.Fprintln(c.stderr, msgSocketBlocked(de.socket, de.blocked))
		} else {
			fmt.Fprintln(c.stderr, msgSocketDenied(de.socket, de.group))
		}
		return exitFailed
	case errors.Is(err, errDaemonGone):
		fmt.Fprintln(c.stderr, msgDaemonGone())
		return exitNoDaemon
	case errors.As(err, &na):
		// No daemon answered, as when none is there; but what was asked
		// may have been done: its own code, for a script to tell.
		c.failCode = codeNoAnswer
		if na.timeout > 0 {
			fmt.Fprintln(c.stderr, msgNoAnswerInTime(na.socket, na.asked(), na.timeout))
		} else {
			fmt.Fprintln(c.stderr, msgGoneBeforeAnswer(na.socket, na.asked()))
		}
		return exitNoDaemon
	case errors.As(err, &nd) && nd.stale != "":
		fmt.Fprintln(c.stderr, msgNothingListens(nd.stale))
		return exitNoDaemon
	case errors.As(err, &nd) && nd.notSocket != "":
		fmt.Fprintln(c.stderr, msgNotASocket(nd.notSocket, nd.notSocketKind))
		return exitNoDaemon
	case errors.As(err, &nd):
		fmt.Fprintln(c.stderr, msgNoDaemon(nd.sockets...))
		return exitNoDaemon
	case errors.As(err, &ae):
		c.failCode = ae.code
		// The daemon's sentence may quote a job file (a refused start
		// gives the declaration's error): one line, escaped.
		fmt.Fprintln(c.stderr, "berth: "+escapeText(ae.msg))
		if ae.code == supervisor.CodeStopping {
			return exitNoDaemon // in a moment there is none: what to ask again is the same
		}
		return exitFailed
	case errors.Is(err, io.ErrUnexpectedEOF):
		// Half an answer (trial AN: a bare "unexpected EOF").
		fmt.Fprintln(c.stderr, msgAnswerCut())
		return exitFailed
	default:
		fmt.Fprintln(c.stderr, "berth: "+err.Error())
		return exitFailed
	}
}
