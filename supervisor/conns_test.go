package supervisor

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
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/berthd/berth/supervisor/ctlsock"
	"github.com/berthd/berth/supervisor/testkit"
)

// answerWithin is how long a connection is given for its answer: far past
// what an answer takes, so that reaching it means it was left hanging
// (before the caps, a status took over 15 s behind a thousand idle
// connections).
const answerWithin = 5 * time.Second

// TestControlSocketKeepsReserve: a client that opens connections in a loop
// and keeps every one it is served on (as an HTTP client that leaks its
// connections does) is refused past its cap — at once, with the API's
// error, the connection closed — while the daemon keeps the descriptors it
// works with: with the connections held, a reload reads the jobs directory
// and a new file, and starts a job with its log file. Closing the
// connections frees their slots.
//
// The test lowers its own limit on open files to 512 and caps the socket
// as the daemon would under that limit. Uncapped, the loop's connections
// (two descriptors each here, the client's and the daemon's) take every
// descriptor the process may open, and the reload cannot read the jobs
// directory.
func TestControlSocketKeepsReserve(t *testing.T) {
	const nofile = 512
	var old unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &old); err != nil {
		t.Fatal(err)
	}
	if old.Cur < nofile {
		t.Skipf("the limit on open files is %d already, under the test's %d", old.Cur, nofile)
	}
	// Registered first, so that it runs last: after the daemon stopped.
	// (Setting the limit tells the Go runtime to stop giving children the
	// limit the test binary started with; no test here depends on that.)
	t.Cleanup(func() {
		if err := unix.Prlimit(0, unix.RLIMIT_NOFILE, &old, nil); err != nil {
			t.Errorf("restore RLIMIT_NOFILE: %v", err)
		}
	})

	lim := ctlsock.LimitsFor(nofile)
	// No idle connection is closed for being idle while its uid asks for
	// more: the test holds its connections for as long as it likes.
	lim.IdleAtLimit = time.Hour
	d, jobsDir, sock := socketDaemon(t, lim)
	if err := unix.Prlimit(0, unix.RLIMIT_NOFILE, &unix.Rlimit{Cur: nofile, Max: old.Max}, nil); err != nil {
		t.Fatalf("lower RLIMIT_NOFILE: %v", err)
	}

	// A job file to come, under a name the daemon ignores: renaming it
	// into place later takes no descriptor, which the test may lack then
	// if the daemon does.
	pending, more := filepath.Join(jobsDir, "more.lua.new"), filepath.Join(jobsDir, "more.lua")
	if err := writeFile(pending, []byte(`job "more" { cmd = "echo started" }`), 0o600); err != nil {
		t.Fatal(err)
	}

	// The test runs as the daemon's own uid, which has the privileged
	// allowance past its share.
	want := lim.PerUID + lim.Privileged
	var held []*apiConn
	refused := 0
	var slowest time.Duration
	for i := range nofile {
		c, err := dialAPI(sock)
		if err != nil {
			// Out of descriptors (this process is the client too): see
			// whether the daemon still works with those it has.
			t.Errorf("connection %d, %d held: %v", i+1, len(held), err)
			break
		}
		began := time.Now()
		status, apiErr, err := c.get("/status")
		switch {
		case err != nil:
			c.Close()
			t.Fatalf("connection %d, %d held: no answer: %v", i+1, len(held), err)
		case status == http.StatusOK:
			held = append(held, c)
		case status == http.StatusTooManyRequests && apiErr.Code == CodeTooManyConnections:
			refused++
			slowest = max(slowest, time.Since(began))
			if !c.closedByDaemon() {
				t.Errorf("connection %d: refused but left open", i+1)
			}
			c.Close()
		default:
			c.Close()
			t.Fatalf("connection %d, %d held: %d %+v, want 200 or 429 %s", i+1, len(held), status, apiErr, CodeTooManyConnections)
		}
	}
	t.Logf("%d connections held, %d refused, the slowest refusal in %v", len(held), refused, slowest)
	if len(held) != want {
		t.Errorf("%d connections held, want %d (%d per uid, %d more for the daemon's own uid)", len(held), want, lim.PerUID, lim.Privileged)
	}
	for _, c := range held[:3] {
		if status, _, err := c.get("/status"); err != nil || status != http.StatusOK {
			t.Errorf("a held connection asked again: %d, %v; want it served", status, err)
		}
	}

	// The daemon works with its files while the connections are held.
	if err := os.Rename(pending, more); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	res, err := d.Reload(ctx)
	if err != nil || !slices.Contains(res.Added, "more") || len(res.Errors) != 0 {
		t.Fatalf("reload with %d connections held: %+v, %v; want job more added", len(held), res, err)
	}
	waitJob(t, d, "more", "done", func(js JobStatus) bool { return js.State == "done" })
	if b, err := os.ReadFile(filepath.Join(d.cfg.StateDir, "logs", "more.log")); err != nil || !strings.Contains(string(b), "started") {
		t.Errorf("job more's log: %q, %v; want its output", b, err)
	}

	for _, c := range held {
		c.Close()
	}
	testkit.WaitFor(t, answerWithin, "a connection served once the held ones closed", func() bool {
		c, err := dialAPI(sock)
		if err != nil {
			return false
		}
		defer c.Close()
		status, _, err := c.get("/status")
		return err == nil && status == http.StatusOK
	})
}

// socketDaemon runs a daemon with a control socket capped at lim, over an
// empty jobs directory.
func socketDaemon(t *testing.T, lim ctlsock.Limits) (d *Daemon, jobsDir, sock string) {
	t.Helper()
	sock = filepath.Join(t.TempDir(), "berth.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	d, jobsDir = runDaemon(t, "", func(cfg *Config) { cfg.Listener, cfg.ControlLimits = l, lim })
	return d, jobsDir, sock
}

// apiConn is one connection to the control socket, kept alive between
// requests as an HTTP client keeps it.
type apiConn struct {
	net.Conn
	br *bufio.Reader
}

func dialAPI(sock string) (*apiConn, error) {
	c, err := net.DialTimeout("unix", sock, answerWithin)
	if err != nil {
		return nil, err
	}
	return &apiConn{Conn: c, br: bufio.NewReader(c)}, nil
}

// get asks for path under the API and returns the status and, for an
// error, the API's error.
func (c *apiConn) get(path string) (int, APIError, error) {
	if err := c.SetDeadline(time.Now().Add(answerWithin)); err != nil {
		return 0, APIError{}, err
	}
	if _, err := fmt.Fprintf(c, "GET %s%s HTTP/1.1\r\nHost: berth\r\n\r\n", APIVersion, path); err != nil {
		return 0, APIError{}, fmt.Errorf("write the request: %w", err)
	}
	resp, err := http.ReadResponse(c.br, nil)
	if err != nil {
		return 0, APIError{}, fmt.Errorf("read the answer: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, APIError{}, fmt.Errorf("read the answer: %w", err)
	}
	var e APIError
	if resp.StatusCode >= 400 {
		if err := json.Unmarshal(body, &e); err != nil {
			return resp.StatusCode, e, fmt.Errorf("the error %q is not the API's: %w", body, err)
		}
	}
	return resp.StatusCode, e, nil
}

// closedByDaemon reports whether the daemon has closed the connection.
func (c *apiConn) closedByDaemon() bool {
	if err := c.SetReadDeadline(time.Now().Add(answerWithin)); err != nil {
		return false
	}
	_, err := c.br.ReadByte()
	return errors.Is(err, io.EOF) || errors.Is(err, unix.ECONNRESET)
}

// TestCheckBodyTrickled: a check whose body does not come whole in time
// is answered, and its connection let go; trickled a byte at a time it
// held the connection, never idle, for as long as its sender liked.
func TestCheckBodyTrickled(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "berth.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	runDaemon(t, "", func(cfg *Config) {
		cfg.Listener, cfg.ControlLimits, cfg.checkBodyTime = l, ctlsock.LimitsFor(1024), 200*time.Millisecond
	})
	c, err := dialAPI(sock)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.SetDeadline(time.Now().Add(answerWithin)); err != nil {
		t.Fatal(err)
	}
	if _, err := fmt.Fprintf(c, "POST %s/check HTTP/1.1\r\nHost: berth\r\nContent-Length: 1000\r\n\r\n{", APIVersion); err != nil {
		t.Fatal(err)
	}
	// Nothing more comes.
	resp, err := http.ReadResponse(c.br, nil)
	switch {
	case errors.Is(err, os.ErrDeadlineExceeded):
		t.Fatalf("no answer within %v to a body that stopped coming", answerWithin)
	case err == nil:
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("a body that stopped coming: %s, want 400", resp.Status)
		}
	}
}
