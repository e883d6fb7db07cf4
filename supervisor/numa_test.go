package supervisor

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/berthd/berth/probes"
)

// numaBox is the 8-card, two-node fixture of probes as the daemon is
// given it, its cards named by CUDA_VISIBLE_DEVICES = visible, with all
// its 128 cores for jobs.
func numaBox(t *testing.T, visible string) probes.Inventory {
	t.Helper()
	// The fixture's topology, with its 128 cores online and the daemon's
	// to use: cores counted, as on the machine, so that each is real.
	root := t.TempDir()
	if err := os.CopyFS(root, os.DirFS("../probes/testdata/topology/eight-two-nodes")); err != nil {
		t.Fatal(err)
	}
	for path, content := range map[string]string{
		"sys/devices/system/cpu/online": "0-127\n",
		"proc/self/status":              "Name:\tberth\nCpus_allowed_list:\t0-127\n",
	} {
		if err := os.MkdirAll(filepath.Join(root, filepath.Dir(path)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, path), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	inv, _ := probes.Probe(root, func(k string) (string, bool) {
		return visible, k == "CUDA_VISIBLE_DEVICES"
	})
	if len(inv.Topology.Cards) != 8 {
		t.Fatalf("the fixture has %d cards", len(inv.Topology.Cards))
	}
	inv.CPUIDs = make([]int, 128)
	for i := range inv.CPUIDs {
		inv.CPUIDs[i] = i
	}
	inv.CPUs, inv.OnlineCPUs = 128, 128
	return inv
}

func TestCapacityNUMA(t *testing.T) {
	t.Parallel()
	c := CapacityOf(numaBox(t, "GPU-a1000006-1111-2222-3333-444455556666,1,MIG-a1000006-1111-2222-3333-444455556666"))
	if !slices.Equal(c.GPUNodes, []int{1, 0, -1}) {
		t.Errorf("card nodes %v, want [1 0 -1]: a UUID, an index in bus order, and a MIG instance unknown", c.GPUNodes)
	}
	if len(c.CPUNodes) != 128 || c.CPUNodes[0] != 0 || c.CPUNodes[40] != 1 || c.CPUNodes[70] != 0 || c.CPUNodes[100] != 1 {
		t.Errorf("core nodes %v", c.CPUNodes)
	}
	// No card whose node is known: no topology for the books.
	c = CapacityOf(numaBox(t, "MIG-x"))
	if c.GPUNodes != nil || c.CPUNodes != nil {
		t.Errorf("with no card placed, nodes %v %v", c.GPUNodes, c.CPUNodes)
	}
}

// TestDaemonNUMALocalCores: a job given a card on node 1 is given cores on
// node 1, not the lowest free ones, and its run is told that card.
func TestDaemonNUMALocalCores(t *testing.T) {
	t.Parallel()
	inv := numaBox(t, "5")
	d, _ := runDaemon(t, `job "train" { cmd = "sleep 1000", cpus = 2, gpus = 1 }`, func(cfg *Config) { cfg.Machine = inv })
	js := waitJob(t, d, "train", "running", func(js JobStatus) bool { return js.State == "running" })
	if !slices.Equal(js.CPUIDs, []int{32, 33}) || !slices.Equal(js.GPUs, []string{"5"}) {
		t.Errorf("granted cores %v and cards %v; want [32 33] (node 1, the card's) and [5]", js.CPUIDs, js.GPUs)
	}
}

// TestCardNodes: a unit's device rule names each card's own node, by the
// minor the driver gives it, not by its place in bus order; a MIG
// instance leaves every card open (no rule).
func TestCardNodes(t *testing.T) {
	t.Parallel()
	d := &Daemon{cfg: Config{Machine: numaBox(t, "0,GPU-a1000006-1111-2222-3333-444455556666,MIG-x")}}
	if got := d.cardNodes([]int{0, 1}); !slices.Equal(got[len(got)-2:], []string{"/dev/nvidia2", "/dev/nvidia4"}) {
		t.Errorf("nodes %v; want the minors 2 and 4 (bus order 0 and 6)", got)
	}
	d.cfg.Machine.Topology.MIG = map[string]string{"MIG-x": "0000:b7:00.0"}
	if got := d.cardNodes([]int{2}); got != nil {
		t.Errorf("a MIG instance's rule: %v", got)
	}
	d.cfg.Machine = numaBox(t, "0")
	d.cfg.Machine.Topology = probes.Topology{}
	if got := d.cardNodes([]int{0}); got[len(got)-1] != "/dev/nvidia0" {
		t.Errorf("without the driver's word, by index: %v", got)
	}
}
