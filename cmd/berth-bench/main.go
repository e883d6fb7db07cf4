// Command berth-bench measures a real berth daemon, end to end, against the
// goals of the README: how fast it runs a thousand short jobs compared with
// a plain loop, how soon a saved job file has its child running, what the
// daemon costs while a thousand jobs run, and how long it takes to be ready.
//
//	go run ./cmd/berth-bench [-only NAME[,NAME]] [-runs N] [-idle 30s] [-storm 30s] [-tmp DIR] [-cpuprofile DIR] [-against OLD] [-v]
//
// The benchmarks are throughput, reload, footprint, startup, storm, programs
// and churn. -tmp puts
// the runs' directories, the daemon's state among them, elsewhere: on tmpfs
// (-tmp /dev/shm) the state's fsyncs cost nothing, which shows their share.
//
// -cpuprofile DIR has every daemon write a CPU profile there, one file per
// daemon (go tool pprof DIR/throughput-1.pprof).
//
// -against OLD is an A/B: each run of a benchmark is made with the berth
// binary OLD (A) and then with the one under test (B), A B A B…, so that
// both meet the same moments of a noisy machine; each figure is shown for
// both, with the median of the runs' B/A ratios.
//
// It builds the berth binary once, then runs each benchmark N times, each
// run with fresh temporary directories and its own daemon, which it stops at
// the end of the run (SIGTERM, then SIGKILL). It prints one line per figure:
// the median over the runs, the min and the max, the ratio against the
// physical limit where there is one, and the goal.
package main

import (
	"flag"
	"fmt"
	"math"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// benchmark is one of the measurements; run does one run of it in dir
// (fresh and empty) and returns its figures in the order they are shown.
type benchmark struct {
	name string
	run  func(b *bencher, dir string) ([]sample, error)
}

var benchmarks = []benchmark{
	{"throughput", runThroughput},
	{"reload", runReload},
	{"footprint", runFootprint},
	{"startup", runStartup},
	{"storm", runStorm},
	{"programs", runPrograms},
	{"churn", runChurn},
}

// sample is one figure of one run.
type sample struct {
	name  string
	value float64
}

// figure says how a figure is shown.
type figure struct {
	unit string
	// limit names the figure of the same run that is the physical limit of
	// this one; the line then shows their ratio (median of the runs').
	limit string
	goal  string
}

var figures = map[string]figure{
	"throughput/loop":           {unit: "s", goal: "the limit: 1 000 spawns of /bin/true from Go, 2 workers"},
	"throughput/berth":          {unit: "s", limit: "throughput/loop", goal: "goal ≤ 1.4× the loop; daemon start to 1 000 done"},
	"throughput/ready-to-done":  {unit: "s", limit: "throughput/loop", goal: "READY=1 to 1 000 done"},
	"throughput/daemon-cpu":     {unit: "ms", limit: "throughput/loop-cpu", goal: "goal ≤ 0.3 ms; the daemon's CPU time (user + system) per run, READY=1 to 1 000 done (the end seen in its log, then in GET /metrics; a GET /v1/status every 200 ms included)"},
	"throughput/daemon-sys":     {unit: "ms", goal: "of which system time"},
	"throughput/status-call":    {unit: "ms", goal: "one GET /v1/status of the 1 000 jobs while they run (median; asked every 200 ms)"},
	"throughput/loop-cpu":       {unit: "ms", goal: "the loop's own CPU time (user + system) per spawn: the fork, the exec's wait and the reaping, which a daemon that runs its jobs directly pays too (as units, systemd forks)"},
	"throughput/loop-child-cpu": {unit: "ms", goal: "the CPU time (user + system) of each /bin/true the loop ran"},
	"throughput/child-cpu":      {unit: "ms", goal: "the same, of each the daemon ran"},
	"throughput/commits":        {unit: "commits", goal: "the state file's write transactions per run, each two fdatasyncs (berth_store_commit_seconds_count)"},
	"throughput/commit-ms":      {unit: "ms", goal: "the mean time of one, its fdatasyncs included (berth_store_commit_seconds)"},
	"throughput/start-p50":      {unit: "ms", goal: "a grant to its process running (the daemon's started lines)"},
	"throughput/start-p99":      {unit: "ms", goal: "the same, 99th percentile"},
	"reload/floor-p50":          {unit: "ms", goal: "the limit: the same child spawned from Go"},
	"reload/p50":                {unit: "ms", limit: "reload/floor-p50", goal: "goal < 50 ms; save to child running, 1 000 jobs loaded"},
	"reload/p99":                {unit: "ms", goal: "goal < 200 ms"},
	"footprint/rss":             {unit: "MiB", goal: "goal < 20 MiB; 1 000 jobs running, end of idle"},
	"footprint/rss-peak":        {unit: "MiB", goal: "highest sample over the idle window"},
	"footprint/anon":            {unit: "MiB", goal: "of which anonymous: the daemon's own memory, not the pages of its binary, its libraries and the state file"},
	"footprint/heap":            {unit: "MiB", goal: "of that, the Go heap in use (go_memstats_heap_inuse_bytes)"},
	"footprint/stacks":          {unit: "MiB", goal: "and the goroutines' stacks (go_memstats_stack_inuse_bytes): one goroutine for each job"},
	"footprint/cpu":             {unit: "% of one core", goal: "goal < 0.5 %; over the idle window"},
	"footprint/threads":         {unit: "threads", goal: "the daemon's, end of idle"},
	"startup/empty":             {unit: "ms", goal: "exec to READY=1, no job files"},
	"startup":                   {unit: "ms", goal: "goal < 1 s; exec to READY=1, 1 000 job files"},
	"startup/all-disabled":      {unit: "ms", goal: "exec to /v1/status showing all 1 000 disabled (polled every 20 ms)"},
	"storm/edits-per-s":         {unit: "edits/s", goal: "saves of job files achieved (asked: 100/s), 200 jobs churning"},
	"storm/status-p50":          {unit: "ms", goal: "GET /v1/status every 10 ms during the storm"},
	"storm/status-p99":          {unit: "ms", goal: "goal < 100 ms"},
	"storm/status-max":          {unit: "ms", goal: "the slowest status call"},
	"storm/rss-before":          {unit: "MiB", goal: "before the storm, 1 job"},
	"storm/rss-after":           {unit: "MiB", goal: "after it, its files removed"},
	"storm/heap-before":         {unit: "MiB", goal: "live heap before (after a GC)"},
	"storm/heap-after":          {unit: "MiB", goal: "live heap after (after a GC)"},
	"storm/goroutines-before":   {unit: "goroutines", goal: "before the storm"},
	"storm/goroutines-after":    {unit: "goroutines", goal: "after it"},
	"programs/start-loop":       {unit: "ms", goal: "the limit: 100 long-running children (sleep) started one after the other from Go, each in its own process group"},
	"programs/start":            {unit: "ms", limit: "programs/start-loop", goal: "goal ≤ 1.5× the loop; exec of `berth daemon` to all 100 shown running (its last started line)"},
	"programs/stop-loop":        {unit: "ms", goal: "the limit: SIGTERM to those 100 from Go, until every one was waited for"},
	"programs/stop":             {unit: "ms", limit: "programs/stop-loop", goal: "goal ≤ 3× the loop; SIGTERM to the daemon to its exit, its 100 stopped"},
	"churn/rss-2000":            {unit: "MiB", goal: "20 jobs of /bin/true, after 2 000 runs (the history full: 100 runs a job)"},
	"churn/rss-10000":           {unit: "MiB", goal: "goal: no growth from the 2 000th; after 10 000 runs"},
	"churn/anon-2000":           {unit: "MiB", goal: "of which anonymous (the daemon's own memory, not the binary's and the state file's pages)"},
	"churn/anon-10000":          {unit: "MiB", goal: "of which anonymous, after 10 000 runs"},
	"churn/state-2000":          {unit: "MiB", goal: "state.db's size after 2 000 runs (the daemon maps it)"},
	"churn/state-10000":         {unit: "MiB", goal: "state.db's size after 10 000 runs"},
	"churn/heap-2000":           {unit: "MiB", goal: "live heap after 2 000 runs (after a GC)"},
	"churn/heap-10000":          {unit: "MiB", goal: "live heap after 10 000 runs (after a GC)"},
	"churn/goroutines-2000":     {unit: "goroutines", goal: "after 2 000 runs"},
	"churn/goroutines-10000":    {unit: "goroutines", goal: "after 10 000 runs"},
	"churn/daemon-cpu":          {unit: "ms", goal: "the daemon's CPU time per run over the last 8 000, 20 at a time, the rounds' starts and status calls included"},
}

// bencher holds what every run shares.
type bencher struct {
	berth   string // the built binary
	idle    time.Duration
	storm   time.Duration
	verbose bool
}

func main() {
	only := flag.String("only", "", "run only these benchmarks (comma-separated): throughput, reload, footprint, startup, storm, programs, churn")
	runs := flag.Int("runs", 3, "runs of each benchmark")
	idle := flag.Duration("idle", 30*time.Second, "footprint: how long to watch the idle daemon")
	storm := flag.Duration("storm", 30*time.Second, "storm: how long the edits go on")
	tmp := flag.String("tmp", "", "where each run's directories (jobs, state, socket) go; default $TMPDIR or /tmp")
	verbose := flag.Bool("v", false, "print each run's figures and the daemon's log on failure to stderr")
	flag.StringVar(&profileDir, "cpuprofile", "", "write each daemon's CPU profile into this directory")
	prebuilt := flag.String("berth", "", "run this berth binary instead of building one (on a machine without Go, such as a container)")
	flag.StringVar(&runnerMode, "runner", "", "start each daemon with --runner MODE (units: each run a systemd unit; needs systemd)")
	against := flag.String("against", "", "A/B: interleave each run with one of this berth binary (A) before the one under test (B)")
	flag.Parse()
	if flag.NArg() > 0 || *runs < 1 || *idle <= 0 || *storm <= 0 {
		flag.Usage()
		os.Exit(2)
	}
	selected := benchmarks
	if *only != "" {
		selected = nil
		for name := range strings.SplitSeq(*only, ",") {
			i := slices.IndexFunc(benchmarks, func(b benchmark) bool { return b.name == strings.TrimSpace(name) })
			if i < 0 {
				fmt.Fprintf(os.Stderr, "berth-bench: no benchmark %q (throughput, reload, footprint, startup, storm, programs, churn)\n", name)
				os.Exit(2)
			}
			selected = append(selected, benchmarks[i])
		}
	}

	bin, err := os.MkdirTemp("", "berth-bench-bin-")
	if err != nil {
		fatal(err)
	}
	top, err := os.MkdirTemp(*tmp, "berth-bench-")
	if err != nil {
		os.RemoveAll(bin)
		fatal(err)
	}
	cleanup := func() {
		os.RemoveAll(top)
		os.RemoveAll(bin)
	}
	// Ctrl-C or a kill stops the daemons of the run in progress.
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, os.Interrupt, syscall.SIGTERM)
	go func() {
		sig := <-signals
		fmt.Fprintf(os.Stderr, "berth-bench: %v: stopping the daemons\n", sig)
		stopAll()
		cleanup()
		os.Exit(1)
	}()

	b := &bencher{idle: *idle, storm: *storm, verbose: *verbose}
	start := time.Now()
	b.berth, err = *prebuilt, nil
	if b.berth == "" {
		b.berth, err = build(bin)
	}
	if err != nil {
		cleanup()
		fatal(err)
	}
	fmt.Printf("# berth-bench: %s %s/%s, %d CPUs, %d runs each; berth built in %.1f s; runs in %s (%s); load average %s\n",
		runtime.Version(), runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), *runs, time.Since(start).Seconds(),
		filepath.Dir(top), filesystem(top), loadAverage())

	failed := false
	for _, bm := range selected {
		if bm.name == "footprint" {
			note, ok := processRoom(jobsPerRun + 50)
			fmt.Printf("# footprint: %s\n", note)
			if !ok {
				fmt.Printf("footprint: skipped, not enough room for 1 000 processes\n")
				failed = true
				continue
			}
		}
		sides := []side{{berth: b.berth}}
		if *against != "" {
			sides = []side{{label: "A", berth: *against}, {label: "B", berth: b.berth}}
		}
		for i := range *runs {
			for k := range sides {
				sd := &sides[k]
				dir := filepath.Join(top, fmt.Sprintf("%s-%d%s", bm.name, i+1, sd.label))
				if err := os.Mkdir(dir, 0o755); err != nil {
					cleanup()
					fatal(err)
				}
				b.berth = sd.berth
				samples, err := bm.run(b, dir)
				os.RemoveAll(dir)
				if err != nil {
					first, _, _ := strings.Cut(err.Error(), "\n")
					sd.errs = append(sd.errs, fmt.Sprintf("run %d%s: %s", i+1, sd.label, first))
					fmt.Fprintf(os.Stderr, "%s: run %d%s failed: %v\n", bm.name, i+1, sd.label, err)
					sd.perRun = append(sd.perRun, nil)
					continue
				}
				sd.add(samples, b.verbose, bm.name, i+1)
			}
		}
		b.berth = sides[len(sides)-1].berth
		for _, name := range sides[0].order {
			if len(sides) == 1 {
				fmt.Println(summary(name, sides[0].vals[name], sides[0].perRun))
				continue
			}
			fmt.Println(abSummary(name, sides[0], sides[1]))
		}
		for _, sd := range sides {
			if len(sd.errs) > 0 {
				failed = true
				fmt.Printf("%s: %d of %d runs%s failed: %s\n", bm.name, len(sd.errs), *runs, sd.label, strings.Join(sd.errs, "; "))
			}
		}
	}
	cleanup()
	// Other work on the machine shows here: the figures of a busy machine
	// are not berth's.
	fmt.Printf("# total %.0f s; load average %s\n", time.Since(start).Seconds(), loadAverage())
	if failed {
		os.Exit(1)
	}
}

// side is the figures of one binary's runs of a benchmark: label is "" or,
// in an A/B, "A" or "B".
type side struct {
	label, berth string
	order        []string
	vals         map[string][]float64
	// perRun are each run's figures by name, nil for a run that failed,
	// so that the runs of two sides pair up by index.
	perRun []map[string]float64
	errs   []string
}

func (sd *side) add(samples []sample, verbose bool, bench string, run int) {
	if sd.vals == nil {
		sd.vals = map[string][]float64{}
	}
	m := map[string]float64{}
	for _, s := range samples {
		if _, seen := sd.vals[s.name]; !seen {
			sd.order = append(sd.order, s.name)
		}
		sd.vals[s.name] = append(sd.vals[s.name], s.value)
		m[s.name] = s.value
		if verbose {
			fmt.Fprintf(os.Stderr, "  %s run %d%s: %s %s\n", s.name, run, sd.label, num(s.value), figures[s.name].unit)
		}
	}
	sd.perRun = append(sd.perRun, m)
}

// abSummary is one figure's lines in an A/B: each side's summary, then the
// median of the B/A ratios of the runs made one after the other.
func abSummary(name string, a, b side) string {
	var ratios []float64
	for i := range min(len(a.perRun), len(b.perRun)) {
		va, ok1 := a.perRun[i][name]
		vb, ok2 := b.perRun[i][name]
		if ok1 && ok2 && va != 0 {
			ratios = append(ratios, vb/va)
		}
	}
	var out strings.Builder
	if vals := a.vals[name]; len(vals) > 0 {
		fmt.Fprintf(&out, "  A %s\n", summary(name, vals, a.perRun))
	}
	if vals := b.vals[name]; len(vals) > 0 {
		fmt.Fprintf(&out, "  B %s\n", summary(name, vals, b.perRun))
	}
	if len(ratios) > 0 {
		fmt.Fprintf(&out, "%s: B/A %s (min %s, max %s) over %d pairs", name, num(median(ratios)), num(slices.Min(ratios)), num(slices.Max(ratios)), len(ratios))
	}
	return strings.TrimSuffix(out.String(), "\n")
}

// summary is one figure's line.
func summary(name string, vals []float64, perRun []map[string]float64) string {
	f := figures[name]
	var b strings.Builder
	fmt.Fprintf(&b, "%s: median %s %s (min %s, max %s) over %d runs", name,
		num(median(vals)), f.unit, num(slices.Min(vals)), num(slices.Max(vals)), len(vals))
	if f.limit != "" {
		var ratios []float64
		for _, m := range perRun {
			if m == nil {
				continue
			}
			v, ok1 := m[name]
			l, ok2 := m[f.limit]
			if ok1 && ok2 && l > 0 {
				ratios = append(ratios, v/l)
			}
		}
		if len(ratios) > 0 {
			fmt.Fprintf(&b, "; %s× %s (min %s×, max %s×)", num(median(ratios)), f.limit, num(slices.Min(ratios)), num(slices.Max(ratios)))
		}
	}
	if f.goal != "" {
		fmt.Fprintf(&b, " — %s", f.goal)
	}
	return b.String()
}

// build compiles berth once, from the module root that `go env GOMOD` names.
func build(dir string) (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	gomod := strings.TrimSpace(string(out))
	if gomod == "" || gomod == os.DevNull {
		return "", fmt.Errorf("not inside a Go module: run berth-bench from the berth repository")
	}
	bin := filepath.Join(dir, "berth")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/berth")
	cmd.Dir = filepath.Dir(gomod)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("go build ./cmd/berth in %s: %w", cmd.Dir, err)
	}
	return bin, nil
}

// median of vals (the mean of the middle two for an even count).
func median(vals []float64) float64 {
	s := slices.Sorted(slices.Values(vals))
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// percentile is the nearest-rank percentile q (0–100) of vals: of 50
// values, p50 is the 25th smallest and p99 the largest.
func percentile(vals []float64, q float64) float64 {
	s := slices.Sorted(slices.Values(vals))
	i := int(math.Ceil(q/100*float64(len(s)))) - 1
	return s[max(0, min(i, len(s)-1))]
}

// num shows a figure with three or so significant digits.
func num(v float64) string {
	a := math.Abs(v)
	switch {
	case a >= 100:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case a >= 10:
		return strconv.FormatFloat(v, 'f', 1, 64)
	case a >= 1:
		return strconv.FormatFloat(v, 'f', 2, 64)
	default:
		return strconv.FormatFloat(v, 'f', 3, 64)
	}
}

// filesystem names the file system that holds path, from mountinfo: the
// state's commits cost an fsync each, which tmpfs makes free.
func filesystem(path string) string {
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return "file system unknown"
	}
	best, found := "", "file system unknown"
	for line := range strings.SplitSeq(string(data), "\n") {
		// ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTIONS... - FSTYPE SOURCE SUPER
		pre, post, ok := strings.Cut(line, " - ")
		f, g := strings.Fields(pre), strings.Fields(post)
		if !ok || len(f) < 5 || len(g) < 2 {
			continue
		}
		mp := f[4]
		if (path == mp || strings.HasPrefix(path, strings.TrimSuffix(mp, "/")+"/")) && len(mp) >= len(best) {
			best, found = mp, g[0]+" on "+g[1]+" at "+mp
		}
	}
	return found
}

// loadAverage is the 1-, 5- and 15-minute load average.
func loadAverage() string {
	data, err := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(data)); err == nil && len(f) >= 3 {
		return strings.Join(f[:3], " ")
	}
	return "unknown"
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "berth-bench:", err)
	os.Exit(1)
}
