package probes

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestTopologyTwoNodes: an 8-card box with four cards on each of two
// nodes; the cards come in bus order whatever their minors, each with its
// node and its local cores (from local_cpulist, or from its node where
// the device has none).
func TestTopologyTwoNodes(t *testing.T) {
	topo := probeTopology("testdata/topology/eight-two-nodes")
	if len(topo.Nodes) != 2 || topo.Nodes[0].ID != 0 || topo.Nodes[1].ID != 1 || len(topo.Nodes[0].CPUs) != 64 {
		t.Fatalf("nodes %+v", topo.Nodes)
	}
	if len(topo.Cards) != 8 {
		t.Fatalf("%d cards", len(topo.Cards))
	}
	for i, c := range topo.Cards {
		want := 0
		if i >= 4 {
			want = 1
		}
		if c.NUMANode != want || !slices.Equal(c.LocalCPUs, topo.Nodes[want].CPUs) {
			t.Errorf("card %d (%s): node %d, local cores %d of them; want node %d", i, c.PCI, c.NUMANode, len(c.LocalCPUs), want)
		}
		if c.Model != "NVIDIA A100-SXM4-80GB" || !strings.HasPrefix(c.UUID, "GPU-a100") || c.Minor < 0 {
			t.Errorf("card %d: %+v", i, c)
		}
	}
	if topo.Cards[0].PCI != "0000:07:00.0" || topo.Cards[0].Minor != 2 {
		t.Errorf("first card by bus: %+v", topo.Cards[0])
	}
	if got := topo.NodeOfCPU(70); got != 0 {
		t.Errorf("core 70 on node %d", got)
	}
	if got := topo.NodeOfCPU(100); got != 1 {
		t.Errorf("core 100 on node %d", got)
	}
	if got := topo.NodeOfCPU(500); got != -1 {
		t.Errorf("core 500 on node %d", got)
	}

	for _, c := range []struct {
		name string
		pci  string
		ok   bool
	}{
		{"0", "0000:07:00.0", true},
		{"5", "0000:90:00.0", true},
		{"GPU-a1000006-1111-2222-3333-444455556666", "0000:b7:00.0", true},
		{"8", "", false},
		{"GPU-nope", "", false},
		{"MIG-a1000006-1111-2222-3333-444455556666", "", false},
	} {
		card, ok := topo.CardNamed(c.name)
		if ok != c.ok || card.PCI != c.pci {
			t.Errorf("CardNamed(%q) = %s, %v; want %s, %v", c.name, card.PCI, ok, c.pci, c.ok)
		}
	}
}

// TestTopologyWorkstation: one node, whose devices say numa_node -1: the
// cards are there, their node unknown.
func TestTopologyWorkstation(t *testing.T) {
	topo := probeTopology("testdata/topology/workstation")
	if len(topo.Cards) != 4 {
		t.Fatalf("%d cards", len(topo.Cards))
	}
	for _, c := range topo.Cards {
		if c.NUMANode != -1 || c.LocalCPUs != nil || c.Model != "NVIDIA GeForce RTX 4090" {
			t.Errorf("%+v", c)
		}
	}
}

// TestTopologyNone: no driver and no nodes read as none of either.
func TestTopologyNone(t *testing.T) {
	topo := probeTopology(t.TempDir())
	if topo.Nodes != nil || topo.Cards != nil {
		t.Errorf("%+v", topo)
	}
}

// TestTopologyOddFiles: an information file that is not a card's, and a
// bus location that would leave sys/bus/pci/devices, are left out.
func TestTopologyOddFiles(t *testing.T) {
	root := t.TempDir()
	for bus, info := range map[string]string{
		"0000:01:00.0": "IRQ: 5\n",
		"0000:02:00.0": "GPU UUID: GPU-x\nBus Location: ../../../../etc\n",
		"0000:03:00.0": "GPU UUID: GPU-y\nBus Location: 0000:03:00.0\n",
	} {
		dir := filepath.Join(root, "proc/driver/nvidia/gpus", bus)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "information"), []byte(info), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	topo := probeTopology(root)
	if len(topo.Cards) != 1 || topo.Cards[0].UUID != "GPU-y" || topo.Cards[0].NUMANode != -1 {
		t.Errorf("%+v", topo.Cards)
	}
}

func FuzzParseCardInformation(f *testing.F) {
	for _, p := range []string{"testdata/topology/eight-two-nodes/proc/driver/nvidia/gpus/0000:07:00.0/information"} {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte("Bus Location: 0000:01:00.0\nDevice Minor: -3\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := parseCardInformation(strings.NewReader(string(b)))
		if err != nil {
			return
		}
		if c.UUID == "" && c.PCI == "" || strings.ContainsAny(c.PCI, "/\x00") || c.Minor < -1 || c.NUMANode != -1 {
			t.Errorf("accepted %q as %+v", b, c)
		}
	})
}

func FuzzParseNUMANode(f *testing.F) {
	for _, s := range []string{"0\n", "-1\n", "7", "x", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := parseNUMANode(strings.NewReader(s))
		if err == nil && (n < -1 || n >= maxCPUs) {
			t.Errorf("accepted %q as %d", s, n)
		}
	})
}

// TestWithNVML: cards counted in /dev that NVML shows in MIG mode become
// their instances, named by UUID and placed on their card's node; cards
// the operator named are left as named.
func TestWithNVML(t *testing.T) {
	inv := Inventory{GPUs: indexNames(8), GPUSource: SourceDev, CardsSeen: 8, Topology: probeTopology("testdata/topology/eight-two-nodes")}
	var uses []CardUse
	for i, c := range inv.Topology.Cards {
		u := CardUse{Index: i, UUID: c.UUID, PCI: c.PCI}
		if i >= 6 {
			u.MIG = []CardUse{{UUID: "MIG-" + strings.Repeat(string(rune('a'+i)), 2) + "-0"}, {UUID: "MIG-" + strings.Repeat(string(rune('a'+i)), 2) + "-1"}}
		}
		uses = append(uses, u)
	}
	got := inv.WithNVML(uses)
	want := []string{"0", "1", "2", "3", "4", "5", "MIG-gg-0", "MIG-gg-1", "MIG-hh-0", "MIG-hh-1"}
	if !slices.Equal(got.GPUs, want) || got.GPUSource != SourceNVML || got.CardsSeen != 10 {
		t.Fatalf("cards %v from %s (%d seen); want %v", got.GPUs, got.GPUSource, got.CardsSeen, want)
	}
	if c, ok := got.Topology.CardNamed("MIG-hh-1"); !ok || c.PCI != inv.Topology.Cards[7].PCI || c.NUMANode != 1 {
		t.Errorf("the instance's card: %+v, %v", c, ok)
	}
	if !slices.Equal(inv.GPUs, indexNames(8)) || inv.Topology.MIG != nil {
		t.Error("WithNVML changed its receiver")
	}
	named := inv
	named.GPUSource = SourceCUDAVisibleDevices
	if got := named.WithNVML(uses); !slices.Equal(got.GPUs, inv.GPUs) {
		t.Errorf("cards the operator named became %v", got.GPUs)
	}
}

// TestWithCardMemory: each card's memory as NVML says it, instances of
// MIG by their own; a card NVML does not describe is unknown; --gpu-mem
// says it for every card, and NVML does not undo it.
func TestWithCardMemory(t *testing.T) {
	top := probeTopology("testdata/topology/eight-two-nodes")
	inv := Inventory{GPUs: []string{"0", "1", "MIG-gg-0"}, GPUSource: SourceNVML, Topology: top}
	inv.Topology.MIG = map[string]string{"MIG-gg-0": top.Cards[6].PCI}
	uses := []CardUse{
		{Index: 0, UUID: top.Cards[0].UUID, PCI: top.Cards[0].PCI, MemoryTotal: 80 << 30},
		{Index: 6, UUID: top.Cards[6].UUID, PCI: top.Cards[6].PCI, MemoryTotal: 80 << 30,
			MIG: []CardUse{{UUID: "MIG-gg-0", MemoryTotal: 20 << 30}}},
	}
	got := inv.WithCardMemory(uses)
	if want := []int64{80 << 30, 0, 20 << 30}; !slices.Equal(got.GPUMem, want) || got.GPUMemSource != SourceNVML {
		t.Errorf("memory %v from %q; want %v from NVML", got.GPUMem, got.GPUMemSource, want)
	}
	if got := inv.WithCardMemory(nil); got.GPUMem != nil {
		t.Errorf("without NVML: %v; want unknown", got.GPUMem)
	}
	n := int64(40 << 30)
	over, _, err := inv.Apply(Overrides{GPUMemBytes: &n})
	if err != nil {
		t.Fatal(err)
	}
	got = over.WithCardMemory(uses)
	if !slices.Equal(got.GPUMem, []int64{n, n, n}) || got.GPUMemSource != SourceOverride {
		t.Errorf("--gpu-mem 40G, then NVML: %v from %q", got.GPUMem, got.GPUMemSource)
	}
	// A share's part of its card is of what the card has.
	if got.CardShareOf(0) != 80<<30 || got.CardShareOf(1) != n || over.CardShareOf(0) != n {
		t.Errorf("the memory shares are parts of: %d, %d, without NVML %d", got.CardShareOf(0), got.CardShareOf(1), over.CardShareOf(0))
	}
	zero := int64(0)
	if _, _, err := inv.Apply(Overrides{GPUMemBytes: &zero}); err == nil || !strings.Contains(err.Error(), "--gpu-mem") {
		t.Errorf("--gpu-mem 0: %v", err)
	}
}
