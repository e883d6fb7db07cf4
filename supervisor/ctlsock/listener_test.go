package ctlsock

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"golang.org/x/sys/unix"

	"github.com/berthd/berth/supervisor/testkit"
)

// answerWithin is how long a test waits for any answer: far past what an
// answer takes, so that reaching it means the connection was left hanging.
const answerWithin = 5 * time.Second

// harness serves a capped socket in a temporary directory. Its clients
// bind their end of each connection to a name that says which uid they
// stand for, and the listener reads the uid from that name: one test
// process can be several users.
type harness struct {
	t    *testing.T
	dir  string
	sock string
	l    *Listener
	logs *testkit.Buffer
	clk  *fakeClock
	seq  int
}

func serve(t *testing.T, lim Limits, privileged ...uint32) *harness {
	t.Helper()
	return serveWith(t, lim, Options{Privileged: append([]uint32{}, privileged...), peer: uidFromName})
}

// serveWith serves with opts's Privileged and peer; the rest is the
// harness's.
func serveWith(t *testing.T, lim Limits, opts Options) *harness {
	t.Helper()
	dir := t.TempDir()
	h := &harness{t: t, dir: dir, sock: filepath.Join(dir, "s"), logs: &testkit.Buffer{},
		clk: &fakeClock{now: time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)}}
	inner, err := net.Listen("unix", h.sock)
	if err != nil {
		t.Fatal(err)
	}
	opts.Limits = lim
	opts.Logger = hclog.New(&hclog.LoggerOptions{Output: h.logs, DisableTime: true, Color: hclog.ColorOff})
	opts.Refuse = http.HandlerFunc(refuseJSON)
	opts.Now = h.clk.Now
	h.l = Wrap(inner, opts)
	srv := &http.Server{
		// The answer names the uid the connection was admitted as.
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			cred, _ := r.Context().Value(credKey{}).(Peer)
			fmt.Fprintf(w, "uid %d", cred.Uid)
		}),
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			if cred, ok := PeerOf(c); ok {
				ctx = context.WithValue(ctx, credKey{}, cred)
			}
			return ctx
		},
		ConnState:   h.l.ConnState,
		IdleTimeout: time.Hour,
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(h.l) }()
	t.Cleanup(func() {
		srv.Close()
		// A test that closed the listener first ends Serve with that.
		if err := <-served; !errors.Is(err, http.ErrServerClosed) && !errors.Is(err, net.ErrClosed) {
			t.Errorf("Serve: %v", err)
		}
	})
	return h
}

type credKey struct{}

// refuseJSON answers as the daemon does: 429 for a uid's own cap, 503 for
// the total's, with the refusal as JSON.
func refuseJSON(w http.ResponseWriter, r *http.Request) {
	ref, ok := RefusalOf(r.Context())
	if !ok {
		http.Error(w, "no refusal in the context", http.StatusInternalServerError)
		return
	}
	status := http.StatusTooManyRequests
	if ref.Total {
		status = http.StatusServiceUnavailable
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(ref)
}

// uidFromName reads the uid from the name the client bound: u1001-3.
func uidFromName(c net.Conn) (Peer, error) {
	a, ok := c.RemoteAddr().(*net.UnixAddr)
	if !ok {
		return Peer{}, errNotUnix
	}
	name, _, _ := strings.Cut(strings.TrimPrefix(filepath.Base(a.Name), "u"), "-")
	uid, err := strconv.ParseUint(name, 10, 32)
	if err != nil {
		return Peer{}, fmt.Errorf("client name %q: %w", a.Name, err)
	}
	return Peer{Ucred: unix.Ucred{Uid: uint32(uid), Pid: 1}}, nil
}

// client is one connection, as uid.
type client struct {
	t   *testing.T
	uid uint32
	c   *net.UnixConn
	br  *bufio.Reader
}

func (h *harness) dial(uid uint32) *client {
	h.t.Helper()
	h.seq++
	local := &net.UnixAddr{Name: filepath.Join(h.dir, fmt.Sprintf("u%d-%d", uid, h.seq)), Net: "unix"}
	c, err := net.DialUnix("unix", local, &net.UnixAddr{Name: h.sock, Net: "unix"})
	if err != nil {
		h.t.Fatalf("dial as uid %d: %v", uid, err)
	}
	h.t.Cleanup(func() { c.Close() })
	return &client{t: h.t, uid: uid, c: c, br: bufio.NewReader(c)}
}

// get asks for / on the connection and returns the status and body; the
// connection stays open (keep-alive) unless the server closes it.
func (c *client) get() (int, string) {
	c.t.Helper()
	if err := c.c.SetDeadline(time.Now().Add(answerWithin)); err != nil {
		c.t.Fatal(err)
	}
	if _, err := io.WriteString(c.c, "GET / HTTP/1.1\r\nHost: berth\r\n\r\n"); err != nil {
		c.t.Fatalf("uid %d: write the request: %v", c.uid, err)
	}
	resp, err := http.ReadResponse(c.br, nil)
	if err != nil {
		c.t.Fatalf("uid %d: no answer: %v", c.uid, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		c.t.Fatalf("uid %d: read the answer: %v", c.uid, err)
	}
	return resp.StatusCode, strings.TrimSpace(string(body))
}

// admitted asks and wants the connection served.
func (c *client) admitted() {
	c.t.Helper()
	if status, body := c.get(); status != http.StatusOK || body != fmt.Sprintf("uid %d", c.uid) {
		c.t.Fatalf("uid %d: %d %q, want 200 %q", c.uid, status, body, fmt.Sprintf("uid %d", c.uid))
	}
}

// refused asks and wants the refusal want, answered at once and followed
// by the end of the connection.
func (c *client) refused(status int, want Refusal) {
	c.t.Helper()
	got, body := c.get()
	var ref Refusal
	if err := json.Unmarshal([]byte(body), &ref); err != nil || got != status || ref != want {
		c.t.Fatalf("uid %d: %d %s, want %d %+v", c.uid, got, body, status, want)
	}
	c.closed()
}

// closed wants the server to have closed the connection.
func (c *client) closed() {
	c.t.Helper()
	if err := c.c.SetReadDeadline(time.Now().Add(answerWithin)); err != nil {
		c.t.Fatal(err)
	}
	if n, err := c.br.Read(make([]byte, 1)); !errors.Is(err, io.EOF) && !errors.Is(err, unix.ECONNRESET) {
		c.t.Fatalf("uid %d: read %d bytes, %v; want the connection closed", c.uid, n, err)
	}
}

// counts are the listener's books: admitted connections of uid, of all
// uids on the shared caps, on the privileged allowance, and refusals under
// way.
func (h *harness) counts(uid uint32) (open, total, priv, refusing int) {
	h.l.mu.Lock()
	defer h.l.mu.Unlock()
	return len(h.l.byUID[uid]), h.l.total, h.l.priv, h.l.refusing
}

// idle is how many of uid's connections the listener knows to be idle.
func (h *harness) idle(uid uint32) int {
	h.l.mu.Lock()
	defer h.l.mu.Unlock()
	n := 0
	for c := range h.l.byUID[uid] {
		if !c.idleSince.IsZero() {
			n++
		}
	}
	return n
}

// waitOpen waits for the listener to count want connections of uid: a
// connection a client closed is given back when the server sees it.
func (h *harness) waitOpen(uid uint32, want int) {
	h.t.Helper()
	testkit.WaitFor(h.t, answerWithin, fmt.Sprintf("%d connections of uid %d open", want, uid), func() bool {
		open, _, _, _ := h.counts(uid)
		return open == want
	})
}

func (h *harness) warnings() []string {
	var out []string
	for _, line := range strings.Split(h.logs.String(), "\n") {
		if strings.Contains(line, "[WARN]") {
			out = append(out, line)
		}
	}
	return out
}

func testLimits(perUID, total int) Limits {
	return Limits{PerUID: perUID, Total: total, Privileged: 2, Refusing: 4, IdleAtLimit: time.Minute}
}

// TestPerUIDCap: a uid past its cap is answered 429 at once and the
// connection closed; another uid is still served; a connection closed
// frees its slot.
func TestPerUIDCap(t *testing.T) {
	h := serve(t, testLimits(3, 10))
	var held []*client
	for range 3 {
		c := h.dial(1001)
		c.admitted()
		held = append(held, c)
	}
	h.dial(1001).refused(http.StatusTooManyRequests, Refusal{UID: 1001, Open: 3, Limit: 3})
	h.dial(1002).admitted()
	for _, c := range held {
		c.admitted() // the held connections are still served
	}

	held[0].c.Close()
	h.waitOpen(1001, 2)
	h.dial(1001).admitted()
	if open, total, priv, refusing := h.counts(1001); open != 3 || total != 4 || priv != 0 {
		t.Errorf("uid 1001 holds %d, all %d, privileged %d, refusing %d; want 3, 4, 0", open, total, priv, refusing)
	}
}

// TestTotalCap: when all uids together hold Total, everyone else is
// answered 503, except the privileged uids on their allowance.
func TestTotalCap(t *testing.T) {
	h := serve(t, testLimits(3, 4), 7)
	var held []*client
	for _, uid := range []uint32{1001, 1001, 1001, 1002} {
		c := h.dial(uid)
		c.admitted()
		held = append(held, c)
	}
	h.dial(1003).refused(http.StatusServiceUnavailable, Refusal{UID: 1003, Open: 0, Limit: 4, Total: true})
	h.dial(1002).refused(http.StatusServiceUnavailable, Refusal{UID: 1002, Open: 1, Limit: 4, Total: true})
	h.dial(1001).refused(http.StatusTooManyRequests, Refusal{UID: 1001, Open: 3, Limit: 3})

	// uid 7 is privileged: it has two more, past the total.
	h.dial(7).admitted()
	h.dial(7).admitted()
	h.dial(7).refused(http.StatusServiceUnavailable, Refusal{UID: 7, Open: 2, Limit: 4, Total: true})
	if _, total, priv, _ := h.counts(7); total != 4 || priv != 2 {
		t.Errorf("all %d, privileged %d; want 4 and 2", total, priv)
	}

	held[0].c.Close()
	h.waitOpen(1001, 2)
	h.dial(1003).admitted()
}

// TestPrivilegedWithinShare: a privileged uid uses the shared caps first
// and its allowance only past its own cap.
func TestPrivilegedWithinShare(t *testing.T) {
	h := serve(t, testLimits(2, 10), 0)
	for range 4 {
		h.dial(0).admitted()
	}
	h.dial(0).refused(http.StatusTooManyRequests, Refusal{UID: 0, Open: 4, Limit: 2})
	if open, total, priv, _ := h.counts(0); open != 4 || total != 2 || priv != 2 {
		t.Errorf("root holds %d, %d shared and %d privileged; want 4, 2 and 2", open, total, priv)
	}
}

// TestPrivilegedAfterChurn: a privileged uid's share of the shared caps is
// counted apart from its allowance: once it closes a shared connection, it
// may open one again, whatever it holds on the allowance.
func TestPrivilegedAfterChurn(t *testing.T) {
	h := serve(t, testLimits(2, 10), 0)
	var held []*client
	for range 4 {
		c := h.dial(0)
		c.admitted()
		held = append(held, c)
	}
	held[0].c.Close() // a shared one: the first two were
	h.waitOpen(0, 3)
	h.dial(0).admitted()
	if open, total, priv, _ := h.counts(0); open != 4 || total != 2 || priv != 2 {
		t.Errorf("root holds %d, %d shared and %d privileged; want 4, 2 and 2", open, total, priv)
	}
}

// TestIdleReclaimedAtLimit: a uid at its cap that asks for more has its
// connections idle for IdleAtLimit closed, and its next connection is
// served; connections idle for less are kept.
func TestIdleReclaimedAtLimit(t *testing.T) {
	h := serve(t, testLimits(2, 10))
	held := []*client{h.dial(1001), h.dial(1001)}
	for _, c := range held {
		c.admitted()
	}
	testkit.WaitFor(t, answerWithin, "both connections idle", func() bool { return h.idle(1001) == 2 })

	h.clk.Advance(time.Minute - time.Millisecond)
	h.dial(1001).refused(http.StatusTooManyRequests, Refusal{UID: 1001, Open: 2, Limit: 2})
	for _, c := range held {
		c.admitted() // idle for less than IdleAtLimit: kept
	}
	testkit.WaitFor(t, answerWithin, "both connections idle again", func() bool { return h.idle(1001) == 2 })

	h.clk.Advance(time.Minute)
	h.dial(1001).refused(http.StatusTooManyRequests, Refusal{UID: 1001, Open: 2, Limit: 2})
	for _, c := range held {
		c.closed()
	}
	if open, total, _, _ := h.counts(1001); open != 0 || total != 0 {
		t.Errorf("uid 1001 holds %d, all %d after the reclaim; want 0", open, total)
	}
	h.dial(1001).admitted()
}

// TestRefusingFullClosesAtOnce: past Refusing refusals under way, a
// connection over a cap is closed unanswered at once, never left waiting.
func TestRefusingFullClosesAtOnce(t *testing.T) {
	lim := testLimits(1, 10)
	lim.Refusing = 1
	h := serve(t, lim)
	h.dial(1001).admitted()
	silent := h.dial(1001) // refused, and sends nothing: it holds the one refusal
	testkit.WaitFor(t, answerWithin, "a refusal under way", func() bool {
		_, _, _, refusing := h.counts(1001)
		return refusing == 1
	})
	h.dial(1001).closed()

	silent.c.Close()
	testkit.WaitFor(t, answerWithin, "no refusal under way", func() bool {
		_, _, _, refusing := h.counts(1001)
		return refusing == 0
	})
	h.dial(1001).refused(http.StatusTooManyRequests, Refusal{UID: 1001, Open: 1, Limit: 1})
	if w := h.warnings(); len(w) != 1 || !strings.Contains(w[0], "refused=1 unanswered=0") {
		t.Errorf("warnings:\n%s\nwant one, for the first refusal", strings.Join(w, "\n"))
	}
}

// TestWarnOncePerUIDPerMinute: refusals are logged once a minute per uid
// at most, the next line counting those in between.
func TestWarnOncePerUIDPerMinute(t *testing.T) {
	h := serve(t, testLimits(1, 10))
	h.dial(1001).admitted()
	h.dial(1002).admitted()
	for range 5 {
		h.dial(1001).refused(http.StatusTooManyRequests, Refusal{UID: 1001, Open: 1, Limit: 1})
	}
	h.dial(1002).refused(http.StatusTooManyRequests, Refusal{UID: 1002, Open: 1, Limit: 1})
	// The server marks a connection idle after its answer is sent, so the
	// client may have read it first: idle, it is idle from before the
	// minute passes.
	testkit.WaitFor(t, answerWithin, "uid 1001's connection idle", func() bool { return h.idle(1001) == 1 })
	h.clk.Advance(time.Minute)
	h.dial(1001).refused(http.StatusTooManyRequests, Refusal{UID: 1001, Open: 1, Limit: 1})

	want := []string{
		"uid=1001 open=1 limit=1 limit_of=uid refused=1 unanswered=0 reclaimed_idle=0",
		"uid=1002 open=1 limit=1 limit_of=uid refused=1 unanswered=0 reclaimed_idle=0",
		// A minute on, the connection uid 1001 holds has been idle past
		// IdleAtLimit: it goes.
		"uid=1001 open=1 limit=1 limit_of=uid refused=5 unanswered=0 reclaimed_idle=1",
	}
	got := h.warnings()
	if len(got) != len(want) {
		t.Fatalf("warnings:\n%s\nwant %d", strings.Join(got, "\n"), len(want))
	}
	for i, w := range want {
		if !strings.HasSuffix(got[i], "control connections refused: over the limit: "+w) {
			t.Errorf("warning %d: %s\nwant it to end %q", i+1, got[i], w)
		}
	}
}

// TestUnknownPeer: a peer whose credentials cannot be read counts under
// one uid that no one has, and is never privileged.
func TestUnknownPeer(t *testing.T) {
	h := serveWith(t, testLimits(1, 10), Options{Privileged: []uint32{unknownUID},
		peer: func(net.Conn) (Peer, error) { return Peer{}, errNotUnix }})
	c := h.dial(1001)
	if status, body := c.get(); status != http.StatusOK || body != "uid 0" {
		t.Fatalf("%d %q, want 200 and no credentials", status, body)
	}
	h.dial(1002).refused(http.StatusTooManyRequests, Refusal{UID: unknownUID, Open: 1, Limit: 1})
}

// TestCloseEndsRefusals: closing the listener ends Accept and the refusals
// under way.
func TestCloseEndsRefusals(t *testing.T) {
	lim := testLimits(1, 10)
	h := serve(t, lim)
	h.dial(1001).admitted()
	silent := h.dial(1001)
	testkit.WaitFor(t, answerWithin, "a refusal under way", func() bool {
		_, _, _, refusing := h.counts(1001)
		return refusing == 1
	})
	if err := h.l.Close(); err != nil {
		t.Fatal(err)
	}
	silent.closed()
	if _, _, _, refusing := h.counts(1001); refusing != 0 {
		t.Errorf("%d refusals under way after Close, want 0", refusing)
	}
}

// TestPeerCredOfRealSocket: without a fake, the uid is the kernel's.
func TestPeerCredOfRealSocket(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "s")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	c, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	s, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	p, err := ReadPeer(s)
	if err != nil || int(p.Uid) != unix.Getuid() || int(p.Pid) != unix.Getpid() {
		t.Fatalf("ReadPeer: %+v %v, want uid %d pid %d", p, err, unix.Getuid(), unix.Getpid())
	}
	want, err := unix.Getgroups()
	if err != nil {
		t.Fatal(err)
	}
	got := make([]int, len(p.Groups))
	for i, g := range p.Groups {
		got[i] = int(g)
	}
	slices.Sort(want)
	slices.Sort(got)
	if !p.GroupsKnown || !slices.Equal(got, want) {
		t.Errorf("ReadPeer's groups: %v (known %v), want this process's %v", got, p.GroupsKnown, want)
	}
}

// TestPeerGroupsOutliveTheProcess: a peer's groups are the connection's,
// from when it was made, not those of whatever process has its pid now
// (trial AL: a person's connection, its process gone, had an
// administrator's rights once an administrator's process took the pid).
func TestPeerGroupsOutliveTheProcess(t *testing.T) {
	if sock := os.Getenv("BERTH_CTLSOCK_CONNECT"); sock != "" {
		// The child below: it connects, and ends.
		c, err := net.Dial("unix", sock)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Write([]byte("x")); err != nil {
			t.Fatal(err)
		}
		return
	}
	if unix.Getuid() != 0 {
		t.Skip("needs root, to start a process with other groups")
	}
	sock := filepath.Join(t.TempDir(), "s")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := l.Accept()
		if err != nil {
			t.Error(err)
		}
		accepted <- c
	}()
	child := exec.Command(os.Args[0], "-test.run=^TestPeerGroupsOutliveTheProcess$")
	child.Env = append(os.Environ(), "BERTH_CTLSOCK_CONNECT="+sock)
	child.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 0, Gid: 0, Groups: []uint32{4242, 4343}}}
	if out, err := child.CombinedOutput(); err != nil {
		t.Fatalf("the child: %v\n%s", err, out)
	}
	s := <-accepted
	if s == nil {
		return
	}
	defer s.Close()
	// The child is gone: /proc has nothing of it now.
	p, err := ReadPeer(s)
	if err != nil || int(p.Pid) != child.Process.Pid || !p.GroupsKnown || !slices.Equal(p.Groups, []uint32{4242, 4343}) {
		t.Errorf("ReadPeer once its process has ended: %+v %v, want pid %d and its groups 4242 4343", p, err, child.Process.Pid)
	}
}

type fakeClock struct {
	mu  sync.Mutex // guards now
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// TestReplace: a socket bound again at the path of one removed is served
// in its place, by the same caps; the one before is closed without
// removing the new one's path; once the listener is closed, a replacement
// is refused and closed.
func TestReplace(t *testing.T) {
	h := serve(t, testLimits(1, 8))
	held := h.dial(1001)
	held.admitted()
	if err := os.Remove(h.sock); err != nil {
		t.Fatal(err)
	}
	next, err := net.Listen("unix", h.sock)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.l.Replace(next); err != nil {
		t.Fatalf("Replace: %v", err)
	}
	if _, err := os.Stat(h.sock); err != nil {
		t.Fatalf("the new socket's path, after the old socket closed: %v", err)
	}
	h.dial(1002).admitted()
	// uid 1001's connection of the old socket is still counted.
	h.dial(1001).refused(http.StatusTooManyRequests, Refusal{UID: 1001, Open: 1, Limit: 1})
	held.admitted()

	if err := h.l.Close(); err != nil {
		t.Fatal(err)
	}
	late, err := net.Listen("unix", filepath.Join(h.dir, "late"))
	if err != nil {
		t.Fatal(err)
	}
	if err := h.l.Replace(late); !errors.Is(err, net.ErrClosed) {
		t.Errorf("Replace after Close: %v, want net.ErrClosed", err)
	}
	if _, err := late.Accept(); !errors.Is(err, net.ErrClosed) {
		t.Errorf("the replacement refused is not closed: %v", err)
	}
}
