package supervisor

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"
	"golang.org/x/sys/unix"

	"github.com/berthd/berth/supervisor/ctlsock"
	"github.com/berthd/berth/supervisor/testkit"
)

// TestSocketBoundAgain: a control socket whose path is removed is bound
// again at the next reload (SIGHUP, systemctl reload), and said; another
// file put at the path is left alone, and said once.
func TestSocketBoundAgain(t *testing.T) {
	t.Parallel()
	sock := filepath.Join(t.TempDir(), "berth.sock")
	logs := &testkit.Buffer{}
	d, _ := runDaemon(t, "", func(cfg *Config) {
		l, err := net.Listen("unix", sock)
		if err != nil {
			t.Fatal(err)
		}
		cfg.Listener = l
		cfg.Relisten = func() (net.Listener, error) { return net.Listen("unix", sock) }
		cfg.Logger = hclog.New(&hclog.LoggerOptions{Output: logs, Level: hclog.Info})
	})
	status := func() int {
		t.Helper()
		resp, err := unixClient(sock).Get("http://berth" + APIVersion + "/status")
		if err != nil {
			return 0
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := status(); code != http.StatusOK {
		t.Fatalf("status over the socket: %d", code)
	}
	if err := os.Remove(sock); err != nil {
		t.Fatal(err)
	}
	if code := status(); code != 0 {
		t.Fatalf("status over a removed socket: %d", code)
	}
	reload(t, d)
	if code := status(); code != http.StatusOK {
		t.Errorf("status over the socket bound again: %d", code)
	}
	if !strings.Contains(logs.String(), "the control socket was removed; bound it again") {
		t.Errorf("not said:\n%s", logs)
	}

	if err := os.Remove(sock); err != nil {
		t.Fatal(err)
	}
	if err := writeFile(sock, []byte("theirs"), 0o600); err != nil {
		t.Fatal(err)
	}
	reload(t, d)
	reload(t, d)
	if b, err := os.ReadFile(sock); err != nil || string(b) != "theirs" {
		t.Errorf("the file at the socket's path: %q, %v; want it left alone", b, err)
	}
	if n := strings.Count(logs.String(), "another file is at the control socket's path"); n != 1 {
		t.Errorf("said %d times, want once:\n%s", n, logs)
	}
}

// TestWrongMethod: a path the daemon serves, asked with another method,
// is answered 405 with the methods it takes, not "no such call" alone;
// a path it does not serve is 404.
func TestWrongMethod(t *testing.T) {
	t.Parallel()
	d, _ := runDaemon(t, `job "train" { cmd = "sleep 600", cpus = 0 }`, nil)
	for _, c := range []struct {
		method, path string
		code         int
		allow, says  string
	}{
		{"GET", jobPath("train") + "/stop", http.StatusMethodNotAllowed, "POST", "/v1/jobs/train/stop takes POST"},
		{"POST", "/status", http.StatusMethodNotAllowed, "GET, HEAD", "/v1/status takes GET"},
		{"DELETE", jobPath("train"), http.StatusMethodNotAllowed, "GET, HEAD", "/v1/jobs/train takes GET"},
		{"GET", "/nothing", http.StatusNotFound, "", "no such call: GET /v1/nothing (the daemon speaks /v1)"},
	} {
		req := httptest.NewRequest(c.method, "http://berth"+APIVersion+c.path, nil)
		req = req.WithContext(context.WithValue(req.Context(), peerKey{}, ctlsock.Peer{Ucred: unix.Ucred{Pid: int32(os.Getpid())}, GroupsKnown: true}))
		rec := httptest.NewRecorder()
		d.api().ServeHTTP(rec, req)
		if rec.Code != c.code || rec.Header().Get("Allow") != c.allow || !strings.Contains(rec.Body.String(), c.says) {
			t.Errorf("%s %s: %d, Allow %q, %s; want %d, Allow %q, %q", c.method, c.path, rec.Code, rec.Header().Get("Allow"), rec.Body.String(), c.code, c.allow, c.says)
		}
	}
}
