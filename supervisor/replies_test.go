package supervisor

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/berthd/berth/supervisor/ctlsock"
	"github.com/berthd/berth/supervisor/testkit"
)

// TestUnreadReplyLetGo: a client that asks for a large reply and reads
// nothing has its connection closed once the reply's time to be written
// is over, and what the reply held goes with it (trial AL: 64 such
// connections held 430 MB of the daemon's for as long as they stayed);
// a stream is not cut so, nor is the next reply on a connection kept.
func TestUnreadReplyLetGo(t *testing.T) {
	t.Parallel()
	sock := filepath.Join(t.TempDir(), "berth.sock")
	// Enough jobs that the status outgrows what the sockets buffer.
	d, _ := runDaemon(t, `for i = 1, 3000 do job ("job-" .. i) { cmd = "true", enabled = false, description = string.rep("d", 200) } end`, func(cfg *Config) {
		l, err := net.Listen("unix", sock)
		if err != nil {
			t.Fatal(err)
		}
		cfg.Listener = l
		cfg.replyWriteTime = time.Second
	})
	waitJob(t, d, "job-3000", "disabled", func(js JobStatus) bool { return js.State == "disabled" })

	c, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	raw, err := c.(*net.UnixConn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	_ = raw.Control(func(fd uintptr) { _ = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUF, 4096) })
	if _, err := io.WriteString(c, "GET "+APIVersion+"/status HTTP/1.1\r\nHost: berth\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	// Another client is answered meanwhile.
	if resp, err := unixClient(sock).Get("http://berth" + APIVersion + "/jobs/job-1"); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("another client's call while a reply waits to be read: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}
	// The daemon closes its end, with the reply unread (POLLRDHUP: the
	// peer is done writing, whatever is left to read).
	closed := func() bool {
		hup := false
		_ = raw.Control(func(fd uintptr) {
			fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLRDHUP}}
			if n, err := unix.Poll(fds, 0); err == nil && n == 1 {
				hup = fds[0].Revents&(unix.POLLRDHUP|unix.POLLHUP) != 0
			}
		})
		return hup
	}
	testkit.WaitFor(t, 20*time.Second, "the connection of a reply nobody reads closed", closed)
	got, _ := io.ReadAll(c)
	resp, err := unixClient(sock).Get("http://berth" + APIVersion + "/status")
	if err != nil {
		t.Fatal(err)
	}
	whole, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	if len(got) == 0 || len(got) >= len(whole) {
		t.Errorf("read %d bytes of the cut reply, want some, and fewer than the status's %d", len(got), len(whole))
	}
}

// TestReplySlots: a person has repliesPerUID replies under way at once;
// the next waits for one of them, or for its client to go; another
// person's are theirs.
func TestReplySlots(t *testing.T) {
	t.Parallel()
	s := perCaller{n: repliesPerUID}
	var releases []func()
	for range repliesPerUID {
		release, ok := s.take(context.Background(), 1001)
		if !ok {
			t.Fatal("a slot refused below the bound")
		}
		releases = append(releases, release)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, ok := s.take(ctx, 1001); ok {
		t.Fatal("a slot past the bound")
	}
	if release, ok := s.take(context.Background(), 1002); !ok {
		t.Fatal("another uid's slot refused")
	} else {
		release()
	}
	got := make(chan bool)
	go func() {
		_, ok := s.take(context.Background(), 1001)
		got <- ok
	}()
	releases[0]()
	if !<-got {
		t.Error("a slot given back is not taken by the one waiting")
	}
}

// TestStreamNotCut: a stream has no time to be written, even on a
// connection that had a reply before it.
func TestStreamNotCut(t *testing.T) {
	t.Parallel()
	sock := filepath.Join(t.TempDir(), "berth.sock")
	d, _ := runDaemon(t, `job "a" { cmd = "true", enabled = false }`, func(cfg *Config) {
		l, err := net.Listen("unix", sock)
		if err != nil {
			t.Fatal(err)
		}
		cfg.Listener = l
		cfg.replyWriteTime = 100 * time.Millisecond
	})
	waitJob(t, d, "a", "disabled", func(js JobStatus) bool { return js.State == "disabled" })
	c, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	br := bufio.NewReader(c)
	get := func(path string) *http.Response {
		t.Helper()
		if _, err := io.WriteString(c, "GET "+APIVersion+path+" HTTP/1.1\r\nHost: berth\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		return resp
	}
	resp := get("/jobs/a")
	if _, err := io.Copy(io.Discard, resp.Body); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("the reply: %d %v", resp.StatusCode, err)
	}
	resp.Body.Close()
	events := get("/events") // ended as the connection is closed
	lines := bufio.NewScanner(events.Body)
	if !lines.Scan() {
		t.Fatalf("the stream's first line: %v", lines.Err())
	}
	// Not a wait for something to happen: a reply's time must be past.
	<-time.After(200 * time.Millisecond)
	d.feed.publish(ChangeStatus)
	if !lines.Scan() {
		t.Fatalf("the stream ended once a reply's time was over: %v", lines.Err())
	}
}

// TestStreams: only the events and a job's output are streams: not a job
// named logs, nor a person's (alice%2Flogs), whose views are replies.
func TestStreams(t *testing.T) {
	t.Parallel()
	for path, want := range map[string]bool{
		"/v1/events": true, "/v1/jobs/train/logs": true, "/v1/jobs/alice%2Ftrain/logs": true,
		"/v1/jobs/logs": false, "/v1/jobs/alice%2Flogs": false, "/v1/status": false, "/v1/jobs//logs": false,
		"/v1/jobs/a/b/logs": false,
	} {
		r := httptest.NewRequest(http.MethodGet, "http://berth"+path, nil)
		if got := streams(r); got != want {
			t.Errorf("GET %s a stream: %v, want %v", path, got, want)
		}
	}
	if streams(httptest.NewRequest(http.MethodPost, "http://berth/v1/events", nil)) {
		t.Error("POST /v1/events taken for a stream")
	}
}

// TestRepliesBoundViewsNotCalls: a person's views (GET) past the bound
// wait their turn; a call that changes something does not wait behind
// them (trial AN: a stop waited 27 s behind four unread statuses), nor
// does root's view.
func TestRepliesBoundViewsNotCalls(t *testing.T) {
	t.Parallel()
	d := &Daemon{replies: perCaller{n: repliesPerUID}}
	release := make(chan struct{})
	entered := make(chan string, 16)
	h := d.boundReplies(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		entered <- r.Method + " " + r.URL.Path
		if r.URL.Path == "/v1/status" {
			<-release
		}
	}))
	as := func(uid uint32, method, path string) func() {
		r := httptest.NewRequest(method, "http://berth"+path, nil)
		r = r.WithContext(context.WithValue(r.Context(), peerKey{}, ctlsock.Peer{Ucred: unix.Ucred{Uid: uid}}))
		done := make(chan struct{})
		go func() {
			defer close(done)
			h.ServeHTTP(httptest.NewRecorder(), r)
		}()
		return func() { <-done }
	}
	var waits []func()
	for range repliesPerUID {
		waits = append(waits, as(1001, "GET", "/v1/status"))
		<-entered
	}
	fifth := as(1001, "GET", "/v1/jobs")
	as(1001, "POST", "/v1/jobs/x/stop")()
	if got := <-entered; got != "POST /v1/jobs/x/stop" {
		t.Fatalf("the stop behind four views: %s went first", got)
	}
	as(0, "GET", "/v1/jobs")()
	if got := <-entered; got != "GET /v1/jobs" {
		t.Fatalf("root's view: %s", got)
	}
	select {
	case got := <-entered:
		t.Fatalf("a fifth view of the same uid went through: %s", got)
	default:
	}
	close(release)
	fifth()
	if got := <-entered; got != "GET /v1/jobs" {
		t.Errorf("the fifth view, once one ended: %s", got)
	}
	for _, w := range waits {
		w()
	}
}
