package probes

import (
	"bufio"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// The cards' place in the machine, from what the NVIDIA driver and the
// kernel publish without any library: each card's
// /proc/driver/nvidia/gpus/BUS/information (its model, UUID, bus location
// and device minor), the NUMA node of its PCI device
// (/sys/bus/pci/devices/BUS/numa_node) and the cores local to it
// (local_cpulist there, else its node's cpulist under
// /sys/devices/system/node). Where any of it cannot be read, the card's
// node is unknown (-1) and the books place it as before.

// Card is one card as the driver describes it.
type Card struct {
	Model string
	UUID  string // "GPU-…"
	// PCI is the card's bus location, "0000:3b:00.0".
	PCI string
	// Minor is the N of /dev/nvidiaN; -1 when not said.
	Minor int
	// NUMANode is the node the card hangs off; -1 when unknown (a machine
	// of one node says -1 too).
	NUMANode int
	// LocalCPUs are the cores local to the card, ascending; nil when
	// unknown.
	LocalCPUs []int
}

// Node is one NUMA node and its CPUs.
type Node struct {
	ID   int
	CPUs []int
}

// Topology is the machine's NUMA nodes and its cards, in PCI bus order
// (the order NVML and nvidia-smi number them in, and CUDA's with
// CUDA_DEVICE_ORDER=PCI_BUS_ID).
type Topology struct {
	Nodes []Node
	Cards []Card
	// MIG maps a MIG instance's UUID to its card's bus location, where
	// NVML told it (WithNVML); nil otherwise.
	MIG map[string]string
}

// NodeOfCPU is the node core id belongs to; -1 when no node lists it.
func (t Topology) NodeOfCPU(id int) int {
	for _, n := range t.Nodes {
		if _, found := slices.BinarySearch(n.CPUs, id); found {
			return n.ID
		}
	}
	return -1
}

// CardNamed is the card an inventory name means: a "GPU-…" name is the card
// of that UUID; an index is the card of that place in PCI bus order. A
// "MIG-…" instance, or a name no card matches, is not found: which card
// holds an instance takes NVML to tell.
func (t Topology) CardNamed(name string) (Card, bool) {
	if pci, ok := t.MIG[name]; ok {
		for _, c := range t.Cards {
			if c.PCI == pci {
				return c, true
			}
		}
		return Card{}, false
	}
	if strings.HasPrefix(name, "GPU-") {
		for _, c := range t.Cards {
			if c.UUID == name {
				return c, true
			}
		}
		return Card{}, false
	}
	i, err := strconv.Atoi(name)
	if err != nil || i < 0 || i >= len(t.Cards) {
		return Card{}, false
	}
	return t.Cards[i], true
}

// maxCards bounds how many driver entries are read.
const maxCards = 1024

// probeTopology reads the nodes and the cards under root. What cannot be
// read is left out: a machine without the driver has no cards here, one
// without /sys/devices/system/node no nodes.
func probeTopology(root string) Topology {
	var t Topology
	nodeDirs, _ := filepath.Glob(filepath.Join(root, "sys/devices/system/node/node[0-9]*"))
	for _, dir := range nodeDirs {
		id, err := strconv.Atoi(strings.TrimPrefix(filepath.Base(dir), "node"))
		if err != nil {
			continue
		}
		rel, _ := filepath.Rel(root, filepath.Join(dir, "cpulist"))
		cpus, err := readProbeFile(root, rel, parseCPUList)
		if err != nil {
			continue
		}
		t.Nodes = append(t.Nodes, Node{ID: id, CPUs: cpus})
	}
	slices.SortFunc(t.Nodes, func(a, b Node) int { return a.ID - b.ID })

	infos, _ := filepath.Glob(filepath.Join(root, "proc/driver/nvidia/gpus/*/information"))
	if len(infos) > maxCards {
		infos = infos[:maxCards]
	}
	for _, path := range infos {
		rel, _ := filepath.Rel(root, path)
		c, err := readProbeFile(root, rel, parseCardInformation)
		if err != nil {
			continue
		}
		if c.PCI == "" {
			c.PCI = filepath.Base(filepath.Dir(path))
		}
		c.NUMANode = -1
		dev := filepath.Join("sys/bus/pci/devices", c.PCI)
		if !strings.Contains(c.PCI, "/") && c.PCI != "." && c.PCI != ".." {
			if n, err := readProbeFile(root, filepath.Join(dev, "numa_node"), parseNUMANode); err == nil {
				c.NUMANode = n
			}
			if cpus, err := readProbeFile(root, filepath.Join(dev, "local_cpulist"), parseCPUList); err == nil {
				c.LocalCPUs = cpus
			}
		}
		if c.LocalCPUs == nil && c.NUMANode >= 0 {
			for _, n := range t.Nodes {
				if n.ID == c.NUMANode {
					c.LocalCPUs = n.CPUs
				}
			}
		}
		t.Cards = append(t.Cards, c)
	}
	slices.SortFunc(t.Cards, func(a, b Card) int { return strings.Compare(a.PCI, b.PCI) })
	return t
}

// parseCardInformation reads the driver's information file of one card:
// "Key: \t value" lines, of which Model, GPU UUID, Bus Location and Device
// Minor are kept. A file without a bus location or a UUID is not a card's.
func parseCardInformation(r io.Reader) (Card, error) {
	c := Card{Minor: -1, NUMANode: -1}
	sc := bufio.NewScanner(io.LimitReader(r, maxProbeFileBytes))
	for sc.Scan() {
		key, value, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		value = strings.TrimSpace(value)
		switch strings.TrimSpace(key) {
		case "Model":
			c.Model = value
		case "GPU UUID":
			c.UUID = value
		case "Bus Location":
			c.PCI = strings.ToLower(value)
		case "Device Minor":
			if n, err := strconv.Atoi(value); err == nil && n >= 0 {
				c.Minor = n
			}
		}
	}
	if err := sc.Err(); err != nil {
		return Card{}, fmt.Errorf("read card information: %w", err)
	}
	if c.UUID == "" && c.PCI == "" {
		return Card{}, fmt.Errorf("no GPU UUID and no Bus Location: not a card's information")
	}
	if strings.ContainsAny(c.PCI, "/\x00") {
		return Card{}, fmt.Errorf("bus location %q is not a PCI address", c.PCI)
	}
	return c, nil
}

// parseNUMANode reads a PCI device's numa_node: a node number, or -1.
func parseNUMANode(r io.Reader) (int, error) {
	b, err := io.ReadAll(io.LimitReader(r, 64))
	if err != nil {
		return -1, err
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || n < -1 || n >= maxCPUs {
		return -1, fmt.Errorf("numa_node %q is not a node number", strings.TrimSpace(string(b)))
	}
	return n, nil
}
