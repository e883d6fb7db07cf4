package supervisor

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/berthd/berth/accounting"
	"github.com/berthd/berth/supervisor/store"
)

// The daemon's Prometheus metrics. Two kinds, kept apart for cost:
//
//   - what mirrors state (jobs by state, the books, what each job holds) is
//     read when scraped, by stateCollector, and costs the daemon nothing
//     between scrapes;
//   - what happens (runs started and ended, restarts, waits, commits,
//     reloads) is counted as it happens, into counters and histograms
//     made once, so that a run's start or end costs an atomic add and
//     allocates nothing.
//
// The registry is the daemon's own, never prometheus.DefaultRegisterer: two
// daemons in one test binary must not share counters.

// metricsNamespace prefixes every metric of berth's own.
const metricsNamespace = "berth"

// endReasons are the reasons a run ends, each counted from zero so that
// rate() works before the first run of a kind ends. TestEndReasonsComplete
// checks that no reason of the store's is missing.
var endReasons = []store.Reason{
	store.ReasonExited, store.ReasonFailed, store.ReasonTimedOut, store.ReasonStopped,
	store.ReasonKilled, store.ReasonLost, store.ReasonSpawnError, store.ReasonOOM,
}

// Buckets, in seconds. A placement is immediate on an idle machine and may
// take a day on a busy one; a commit is an fsync pair (1–2 ms) unless the
// disk is in trouble; a reload evaluates files in a child (tens of ms) but
// each file has a budget of a second or more.
var (
	placementBuckets = []float64{0.001, 0.01, 0.1, 0.5, 1, 5, 15, 60, 300, 900, 3600, 4 * 3600, 12 * 3600, 24 * 3600}
	commitBuckets    = []float64{0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 10}
	reloadBuckets    = []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30}
)

// meters are the daemon's registry and what it counts as things happen.
// Every field is safe for concurrent use (Prometheus's own atomics).
type meters struct {
	reg *prometheus.Registry

	runsStarted prometheus.Counter
	// runsEnded is indexed by store.Reason; endedBy counts a reason it
	// does not know (none today) by its name.
	runsEnded [store.ReasonOOM + 1]prometheus.Counter
	endedBy   *prometheus.CounterVec
	restarts  prometheus.Counter

	placementWait prometheus.Histogram

	commitSeconds  prometheus.Histogram
	commitFailures prometheus.Counter

	ready             prometheus.Gauge
	reloadSeconds     prometheus.Histogram
	filesRefused      prometheus.Gauge
	filesRefusedTotal prometheus.Counter
}

// newMeters makes the registry, with the Go runtime's and the process's
// collectors and the daemon's own metrics. The daemon, once made, adds
// stateCollector: the store, opened before it, is told of the commits.
func newMeters() *meters {
	reg := prometheus.NewRegistry()
	f := func(name, help string) prometheus.CounterOpts {
		return prometheus.CounterOpts{Namespace: metricsNamespace, Name: name, Help: help}
	}
	m := &meters{
		reg:         reg,
		runsStarted: prometheus.NewCounter(f("runs_started_total", "Runs begun: each spawn of a job, including those that failed to start (reason \"spawn error\").")),
		endedBy: prometheus.NewCounterVec(f("runs_ended_total",
			"Runs ended, by the reason berth history shows (exited, failed, timed out, stopped, killed after stop_timeout, lost, spawn error, out of memory)."), []string{"reason"}),
		restarts: prometheus.NewCounter(f("restarts_total", "Restarts the restart policy scheduled (on-failure, always) after a run ended; berth restart is not counted.")),
		placementWait: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: metricsNamespace, Name: "placement_wait_seconds",
			Help: "How long a job waited in the placer, from asking for its resources until they were granted.", Buckets: placementBuckets}),
		commitSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: metricsNamespace, Name: "store_commit_seconds",
			Help: "How long each write transaction of the state file took, fsync included, failed ones too.", Buckets: commitBuckets}),
		commitFailures: prometheus.NewCounter(f("store_commit_failures_total", "Write transactions of the state file that failed (disk full, I/O error).")),
		ready: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: metricsNamespace, Name: "ready",
			Help: "1 once the daemon has read its job files at start; 0 before, while the job gauges count nothing yet."}),
		reloadSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: metricsNamespace, Name: "reload_duration_seconds",
			Help: "How long each reload of the job files took, from the scan until the jobs were told.", Buckets: reloadBuckets}),
		filesRefused: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: metricsNamespace, Name: "reload_files_refused",
			Help: "Job files whose latest version is not in force after the last reload (an error in it, or refused for its owner or mode)."}),
		filesRefusedTotal: prometheus.NewCounter(f("reload_files_refused_total", "Job files refused, each time a new problem of its own kept one out of force (a save with a new error); a file still broken at other files' reloads is not counted again.")),
	}
	for _, r := range endReasons {
		m.runsEnded[r] = m.endedBy.WithLabelValues(r.String())
	}
	reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		m.runsStarted, m.endedBy, m.restarts, m.placementWait,
		m.commitSeconds, m.commitFailures,
		m.ready, m.reloadSeconds, m.filesRefused, m.filesRefusedTotal,
	)
	return m
}

// ended counts a run's end.
func (m *meters) ended(r store.Reason) {
	if int(r) < len(m.runsEnded) && m.runsEnded[r] != nil {
		m.runsEnded[r].Inc()
		return
	}
	m.endedBy.WithLabelValues(r.String()).Inc()
}

// committed observes one write transaction of the state (store.Options.OnCommit).
func (m *meters) committed(took time.Duration, err error) {
	m.commitSeconds.Observe(took.Seconds())
	if err != nil {
		m.commitFailures.Inc()
	}
}

// reloaded observes a reload that was applied: how long it took, how
// many files are not in force after it, and how many of those were
// refused for a problem that was not in force before.
func (m *meters) reloaded(took time.Duration, refused, refusedAnew int) {
	m.reloadSeconds.Observe(took.Seconds())
	m.filesRefused.Set(float64(refused))
	m.filesRefusedTotal.Add(float64(refusedAnew))
}

// handler serves the registry in Prometheus's text format (or gzipped, or
// OpenMetrics, as the scraper asks). A metric that cannot be gathered is
// left out and logged, rather than failing the whole scrape.
func (m *meters) handler(d *Daemon) http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{
		ErrorLog:      metricsErrorLog{d},
		ErrorHandling: promhttp.ContinueOnError,
		// A scrape reads every job: a handful at once is plenty.
		MaxRequestsInFlight: 4,
	})
}

// metricsErrorLog hands promhttp's errors to the daemon's logger.
type metricsErrorLog struct{ d *Daemon }

func (l metricsErrorLog) Println(v ...any) {
	l.d.log.Warn("cannot gather a metric", "error", fmt.Sprint(v...))
}

// serveMetrics serves GET /metrics, and nothing else, on l (--metrics):
// the control API is never served over TCP. It returns the server, for
// Run to shut down with the daemon.
func (d *Daemon) serveMetrics(l net.Listener, wait func(func())) *http.Server {
	mux := http.NewServeMux()
	// Anything else is the mux's own 404 (405 for another method).
	mux.Handle("GET /metrics", d.asWork(d.meters.handler(d)))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second, IdleTimeout: 30 * time.Second}
	wait(func() {
		if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			d.log.Error("metrics listener failed", "address", l.Addr().String(), "error", err)
		}
	})
	d.log.Info("serving metrics", "address", l.Addr().String())
	return srv
}

// stateCollector reads what mirrors the daemon's state at each scrape:
// jobs by state, the books, and what each job holds.
type stateCollector struct{ d *Daemon }

var (
	descJobs = prometheus.NewDesc("berth_jobs", "Jobs declared, by state, and those removed while their run is being stopped; every state is present, zero included.", []string{"state"}, nil)

	descJobCores  = prometheus.NewDesc("berth_job_cores", "Cores a job holds now; present while it holds a grant.", []string{"job", "owner"}, nil)
	descJobGPUs   = prometheus.NewDesc("berth_job_gpus", "GPU cards a job holds now; present while it holds a grant.", []string{"job", "owner"}, nil)
	descJobMemory = prometheus.NewDesc("berth_job_memory_bytes", "Memory a job holds now, in bytes; present while it holds a grant.", []string{"job", "owner"}, nil)
	descJobGPUMem = prometheus.NewDesc("berth_job_gpu_mem_bytes", "Memory of a card a job's share holds (gpu_mem), in bytes; present while it holds a share.", []string{"job", "owner"}, nil)
	descCardMem   = prometheus.NewDesc("berth_gpu_mem_bytes", "Memory of each card, in bytes, as shares (gpu_mem) are booked against it; present where it is known.", []string{"card"}, nil)
	descCardBook  = prometheus.NewDesc("berth_gpu_mem_booked_bytes", "Memory of each card booked by shares (gpu_mem) now, in bytes; present where the card's memory is known.", []string{"card"}, nil)

	descCores     = prometheus.NewDesc("berth_cores", "Cores the books hand out on this machine.", nil, nil)
	descCoresHeld = prometheus.NewDesc("berth_cores_held", "Cores granted to jobs now.", nil, nil)
	descCoresFree = prometheus.NewDesc("berth_cores_free", "Cores free in the books now.", nil, nil)
	descGPUs      = prometheus.NewDesc("berth_gpus", "GPU cards the books hand out on this machine.", nil, nil)
	descGPUsHeld  = prometheus.NewDesc("berth_gpus_held", "GPU cards granted to jobs now.", nil, nil)
	descGPUsFree  = prometheus.NewDesc("berth_gpus_free", "GPU cards free in the books now.", nil, nil)
	descMem       = prometheus.NewDesc("berth_memory_bytes", "Memory the books hand out on this machine, in bytes; absent where the machine's memory is unknown.", nil, nil)
	descMemHeld   = prometheus.NewDesc("berth_memory_held_bytes", "Memory granted to jobs now, in bytes; absent where the machine's memory is unknown.", nil, nil)
	descMemFree   = prometheus.NewDesc("berth_memory_free_bytes", "Memory free in the books now, in bytes; absent where the machine's memory is unknown.", nil, nil)
)

func (stateCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, desc := range []*prometheus.Desc{descJobs, descJobCores, descJobGPUs, descJobMemory, descJobGPUMem, descCardMem, descCardBook,
		descCores, descCoresHeld, descCoresFree, descGPUs, descGPUsHeld, descGPUsFree, descMem, descMemHeld, descMemFree} {
		ch <- desc
	}
}

// Collect reads the books once and each job's state under its own lock;
// it never waits on the daemon's loop, so a scrape is answered while the
// loop is busy with a reload.
func (c stateCollector) Collect(ch chan<- prometheus.Metric) {
	d := c.d
	// Each job is read under its own lock once d.mu is let go, as Status
	// does: never one lock inside the other.
	d.mu.Lock()
	jobs := make([]*job, 0, len(d.jobs))
	for _, j := range d.jobs {
		jobs = append(jobs, j)
	}
	declared := len(jobs)
	for name := range d.draining {
		if j := d.removedLocked(name); j != nil {
			jobs = append(jobs, j)
		}
	}
	d.mu.Unlock()
	counts := make(map[store.State]int, len(displayOrder))
	for i, j := range jobs {
		j.mu.Lock()
		// A removed job is counted, as status shows it, while its run
		// is being stopped.
		if i < declared || Holds(j.v.State) {
			counts[j.v.State]++
		}
		j.mu.Unlock()
	}
	for _, s := range displayOrder {
		ch <- prometheus.MustNewConstMetric(descJobs, prometheus.GaugeValue, float64(counts[s]), s.String())
		delete(counts, s)
	}
	for s, n := range counts { // a job just declared, not yet started ("new")
		ch <- prometheus.MustNewConstMetric(descJobs, prometheus.GaugeValue, float64(n), s.String())
	}

	snap := d.book.Snapshot()
	gauge := func(desc *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(desc, prometheus.GaugeValue, v, labels...)
	}
	total, free := snap.Capacity.CPUs(), snap.Free.CPUs
	gauge(descCores, float64(total))
	gauge(descCoresHeld, float64(total-free))
	gauge(descCoresFree, float64(free))
	gauge(descGPUs, float64(snap.Capacity.GPUs))
	gauge(descGPUsHeld, float64(snap.Capacity.GPUs-snap.Free.GPUs))
	gauge(descGPUsFree, float64(snap.Free.GPUs))
	if snap.Capacity.RAMKnown {
		gauge(descMem, float64(snap.Capacity.RAMBytes))
		gauge(descMemHeld, float64(snap.Capacity.RAMBytes-snap.Free.RAMBytes))
		gauge(descMemFree, float64(snap.Free.RAMBytes))
	}
	for i, mem := range snap.Capacity.GPUMem {
		if mem > 0 {
			gauge(descCardMem, float64(mem), d.cfg.Machine.GPUs[i])
			gauge(descCardBook, float64(snap.CardBooked[i]), d.cfg.Machine.GPUs[i])
		}
	}

	// From the books' grants, which are what is held (a run taken back
	// from a previous daemon included). Summed by holder: a job removed
	// and declared again may hold two grants for a moment, and one series
	// may be sent only once.
	type holder struct{ job, owner string }
	held := make(map[holder]accounting.Resources, len(snap.Grants))
	for _, g := range snap.Grants {
		k := holder{g.Holder, g.Owner}
		held[k] = held[k].Plus(g.Resources())
	}
	for k, r := range held {
		gauge(descJobCores, float64(r.CPUs), k.job, k.owner)
		gauge(descJobGPUs, float64(r.GPUs), k.job, k.owner)
		gauge(descJobMemory, float64(r.RAMBytes), k.job, k.owner)
		if r.GPUMemBytes > 0 {
			gauge(descJobGPUMem, float64(r.GPUMemBytes), k.job, k.owner)
		}
	}
}
