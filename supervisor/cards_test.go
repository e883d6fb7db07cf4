package supervisor

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/berthd/berth/accounting"
	"github.com/berthd/berth/probes"
	"github.com/berthd/berth/supervisor/runner"
	"github.com/berthd/berth/supervisor/testkit"
)

// fakeCards is a CardReader whose answer the test sets.
type fakeCards struct {
	mu   sync.Mutex
	uses []probes.CardUse
}

func (f *fakeCards) ReadCards() ([]probes.CardUse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]probes.CardUse, len(f.uses))
	for i, u := range f.uses {
		u.Processes = slices.Clone(u.Processes)
		out[i] = u
	}
	return out, nil
}

func (f *fakeCards) set(card int, procs ...probes.CardProcess) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.uses[card].Processes = procs
	f.uses[card].MemoryUsed = 0
	for _, p := range procs {
		f.uses[card].MemoryUsed += p.MemoryBytes
	}
}

// notBerths starts a process berth did not start, for the test's life:
// one that holds memory on a card, as the fake driver says.
func notBerths(t *testing.T) *exec.Cmd {
	t.Helper()
	p := exec.Command("sleep", "1000")
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Process.Kill(); p.Wait() })
	return p
}

// workstation is the 4-card workstation of the issue: 24 GiB cards.
func workstation() *fakeCards {
	f := &fakeCards{}
	for i := range 4 {
		f.uses = append(f.uses, probes.CardUse{Index: i, UUID: "GPU-4090000" + strconv.Itoa(i), Model: "NVIDIA GeForce RTX 4090",
			PCI: "0000:" + strconv.Itoa(i) + "1:00.0", MemoryTotal: 24 * accounting.GiB})
	}
	return f
}

// TestDaemonForeignCardUse: a card on which a process berth did not start
// holds 21G is given to no job, the waiting job's why says which card and
// whose process, and status shows it; once the process is gone the job
// runs on every card. A run of berth's own on a card is not foreign.
func TestDaemonForeignCardUse(t *testing.T) {
	t.Parallel()
	server := notBerths(t)
	cards := workstation()
	cards.set(1, probes.CardProcess{PID: server.Process.Pid, MemoryBytes: 21 * accounting.GiB})

	d, _ := runDaemon(t, `job "train" { cmd = "sleep 1000", cpus = 1, gpus = 4 }
job "viewer" { cmd = "sleep 1000", cpus = 0 }`, func(cfg *Config) {
		cfg.Machine.GPUs, cfg.Machine.CardsSeen = []string{"0", "1", "2", "3"}, 4
		cfg.Cards = cards
	})
	if err := d.readCards(); err != nil {
		t.Fatal(err)
	}
	js := waitJob(t, d, "train", "waiting for card 1", func(js JobStatus) bool {
		return js.State == "waiting" && strings.Contains(js.Why, "card 1: 21G used by pid "+strconv.Itoa(server.Process.Pid)+" (sleep, ")
	})
	if !strings.HasSuffix(js.Why, "— not a berth job") {
		t.Errorf("why: %q", js.Why)
	}
	st := d.Status()
	c := st.Machine.Cards[1]
	if !c.Off || len(c.Foreign) != 1 || c.Foreign[0].PID != server.Process.Pid || c.Foreign[0].Command != "sleep" ||
		c.MemoryTotalBytes == nil || *c.MemoryTotalBytes != 24*accounting.GiB || *c.MemoryUsedBytes != 21*accounting.GiB {
		t.Errorf("card 1 in status: %+v", c)
	}
	if st.Machine.Cards[0].Off || st.Machine.Cards[0].Foreign != nil {
		t.Errorf("card 0 in status: %+v", st.Machine.Cards[0])
	}

	// A run of berth's own holding memory on a card is not foreign.
	viewer := waitJob(t, d, "viewer", "running", func(js JobStatus) bool { return js.State == "running" })
	cards.set(0, probes.CardProcess{PID: viewer.PID, MemoryBytes: 8 * accounting.GiB})
	if err := d.readCards(); err != nil {
		t.Fatal(err)
	}
	if c := d.Status().Machine.Cards[0]; c.Off || c.Foreign != nil {
		t.Errorf("a berth run counted as foreign: %+v", c)
	}

	// The server goes: the card is back, and train runs on all four.
	cards.set(1)
	if err := d.readCards(); err != nil {
		t.Fatal(err)
	}
	js = waitJob(t, d, "train", "running", func(js JobStatus) bool { return js.State == "running" })
	if !slices.Equal(js.GPUs, []string{"0", "1", "2", "3"}) {
		t.Errorf("train got cards %v", js.GPUs)
	}
}

// TestForeignUnderLimit: a small foreign process (a desktop's) is shown,
// and leaves the card on.
func TestForeignUnderLimit(t *testing.T) {
	t.Parallel()
	cards := workstation()
	cards.set(2, probes.CardProcess{PID: 1, MemoryBytes: 300 << 20})
	d, _ := runDaemon(t, "", func(cfg *Config) {
		cfg.Machine.GPUs, cfg.Machine.CardsSeen = []string{"0", "1", "2", "3"}, 4
		cfg.Cards = cards
	})
	if err := d.readCards(); err != nil {
		t.Fatal(err)
	}
	c := d.Status().Machine.Cards[2]
	if c.Off || len(c.Foreign) != 1 || c.Foreign[0].PID != 1 {
		t.Errorf("card 2: %+v", c)
	}
	if d.book.Snapshot().Free.GPUs != 4 {
		t.Errorf("%d cards free", d.book.Snapshot().Free.GPUs)
	}
}

// shareBox is the workstation of 24G cards with 8 cores, whose cards'
// memory is known.
func shareBox(cards *fakeCards) func(cfg *Config) {
	return func(cfg *Config) {
		cfg.Machine.CPUs, cfg.Machine.CPUIDs = 8, []int{0, 1, 2, 3, 4, 5, 6, 7}
		cfg.Machine.GPUs, cfg.Machine.CardsSeen = []string{"0", "1", "2", "3"}, 4
		cfg.Machine.GPUMem = []int64{24 * accounting.GiB, 24 * accounting.GiB, 24 * accounting.GiB, 24 * accounting.GiB}
		cfg.Cards = cards
	}
}

// TestDaemonCardShares: jobs asking gpu_mem share a card: two of 10G on
// card 0, the third on card 1, and a job of two whole cards then takes the
// untouched ones; each run sees its card and its part of it; a foreign
// process's memory is room no share is given, and a job that does not fit
// any card's room waits saying what is most free; a run over its share is
// shown with what it holds, and its peak is in its run's record.
func TestDaemonCardShares(t *testing.T) {
	t.Parallel()
	foreign := notBerths(t)
	cards := workstation()
	logs := &testkit.Buffer{}
	sock := filepath.Join(t.TempDir(), "berth.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	d, jobsDir := runDaemon(t, `for _, n in ipairs { "a", "b", "c" } do
  job (n) { cmd = "sleep 1000", gpu_mem = "10G" }
end`, func(cfg *Config) {
		shareBox(cards)(cfg)
		cfg.Listener = l
		cfg.Logger = hclog.New(&hclog.LoggerOptions{Output: logs, Level: hclog.Info})
	})
	runs := map[string]JobStatus{}
	byCard := map[string][]string{}
	for _, name := range []string{"a", "b", "c"} {
		js := waitJob(t, d, name, "running", func(js JobStatus) bool { return js.State == "running" })
		if len(js.GPUs) != 1 || js.GPUMemBytes != 10*accounting.GiB {
			t.Fatalf("%s: cards %v, share %d; want one card, 10G", name, js.GPUs, js.GPUMemBytes)
		}
		env, ok := runner.EnvValues(js.PID, "CUDA_VISIBLE_DEVICES", "XLA_PYTHON_CLIENT_MEM_FRACTION", "BERTH_GPU_MEM")
		if !ok || !slices.Equal(env, []string{js.GPUs[0], "0.416", "10737418240"}) {
			t.Errorf("%s's environment: %q", name, env)
		}
		runs[name] = js
		byCard[js.GPUs[0]] = append(byCard[js.GPUs[0]], name)
	}
	// Whichever started first: two on card 0, the third on card 1.
	if len(byCard["0"]) != 2 || len(byCard["1"]) != 1 {
		t.Fatalf("shares by card: %v; want two on card 0, one on card 1", byCard)
	}
	first, third := byCard["0"][0], byCard["1"][0]
	if err := writeFile(filepath.Join(jobsDir, "whole.lua"), []byte(`job "whole" { cmd = "sleep 1000", gpus = 2 }`), 0o600); err != nil {
		t.Fatal(err)
	}
	reload(t, d)
	if js := waitJob(t, d, "whole", "running", func(js JobStatus) bool { return js.State == "running" }); !slices.Equal(js.GPUs, []string{"2", "3"}) {
		t.Errorf("whole got cards %v; want the untouched 2 and 3", js.GPUs)
	}
	c0 := d.Status().Machine.Cards[0]
	if len(c0.Shares) != 2 || c0.Shares[0].Bytes != 10*accounting.GiB || c0.RoomBytes == nil || *c0.RoomBytes != 4*accounting.GiB {
		t.Errorf("card 0: shares %+v, room %v; want two of 10G, 4G left", c0.Shares, c0.RoomBytes)
	}
	checkScrape(t, scrapeMetrics(t, unixClient(sock), "http://berth/metrics"), []want{
		{"berth_job_gpu_mem_bytes", []string{"job", first}, is(10 << 30)},
		{"berth_job_gpus", []string{"job", first}, is(0)}, // a share is no whole card
		{"berth_job_gpus", []string{"job", "whole"}, is(2)},
		{"berth_gpu_mem_bytes", []string{"card", "0"}, is(24 << 30)},
		{"berth_gpu_mem_booked_bytes", []string{"card", "0"}, is(20 << 30)},
		{"berth_gpu_mem_booked_bytes", []string{"card", "2"}, is(0)},
		{"berth_gpus_free", nil, is(0)},
	})

	// a goes over its share; a foreign process takes 8G of card 1.
	cards.set(0, probes.CardProcess{PID: runs[first].PID, MemoryBytes: 12 * accounting.GiB})
	cards.set(1, probes.CardProcess{PID: foreign.Process.Pid, MemoryBytes: 8 * accounting.GiB})
	if err := d.readCards(); err != nil {
		t.Fatal(err)
	}
	st := d.Status()
	if room := st.Machine.Cards[0].RoomBytes; room == nil || *room != 2*accounting.GiB {
		t.Errorf("card 0's room with a over its share by 2G: %v; want 2G", room)
	}
	if room := st.Machine.Cards[1].RoomBytes; room == nil || *room != 6*accounting.GiB {
		t.Errorf("card 1's room beside 8G foreign and c's 10G: %v; want 6G", room)
	}
	over, _ := d.jobStatus(first)
	if over.GPUMemUsedBytes == nil || *over.GPUMemUsedBytes != 12*accounting.GiB || *over.GPUMemPeakBytes != 12*accounting.GiB {
		t.Errorf("%s's use: %v, peak %v; want 12G", first, over.GPUMemUsedBytes, over.GPUMemPeakBytes)
	}
	// Its neighbour holds nothing on the card yet: 0, not unknown.
	if idle, _ := d.jobStatus(byCard["0"][1]); idle.GPUMemUsedBytes == nil || *idle.GPUMemUsedBytes != 0 {
		t.Errorf("a share whose processes hold nothing on its card: %v; want 0", idle.GPUMemUsedBytes)
	}
	// Said once, however many reads see it over.
	if err := d.readCards(); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(logs.String(), "a run holds more card memory than its share"); n != 1 {
		t.Errorf("the run over its share was logged %d times; want once:\n%s", n, logs.String())
	}

	// A share of 8G fits no card's room (2G and 6G): it waits, and says so.
	if err := writeFile(filepath.Join(jobsDir, "more.lua"), []byte(`job "d" { cmd = "sleep 1000", gpu_mem = "8G" }`), 0o600); err != nil {
		t.Fatal(err)
	}
	reload(t, d)
	waitJob(t, d, "d", "waiting for card memory", func(js JobStatus) bool {
		return js.State == "waiting" && js.Short != nil && js.Short.GPUMemBytes == 2*accounting.GiB &&
			js.Why == "needs 8G of one gpu's memory; 6G the most free on one; card 1: 8G used by pid "+
				strconv.Itoa(foreign.Process.Pid)+" (sleep, "+userName(os.Getuid())+") — not a berth job"
	})
	// First in line, it keeps the room of card 1, the most, for itself:
	// no other share could be given it now.
	if c1 := d.Status().Machine.Cards[1]; c1.RoomBytes == nil || *c1.RoomBytes != 0 || c1.KeptFor != "d" {
		t.Errorf("card 1 with d first in line for it: room %v, kept for %q; want none left, kept for d", c1.RoomBytes, c1.KeptFor)
	}
	// The foreign process goes: d runs beside the third.
	cards.set(1)
	if err := d.readCards(); err != nil {
		t.Fatal(err)
	}
	if js := waitJob(t, d, "d", "running", func(js JobStatus) bool { return js.State == "running" }); !slices.Equal(js.GPUs, []string{"1"}) {
		t.Errorf("d got %v; want card 1, beside %s", js.GPUs, third)
	}

	// The peak is kept with the run.
	if code, body := as(t, d, "root", "POST", jobPath(first)+"/stop"); code != 200 {
		t.Fatalf("stop %s: %d %s", first, code, body)
	}
	waitJob(t, d, first, "stopped", func(js JobStatus) bool { return js.State == "stopped" })
	testkit.WaitFor(t, 10*time.Second, "the run record to keep its peak", func() bool {
		recs, err := d.store.Runs(first, 1)
		return err == nil && len(recs) == 1 && recs[0].GPUMemPeakBytes == 12*accounting.GiB && recs[0].GPUMemBytes == 10*accounting.GiB
	})
}

// TestKeptCardSaid: a free card the head of the queue holds back for
// itself is said to be kept for it, its memory known or not (trial AR:
// shown free beside jobs waiting for a card).
func TestKeptCardSaid(t *testing.T) {
	t.Parallel()
	d, _ := runDaemon(t, `job "one" { cmd = "sleep 1000", gpus = 1 }
job "two" { cmd = "sleep 1000", gpus = 2 }`, func(cfg *Config) { cfg.Machine.GPUs = []string{"0", "1"} })
	var one JobStatus
	testkit.WaitFor(t, 20*time.Second, "one running, two waiting", func() bool {
		one, _ = d.jobStatus("one")
		two, _ := d.jobStatus("two")
		return one.State == "running" && two.State == "waiting"
	})
	for _, c := range d.Status().Machine.Cards {
		if want := map[bool]string{true: "", false: "two"}[slices.Contains(one.GPUs, c.Name)]; c.KeptFor != want {
			t.Errorf("card %s kept for %q, want %q", c.Name, c.KeptFor, want)
		}
	}
}

// TestShareFractionOfTheCard: under --gpu-mem, which books less of each
// card than it has, a share is told its part of the card as it is (JAX
// takes its fraction of the card's whole memory), not of what is booked.
func TestShareFractionOfTheCard(t *testing.T) {
	t.Parallel()
	d, _ := runDaemon(t, `job "infer" { cmd = "sleep 1000", gpu_mem = "20G" }`, func(cfg *Config) {
		cfg.Machine.GPUs, cfg.Machine.CardsSeen = []string{"0"}, 1
		cfg.Machine.GPUMem, cfg.Machine.GPUMemSource = []int64{40 * accounting.GiB}, probes.SourceOverride
		cfg.Machine.GPUMemTotal = []int64{80 * accounting.GiB}
	})
	js := waitJob(t, d, "infer", "running", func(js JobStatus) bool { return js.State == "running" })
	if env, ok := runner.EnvValues(js.PID, "XLA_PYTHON_CLIENT_MEM_FRACTION"); !ok || env[0] != "0.25" {
		t.Errorf("XLA_PYTHON_CLIENT_MEM_FRACTION=%q; want 0.25, 20G of the card's 80G", env)
	}
}

// TestShareWaitNamesForeign: a share that would fit a card but for what a
// process berth did not start holds there names that process, under the
// limit that keeps cards from whole-card jobs too.
func TestShareWaitNamesForeign(t *testing.T) {
	t.Parallel()
	desktop := notBerths(t)
	cards := workstation()
	cards.uses = cards.uses[:1]
	cards.set(0, probes.CardProcess{PID: desktop.Process.Pid, MemoryBytes: 600 << 20})
	d, jobsDir := runDaemon(t, "", func(cfg *Config) {
		shareBox(cards)(cfg)
		cfg.Machine.GPUs, cfg.Machine.GPUMem, cfg.Machine.CardsSeen = []string{"0"}, []int64{24 * accounting.GiB}, 1
	})
	// The cards read before the job is declared: it is never placed.
	if err := d.readCards(); err != nil {
		t.Fatal(err)
	}
	if err := writeFile(filepath.Join(jobsDir, "big.lua"), []byte(`job "big" { cmd = "sleep 1000", gpu_mem = "24G" }`), 0o600); err != nil {
		t.Fatal(err)
	}
	reload(t, d)
	waitJob(t, d, "big", "waiting, naming the desktop", func(js JobStatus) bool {
		return js.State == "waiting" && strings.Contains(js.Why, "card 0: 600M used by pid "+strconv.Itoa(desktop.Process.Pid)+" (sleep, ")
	})
}
