package supervisor

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/berthd/berth/probes"
	"github.com/berthd/berth/supervisor/clock"
	"github.com/berthd/berth/supervisor/store"
)

// scrape is one scrape of /metrics, parsed.
type scrape map[string]*dto.MetricFamily

// scrapeMetrics GETs /metrics through client (whose transport reaches the
// daemon, over the control socket or TCP) and parses Prometheus's text
// format.
func scrapeMetrics(t *testing.T, client *http.Client, url string) scrape {
	t.Helper()
	resp, err := client.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", url, resp.Status)
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") {
		t.Errorf("GET %s: Content-Type %q, want Prometheus's text format", url, ct)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	families, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: not Prometheus's text format: %v", url, err)
	}
	return families
}

// value is the value of the one series of name whose labels include
// labels (name, value pairs); ok is false when there is none.
func (s scrape) value(name string, labels ...string) (v float64, ok bool) {
	f := s[name]
	if f == nil {
		return 0, false
	}
	for _, m := range f.GetMetric() {
		if !hasLabels(m, labels) {
			continue
		}
		switch {
		case m.Gauge != nil:
			return m.Gauge.GetValue(), true
		case m.Counter != nil:
			return m.Counter.GetValue(), true
		case m.Untyped != nil:
			return m.Untyped.GetValue(), true
		}
	}
	return 0, false
}

// histogram is the sample count and sum of name.
func (s scrape) histogram(name string) (count uint64, sum float64, ok bool) {
	f := s[name]
	if f == nil || len(f.GetMetric()) != 1 || f.GetMetric()[0].Histogram == nil {
		return 0, 0, false
	}
	h := f.GetMetric()[0].Histogram
	return h.GetSampleCount(), h.GetSampleSum(), true
}

func hasLabels(m *dto.Metric, labels []string) bool {
	for i := 0; i+1 < len(labels); i += 2 {
		found := false
		for _, lp := range m.GetLabel() {
			if lp.GetName() == labels[i] && lp.GetValue() == labels[i+1] {
				found = true
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// unixClient is an HTTP client that reaches the control socket at sock.
func unixClient(sock string) *http.Client {
	return &http.Client{Timeout: answerWithin, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", sock)
		},
	}}
}

// want is one expected value of a scrape; a nil value: no such series.
type want struct {
	name   string
	labels []string
	value  *float64
}

func is(v float64) *float64 { return &v }

func checkScrape(t *testing.T, s scrape, wants []want) {
	t.Helper()
	for _, w := range wants {
		got, ok := s.value(w.name, w.labels...)
		series := w.name + fmt.Sprint(w.labels)
		switch {
		case w.value == nil && ok:
			t.Errorf("%s = %v, want no such series", series, got)
		case w.value != nil && !ok:
			t.Errorf("%s is missing, want %v", series, *w.value)
		case w.value != nil && got != *w.value:
			t.Errorf("%s = %v, want %v", series, got, *w.value)
		}
	}
}

// TestMetricsOnControlSocket scrapes a real daemon's control socket
// while real jobs run and end, on a fake clock so that the waits and
// restarts are what the test makes them: jobs by state, the books, what
// each job holds, runs started and ended by reason, a restart, the wait in
// the placer, reloads and a refused file.
func TestMetricsOnControlSocket(t *testing.T) {
	t.Parallel()
	const jobs = `
job "holder" { cmd = "sleep 600", cpus = 2, ram = "1G", timeout = "1h", priority = 10 }
job "bad"    { cmd = "exit 3", cpus = 0 }
job "flaky"  { cmd = "exit 3", cpus = 0, restart = "on-failure", max_restarts = 1 }
job "huge"   { cmd = "true", cpus = 8 }
job "off"    { cmd = "true", enabled = false }
`
	sock := filepath.Join(t.TempDir(), "berth.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	clk := clock.NewFake(time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC))
	d, jobsDir := runDaemon(t, jobs, func(cfg *Config) {
		cfg.Listener, cfg.Clock = l, clk
		// Only the reloads the test asks for: one the watcher made on its
		// own, before the test's, would be counted too.
		cfg.Quiet = time.Hour
		// There from the first reload, which refuses it.
		if err := writeFile(filepath.Join(cfg.JobsDir, "broken.lua"), []byte(`job "x" {`), 0o600); err != nil {
			t.Fatal(err)
		}
	})
	client := unixClient(sock)
	const url = "http://berth/metrics"

	waitJob(t, d, "holder", "running", func(js JobStatus) bool { return js.State == "running" })
	// Declared once the holder runs, so that it waits for the holder.
	if err := writeFile(filepath.Join(jobsDir, "after.lua"), []byte(`job "after" { cmd = "exit 0", cpus = 1 }`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Reload(context.Background()); err != nil {
		t.Fatal(err)
	}
	waitJob(t, d, "after", "waiting", func(js JobStatus) bool { return js.State == "waiting" })
	waitJob(t, d, "bad", "failed", func(js JobStatus) bool { return js.State == "failed" })
	waitJob(t, d, "flaky", "backing off", func(js JobStatus) bool { return js.State == "backoff" })
	waitJob(t, d, "huge", "unplaceable", func(js JobStatus) bool { return js.State == "unplaceable" })
	waitJob(t, d, "off", "disabled", func(js JobStatus) bool { return js.State == "disabled" })

	s := scrapeMetrics(t, client, url)
	wants := []want{
		{"berth_jobs", []string{"state", "running"}, is(1)},
		{"berth_jobs", []string{"state", "waiting"}, is(1)},
		{"berth_jobs", []string{"state", "failed"}, is(1)},
		{"berth_jobs", []string{"state", "backoff"}, is(1)},
		{"berth_jobs", []string{"state", "unplaceable"}, is(1)},
		{"berth_jobs", []string{"state", "disabled"}, is(1)},
		{"berth_jobs", []string{"state", "done"}, is(0)},
		{"berth_cores", nil, is(2)},
		{"berth_cores_held", nil, is(2)},
		{"berth_cores_free", nil, is(0)},
		{"berth_gpus", nil, is(0)},
		{"berth_gpus_free", nil, is(0)},
		{"berth_memory_bytes", nil, is(4 << 30)},
		{"berth_memory_held_bytes", nil, is(1 << 30)},
		{"berth_memory_free_bytes", nil, is(3 << 30)},
		{"berth_job_cores", []string{"job", "holder", "owner", ""}, is(2)},
		{"berth_job_gpus", []string{"job", "holder"}, is(0)},
		{"berth_job_memory_bytes", []string{"job", "holder"}, is(1 << 30)},
		{"berth_job_cores", []string{"job", "after"}, nil}, // waits: holds nothing
		{"berth_runs_started_total", nil, is(3)},           // holder, bad, flaky
		{"berth_runs_ended_total", []string{"reason", "failed"}, is(2)},
		{"berth_runs_ended_total", []string{"reason", "exited"}, is(0)},
		{"berth_runs_ended_total", []string{"reason", "timed out"}, is(0)},
		{"berth_restarts_total", nil, is(1)},
		{"berth_reload_files_refused", nil, is(1)},
		{"berth_reload_files_refused_total", nil, is(1)}, // two reloads found it broken: refused once
	}
	checkScrape(t, s, wants)
	for _, state := range StatesInOrder() {
		if _, ok := s.value("berth_jobs", "state", state.String()); !ok {
			t.Errorf("berth_jobs{state=%q} is missing: every state must be there", state)
		}
	}
	// Only the holder waited in the placer, and not at all on the fake
	// clock; the unaccounted jobs never ask it.
	if n, sum, ok := s.histogram("berth_placement_wait_seconds"); !ok || n != 1 || sum != 0 {
		t.Errorf("berth_placement_wait_seconds: %d observed, sum %v (%v); want 1, sum 0", n, sum, ok)
	}
	if n, _, ok := s.histogram("berth_reload_duration_seconds"); !ok || n != 2 {
		t.Errorf("berth_reload_duration_seconds: %d observed (%v), want 2 reloads", n, ok)
	}
	if n, _, ok := s.histogram("berth_store_commit_seconds"); !ok || n == 0 {
		t.Errorf("berth_store_commit_seconds: %d observed (%v), want the commits of the runs", n, ok)
	}
	for _, name := range []string{"go_goroutines", "process_open_fds"} {
		if _, ok := s.value(name); !ok {
			t.Errorf("%s is missing: the Go and process collectors are registered", name)
		}
	}

	// Half an hour on, the flaky job restarts and fails for good, and the
	// waiting job's priority is edited: queued again, its wait goes on.
	// Another half hour: the holder times out, which lets the waiting job
	// run and end, after an hour in the placer. The restart has ended
	// before the clock moves on or the file is written: a run that
	// straddled the next half hour would have been a healthy one, and the
	// restart's fork would hold the file being written open for a moment,
	// which the scan of the reload would see open for writing (and read
	// again, a reload the test did not ask for).
	clk.Advance(30 * time.Minute)
	waitJob(t, d, "flaky", "failed", func(js JobStatus) bool { return js.State == "failed" })
	if err := writeFile(filepath.Join(jobsDir, "after.lua"), []byte(`job "after" { cmd = "exit 0", cpus = 1, priority = 5 }`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Reload(context.Background()); err != nil {
		t.Fatal(err)
	}
	waitJob(t, d, "after", "waiting", func(js JobStatus) bool { return js.State == "waiting" })
	clk.Advance(30 * time.Minute)
	waitJob(t, d, "after", "done", func(js JobStatus) bool { return js.State == "done" })
	waitJob(t, d, "holder", "failed", func(js JobStatus) bool { return js.State == "failed" })
	// A reload asked for finds the broken file as it was: not refused anew.
	if _, err := d.Reload(context.Background()); err != nil {
		t.Fatal(err)
	}

	s = scrapeMetrics(t, client, url)
	checkScrape(t, s, []want{
		{"berth_jobs", []string{"state", "running"}, is(0)},
		{"berth_jobs", []string{"state", "done"}, is(1)},
		{"berth_jobs", []string{"state", "failed"}, is(3)},
		{"berth_cores_held", nil, is(0)},
		{"berth_cores_free", nil, is(2)},
		{"berth_memory_held_bytes", nil, is(0)},
		{"berth_job_cores", []string{"job", "holder"}, nil},
		{"berth_runs_started_total", nil, is(5)},
		{"berth_runs_ended_total", []string{"reason", "failed"}, is(3)},
		{"berth_runs_ended_total", []string{"reason", "timed out"}, is(1)},
		{"berth_runs_ended_total", []string{"reason", "exited"}, is(1)},
		{"berth_runs_ended_total", []string{"reason", "stopped"}, is(0)},
		{"berth_restarts_total", nil, is(1)},
		{"berth_reload_files_refused", nil, is(1)},
		{"berth_reload_files_refused_total", nil, is(1)},
	})
	if n, sum, ok := s.histogram("berth_placement_wait_seconds"); !ok || n != 2 || sum != 3600 {
		t.Errorf("berth_placement_wait_seconds: %d observed, sum %v (%v); want 2, sum 3600 (the hour the second job waited)", n, sum, ok)
	}
	if n, _, ok := s.histogram("berth_reload_duration_seconds"); !ok || n != 4 {
		t.Errorf("berth_reload_duration_seconds: %d observed (%v), want 4 reloads", n, ok)
	}
}

// TestMetricsTCP serves /metrics on a loopback TCP address: metrics there,
// and none of the control API; the listener closes with the daemon.
func TestMetricsTCP(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	client := &http.Client{Timeout: answerWithin}
	t.Run("serving", func(t *testing.T) {
		d, _ := runDaemon(t, `job "one" { cmd = "exit 0" }`, func(cfg *Config) { cfg.MetricsListener = l })
		waitJob(t, d, "one", "done", func(js JobStatus) bool { return js.State == "done" })
		s := scrapeMetrics(t, client, "http://"+addr+"/metrics")
		checkScrape(t, s, []want{
			{"berth_jobs", []string{"state", "done"}, is(1)},
			{"berth_runs_ended_total", []string{"reason", "exited"}, is(1)},
		})
		for _, tc := range []struct {
			method, path string
			want         int
		}{
			{"GET", APIVersion + "/status", http.StatusNotFound},
			{"POST", APIVersion + "/reload", http.StatusNotFound},
			{"GET", "/", http.StatusNotFound},
			{"POST", "/metrics", http.StatusMethodNotAllowed},
			{"HEAD", "/metrics", http.StatusOK},
		} {
			req, err := http.NewRequest(tc.method, "http://"+addr+tc.path, nil)
			if err != nil {
				t.Fatal(err)
			}
			resp, err := client.Do(req)
			if err != nil {
				t.Fatalf("%s %s: %v", tc.method, tc.path, err)
			}
			resp.Body.Close()
			if resp.StatusCode != tc.want {
				t.Errorf("%s %s over TCP: %s, want %d", tc.method, tc.path, resp.Status, tc.want)
			}
		}
	})
	// The subtest's cleanup stopped the daemon.
	conn, err := net.DialTimeout("tcp", addr, answerWithin)
	if err == nil {
		conn.Close()
		t.Fatalf("%s still accepts connections after the daemon stopped", addr)
	}
	if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("dial %s after the daemon stopped: %v, want connection refused", addr, err)
	}
}

// TestEndReasonsComplete: every reason a run can end with is counted from
// zero, so a reason added to the store must be added to endReasons.
func TestEndReasonsComplete(t *testing.T) {
	t.Parallel()
	for r := store.Reason(1); r != 0; r++ {
		if strings.HasPrefix(r.String(), "reason(") {
			continue // no such reason
		}
		if !slices.Contains(endReasons, r) {
			t.Errorf("reason %d (%s) is not in endReasons", r, r)
		}
		if int(r) >= len((&meters{}).runsEnded) {
			t.Errorf("reason %d (%s) is past meters.runsEnded: counting it would take the slow way", r, r)
		}
	}
}

// TestMetersHotPathAllocatesNothing: what a run's start and end, its wait
// and a commit cost the daemon is atomic adds, nothing allocated.
func TestMetersHotPathAllocatesNothing(t *testing.T) {
	m := newMeters()
	allocs := testing.AllocsPerRun(1000, func() {
		m.runsStarted.Inc()
		m.placementWait.Observe(0.25)
		m.committed(1500*time.Microsecond, nil)
		for _, r := range endReasons {
			m.ended(r)
		}
		m.restarts.Inc()
	})
	if allocs != 0 {
		t.Errorf("%v allocations per run's worth of counting, want 0", allocs)
	}
}

// TestMetricsMemoryUnknown: where the machine's memory is unknown it is not
// accounted, which is not zero: its gauges are absent, not 0.
func TestMetricsMemoryUnknown(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		known bool
		want  int // series of each memory gauge
	}{
		{"known", true, 1},
		{"unknown", false, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, _ := runDaemon(t, "", func(cfg *Config) { cfg.Machine.RAM = probes.Memory{Bytes: 8 << 30, Known: tc.known} })
			for _, name := range []string{"berth_memory_bytes", "berth_memory_held_bytes", "berth_memory_free_bytes"} {
				n, err := testutil.GatherAndCount(d.meters.reg, name)
				if err != nil {
					t.Fatal(err)
				}
				if n != tc.want {
					t.Errorf("%d series of %s, want %d", n, name, tc.want)
				}
			}
			if n, err := testutil.GatherAndCount(d.meters.reg, "berth_cores"); err != nil || n != 1 {
				t.Errorf("%d series of berth_cores (%v), want 1", n, err)
			}
		})
	}
}
