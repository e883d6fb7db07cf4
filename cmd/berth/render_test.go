package main

import (
	"bytes"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/berthd/berth/accounting"
	"github.com/berthd/berth/supervisor"
	"github.com/berthd/berth/supervisor/testkit"
)

// renderNow is the daemon's clock in every picture below.
var renderNow = time.Date(2026, 11, 29, 14, 0, 0, 0, time.UTC)

// pinRenderZone writes wall-clock times in UTC for the length of the test,
// so the goldens do not depend on the machine's time zone.
func pinRenderZone(t *testing.T) {
	t.Helper()
	old := renderZone
	renderZone = time.UTC
	t.Cleanup(func() { renderZone = old })
}

func ago(d time.Duration) time.Time { return renderNow.Add(-d) }

func sizeG(g int64) *int64 { n := g * accounting.GiB; return &n }

func cardsHeldBy(holders ...string) []supervisor.CardStatus {
	cards := make([]supervisor.CardStatus, len(holders))
	for i, h := range holders {
		cards[i] = supervisor.CardStatus{Name: fmt.Sprint(i), Holder: h}
	}
	return cards
}

// quietBox is a workstation without cards where two jobs have finished.
func quietBox() supervisor.Status {
	return supervisor.Status{
		Host:    "quietbox",
		Machine: supervisor.MachineStatus{CPUs: 4, CPUsFree: 4, RAMBytes: sizeG(15), RAMFreeBytes: sizeG(15), Cards: []supervisor.CardStatus{}},
		Jobs: []supervisor.JobStatus{
			{Name: "index-photos", State: "done", Since: ago(26 * time.Hour), Why: "exit 0", GPUs: []string{}, Asked: supervisor.Size{CPUs: 2}},
			{Name: "backup-home", State: "done", Since: ago(3*time.Hour + 10*time.Minute), Why: "exit 0", GPUs: []string{}, Asked: supervisor.Size{CPUs: 1}},
		},
		Errors: []string{},
		Logs:   "files",
		Now:    renderNow,
	}
}

// headBox is four cards all taken, and a queue whose head has an expected
// start although another job has waited longer.
func headBox() supervisor.Status {
	expected := renderNow.Add(5 * time.Minute)
	return supervisor.Status{
		Host: "gpubox",
		Machine: supervisor.MachineStatus{CPUs: 14, CPUsFree: 3, RAMBytes: sizeG(62), RAMFreeBytes: sizeG(14),
			Cards: cardsHeldBy("train-resnet", "train-resnet", "sweep-1", "sweep-3")},
		Jobs: []supervisor.JobStatus{
			{Name: "eval-nightly", State: "failed", Since: ago(time.Hour), Why: "exit 3", GPUs: []string{}, Run: 17},
			{Name: "report", State: "done", Since: ago(5 * 24 * time.Hour), GPUs: []string{}, RunsAgainAfter: "sweep-1",
				Why: "runs again after sweep-1, which runs again first: its output is out of date until then (berth show sweep-1 says why)"},
			{Name: "sweep-1", State: "running", Since: ago(50 * time.Minute), Run: 21, PID: 4242, CPUs: 2, GPUs: []string{"2"}, RAMBytes: 8 * accounting.GiB},
			{Name: "sweep-2", State: "waiting", Since: ago(30 * time.Minute), Why: "needs 1 gpu; 0 free", GPUs: []string{},
				Asked: supervisor.Size{CPUs: 1, GPUs: 1}, Short: &supervisor.Size{GPUs: 1}},
			{Name: "sweep-3", State: "running", Since: ago(3 * time.Minute), Run: 23, PID: 4300, CPUs: 1, GPUs: []string{"3"}, RAMBytes: 8 * accounting.GiB},
			{Name: "train-llama-7b-lora", State: "waiting", Since: ago(5 * time.Minute), Why: "needs 2 gpus; 0 free",
				GPUs: []string{}, ExpectedStart: &expected, Asked: supervisor.Size{CPUs: 8, GPUs: 2}, Short: &supervisor.Size{GPUs: 2}},
			{Name: "train-resnet", State: "running", Since: ago(2*time.Hour + 5*time.Minute), Run: 12, PID: 4100, CPUs: 8, GPUs: []string{"0", "1"}, RAMBytes: 32 * accounting.GiB},
		},
		Errors: []string{},
		Logs:   "journal",
		Now:    renderNow,
	}
}

// peopleBox is a shared box: alice's and bob's jobs beside an admin's;
// one of alice's waits on her quota.
func peopleBox() supervisor.Status {
	cards := cardsHeldBy("alice/train", "alice/train", "bob/sweep", "")
	cards[0].Owner, cards[1].Owner, cards[2].Owner = "alice", "alice", "bob"
	return supervisor.Status{
		Host:    "gpubox",
		Machine: supervisor.MachineStatus{CPUs: 32, CPUsFree: 12, RAMBytes: sizeG(251), RAMFreeBytes: sizeG(120), Cards: cards},
		Jobs: []supervisor.JobStatus{
			{Name: "alice/eval", Owner: "alice", State: "waiting", Since: ago(10 * time.Minute), GPUs: []string{},
				Why: "alice holds 2 of their 2 cards (quota; berth status --owner alice shows their jobs)", Asked: supervisor.Size{CPUs: 4, GPUs: 1}, Short: &supervisor.Size{},
				Quota: &supervisor.QuotaView{Held: supervisor.Size{CPUs: 16, GPUs: 2, RAMBytes: 96 * accounting.GiB}, Quota: supervisor.Size{CPUs: -1, GPUs: 2, RAMBytes: -1}}},
			{Name: "alice/train", Owner: "alice", State: "running", Since: ago(3 * time.Hour), Run: 40, PID: 5100, CPUs: 16, GPUs: []string{"0", "1"}, RAMBytes: 96 * accounting.GiB},
			{Name: "backup", State: "running", Since: ago(20 * time.Minute), Run: 44, PID: 5300, CPUs: 1, GPUs: []string{}},
			{Name: "bob/sweep", Owner: "bob", State: "running", Since: ago(time.Hour), Run: 42, PID: 5200, CPUs: 4, GPUs: []string{"2"}, RAMBytes: 32 * accounting.GiB},
		},
		Errors: []string{},
		Logs:   "journal",
		Now:    renderNow,
	}
}

// errorsBox has configuration errors in two files, one too long for a line,
// and one said as its job's why, which the errors do not say again.
func errorsBox() supervisor.Status {
	return supervisor.Status{
		Host:    "devbox",
		Machine: supervisor.MachineStatus{CPUs: 16, CPUsFree: 8, RAMBytes: sizeG(126), RAMFreeBytes: sizeG(110), Cards: cardsHeldBy("train", "")},
		Jobs: []supervisor.JobStatus{
			{Name: "train", State: "running", Since: ago(40 * time.Minute), CPUs: 8, GPUs: []string{"0"}, RAMBytes: 16 * accounting.GiB},
			{Name: "sweep-1", State: "invalid", Since: ago(2 * time.Minute), GPUs: []string{},
				Why: `jobs.d/sweep.lua:7: job "sweep-1": flavor "gpu-huge" does not exist (berth flavors lists them)`},
		},
		Problems: []supervisor.Problem{
			{Code: "unknown_field", File: "jobs.d/eval.lua", Line: 3, Kind: "job", Job: "eval", Field: "gpu",
				Text: `jobs.d/eval.lua:3: job "eval": unknown field "gpu" (did you mean "gpus"?)`},
			{Code: "unknown_flavor", File: "jobs.d/sweep.lua", Line: 7, Kind: "job", Job: "sweep-1", Field: "flavor",
				Text: `jobs.d/sweep.lua:7: job "sweep-1": flavor "gpu-huge" does not exist (berth flavors lists them)`},
			{Code: "bad_value", File: "jobs.d/sweep.lua", Line: 19, Kind: "job", Job: "sweep-2", Field: "ram",
				Text: `jobs.d/sweep.lua:19: job "sweep-2": field "ram": size "32" has no unit; write it with one of K, M, G or T (base 1024, optionally followed by "B" or "iB"), e.g. "32G"`},
		},
		Logs: "journal",
		Now:  renderNow,
	}
}

// busyBox is eight cards and 200 jobs in every state, generated the same way
// each time.
func busyBox() supervisor.Status {
	gib := accounting.GiB
	var jobs []supervisor.JobStatus
	add := func(j supervisor.JobStatus) {
		if j.GPUs == nil {
			j.GPUs = []string{}
		}
		jobs = append(jobs, j)
	}
	// Holding every card.
	add(supervisor.JobStatus{Name: "train-resnet50", State: "running", Since: ago(2*time.Hour + 10*time.Minute),
		Run: 101, PID: 5100, CPUs: 16, GPUs: []string{"0", "1"}, RAMBytes: 64 * gib})
	add(supervisor.JobStatus{Name: "train-vit-huge-patch14-224-in21k-finetune-lr3e-4-bs1024", State: "running", Since: ago(26 * time.Hour),
		Run: 88, PID: 4800, CPUs: 16, GPUs: []string{"2", "3"}, RAMBytes: 128 * gib})
	for i := 1; i <= 4; i++ {
		add(supervisor.JobStatus{Name: fmt.Sprintf("sweep-lr-%03d", i), State: "running", Since: ago(time.Duration(15+7*i) * time.Minute),
			Run: uint64(200 + i), PID: 6000 + i, CPUs: 4, GPUs: []string{fmt.Sprint(3 + i)}, RAMBytes: 24 * gib})
	}
	// Holding cores and memory only.
	for i := range 3 {
		add(supervisor.JobStatus{Name: fmt.Sprintf("preprocess-shard-%02d", i), State: "running", Since: ago(time.Duration(3+i) * time.Minute),
			Run: uint64(300 + i), PID: 7000 + i, CPUs: 4, RAMBytes: 8 * gib})
	}
	add(supervisor.JobStatus{Name: "tensorboard", State: "running", Since: ago(4 * 24 * time.Hour), Run: 40, PID: 900, Restarts: 2})
	add(supervisor.JobStatus{Name: "notebook-ana", State: "stopping", Since: ago(10 * time.Second), Run: 310, PID: 7100, CPUs: 2, RAMBytes: 4 * gib})
	add(supervisor.JobStatus{Name: "eval-quick", State: "starting", Since: ago(time.Second), Run: 311, CPUs: 2, RAMBytes: 8 * gib})
	// The queue: its head, waiting for cards behind it, and for cores.
	expected := renderNow.Add(25 * time.Minute)
	add(supervisor.JobStatus{Name: "train-llama-7b-lora", State: "waiting", Since: ago(40 * time.Minute),
		Why: "needs 2 gpus; 0 free", ExpectedStart: &expected, Asked: supervisor.Size{CPUs: 8, GPUs: 2, RAMBytes: 64 * gib},
		Short: &supervisor.Size{GPUs: 2}})
	for i := 5; i <= 40; i++ {
		add(supervisor.JobStatus{Name: fmt.Sprintf("sweep-lr-%03d", i), State: "waiting", Since: ago(time.Duration(45-i) * time.Minute),
			Why: "needs 1 gpu; 0 free", Asked: supervisor.Size{CPUs: 4, GPUs: 1, RAMBytes: 24 * gib}, Short: &supervisor.Size{GPUs: 1}})
	}
	for i := 3; i < 8; i++ {
		add(supervisor.JobStatus{Name: fmt.Sprintf("preprocess-shard-%02d", i), State: "waiting", Since: ago(time.Duration(9-i) * time.Minute),
			Why: "needs 4 cores; 0 free", Asked: supervisor.Size{CPUs: 4, RAMBytes: 8 * gib}, Short: &supervisor.Size{CPUs: 4}})
	}
	// Restarting, and ended badly.
	add(supervisor.JobStatus{Name: "data-sync", State: "backoff", Since: ago(20 * time.Second), Why: "exit 1", Restarts: 3, RetryAt: new(renderNow.Add(8 * time.Second))})
	add(supervisor.JobStatus{Name: "label-server", State: "backoff", Since: ago(5 * time.Second), Why: "killed by SIGSEGV", Restarts: 1})
	add(supervisor.JobStatus{Name: "eval-imagenet-c", State: "failed", Since: ago(35 * time.Minute), Why: "exit 3"})
	add(supervisor.JobStatus{Name: "train-gan", State: "failed", Since: ago(3 * time.Hour), Why: "timed out after 12h"})
	add(supervisor.JobStatus{Name: "export-onnx", State: "failed", Since: ago(9 * time.Hour), Why: "exit 1", Restarts: 5, GaveUp: true})
	add(supervisor.JobStatus{Name: "bench-throughput", State: "failed", Since: ago(50 * time.Hour), Why: "killed by SIGKILL"})
	add(supervisor.JobStatus{Name: "eval-old-ckpt", State: "failed", Since: ago(7 * 24 * time.Hour), Why: "exit 137"})
	add(supervisor.JobStatus{Name: "train-70b-full", State: "unplaceable", Since: ago(time.Hour),
		Why: `job "train-70b-full" asks for 16 GPUs; this machine has 8 (berth machine shows what it has)`})
	add(supervisor.JobStatus{Name: "sweep-1", State: "invalid", Since: ago(2 * time.Hour),
		Why: `jobs.d/sweep.lua:7: job "sweep-1": flavor "gpu-huge" does not exist (berth flavors lists them)`})
	// Over.
	add(supervisor.JobStatus{Name: "notebook-bo", State: "stopped", Since: ago(6 * time.Hour)})
	add(supervisor.JobStatus{Name: "jupyter-old", State: "stopped", Since: ago(12 * 24 * time.Hour)})
	add(supervisor.JobStatus{Name: "nightly-backup", State: "disabled", Since: ago(30 * 24 * time.Hour)})
	for i := 0; len(jobs) < 200; i++ {
		add(supervisor.JobStatus{Name: fmt.Sprintf("sweep-old-%03d", i), State: "done", Since: ago(time.Duration(3+i*37) * time.Minute), Why: "exit 0"})
	}

	holders := []string{"train-resnet50", "train-resnet50",
		"train-vit-huge-patch14-224-in21k-finetune-lr3e-4-bs1024", "train-vit-huge-patch14-224-in21k-finetune-lr3e-4-bs1024",
		"sweep-lr-001", "sweep-lr-002", "sweep-lr-003", "sweep-lr-004"}
	// Listed by name, as the daemon lists them.
	for i := 1; i < len(jobs); i++ {
		for k := i; k > 0 && jobs[k].Name < jobs[k-1].Name; k-- {
			jobs[k], jobs[k-1] = jobs[k-1], jobs[k]
		}
	}
	return supervisor.Status{
		Host:    "gpubox",
		Machine: supervisor.MachineStatus{CPUs: 64, CPUsFree: 0, RAMBytes: sizeG(503), RAMFreeBytes: sizeG(179), Cards: cardsHeldBy(holders...)},
		Jobs:    jobs,
		Errors:  []string{},
		Logs:    "journal",
		Now:     renderNow,
	}
}

// arraysBox is a box where arrays run beside plain jobs: one running
// behind its max_parallel, one whose indices all wait for it, one with
// failed indices, one of a person's with an index that fits nowhere, and
// one done; a plain job waits for cards, its why in the column while the
// arrays' may go under them.
func arraysBox() supervisor.Status {
	gib := accounting.GiB
	queued := 42
	expected := renderNow.Add(10 * time.Minute)
	return supervisor.Status{
		Host: "gpubox",
		Machine: supervisor.MachineStatus{CPUs: 32, CPUsFree: 8, RAMBytes: sizeG(251), RAMFreeBytes: sizeG(91),
			Cards: cardsHeldBy("sweep[38]", "sweep[39]", "sweep[40]", "sweep[41]")},
		Jobs: []supervisor.JobStatus{
			{Name: "alice/grid", Owner: "alice", State: "unplaceable", Since: ago(20 * time.Minute), GPUs: []string{},
				Why:   `job "alice/grid[3]" asks for 8 GPUs; this machine has 4 (berth machine shows what it has)`,
				Array: &supervisor.ArrayStatus{From: 0, To: 9, Size: 10, Counts: map[string]int{"done": 8, "unplaceable": 2}}},
			{Name: "eval", State: "failed", Since: ago(time.Hour), GPUs: []string{},
				Why:   "3 of 20 indices failed; berth restart eval --failed runs them again (berth show eval lists them)",
				Array: &supervisor.ArrayStatus{From: 1, To: 20, Size: 20, Counts: map[string]int{"done": 17, "failed": 3}}},
			{Name: "prep", State: "done", Since: ago(3 * time.Hour), GPUs: []string{},
				Array: &supervisor.ArrayStatus{From: 1, To: 8, Size: 8, Counts: map[string]int{"done": 8}}},
			{Name: "render", State: "waiting", Since: ago(5 * time.Minute), GPUs: []string{},
				Why:   "4 indices in line for max_parallel = 2 (every place taken until an index ends)",
				Array: &supervisor.ArrayStatus{From: 1, To: 6, Size: 6, MaxParallel: 2, Counts: map[string]int{"stopping": 2, "waiting": 4}}},
			{Name: "sweep", State: "running", Since: ago(90 * time.Minute), CPUs: 16, CPUIDs: []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15},
				GPUs: []string{"0", "1", "2", "3"}, RAMBytes: 128 * gib, Restarts: 1, ExpectedStart: &expected,
				Asked: supervisor.Size{CPUs: 4, GPUs: 1, RAMBytes: 32 * gib}, Short: &supervisor.Size{GPUs: 1},
				Array: &supervisor.ArrayStatus{From: 1, To: 100, Size: 100, MaxParallel: 5, Queued: &queued,
					Counts: map[string]int{"done": 37, "running": 4, "waiting": 59}}},
			{Name: "train", State: "running", Since: ago(2 * time.Hour), Run: 12, PID: 4100, CPUs: 8, GPUs: []string{}, RAMBytes: 32 * gib},
			{Name: "tune", State: "waiting", Since: ago(30 * time.Minute), Why: "needs 2 gpus; 0 free", GPUs: []string{},
				Asked: supervisor.Size{CPUs: 2, GPUs: 2}, Short: &supervisor.Size{GPUs: 2}},
		},
		Errors: []string{},
		Logs:   "journal",
		Now:    renderNow,
	}
}

func emptyBox() supervisor.Status {
	return supervisor.Status{
		Host:    "newbox",
		Machine: supervisor.MachineStatus{CPUs: 6, CPUsFree: 6, Cards: cardsHeldBy("", "")},
		Jobs:    []supervisor.JobStatus{},
		Errors:  []string{},
		Now:     renderNow,
	}
}

// unitsBox runs its jobs as systemd units: each running job shows what it
// uses beside what it holds; one is over its memory, one ended so.
func unitsBox() supervisor.Status {
	s := headBox()
	s.Runner = "units"
	mem := func(g int64) *int64 { return &g }
	secs := func(f float64) *float64 { return &f }
	for i := range s.Jobs {
		j := &s.Jobs[i]
		switch j.Name {
		case "sweep-1":
			j.Used = &supervisor.Usage{MemoryBytes: mem(5 * accounting.GiB), CPUSeconds: secs(1.5 * 50 * 60)}
		case "train-resnet":
			j.Used = &supervisor.Usage{MemoryBytes: mem(30 * accounting.GiB)}
		case "eval-nightly":
			j.Why = "out of memory: went over its 16G"
		}
	}
	return s
}

func directBox() supervisor.Status {
	s := quietBox()
	s.Runner = "direct"
	return s
}

var statusFixtures = []struct {
	name  string
	state func() supervisor.Status
}{
	{"quiet", quietBox},
	{"busy", busyBox},
	{"errors", errorsBox},
	{"head", headBox},
	{"empty", emptyBox},
	{"units", unitsBox},
	{"direct", directBox},
	{"people", peopleBox},
	{"arrays", arraysBox},
	{"foreign", foreignBox},
	{"shares", sharesBox},
	{"wide", wideBox},
}

// wideBox is the quiet box with a job whose why is in wide characters,
// which fill two columns each.
func wideBox() supervisor.Status {
	s := quietBox()
	s.Jobs = append(s.Jobs, supervisor.JobStatus{Name: "wdir", State: "failed", Since: ago(time.Minute), GPUs: []string{},
		Why: "cannot start: dir /日本語のディレクトリ名はとても長いです日本語のディレクトリ名はとても長いです does not exist"})
	return s
}

// sharesBox is the 4-card workstation with cards shared by memory: two
// jobs of 10G on card 0, one of 20G on card 2 that holds 22G, over its
// share; a share of 20G waits for room on one card.
func sharesBox() supervisor.Status {
	gib := accounting.GiB
	cards := cardsHeldBy("", "train", "", "train")
	cards[0].Shares = []supervisor.CardShare{{Holder: "infer", Bytes: 10 * gib}, {Holder: "alice/notebook", Owner: "alice", Bytes: 10 * gib}}
	cards[0].RoomBytes = ptr(4 * gib)
	cards[2].Shares = []supervisor.CardShare{{Holder: "embed", Bytes: 20 * gib}}
	cards[2].RoomBytes = ptr(2 * gib)
	for i := range cards {
		cards[i].ShareOfBytes = ptr(24 * gib)
	}
	run := uint64(59)
	share := func(name, owner, card string, share, used int64) supervisor.JobStatus {
		run++
		return supervisor.JobStatus{Name: name, Owner: owner, State: "running", Since: renderNow.Add(-time.Hour), Run: run, PID: 6000 + int(run), CPUs: 1, CPUIDs: []int{2},
			GPUs: []string{card}, GPUMemBytes: share, GPUMemUsedBytes: ptr(used), GPUMemPeakBytes: ptr(used), Asked: supervisor.Size{CPUs: 1, GPUMemBytes: share}}
	}
	return supervisor.Status{
		Host:    "workstation",
		Machine: supervisor.MachineStatus{CPUs: 22, CPUsFree: 11, RAMBytes: sizeG(125), RAMFreeBytes: sizeG(93), Cards: cards},
		Jobs: []supervisor.JobStatus{
			share("infer", "", "0", 10*gib, 6*gib),
			share("alice/notebook", "alice", "0", 10*gib, 9*gib),
			share("embed", "", "2", 20*gib, 22*gib),
			{Name: "train", State: "running", Since: renderNow.Add(-3 * time.Hour), CPUs: 8, CPUIDs: []int{3, 4, 5, 6, 7, 8, 9, 10}, GPUs: []string{"1", "3"}, Asked: supervisor.Size{CPUs: 8, GPUs: 2}},
			{Name: "serve", State: "waiting", Since: renderNow.Add(-20 * time.Minute), CPUIDs: []int{}, GPUs: []string{}, Asked: supervisor.Size{CPUs: 1, GPUMemBytes: 20 * gib},
				Short: &supervisor.Size{GPUMemBytes: 16 * gib}, Why: "needs 20G of one gpu's memory; 4G the most free on one"},
		},
		Errors: []string{},
		Logs:   "journal",
		Now:    renderNow,
	}
}

// foreignBox is the 4-card workstation of issue 16: a hand-started
// inference server holds 21G of card 1, a desktop 300M of card 3; a job
// asking for every card waits, and says for what.
func foreignBox() supervisor.Status {
	gib := accounting.GiB
	cards := cardsHeldBy("notebook", "", "", "")
	cards[1].Off = true
	cards[1].Foreign = []supervisor.ForeignUse{{PID: 4242, User: "carol", Command: "python3", MemoryBytes: 21 * gib}}
	cards[3].Foreign = []supervisor.ForeignUse{{PID: 1830, User: "gdm", Command: "Xorg", MemoryBytes: 300 << 20}}
	return supervisor.Status{
		Host:    "workstation",
		Machine: supervisor.MachineStatus{CPUs: 22, CPUsFree: 14, RAMBytes: sizeG(125), RAMFreeBytes: sizeG(93), Cards: cards},
		Jobs: []supervisor.JobStatus{
			{Name: "notebook", State: "running", Since: renderNow.Add(-3 * time.Hour), CPUs: 8, CPUIDs: []int{2, 3, 4, 5, 6, 7, 8, 9}, GPUs: []string{"0"}, RAMBytes: 32 * gib, Asked: supervisor.Size{CPUs: 8, GPUs: 1, RAMBytes: 32 * gib}},
			{Name: "train", State: "waiting", Since: renderNow.Add(-20 * time.Minute), CPUIDs: []int{}, GPUs: []string{}, Asked: supervisor.Size{CPUs: 8, GPUs: 4, RAMBytes: 64 * gib},
				Short: &supervisor.Size{GPUs: 2}, Why: "needs 4 gpus; 2 free; card 1: 21G used by pid 4242 (python3, carol) — not a berth job"},
		},
		Errors: []string{},
		Logs:   "journal",
		Now:    renderNow,
	}
}

func statusText(s supervisor.Status, width int, color bool) string {
	var b bytes.Buffer
	renderStatus(&b, s, renderOptions{width: width, color: color, now: s.Now})
	return b.String()
}

func TestRenderStatusGolden(t *testing.T) {
	pinRenderZone(t)
	for _, f := range statusFixtures {
		for _, width := range []int{80, 200} {
			for _, color := range []bool{false, true} {
				name := fmt.Sprintf("status-%s-%d", f.name, width)
				if color {
					name += "-color"
				}
				t.Run(name, func(t *testing.T) {
					out := statusText(f.state(), width, color)
					if !color && strings.Contains(out, "\x1b") {
						t.Error("colour codes without colour")
					}
					if color && !strings.Contains(out, "\x1b[") {
						t.Error("no colour codes with colour")
					}
					testkit.Golden(t, "testdata/render/"+name+".golden", []byte(out))
				})
			}
		}
	}
}

var ansiCode = regexp.MustCompile(`\x1b\[[0-9;]*m`)

// TestRenderStatusFitsWidth holds for every width a terminal may have: no
// line is longer, and colour adds codes and nothing else.
func TestRenderStatusFitsWidth(t *testing.T) {
	pinRenderZone(t)
	for _, f := range statusFixtures {
		s := f.state()
		for width := 40; width <= 220; width++ {
			plain := statusText(s, width, false)
			for i, l := range strings.Split(strings.TrimSuffix(plain, "\n"), "\n") {
				if n := runeLen(l); n > width {
					t.Errorf("%s at %d columns: line %d is %d long: %q", f.name, width, i+1, n, l)
				}
				if strings.HasSuffix(l, " ") {
					t.Errorf("%s at %d columns: line %d ends in a blank: %q", f.name, width, i+1, l)
				}
			}
			colored := statusText(s, width, true)
			if stripped := ansiCode.ReplaceAllString(colored, ""); stripped != plain {
				t.Errorf("%s at %d columns: stripped of colour, the coloured text differs:\n%s\n---\n%s", f.name, width, stripped, plain)
			}
		}
	}
}

// TestRenderStatusOrder checks what a person reads first: what holds the
// machine, then the head of the queue, then the rest in the order of waiting.
func TestRenderStatusOrder(t *testing.T) {
	out := statusText(busyBox(), 200, false)
	var states, waiting []string
	for _, l := range strings.Split(out, "\n") {
		f := strings.Fields(l)
		if len(f) < 2 || !strings.Contains(" running starting stopping waiting backoff failed unplaceable invalid done stopped disabled ", " "+f[1]+" ") {
			continue
		}
		if len(states) == 0 || states[len(states)-1] != f[1] {
			states = append(states, f[1])
		}
		if f[1] == "waiting" {
			waiting = append(waiting, f[0])
		}
	}
	want := "running starting stopping waiting backoff failed unplaceable invalid done stopped disabled"
	if got := strings.Join(states, " "); got != want {
		t.Errorf("states in the order\n %s\nwant\n %s", got, want)
	}
	if len(waiting) < 3 || waiting[0] != "train-llama-7b-lora" || waiting[1] != "sweep-lr-005" || waiting[2] != "sweep-lr-006" {
		t.Errorf("waiting jobs start %v, want the head then the longest waiting", waiting[:min(3, len(waiting))])
	}
	if n := strings.Count(out, "\n"); n < 200 {
		t.Errorf("%d lines for 200 jobs: every job must have its line", n)
	}
}

// TestRenderStatusKeepsExpectedStart: where the reason is cut, when the head
// starts is what stays.
func TestRenderStatusKeepsExpectedStart(t *testing.T) {
	for _, width := range []int{70, 80, 100} {
		out := statusText(busyBox(), width, false)
		if !strings.Contains(out, "start ~14:25") {
			t.Errorf("at %d columns the head's expected start is cut:\n%s", width, out)
		}
	}
	// To the nearest minute: 14:24:55 is ~14:25, not a minute early.
	box := busyBox()
	for i := range box.Jobs {
		if at := box.Jobs[i].ExpectedStart; at != nil {
			early := at.Add(-5 * time.Second)
			box.Jobs[i].ExpectedStart = &early
		}
	}
	if out := statusText(box, 100, false); !strings.Contains(out, "start ~14:25") {
		t.Errorf("an expected start 5 s before 14:25 is not ~14:25:\n%s", out)
	}
	// Another day's is given with its date, as berth show gives it.
	want := ""
	for i := range box.Jobs {
		if at := box.Jobs[i].ExpectedStart; at != nil {
			later := at.Add(48 * time.Hour)
			box.Jobs[i].ExpectedStart = &later
			want = "start ~" + expectedAt(later).Format("2006-01-02 15:04")
		}
	}
	if out := statusText(box, 120, false); want == "" || !strings.Contains(out, want) {
		t.Errorf("an expected start two days on is given without its date:\n%s", out)
	}
}

// TestRenderKeptCard: a card the head of the queue holds back is not
// shown free (trial AR).
func TestRenderKeptCard(t *testing.T) {
	cards := []supervisor.CardStatus{{Name: "0", Holder: "one"}, {Name: "1", KeptFor: "two"}, {Name: "2"}}
	var b strings.Builder
	for _, l := range cardGrid(cards, 80) {
		for _, sp := range l {
			b.WriteString(sp.text)
		}
		b.WriteString("\n")
	}
	if got := b.String(); !strings.Contains(got, "1 kept for two") || !strings.Contains(got, "2 free") {
		t.Errorf("the grid:\n%s\nwant card 1 kept for two, card 2 free", got)
	}
}

func TestRenderEllipsize(t *testing.T) {
	tests := []struct {
		f    func(string, int) string
		in   string
		n    int
		want string
	}{
		{ellipsize, "needs 2 gpus; 1 free", 20, "needs 2 gpus; 1 free"},
		// Wide characters fill two columns, as a terminal draws them.
		{ellipsize, "日本語のディレクトリ", 7, "日本語…"},
		{ellipsize, "日本語のディレクトリ", 8, "日本語…"},
		{ellipsizeMiddle, "日本語のディレクトリ", 9, "日本…トリ"},
		{ellipsize, "needs 2 gpus; 1 free", 10, "needs 2 g…"},
		{ellipsize, "abc", 1, "…"},
		{ellipsize, "abc", 0, ""},
		{ellipsize, "needs 2 gpus", 9, "needs 2…"},
		{ellipsizeMiddle, "sweep-lr0.01-seed1", 12, "sweep-…seed1"},
		{ellipsizeMiddle, "sweep-lr0.01-seed1", 18, "sweep-lr0.01-seed1"},
		{ellipsizeMiddle, "résumé-évaluation", 9, "résu…tion"},
		{ellipsizeWhy, "needs 2 gpus; 0 free; expected start ~14:25", 30, "needs…; expected start ~14:25"},
		{ellipsizeWhy, "needs 2 gpus; 0 free; expected start ~14:25", 27, "expected start ~14:25"},
		{ellipsizeWhy, "needs 2 gpus; 0 free; expected start ~14:25", 20, "start ~14:25"},
		{ellipsizeWhy, "needs 2 gpus; 0 free; expected start ~14:25", 11, "needs 2 gp…"},
		{ellipsizeWhy, "needs 2 gpus; 0 free", 12, "needs 2 gpu…"},
	}
	for _, tt := range tests {
		got := tt.f(tt.in, tt.n)
		if got != tt.want {
			t.Errorf("(%q, %d) = %q, want %q", tt.in, tt.n, got, tt.want)
		}
		if n := utf8.RuneCountInString(got); n > tt.n {
			t.Errorf("(%q, %d) = %q is %d long", tt.in, tt.n, got, n)
		}
	}
}

func TestRenderAge(t *testing.T) {
	tests := []struct {
		d    time.Duration
		want string
	}{
		{0, "0s"}, {-time.Minute, "0s"}, {59 * time.Second, "59s"}, {3 * time.Minute, "3m"},
		{2*time.Hour + 59*time.Minute, "2h"}, {47 * time.Hour, "47h"}, {5 * 24 * time.Hour, "5d"},
	}
	for _, tt := range tests {
		if got := compactAge(ago(tt.d), renderNow); got != tt.want {
			t.Errorf("%v ago = %q, want %q", tt.d, got, tt.want)
		}
	}
	if got := compactAge(time.Time{}, renderNow); got != "-" {
		t.Errorf("no time = %q, want -", got)
	}
}

func TestRenderJobs(t *testing.T) {
	pinRenderZone(t)
	var b bytes.Buffer
	renderJobs(&b, slices.Concat(headBox().Jobs, peopleBox().Jobs, arraysBox().Jobs[:2]), renderOptions{width: 40, color: true, now: renderNow})
	if strings.Contains(b.String(), "\x1b") {
		t.Error("berth jobs is for scripts too: no colour")
	}
	testkit.Golden(t, "testdata/render/jobs.golden", b.Bytes())
}

func TestRenderShow(t *testing.T) {
	pinRenderZone(t)
	five, exit1 := 5, 1
	end := ago(3 * time.Hour)
	running := supervisor.JobDetail{
		Status: headBox().Jobs[6],
		Definition: supervisor.JobDefinition{
			Name: "train-resnet", File: "jobs.d/train.lua", Line: 14,
			Cmd: []string{"python", "train.py", "--data", "/data/imagenet 1k", "--note", "it's fine"},
			Dir: "/home/ana/resnet", Flavor: "gpu-large", Resources: supervisor.Size{CPUs: 8, GPUs: 2, RAMBytes: 32 * accounting.GiB},
			Env:  map[string]string{"HF_HOME": "/data/hf", "OMP_NUM_THREADS": "4"},
			User: "ana", Group: "ml", Restart: "on-failure", MaxRestarts: &five, Timeout: "12h",
			StopSignal: "SIGTERM", StopTimeout: "30s", OnChange: "finish", Enabled: true,
			Description: "ResNet-50 on ImageNet-1k",
		},
		NextEnv: []string{
			"PATH=/usr/bin:/bin", "OMP_NUM_THREADS=4", "HF_HOME=/data/hf", "BERTH_JOB=train-resnet", "BERTH_RUN=next",
			"BERTH_CPUS=8", "BERTH_GPUS=0,1", "CUDA_VISIBLE_DEVICES=0,1", "MKL_NUM_THREADS=8", "GOMAXPROCS=8", "LANG=C.UTF-8",
			"HOME=/home/ana", "USER=ana", "LOGNAME=ana", "SHELL=/bin/zsh", "BERTH_SOCKET=/run/berth/berth.sock",
		},
		Runs: []supervisor.RunView{
			{ID: 11, Job: "train-resnet", Start: ago(5 * time.Hour), End: &end, CPUs: 8, GPUs: []string{"0", "1"}, ExitCode: &exit1, Reason: "failed"},
			{ID: 12, Job: "train-resnet", Start: ago(2*time.Hour + 5*time.Minute), PID: 4100, CPUs: 8, GPUs: []string{"0", "1"}},
		},
		Logs: "journal",
	}
	waiting := supervisor.JobDetail{
		Status: headBox().Jobs[5],
		Definition: supervisor.JobDefinition{
			Name: "train-llama-7b-lora", File: "jobs.d/llama.lua", Line: 3, Cmd: []string{"torchrun", "--nproc_per_node=2", "lora.py"},
			Resources: supervisor.Size{CPUs: 8, GPUs: 2}, Env: map[string]string{}, Restart: "no",
			StopSignal: "SIGINT", StopTimeout: "1m", Priority: 10, OnChange: "restart", Enabled: true,
		},
		NextEnv: []string{"BERTH_CPUS=8", "BERTH_GPUS=0,1", "BERTH_JOB=train-llama-7b-lora", "BERTH_RUN=next", "CUDA_DEVICE_ORDER=PCI_BUS_ID", "CUDA_VISIBLE_DEVICES=0,1", "OMP_NUM_THREADS=8"},
		Runs:    []supervisor.RunView{},
		Logs:    "/var/lib/berth/logs/train-llama-7b-lora.log",
	}
	embed := sharesBox().Jobs[2]
	share := supervisor.JobDetail{
		Status: embed,
		Definition: supervisor.JobDefinition{
			Name: "embed", File: "jobs.d/serve.lua", Line: 2, Cmd: []string{"python3", "embed.py"},
			Resources: supervisor.Size{CPUs: 1, GPUMemBytes: 20 * accounting.GiB}, Env: map[string]string{}, Restart: "always",
			StopSignal: "SIGTERM", StopTimeout: "10s", OnChange: "restart", Enabled: true,
		},
		NextEnv: []string{"BERTH_CPUS=1", "BERTH_GPUS=0", "BERTH_GPU_MEM=21474836480", "BERTH_JOB=embed", "BERTH_RUN=next",
			"CUDA_VISIBLE_DEVICES=0", "TF_FORCE_GPU_ALLOW_GROWTH=true", "XLA_PYTHON_CLIENT_MEM_FRACTION=0.833"},
		Runs: []supervisor.RunView{{ID: 60, Job: "embed", Start: ago(time.Hour), PID: 6000, CPUs: 1, GPUs: []string{"2"},
			GPUMemBytes: 20 * accounting.GiB, GPUMemPeakBytes: ptr(22 * accounting.GiB)}},
		Logs: "journal",
	}
	// One index of the array: a job of its own, with the array's
	// definition.
	index := arrayDetail()
	index.Status = supervisor.JobStatus{Name: "sweep[3]", State: "failed", Since: ago(20 * time.Minute), Why: "failed (exit 2)"}
	index.NextEnv = []string{"BERTH_ARRAY_INDEX=3", "BERTH_ARRAY_SIZE=100", "BERTH_CPUS=4", "BERTH_GPUS=0", "BERTH_JOB=sweep[3]", "BERTH_RUN=next", "CUDA_VISIBLE_DEVICES=0", "OMP_NUM_THREADS=4"}
	index.Indices, index.Parents, index.Dependants = nil, nil, nil
	index.Runs = historyRuns()[12:13]
	// Unaccounted, under a daemon that set OMP_NUM_THREADS itself: that
	// one is the daemon's, the others berth's share.
	unaccounted := supervisor.JobDetail{
		Status: supervisor.JobStatus{Name: "web", State: "running", Since: ago(time.Minute)},
		Definition: supervisor.JobDefinition{
			Name: "web", File: "jobs.d/web.lua", Line: 1, Cmd: []string{"./serve"}, Env: map[string]string{},
			Restart: "always", StopSignal: "SIGTERM", StopTimeout: "10s", OnChange: "restart", Enabled: true,
		},
		NextEnv: []string{"BERTH_CPUS=2", "BERTH_GPUS=", "BERTH_JOB=web", "BERTH_RUN=next", "GOMAXPROCS=2", "OMP_NUM_THREADS=3"},
		Runs:    []supervisor.RunView{},
		Logs:    "journal",
	}
	// Another person's job: its environment and output are not the
	// caller's to read.
	others := waiting
	others.Definition.Name, others.Status.Name = "alice/train", "alice/train"
	others.EnvHidden, others.NextEnv = "its environment is shown only to alice and the administrators", []string{}
	// In backoff: when it runs again.
	backoff := unaccounted
	backoff.Status = supervisor.JobStatus{Name: "web", State: "backoff", Since: ago(20 * time.Second), Why: "exit 1", Restarts: 3,
		RetryAt: new(renderNow.Add(8 * time.Second))}
	// Its file removed, its run being stopped: no next run to show.
	removed := unaccounted
	removed.Status.State, removed.Status.PID, removed.Status.Run = "stopping", 4200, 3
	removed.Status.Why = "no job file declares it any more; SIGTERM sent"
	removed.Status.KillAt = new(renderNow.Add(10 * time.Second))
	removed.Removed, removed.NextEnv = true, []string{}
	removed.Runs = []supervisor.RunView{{ID: 3, Job: "web", Start: ago(time.Minute), PID: 4200}}
	for name, d := range map[string]supervisor.JobDetail{"running": running, "waiting": waiting, "array": arrayDetail(), "index": index, "share": share, "unaccounted": unaccounted, "others": others, "removed": removed, "backoff": backoff} {
		t.Run(name, func(t *testing.T) {
			var b bytes.Buffer
			renderShow(&b, d, renderOptions{width: 80, now: renderNow})
			testkit.Golden(t, "testdata/render/show-"+name+".golden", b.Bytes())
			var c bytes.Buffer
			renderShow(&c, d, renderOptions{width: 80, color: true, now: renderNow})
			if ansiCode.ReplaceAllString(c.String(), "") != b.String() {
				t.Error("stripped of colour, the coloured text differs")
			}
		})
	}
}

// TestRenderShowArrayOnQuota: an array whose index waits on its owner's
// quota is not said to be in the machine's queue (trial AS).
func TestRenderShowArrayOnQuota(t *testing.T) {
	d := arrayDetail()
	d.Status.Short = nil
	d.Status.Owner, d.Status.Why = "alice", "alice holds 3 of their 3 cards (quota; berth status --owner alice shows their jobs)"
	d.Status.Quota = &supervisor.QuotaView{Held: supervisor.Size{GPUs: 3}, Quota: supervisor.Size{CPUs: -1, GPUs: 3, RAMBytes: -1, GPUMemBytes: -1}}
	var b bytes.Buffer
	renderShow(&b, d, renderOptions{width: 200, now: renderNow})
	if out := b.String(); !strings.Contains(out, "index 42, waiting: alice holds 3 of their 3 cards") || strings.Contains(out, "in the queue") {
		t.Errorf("berth show of an array held by its owner's quota:\n%s", out)
	}
}

// arrayDetail is berth show of the array sweep of arraysBox: its indices
// by state, one state's ranges too long for a line of 80, and its last
// runs, of several indices.
func arrayDetail() supervisor.JobDetail {
	var waiting, failed []string
	for i := 42; i <= 100; i += 2 {
		waiting = append(waiting, fmt.Sprint(i))
		if i < 100 {
			failed = append(failed, fmt.Sprint(i+1))
		}
	}
	var box supervisor.JobStatus
	for _, j := range arraysBox().Jobs {
		if j.Name == "sweep" {
			box = j
		}
	}
	box.Array.Counts = map[string]int{"done": 37, "running": 4, "waiting": 30, "failed": 29}
	return supervisor.JobDetail{
		Status: box,
		Definition: supervisor.JobDefinition{
			Name: "sweep", File: "jobs.d/sweep.lua", Line: 3, Cmd: []string{"python", "sweep.py", "--seed", "$BERTH_ARRAY_INDEX"},
			Resources: supervisor.Size{CPUs: 4, GPUs: 1, RAMBytes: 32 * accounting.GiB}, Env: map[string]string{}, Restart: "on-failure",
			StopSignal: "SIGTERM", StopTimeout: "30s", OnChange: "restart", Enabled: true,
			Array: &supervisor.ArrayRange{From: 1, To: 100}, MaxParallel: 5,
		},
		NextEnv: []string{"BERTH_ARRAY_INDEX=1", "BERTH_ARRAY_SIZE=100", "BERTH_CPUS=4", "BERTH_GPUS=0", "BERTH_JOB=sweep[1]", "BERTH_RUN=next", "CUDA_VISIBLE_DEVICES=0", "OMP_NUM_THREADS=4"},
		Indices: map[string]string{
			"done":    "1-37",
			"running": "38-41",
			"waiting": strings.Join(waiting, ","),
			"failed":  strings.Join(failed, ","),
		},
		Parents:    []supervisor.Dependency{{Job: "prep", Kind: "after", State: "done", Satisfied: true}},
		Dependants: []supervisor.Dependency{{Job: "report", Kind: "after", State: "waiting"}},
		Runs:       historyRuns()[10:],
		Logs:       "journal",
	}
}

func historyRuns() []supervisor.RunView {
	at := func(d time.Duration) *time.Time { x := ago(d); return &x }
	code := func(n int) *int { return &n }
	return []supervisor.RunView{
		{ID: 40, Job: "eval", Start: ago(50 * time.Hour), End: at(49 * time.Hour), CPUs: 2, GPUs: []string{}, ExitCode: code(0), Reason: "exited"},
		{ID: 41, Job: "train-gan", Start: ago(15 * time.Hour), End: at(3 * time.Hour), CPUs: 8, GPUs: []string{"0", "1"}, Signal: "SIGTERM", Reason: "timed out"},
		{ID: 42, Job: "eval", Start: ago(2 * time.Hour), End: at(2*time.Hour - 90*time.Second), CPUs: 2, GPUs: []string{}, ExitCode: code(3), Reason: "failed"},
		{ID: 43, Job: "label-server", Start: ago(90 * time.Minute), End: at(90*time.Minute - 250*time.Millisecond), CPUs: 1, GPUs: []string{}, Signal: "SIGSEGV", Reason: "failed"},
		{ID: 44, Job: "notebook", Start: ago(80 * time.Minute), End: at(20 * time.Minute), CPUs: 2, GPUs: []string{"2"}, ExitCode: code(0), Reason: "stopped"},
		{ID: 45, Job: "notebook-2", Start: ago(70 * time.Minute), End: at(60 * time.Minute), CPUs: 2, GPUs: []string{}, Signal: "SIGKILL", Reason: "killed after stop_timeout"},
		{ID: 46, Job: "sync", Start: ago(40 * time.Minute), End: at(40 * time.Minute), CPUs: 1, GPUs: []string{}, Reason: "spawn error", Cause: "program /opt/sync/bin/sync does not exist"},
		{ID: 47, Job: "train-resnet", Start: ago(30 * 24 * time.Hour), End: at(29 * 24 * time.Hour), CPUs: 8, GPUs: []string{"0", "1"}, Reason: "lost",
			Cause: "the machine went down while it ran (its end is the next boot); the job runs again"},
		{ID: 48, Job: "train-resnet", Start: ago(2*time.Hour + 5*time.Minute), PID: 4100, CPUs: 8, GPUs: []string{"0", "1"}, RAMBytes: 32 * accounting.GiB},
		{ID: 49, Job: "eval-nightly", Start: ago(time.Hour), End: at(55 * time.Minute), CPUs: 4, GPUs: []string{}, RAMBytes: 16 * accounting.GiB, Signal: "SIGKILL", Reason: "out of memory"},
		// The indices of the array sweep, each a job of its own.
		{ID: 50, Job: "sweep[37]", Start: ago(40 * time.Minute), End: at(10 * time.Minute), CPUs: 4, GPUs: []string{"1"}, ExitCode: code(0), Reason: "exited"},
		{ID: 51, Job: "sweep[38]", Start: ago(35 * time.Minute), PID: 5001, CPUs: 4, GPUs: []string{"0"}},
		{ID: 52, Job: "sweep[39]", Start: ago(30 * time.Minute), End: at(29 * time.Minute), CPUs: 4, GPUs: []string{"1"}, ExitCode: code(2), Reason: "failed"},
		{ID: 53, Job: "sweep[39]", Start: ago(28 * time.Minute), PID: 5003, CPUs: 4, GPUs: []string{"1"}},
		{ID: 54, Job: "sweep[40]", Start: ago(10 * time.Minute), PID: 5004, CPUs: 4, GPUs: []string{"2"}},
		{ID: 55, Job: "sweep[41]", Start: ago(9 * time.Minute), PID: 5005, CPUs: 4, GPUs: []string{"3"}},
	}
}

func TestRenderHistory(t *testing.T) {
	pinRenderZone(t)
	var b bytes.Buffer
	renderHistory(&b, historyRuns()[:10], renderOptions{width: 80, now: renderNow})
	testkit.Golden(t, "testdata/render/history.golden", b.Bytes())

	// An array's: the JOB column says which index each run was.
	b.Reset()
	renderHistory(&b, historyRuns()[10:], renderOptions{width: 80, now: renderNow})
	testkit.Golden(t, "testdata/render/history-array.golden", b.Bytes())

	// Shares of a card: each run's peak beside its share, and the one
	// that went over it said so.
	b.Reset()
	gib := accounting.GiB
	renderHistory(&b, []supervisor.RunView{
		{ID: 60, Job: "embed", Start: renderNow.Add(-2 * time.Hour), End: ptr(renderNow.Add(-time.Hour)), CPUs: 1, GPUs: []string{"2"},
			GPUMemBytes: 20 * gib, GPUMemPeakBytes: ptr(22 * gib), ExitCode: ptr(0), Reason: "exited"},
		{ID: 61, Job: "infer", Start: renderNow.Add(-time.Hour), PID: 6001, CPUs: 1, GPUs: []string{"0"}, GPUMemBytes: 10 * gib, GPUMemPeakBytes: ptr(6 * gib)},
		{ID: 62, Job: "train", Start: renderNow.Add(-3 * time.Hour), PID: 6002, CPUs: 8, GPUs: []string{"1", "3"}, GPUMemPeakBytes: ptr(40 * gib)},
	}, renderOptions{width: 80, now: renderNow})
	testkit.Golden(t, "testdata/render/history-shares.golden", b.Bytes())

	b.Reset()
	renderHistory(&b, nil, renderOptions{now: renderNow})
	if b.String() != "no runs\n" {
		t.Errorf("no runs: %q", b.String())
	}
}

func TestRenderFlavors(t *testing.T) {
	var b bytes.Buffer
	renderFlavors(&b, []supervisor.FlavorView{
		{Name: "gpu-large", File: "jobs.d/flavors.lua", Line: 9, Resources: supervisor.Size{CPUs: 8, GPUs: 2, RAMBytes: 64 * accounting.GiB}, UsedBy: []string{"train-resnet", "train-llama-7b-lora"}},
		{Name: "cpu-small", File: "jobs.d/flavors.lua", Line: 1, Resources: supervisor.Size{CPUs: 2}, UsedBy: []string{}},
		{Name: "gpu-one", File: "jobs.d/flavors.lua", Line: 5, Resources: supervisor.Size{CPUs: 4, GPUs: 1, RAMBytes: 24 * accounting.GiB}, UsedBy: []string{"sweep-1"}},
		{Name: "gpu-slice", File: "jobs.d/flavors.lua", Line: 13, Resources: supervisor.Size{CPUs: 2, GPUMemBytes: 10 * accounting.GiB}, UsedBy: []string{"infer"}},
	}, renderOptions{width: 80, now: renderNow})
	testkit.Golden(t, "testdata/render/flavors.golden", b.Bytes())

	b.Reset()
	renderFlavors(&b, nil, renderOptions{})
	if b.String() != "no flavors declared\n" {
		t.Errorf("no flavors: %q", b.String())
	}
}

func TestRenderHolders(t *testing.T) {
	var b bytes.Buffer
	renderHolders(&b, busyBox().Machine, renderOptions{width: 80, now: renderNow})
	testkit.Golden(t, "testdata/render/holders.golden", b.Bytes())

	b.Reset()
	renderHolders(&b, supervisor.MachineStatus{CPUs: 6, CPUsFree: 5, Cards: []supervisor.CardStatus{
		{Name: "GPU-8d3f5a2e-1b4c-4d2e-9f3a-2c1b0a9e8d7f", Holder: "train"},
		{Name: "MIG-1c2d3e4f-aaaa-bbbb-cccc-0123456789ab"},
	}}, renderOptions{width: 80, now: renderNow})
	testkit.Golden(t, "testdata/render/holders-uuids.golden", b.Bytes())

	b.Reset()
	renderHolders(&b, peopleBox().Machine, renderOptions{width: 80, now: renderNow})
	testkit.Golden(t, "testdata/render/holders-people.golden", b.Bytes())

	// A card shared by memory is held by its shares, not free.
	b.Reset()
	renderHolders(&b, sharesBox().Machine, renderOptions{width: 80, now: renderNow})
	testkit.Golden(t, "testdata/render/holders-shares.golden", b.Bytes())
}

// TestRenderHolds: one of a thing is not written as several.
func TestRenderHolds(t *testing.T) {
	tests := []struct {
		st   supervisor.JobStatus
		want string
	}{
		{supervisor.JobStatus{CPUs: 1, GPUs: []string{"3"}}, "1 core, card 3"},
		{supervisor.JobStatus{CPUs: 8, GPUs: []string{"0", "1"}, RAMBytes: 32 * accounting.GiB}, "8 cores, cards 0,1, 32G memory"},
		{supervisor.JobStatus{}, "nothing"},
	}
	for _, tt := range tests {
		if got := holdsText(tt.st); got != tt.want {
			t.Errorf("holds %q, want %q", got, tt.want)
		}
	}
	a1 := supervisor.Problem{Code: "syntax", File: "a.lua", Line: 1}
	a2 := supervisor.Problem{Code: "unknown_field", File: "a.lua", Line: 2}
	b2 := supervisor.Problem{Code: "bad_value", File: "b.lua", Line: 2}
	refused := supervisor.Problem{Code: supervisor.ProblemFileRefused, File: "c.lua"}
	state := supervisor.Problem{Code: supervisor.ProblemNotRecording, File: "/var/lib/berth"}
	for _, tt := range []struct {
		problems []supervisor.Problem
		want     string
	}{
		{[]supervisor.Problem{a1}, "1 file with errors"},
		{[]supervisor.Problem{a1, a2}, "1 file with errors"},
		{[]supervisor.Problem{a1, b2, refused}, "3 files with errors"},
		{[]supervisor.Problem{state, a1}, "state not recorded · 1 file with errors"},
		{[]supervisor.Problem{state}, "state not recorded"},
		{[]supervisor.Problem{{Code: supervisor.ProblemDirMissing, File: "/etc/berth/jobs.d"}}, "1 configuration error"},
		{[]supervisor.Problem{{Code: supervisor.ProblemStateGone, File: "/var/lib/berth/state.db"}, a1}, "state not recorded · 1 file with errors"},
		{[]supervisor.Problem{state, {Code: supervisor.ProblemDirMissing, File: "/etc/berth/jobs.d"}}, "state not recorded · 1 configuration error"},
		{[]supervisor.Problem{a1, {Code: supervisor.ProblemOrphanKept, Job: "gone"}}, "1 file with errors · 1 run of a job no file declares"},
		{[]supervisor.Problem{{Code: supervisor.ProblemOrphanKept, Job: "a"}, {Code: supervisor.ProblemOrphanKept, Job: "b"}}, "2 runs of jobs no file declares"},
	} {
		if got := errorsSummary(tt.problems); got != tt.want {
			t.Errorf("errors %+v: %q, want %q", tt.problems, got, tt.want)
		}
	}
}

// TestRuneLen: the columns of a terminal a text fills.
func TestRuneLen(t *testing.T) {
	for _, tt := range []struct {
		s    string
		want int
	}{
		{"train", 5}, {"日本語", 6}, {"e\u0301", 1}, {"한국어", 6}, {"ＡＢ", 4}, {"🚀x", 3}, {"…", 1},
	} {
		if got := runeLen(tt.s); got != tt.want {
			t.Errorf("runeLen(%q) = %d, want %d", tt.s, got, tt.want)
		}
	}
}

// TestRunResultKilled: a run killed after its stop_timeout says what ended
// its main process where that was not the SIGKILL: the rest of its
// processes (its group, and what left it) ignored the stop signal, not it.
func TestRunResultKilled(t *testing.T) {
	end, zero := time.Now(), 0
	for _, c := range []struct {
		run  supervisor.RunView
		want string
	}{
		{supervisor.RunView{End: &end, Reason: "killed after stop_timeout", Signal: "SIGKILL"}, "killed after stop_timeout (SIGKILL)"},
		{supervisor.RunView{End: &end, Reason: "killed after stop_timeout", Signal: "SIGTERM"},
			"killed after stop_timeout (its main process SIGTERM, the rest of its processes SIGKILL)"},
		{supervisor.RunView{End: &end, Reason: "killed after stop_timeout", ExitCode: &zero, Cause: "stopped on request (berth stop)"},
			"killed after stop_timeout (its main process exit 0, the rest of its processes SIGKILL): stopped on request (berth stop)"},
	} {
		if got, _ := runResult(c.run); got != c.want {
			t.Errorf("%+v: %q, want %q", c.run, got, c.want)
		}
	}
}

// TestRenderDoneUnrecorded: a job done says nothing more, unless its
// record is not on disk yet: then why it may run again.
func TestRenderDoneUnrecorded(t *testing.T) {
	const why = "done, but not yet recorded: …"
	done := supervisor.JobStatus{Name: "prep", State: "done", Why: "exit 0", GPUs: []string{}}
	if got := singleWhy(done, renderNow); got != "" {
		t.Errorf("done: %q, want nothing", got)
	}
	done.Unrecorded, done.Why = true, why
	if got := singleWhy(done, renderNow); got != why {
		t.Errorf("done, not recorded: %q, want %q", got, why)
	}
}

// TestRenderStatusLoading: a daemon still reading its job files at start
// has no jobs yet, as the header and the list both say (trial AI: the
// header said "no jobs").
func TestRenderStatusLoading(t *testing.T) {
	s := supervisor.Status{Host: "vm", Logs: "journal", Now: renderNow}
	s.Daemon.Loading = true
	out := statusText(s, 80, false)
	if !strings.HasPrefix(out, "vm — no jobs yet\n") || !strings.Contains(out, "\nno jobs yet\n") {
		t.Errorf("status while loading:\n%s", out)
	}
}

// TestCardSharesPartKept: a card no one shares, part of which the head of
// the queue keeps for its share, says so below the grid, where its cell
// says free (trial AZ); a card free whole says nothing.
func TestCardSharesPartKept(t *testing.T) {
	gib := accounting.GiB
	cards := []supervisor.CardStatus{
		{Name: "0", ShareOfBytes: ptr(16 * gib), RoomBytes: ptr(12 * gib), KeptFor: "s"},
		{Name: "1", ShareOfBytes: ptr(16 * gib), RoomBytes: ptr(16 * gib)},
	}
	var got []string
	for _, l := range cardShares(cards, 80) {
		var b strings.Builder
		for _, sp := range l {
			b.WriteString(sp.text)
		}
		got = append(got, b.String())
	}
	if want := []string{"  card 0: 4G kept for s, first in line; 12G left for another"}; !slices.Equal(got, want) {
		t.Errorf("lines below the grid: %q, want %q", got, want)
	}
}
