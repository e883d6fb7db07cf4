package supervisor

import (
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/berthd/berth/supervisor/testkit"
)

// TestSocketBoundAgain: a control socket whose path is removed is bound
// again at the next reload (SIGHUP, systemctl reload), and said; another
// file put at the path is left alone, and said once.
func TestSocketBoundAgain(t *testing.T) {
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
