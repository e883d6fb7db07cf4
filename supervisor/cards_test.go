package supervisor

import (
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/berthd/berth/accounting"
	"github.com/berthd/berth/probes"
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
	server := exec.Command("sleep", "1000")
	if err := server.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { server.Process.Kill(); server.Wait() })
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
