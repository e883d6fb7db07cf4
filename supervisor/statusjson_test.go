package supervisor

import (
	"bytes"
	"fmt"
	"net/http/httptest"
	"reflect"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/berthd/berth/accounting"
	"github.com/berthd/berth/luaapi"
	"github.com/berthd/berth/probes"
	"github.com/berthd/berth/supervisor/testkit"
)

// oracle is what writeJSON, encoding/json, answers with v.
func oracle(v any) string {
	rec := httptest.NewRecorder()
	writeJSON(rec, 200, v)
	return rec.Body.String()
}

func appended(write func(*httptest.ResponseRecorder)) (string, string) {
	rec := httptest.NewRecorder()
	write(rec)
	return rec.Body.String(), rec.Header().Get("Content-Type")
}

// oddStrings are strings encoding/json escapes, each its own way.
var oddStrings = []string{
	"", "plain", `quo"te`, `back\slash`, "<b>&amp;</b>", "tab\tnl\ncr\rbs\bff\f", "\x00\x01\x1f\x7f",
	"zürich ✓ 漢字", "bad \xff utf8 \xc3", "line\u2028para\u2029end", "\u00a0nbsp", "emoji 🚀",
}

func sampleJobs() []JobStatus {
	i64 := func(n int64) *int64 { return &n }
	n := 3
	exit := 2
	start := time.Date(2026, 12, 4, 9, 1, 2, 345_678_901, time.FixedZone("", 5*3600+30*60))
	jobs := []JobStatus{
		{}, // every field zero: the omitempty ones left out, the lists null
		{
			Name: "alice/train", Owner: "alice", State: "running", Since: time.Date(2026, 12, 4, 8, 0, 0, 0, time.UTC),
			Why: "waits for 2 cores", Run: 1 << 63, PID: 4194304, CPUs: 4, CPUIDs: []int{0, 1, 2, 3},
			GPUs: []string{"0", "GPU-4f2a"}, RAMBytes: 1 << 40, GPUMemBytes: 8 << 30,
			GPUMemUsedBytes: i64(-1), GPUMemPeakBytes: i64(1 << 33), Restarts: 7, File: "/etc/berth/jobs.d/a.lua", Line: 12,
			Asked: Size{CPUs: 4, GPUs: 2, RAMBytes: -1, GPUMemBytes: 3}, Flavor: "big",
			ExpectedStart: &start, Short: &Size{CPUs: 1}, Quota: &QuotaView{Held: Size{CPUs: 2}, Quota: Size{CPUs: -1}},
			Used: &Usage{MemoryBytes: i64(5)}, After: []Dependency{{Job: "prep", Kind: "after", State: "done", ExitCode: &exit, Satisfied: true}},
			Array: &ArrayStatus{From: 1, To: 10, Size: 10, MaxParallel: 2, Counts: map[string]int{"done": 3, "waiting": 7}, Queued: &n},
		},
		{Name: "empty-lists", CPUIDs: []int{}, GPUs: []string{}, After: []Dependency{}, Short: &Size{}},
	}
	for _, s := range oddStrings {
		jobs = append(jobs, JobStatus{Name: s, Owner: s, State: s, Why: s, GPUs: []string{s}, File: s, Flavor: s, Since: start})
	}
	return jobs
}

// TestStatusJSONMatches: the answers of GET /v1/status and /v1/jobs are
// encoding/json's, byte for byte.
func TestStatusJSONMatches(t *testing.T) {
	t.Parallel()
	mem := int64(1 << 34)
	statuses := []Status{
		{}, // nothing at all: lists and maps null
		{
			Host: "gpu<1>&co", Machine: MachineStatus{CPUs: 64, CPUsFree: 3, RAMBytes: &mem, Cards: []CardStatus{{Name: "0", Holder: "a", Off: true, Foreign: []ForeignUse{{PID: 1, User: "bob", Command: "python <x>", MemoryBytes: -1}}}}},
			Jobs: sampleJobs(), Errors: []string{"a <b>"}, Problems: []Problem{{Code: "bad_field", File: "x.lua", Line: 3, Text: "t"}},
			Counts: map[string]int{"running": 1, "done": 2}, Logs: "journal", Runner: "units", Now: time.Now(),
			Daemon: DaemonStatus{Version: "1.0", PID: 42, Started: time.Now().Add(-time.Hour), Binary: "/usr/bin/berth", BinaryReplaced: true},
		},
		{Jobs: []JobStatus{}, Errors: []string{}, Problems: []Problem{}, Counts: map[string]int{}},
	}
	for i, s := range statuses {
		got, ctype := appended(func(w *httptest.ResponseRecorder) { writeStatus(w, s) })
		if want := oracle(s); got != want {
			t.Errorf("status %d:\n got %s\nwant %s", i, got, want)
		}
		if ctype != "application/json" {
			t.Errorf("status %d: Content-Type %q", i, ctype)
		}
		got, _ = appended(func(w *httptest.ResponseRecorder) { writeJobs(w, s.Jobs) })
		if want := oracle(s.Jobs); got != want {
			t.Errorf("jobs %d:\n got %s\nwant %s", i, got, want)
		}
	}
}

// TestStatusJSONTimeOutOfRange: a time encoding/json refuses is left to
// encoding/json, whatever it makes of it.
func TestStatusJSONTimeOutOfRange(t *testing.T) {
	t.Parallel()
	jobs := []JobStatus{{Name: "far", Since: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)}}
	got, _ := appended(func(w *httptest.ResponseRecorder) { writeJobs(w, jobs) })
	if want := oracle(jobs); got != want {
		t.Errorf("got %q, want encoding/json's %q", got, want)
	}
}

// FuzzJobStatusJSON: whatever the strings and numbers, a job is written
// as encoding/json writes it.
func FuzzJobStatusJSON(f *testing.F) {
	for _, s := range oddStrings {
		f.Add(s, s, uint64(1), int64(-5), int64(1_700_000_000), int64(999))
	}
	f.Fuzz(func(t *testing.T, name, gpu string, run uint64, n, sec, nsec int64) {
		at := time.Unix(sec%(1<<36), nsec).In(time.FixedZone("", int(n%(14*3600))))
		jobs := []JobStatus{{Name: name, Owner: gpu, State: name, Since: at, Why: gpu, Run: run, PID: int(n), CPUs: int(n),
			CPUIDs: []int{int(n)}, GPUs: []string{gpu, name}, RAMBytes: n, GPUMemUsedBytes: &n, Asked: Size{RAMBytes: n}, ExpectedStart: &at}}
		got, _ := appended(func(w *httptest.ResponseRecorder) { writeJobs(w, jobs) })
		if want := oracle(jobs); got != want {
			t.Errorf("got  %q\nwant %q", got, want)
		}
	})
}

// BenchmarkStatusJSON is the answer of GET /v1/status with 1 000 jobs,
// written here and by encoding/json.
func BenchmarkStatusJSON(b *testing.B) {
	s := Status{Host: "h", Counts: map[string]int{"running": 1000}, Now: time.Now()}
	for i := range 1000 {
		s.Jobs = append(s.Jobs, JobStatus{Name: fmt.Sprintf("true-%02d-%03d", i/100, i%100), State: "running", Since: time.Now(),
			Run: uint64(i), PID: 1000 + i, CPUs: 1, CPUIDs: []int{i % 2}, GPUs: []string{}, File: "/etc/berth/jobs.d/f.lua", Line: i,
			Asked: Size{CPUs: 1}})
	}
	for _, c := range []struct {
		name  string
		write func(*httptest.ResponseRecorder)
	}{
		{"appended", func(w *httptest.ResponseRecorder) { writeStatus(w, s) }},
		{"encoding-json", func(w *httptest.ResponseRecorder) { writeJSON(w, 200, s) }},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				w := httptest.NewRecorder()
				w.Body = bytes.NewBuffer(make([]byte, 0, 300<<10))
				c.write(w)
			}
		})
	}
}

// TestStatusJSONEveryField: a Status with every field of every type in it
// set, its jobs' included, is written as encoding/json writes it, so that
// a field added to JobStatus, Size or Status without its line in
// statusjson.go fails here.
func TestStatusJSONEveryField(t *testing.T) {
	t.Parallel()
	var s Status
	fill(reflect.ValueOf(&s).Elem(), 0)
	if len(s.Jobs) == 0 || s.Jobs[0].Array == nil || s.Jobs[0].Short == nil {
		t.Fatalf("fill left the jobs' fields out: %+v", s.Jobs)
	}
	got, _ := appended(func(w *httptest.ResponseRecorder) { writeStatus(w, s) })
	if want := oracle(s); got != want {
		t.Errorf("status:\n got %s\nwant %s", got, want)
	}
}

// fill sets every field it can reach to something not zero: one element
// in each list and map, a value behind each pointer.
func fill(v reflect.Value, depth int) {
	if depth > 8 {
		return
	}
	switch v.Kind() {
	case reflect.String:
		v.SetString("x<" + v.Type().Name() + ">")
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(int64(7 + depth))
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(uint64(9 + depth))
	case reflect.Float32, reflect.Float64:
		v.SetFloat(1.5)
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		fill(v.Elem(), depth+1)
	case reflect.Slice:
		v.Set(reflect.MakeSlice(v.Type(), 1, 1))
		fill(v.Index(0), depth+1)
	case reflect.Map:
		m := reflect.MakeMap(v.Type())
		k, e := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
		fill(k, depth+1)
		fill(e, depth+1)
		m.SetMapIndex(k, e)
		v.Set(m)
	case reflect.Struct:
		if v.Type() == reflect.TypeFor[time.Time]() {
			v.Set(reflect.ValueOf(time.Date(2026, 12, 4, 10, 11, 12, 13, time.UTC)))
			return
		}
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				fill(v.Field(i), depth+1)
			}
		}
	}
}

// BenchmarkStatus is the daemon's part of GET /v1/status with 1 000 jobs,
// the picture taken and written: berth-bench's status call without the
// socket and the client. "independent" has them done; "pipelines" has them
// done in chains of ten, each after the one before, so that each done job
// is asked whether it runs again after its parent; "waiting" has them
// queued behind a job that holds every core, each with its place in the
// queue and why it waits.
func BenchmarkStatus(b *testing.B) {
	done := func(d *Daemon) bool { return d.Status().Counts["done"] == 1000 }
	for _, c := range []struct {
		name  string
		first string // a job declared before the thousand
		after func(i int) string
		ready func(d *Daemon) bool
	}{
		{"independent", "", func(int) string { return "" }, done},
		{"pipelines", "", func(i int) string {
			if i%10 == 0 {
				return ""
			}
			return fmt.Sprintf(`, after = "j%04d"`, i-1)
		}, done},
		{"waiting", "job \"hog\" { cmd = \"sleep 600\", cpus = 2 }\n", func(int) string { return "" },
			func(d *Daemon) bool { return d.Status().Counts["waiting"] == 1000 }},
	} {
		b.Run(c.name, func(b *testing.B) {
			jobs := strings.Builder{}
			jobs.WriteString(c.first)
			for i := range 1000 {
				fmt.Fprintf(&jobs, "job \"j%04d\" { cmd = { \"/bin/true\" }, cpus = 1%s }\n", i, c.after(i))
			}
			d, _ := runDaemon(b, jobs.String(), nil)
			testkit.WaitFor(b, 2*time.Minute, c.name+": 1 000 jobs in place", func() bool { return c.ready(d) })
			w := httptest.NewRecorder()
			b.ReportAllocs()
			cpu0 := processCPU(b)
			for b.Loop() {
				w.Body.Reset()
				writeStatus(w, d.Status())
			}
			// The wall time per op counts what else this shared machine
			// runs; the CPU the process spent does much less.
			b.ReportMetric(float64(processCPU(b)-cpu0)/float64(b.N), "cpu-ns/op")
		})
	}
}

// processCPU is the CPU time this process has spent, user and system.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// TestStatusCoresThatExist: a job's cpu_ids are the cores it holds that
// exist; those a --cpus above the machine's count adds, which no process
// can be pinned to, are not listed (trial AB: a core 2 on a two-core box).
func TestStatusCoresThatExist(t *testing.T) {
	t.Parallel()
	d, _ := runDaemon(t, `job "wide" { cmd = "sleep 600", cpus = 2 }`, func(cfg *Config) {
		cfg.Machine = probes.Inventory{CPUs: 2, CPUIDs: []int{0, 1}, OnlineCPUs: 1,
			RAM: probes.Memory{Bytes: 4 * accounting.GiB, Known: true}}
	})
	j := waitJob(t, d, "wide", "running", func(j JobStatus) bool { return j.State == "running" })
	if j.CPUs != 2 || !slices.Equal(j.CPUIDs, []int{0}) {
		t.Errorf("wide holds %d cores, IDs %v; want 2, [0]", j.CPUs, j.CPUIDs)
	}
}

// TestCompareCards: an array's cards are listed in the machine's order,
// an index by its number (trial AJ: "3,2").
func TestCompareCards(t *testing.T) {
	t.Parallel()
	cards := []string{"GPU-b", "10", "3", "GPU-a", "2", "3"}
	slices.SortFunc(cards, compareCards)
	if want := []string{"2", "3", "3", "10", "GPU-a", "GPU-b"}; !slices.Equal(cards, want) {
		t.Errorf("sorted: %q, want %q", cards, want)
	}
}

// TestArrayStatusCards: an array's line lists the cards its indices hold
// in the machine's order, a card two indices share once (trial AJ: "3,2").
func TestArrayStatusCards(t *testing.T) {
	t.Parallel()
	a := newArray(&luaapi.Job{Name: "sw", Array: &luaapi.Range{From: 1, To: 3}})
	got := arrayStatus(a, []JobStatus{
		{Name: "sw[1]", GPUs: []string{"3"}, CPUIDs: []int{5}},
		{Name: "sw[2]", GPUs: []string{"2"}, CPUIDs: []int{1}, GPUMemBytes: 4 << 30},
		{Name: "sw[3]", GPUs: []string{"2"}, GPUMemBytes: 4 << 30},
	})
	if !slices.Equal(got.GPUs, []string{"2", "3"}) || !slices.Equal(got.CPUIDs, []int{1, 5}) || got.GPUMemBytes != 8<<30 {
		t.Errorf("the array's cards %q, cores %v, shares %d; want 2,3, 1,5 and 8G", got.GPUs, got.CPUIDs, got.GPUMemBytes)
	}
}
