package watch

import (
	"context"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestSaveLatency measures, with the default options, the time from the
// end of a save (the file holds its new content) to the signal, and to the
// end of the scan that follows: what the watcher adds to berth's
// save-to-running latency. It logs the figures (go test -v -run
// SaveLatency) and fails only if a save goes unnoticed.
func TestSaveLatency(t *testing.T) {
	if testing.Short() {
		t.Skip("150 saves")
	}
	const n = 50
	for _, style := range []string{"truncate+write", "vim", "atomic"} {
		t.Run(style, func(t *testing.T) {
			dir := jobsDir(t)
			writeFile(t, filepath.Join(dir, "f.lua"), "v0")
			s := newTestScanner(dir)
			scan(t, s)
			w := startWatcher(t, dir, WatchOptions{})
			var toSignal, toScanned []time.Duration
			for i := 1; i <= n; i++ {
				want := "v" + strconv.Itoa(i)
				select {
				case <-w.Changes(): // a late signal from the previous save
				default:
				}
				saves[style](t, dir, want)
				end := time.Now()
				deadline := time.After(settleWithin)
				for first := true; ; first = false {
					select {
					case <-w.Changes():
					case <-deadline:
						t.Fatalf("save %d: no signal", i)
					}
					signalled := time.Since(end)
					got := scan(t, s)
					if string(got.Changed[filepath.Join(dir, "f.lua")]) == want {
						if first {
							toSignal = append(toSignal, signalled)
						}
						toScanned = append(toScanned, time.Since(end))
						break
					}
				}
			}
			t.Logf("quiet %v, %d saves: end of save → signal %s; → scanned %s",
				DefaultQuiet, n, percentiles(toSignal), percentiles(toScanned))
		})
	}
}

// percentiles renders "median 10.8ms, p90 11.5ms, max 13.0ms".
func percentiles(d []time.Duration) string {
	if len(d) == 0 {
		return "no samples"
	}
	d = slices.Clone(d)
	slices.Sort(d)
	at := func(q float64) time.Duration { return d[int(q*float64(len(d)-1))] }
	ms := func(x time.Duration) string { return strconv.FormatFloat(float64(x)/1e6, 'f', 1, 64) + "ms" }
	return fmt.Sprintf("median %s, p90 %s, max %s", ms(at(0.5)), ms(at(0.9)), ms(d[len(d)-1]))
}

// jobText is a job file of a realistic size (about 300 bytes).
func jobText(i, version int) string {
	return fmt.Sprintf(`-- generated
job "sweep-%d" {
  cmd = { "python3", "sweep.py", "--seed", "%d" },
  cpus = 2, gpus = 1, ram = "8G",
  restart = "on-failure",
  env = { WANDB_MODE = "offline", VERSION = "%d" },
  description = "seed sweep, one of a thousand",
}
`, i, i, version)
}

func thousandFiles(b *testing.B) (string, *Scanner) {
	dir := jobsDir(b)
	for i := range 1000 {
		writeFile(b, filepath.Join(dir, fmt.Sprintf("job%04d.lua", i)), jobText(i, 0))
	}
	s := newTestScanner(dir)
	if got, err := s.Scan(); err != nil || len(got.Changed) != 1000 {
		b.Fatalf("first scan: %d changed, %v", len(got.Changed), err)
	}
	return dir, s
}

// BenchmarkScan1000 is the scan after an edit: 1000 job files, one of them
// changed since the last scan. The scanner's clock is moved past the racy
// window, as it is in a directory whose files were not all written in the
// last two seconds, so only the changed file is read.
func BenchmarkScan1000(b *testing.B) {
	dir, s := thousandFiles(b)
	s.now = func() time.Time { return time.Now().Add(time.Hour) }
	s.Scan() // settle: nothing is racy from here on
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		k := i % 1000
		writeFile(b, filepath.Join(dir, fmt.Sprintf("job%04d.lua", k)), jobText(k, i+1))
		b.StartTimer()
		got, err := s.Scan()
		if err != nil || len(got.Changed) != 1 {
			b.Fatalf("scan %d: %d changed, %v", i, len(got.Changed), err)
		}
	}
}

// BenchmarkScan1000Unchanged is the periodic safety-net scan: nothing
// changed, so it is a directory listing and 1000 stats.
func BenchmarkScan1000Unchanged(b *testing.B) {
	_, s := thousandFiles(b)
	s.now = func() time.Time { return time.Now().Add(time.Hour) }
	s.Scan()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if got, err := s.Scan(); err != nil || len(got.Changed) != 0 {
			b.Fatalf("scan %d: %d changed, %v", i, len(got.Changed), err)
		}
	}
}

// BenchmarkScan1000AllRacy is the worst case: every file was written in
// the last two seconds (a git checkout of the whole directory), so every
// scan reads and hashes all of them.
func BenchmarkScan1000AllRacy(b *testing.B) {
	_, s := thousandFiles(b)
	frozen := time.Now()
	s.now = func() time.Time { return frozen }
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := s.Scan(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkQuiet is the measurement behind DefaultQuiet: for each quiet
// period and save style, b.N saves while a daemon-like goroutine scans on
// every signal. It reports the latency from the end of a save to the scan
// that shows it (ms-p50, ms-p90) and how many scans saw a state in the
// middle of a save (mid-save/op: f.lua missing, empty, or neither its old
// nor its new content). BERTH_WATCH_LOAD=N runs N CPU-bound processes
// meanwhile, so that the saver and the watcher get preempted as on a busy
// machine:
//
//	BERTH_WATCH_LOAD=8 go test -run '^$' -bench Quiet -benchtime 200x ./supervisor/watch
func BenchmarkQuiet(b *testing.B) {
	if n, _ := strconv.Atoi(os.Getenv("BERTH_WATCH_LOAD")); n > 0 {
		stop := spin(b, n)
		defer stop()
	}
	type style struct {
		save func(t testing.TB, dir, content string)
		eol  string // what the program adds to the content
	}
	styles := map[string]style{}
	for name, save := range saves {
		styles[name] = style{save, ""}
	}
	for name, save := range realSaves(b) {
		styles["real "+name] = style{save, "\n"}
	}
	names := slices.Sorted(maps.Keys(styles))
	for _, quiet := range []time.Duration{time.Millisecond, 2 * time.Millisecond, 5 * time.Millisecond, 10 * time.Millisecond, 20 * time.Millisecond} {
		for _, name := range names {
			b.Run(fmt.Sprintf("quiet=%v/%s", quiet, name), func(b *testing.B) {
				benchQuiet(b, quiet, styles[name].save, styles[name].eol)
			})
		}
	}
}

func benchQuiet(b *testing.B, quiet time.Duration, save func(t testing.TB, dir, content string), eol string) {
	dir := jobsDir(b)
	f := filepath.Join(dir, "f.lua")
	writeFile(b, f, "v0"+eol)
	s := newTestScanner(dir)
	if _, err := s.Scan(); err != nil {
		b.Fatal(err)
	}
	w := startWatcher(b, dir, WatchOptions{Quiet: quiet})

	// The daemon: scan on every signal, report what f.lua became.
	type seen struct {
		at      time.Time
		removed bool
		content string
		changed bool
	}
	results := make(chan seen, 1024)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-ctx.Done():
				return
			case <-w.Changes():
			}
			got, err := s.Scan()
			if err != nil {
				panic(err)
			}
			c, changed := got.Changed[f]
			results <- seen{at: time.Now(), removed: slices.Contains(got.Removed, f), content: string(c), changed: changed}
		}
	}()
	defer func() { cancel(); <-done }()

	var lat []time.Duration
	midSave := 0
	prev := "v0" + eol
	b.ResetTimer()
	for i := 1; i <= b.N; i++ {
		want := "v" + strconv.Itoa(i) + eol
		save(b, dir, strings.TrimSuffix(want, eol))
		end := time.Now()
		deadline := time.After(settleWithin)
	wait:
		for {
			select {
			case r := <-results:
				switch {
				case r.changed && r.content == want:
					lat = append(lat, r.at.Sub(end))
					break wait
				case r.removed || (r.changed && r.content != prev):
					midSave++
				}
			case <-deadline:
				b.Fatalf("save %d: never seen", i)
			}
		}
		prev = want
		// Let the save's tail (vim's removal of f.lua~) be delivered, so
		// that its signal does not land in the middle of the next save: a
		// person does not save a hundred times a second.
		b.StopTimer()
		for settled := false; !settled; {
			select {
			case r := <-results:
				if r.removed || (r.changed && r.content != want) {
					midSave++
				}
			case <-time.After(10*quiet + 20*time.Millisecond):
				settled = true
			}
		}
		b.StartTimer()
	}
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2])/1e6, "ms-p50")
	b.ReportMetric(float64(lat[len(lat)*9/10])/1e6, "ms-p90")
	b.ReportMetric(float64(midSave)/float64(b.N), "mid-save/op")
}

// spin starts n copies of the test binary that only burn CPU (TestMain),
// and returns a function that kills exactly those.
func spin(b *testing.B, n int) func() {
	var cmds []*exec.Cmd
	for range n {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), "BERTH_WATCH_SPIN=1")
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		cmds = append(cmds, cmd)
	}
	b.Logf("%d CPU-bound processes on %d CPUs", n, runtime.NumCPU())
	return func() {
		for _, cmd := range cmds {
			cmd.Process.Kill()
			cmd.Wait()
		}
	}
}
