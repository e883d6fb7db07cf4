package main

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
)

// scrapeText GETs url through client: Prometheus's text format, as a
// scraper reads it. (The families are parsed and checked one by one in the
// supervisor's own tests; here the same series are looked for as lines.)
func scrapeText(t *testing.T, client *http.Client, url string) string {
	t.Helper()
	resp, err := client.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s, %v", url, resp.Status, err)
	}
	return string(b)
}

// servingMetrics is the daemon's log line that names the address bound.
var servingMetrics = regexp.MustCompile(`serving metrics: address=(\S+)`)

// TestDaemonMetrics runs the berth binary with --metrics on a port the
// kernel picks, and scrapes it and the control socket alike: both say
// what the jobs did. The port closes with the daemon.
func TestDaemonMetrics(t *testing.T) {
	t.Parallel()
	d := newTestDaemon(t, map[string]string{
		"jobs.lua": `
job "ok"  { cmd = "exit 0", cpus = 1 }
job "bad" { cmd = "exit 2", cpus = 1 }
`,
		"broken.lua": `job "x" { cmd = `,
	})
	d.start(daemonOptions{args: []string{"--cpus", "2", "--metrics", "127.0.0.1:0"}})
	m := servingMetrics.FindStringSubmatch(d.logs.String())
	if m == nil {
		t.Fatalf("the daemon did not log the metrics address:\n%s", d.logs.String())
	}
	addr := m[1]
	if host, _, err := net.SplitHostPort(addr); err != nil || host != "127.0.0.1" || strings.HasSuffix(addr, ":0") {
		t.Fatalf("metrics address %q, want 127.0.0.1 and the port bound", addr)
	}
	d.waitState("ok", "done")
	d.waitState("bad", "failed")

	tcp := &http.Client{Timeout: 10 * time.Second}
	for _, tc := range []struct {
		name   string
		client *http.Client
		url    string
	}{
		{"control socket", d.client(), "http://berth/metrics"},
		{"tcp", tcp, "http://" + addr + "/metrics"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			text := scrapeText(t, tc.client, tc.url)
			for _, series := range []string{
				`berth_jobs{state="done"} 1`,
				`berth_jobs{state="failed"} 1`,
				`berth_jobs{state="running"} 0`,
				`berth_runs_started_total 2`,
				`berth_runs_ended_total{reason="exited"} 1`,
				`berth_runs_ended_total{reason="failed"} 1`,
				`berth_cores 2`,
				`berth_cores_free 2`,
				`berth_reload_files_refused 1`,
				`berth_reload_files_refused_total 1`,
			} {
				if !strings.Contains(text, "\n"+series+"\n") {
					t.Errorf("no series %s in:\n%s", series, text)
				}
			}
		})
	}
	// The control API is not served on TCP.
	resp, err := tcp.Get("http://" + addr + "/v1/status")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("GET /v1/status over TCP: %s, want 404", resp.Status)
	}
	tcp.CloseIdleConnections()

	d.stop()
	conn, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err == nil {
		conn.Close()
		t.Fatalf("%s still accepts connections after the daemon stopped", addr)
	}
	if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("dial %s after the daemon stopped: %v, want connection refused", addr, err)
	}
}

// TestDaemonMetricsCannotListen: an address that cannot be bound, given by
// flag or by BERTH_METRICS, stops the daemon at once with a sentence that
// says what to do.
func TestDaemonMetricsCannotListen(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	busy := taken.Addr().String()
	_, port, _ := net.SplitHostPort(busy)
	for _, tc := range []struct {
		name string
		args []string
		env  map[string]string
		want string
	}{
		{"flag, in use", []string{"--metrics", busy}, nil,
			fmt.Sprintf("berth: cannot serve metrics on %s: the address is in use, by another program or another berth daemon (ss -ltnp 'sport = :%s' shows which; ", busy, port)},
		{"env, in use", nil, map[string]string{"BERTH_METRICS": busy},
			fmt.Sprintf("berth: cannot serve metrics on %s: the address is in use", busy)},
		{"no port", []string{"--metrics", "localhost"}, nil,
			"berth: cannot serve metrics on localhost: listen tcp: address localhost: missing port in address (give --metrics HOST:PORT"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			args := append([]string{"daemon", "--jobs", filepath.Join(dir, "jobs.d"), "--state", filepath.Join(dir, "state"),
				"--socket", filepath.Join(dir, "berth.sock"), "--user-jobs", ""}, tc.args...)
			_, stderr, code := berth(t, tc.env, args...)
			if code != exitFailed {
				t.Errorf("exit %d, want %d", code, exitFailed)
			}
			if !strings.HasPrefix(stderr, tc.want) {
				t.Errorf("stderr:\n  %s\nwant it to begin\n  %s", strings.TrimSpace(stderr), tc.want)
			}
		})
	}
}

// TestListenMetricsIPv4: an IPv4 address is bound as given, and said so,
// not as every address ([::]).
func TestListenMetricsIPv4(t *testing.T) {
	l, err := listenMetrics("0.0.0.0:0", hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if a := l.Addr().String(); !strings.HasPrefix(a, "0.0.0.0:") {
		t.Errorf("bound %s, want 0.0.0.0:PORT", a)
	}
}
