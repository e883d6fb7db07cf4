package main

import (
	"cmp"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"strconv"
	"strings"

	"github.com/berthd/berth/accounting"
	"github.com/berthd/berth/probes"
	"github.com/berthd/berth/supervisor"
)

// machineFlags are the overrides of what the machine has, shared by every
// command that needs the inventory.
type machineFlags struct {
	cpus, gpus  optionalInt
	ram, gpuMem string
	// books says the values are an answering daemon's (fromDaemon), not
	// given: what they override is not the person's doing, and is not
	// warned of.
	books bool
	// ramUnknown: the daemon's books do not account memory (it could
	// not read it), and neither may the books measured against them.
	ramUnknown bool
}

func (m *machineFlags) register(fs *flag.FlagSet) {
	fs.Var(&m.cpus, "cpus", "cores jobs may use, instead of the online cores less 2")
	fs.Var(&m.gpus, "gpus", "cards jobs may use, instead of CUDA_VISIBLE_DEVICES or /dev/nvidia*")
	fs.StringVar(&m.ram, "ram", "", "memory jobs may use, e.g. 64G, instead of the physical or cgroup limit less 1G")
	fs.StringVar(&m.gpuMem, "gpu-mem", "", "each card's memory, e.g. 80G, for jobs that share a card by memory (gpu_mem), instead of what NVML says")
}

// given reports whether any of the flags was given.
func (m *machineFlags) given() bool {
	return m.cpus.set || m.gpus.set || m.ram != "" || m.gpuMem != ""
}

// fromDaemon sets the flags to the books of the daemon whose status s is,
// as berth status shows them.
func (m *machineFlags) fromDaemon(s *supervisor.Status) {
	m.cpus = optionalInt{n: s.Machine.CPUs, set: true}
	m.gpus = optionalInt{n: len(s.Machine.Cards), set: true}
	if s.Machine.RAMBytes != nil {
		m.ram = strconv.FormatInt(*s.Machine.RAMBytes>>10, 10) + "K"
	} else {
		m.ramUnknown = true
	}
	// A share fits where it fits the largest card it could be put on.
	var shareOf int64
	for _, card := range s.Machine.Cards {
		if card.ShareOfBytes != nil {
			shareOf = max(shareOf, *card.ShareOfBytes)
		}
	}
	if shareOf > 0 {
		m.gpuMem = strconv.FormatInt(shareOf>>10, 10) + "K"
	}
	m.books = true
}

// daemonStatus is the status of the daemon that answers on socket (or
// where c looks: c.sockets), nil where none does.
func (c *cli) daemonStatus(socket string) *supervisor.Status {
	var s supervisor.Status
	if err := newClient(c.sockets(socket)...).get("/status", nil, &s); err != nil {
		return nil
	}
	return &s
}

// inventory probes the machine and applies the overrides. Warnings go to
// warn, each with its kind (stderr where warn is nil); an error is
// returned as the sentence to print.
func (c *cli) inventory(m *machineFlags, warn func(kind, text string)) (probes.Inventory, error) {
	if warn == nil {
		warn = func(_, text string) { fmt.Fprintln(c.stderr, msgWarning(text)) }
	}
	inv, err := probes.Probe(c.root, c.env.lookup)
	// Cores that cannot be counted are no obstacle when --cpus says how
	// many there are; that is what the message asking for it promises.
	if err != nil && !(errors.Is(err, probes.ErrCoresUnknown) && m.cpus.set) {
		return probes.Inventory{}, err
	}
	if c.cards != nil && len(inv.GPUs) > 0 {
		// NVML, where it is there, says what the cards hold, and which
		// are in MIG mode: counted in /dev, their instances are the
		// cards then.
		if uses, err := c.cards.ReadCards(); err == nil {
			inv, c.cardUse = inv.WithNVML(uses), uses
		}
	}
	var o probes.Overrides
	if m.cpus.set {
		o.CPUs = &m.cpus.n
	}
	if m.gpus.set {
		o.GPUs = &m.gpus.n
	}
	if m.ram != "" {
		n, err := parseFlagSize(m.ram)
		if err != nil {
			return probes.Inventory{}, flagError{flag: "--ram", err: err}
		}
		o.RAMBytes = &n
	}
	if m.gpuMem != "" {
		n, err := parseFlagSize(m.gpuMem)
		if err != nil {
			return probes.Inventory{}, flagError{flag: "--gpu-mem", err: err}
		}
		o.GPUMemBytes = &n
	}
	inv, warnings, err := inv.Apply(o)
	if err != nil {
		return probes.Inventory{}, err
	}
	inv = inv.WithCardMemory(c.cardUse)
	if m.books {
		if m.ramUnknown {
			inv.RAM = probes.Memory{}
		}
		return inv, nil
	}
	if inv.GPUMemSource == probes.SourceOverride {
		for i, total := range inv.GPUMemTotal {
			if total > 0 && inv.GPUMem[i] > total {
				warn("gpu-mem-over", msgGPUMemOver(inv.GPUMem[i], inv.GPUs[i], total))
				break
			}
		}
	}
	for _, w := range warnings {
		warn(w.Kind.String(), w.String())
	}
	return inv, nil
}

// parseFlagSize is accounting.ParseSize for a flag, but for a bare 0,
// which is zero bytes: the flag's own bound then says what it takes,
// where "no unit; e.g. 0G" led to it.
func parseFlagSize(s string) (int64, error) {
	if strings.TrimSpace(s) == "0" {
		return 0, nil
	}
	return accounting.ParseSize(s)
}

// optionalInt is an int flag that knows whether it was given.
type optionalInt struct {
	n   int
	set bool
}

func (o *optionalInt) String() string {
	if !o.set {
		return ""
	}
	return strconv.Itoa(o.n)
}

func (o *optionalInt) Set(s string) error {
	n, err := strconv.Atoi(s)
	if err != nil {
		return fmt.Errorf("%q is not a whole number", s)
	}
	o.n, o.set = n, true
	return nil
}

// machineJSON is `berth machine --json`; its keys are part of the interface.
type machineJSON struct {
	CPUs     int      `json:"cpus"`
	CPUIDs   []int    `json:"cpu_ids"`
	GPUs     []string `json:"gpus"`
	RAMBytes *int64   `json:"ram_bytes"`
	Hostname string   `json:"hostname"`
	// GPUMemBytes is each card of gpus's memory as the books count it
	// for shares (gpu_mem): NVML's, or --gpu-mem; 0 where unknown.
	GPUMemBytes []int64 `json:"gpu_mem_bytes"`
	// Cards are the cards of gpus, as the driver describes them: [] where
	// it says nothing (no driver, or names it cannot match).
	Cards []cardJSON `json:"cards"`
	// NUMANodes are the machine's NUMA nodes and their CPUs; [] where
	// they cannot be read.
	NUMANodes []nodeJSON `json:"numa_nodes"`
	// Daemon is the running daemon's view, with who holds each card; null
	// when no daemon answers.
	Daemon *supervisor.MachineStatus `json:"daemon"`
	// Quota, for a person under one, is their quota and what their jobs
	// hold now, as the daemon says; absent otherwise.
	Quota *supervisor.QuotaView `json:"quota,omitempty"`
}

// cardJSON is one card of berth machine --json: its name as the books
// have it, and what the driver says of it (numa_node -1: unknown).
type cardJSON struct {
	Name      string `json:"name"`
	Model     string `json:"model"`
	UUID      string `json:"uuid"`
	PCI       string `json:"pci"`
	NUMANode  int    `json:"numa_node"`
	LocalCPUs []int  `json:"local_cpus"`
	// What it holds now, where NVML answered: its memory and the
	// processes on it (memory_bytes -1 where NVML cannot say).
	MemoryTotalBytes *int64        `json:"memory_total_bytes,omitempty"`
	MemoryUsedBytes  *int64        `json:"memory_used_bytes,omitempty"`
	Processes        []processJSON `json:"processes,omitempty"`
}

type processJSON struct {
	PID         int   `json:"pid"`
	MemoryBytes int64 `json:"memory_bytes"`
}

type nodeJSON struct {
	Node int   `json:"node"`
	CPUs []int `json:"cpus"`
}

func runMachine(c *cli, args []string) int {
	fs := c.flags("machine")
	var m machineFlags
	m.register(fs)
	asJSON := fs.Bool("json", false, "print the inventory as JSON")
	socket := fs.String("socket", "", "the daemon's control socket, asked who holds what (env BERTH_SOCKET; default: your own daemon's, else the system's)")
	rest, code, done := c.parse(fs, args)
	if done {
		return code
	}
	if len(rest) > 0 {
		fmt.Fprintln(c.stderr, msgUnexpectedArgs("machine", rest))
		return exitUsage
	}
	inv, err := c.inventory(&m, nil)
	if err != nil {
		fmt.Fprintln(c.stderr, msgInventory(err))
		return inventoryExit(err)
	}
	// With a daemon running, say who holds what; without one, the
	// inventory is the whole answer.
	var held *supervisor.Status
	var s supervisor.Status
	var me supervisor.Me
	cl := newClient(c.sockets(*socket)...)
	if err := cl.get("/status", nil, &s); err == nil {
		held = &s
		if cl.get("/me", nil, &me) != nil {
			me.Quota = nil
		}
	} else if *socket != "" || c.env.get("BERTH_SOCKET") != "" {
		// A daemon was named, and did not answer: said, or its books
		// would seem to be what is probed here.
		fmt.Fprintln(c.stderr, msgWarning(msgMachineNoDaemon(err)))
	}
	if *asJSON {
		out := machineJSON{CPUs: inv.CPUs, CPUIDs: inv.CPUIDs, GPUs: inv.GPUs, Hostname: inv.Hostname,
			Cards: []cardJSON{}, NUMANodes: []nodeJSON{}}
		for _, name := range inv.GPUs {
			card, described := inv.Topology.CardNamed(name)
			use, live := probes.UseOf(c.cardUse, inv.Topology, name)
			if !described && !live {
				continue
			}
			cj := cardJSON{Name: name, Model: cmp.Or(use.Model, card.Model), UUID: cmp.Or(use.UUID, card.UUID), PCI: cmp.Or(card.PCI, use.PCI),
				NUMANode: -1, LocalCPUs: []int{}}
			if described {
				cj.NUMANode = card.NUMANode
				if card.LocalCPUs != nil {
					cj.LocalCPUs = card.LocalCPUs
				}
			}
			if live {
				cj.MemoryTotalBytes, cj.MemoryUsedBytes = &use.MemoryTotal, &use.MemoryUsed
				for _, p := range use.Processes {
					cj.Processes = append(cj.Processes, processJSON{PID: p.PID, MemoryBytes: p.MemoryBytes})
				}
			}
			out.Cards = append(out.Cards, cj)
		}
		for _, n := range inv.Topology.Nodes {
			out.NUMANodes = append(out.NUMANodes, nodeJSON{Node: n.ID, CPUs: n.CPUs})
		}
		if held != nil {
			out.Daemon, out.Quota = &held.Machine, me.Quota
		}
		if out.GPUs == nil {
			out.GPUs = []string{}
		}
		out.GPUMemBytes = make([]int64, len(out.GPUs))
		copy(out.GPUMemBytes, inv.GPUMem)
		if inv.RAM.Known {
			out.RAMBytes = &inv.RAM.Bytes
		}
		return c.writeJSON(out)
	}
	printMachine(c.stdout, inv, c.cardUse)
	if held != nil {
		fmt.Fprintln(c.stdout)
		if m := held.Machine; m.CPUs != inv.CPUs || len(m.Cards) != len(inv.GPUs) || !sameRAM(m.RAMBytes, inv.RAM) || !sameCardMemory(m.Cards, inv.GPUMem) {
			// The daemon was told otherwise (--cpus, --gpus, --ram,
			// --gpu-mem): its books are what a job is placed against.
			fmt.Fprintln(c.stdout, msgBooksDiffer(m))
		}
		renderHolders(c.stdout, held.Machine, c.render(held.Now))
		if me.Quota != nil {
			fmt.Fprintln(c.stdout)
			fmt.Fprintln(c.stdout, escapeText(msgYourQuota(me.Owner, *me.Quota)))
		}
	}
	return exitOK
}

func (c *cli) writeJSON(v any) int {
	enc := json.NewEncoder(c.stdout)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		fmt.Fprintln(c.stderr, msgInternal(err))
		return exitFailed
	}
	return exitOK
}

// sameCardMemory says whether the daemon's books give its cards the
// memory for shares probed here (none known on either side is the same).
func sameCardMemory(cards []supervisor.CardStatus, probed []int64) bool {
	for i, c := range cards {
		var here int64
		if i < len(probed) {
			here = probed[i]
		}
		if c.ShareOfBytes == nil && here != 0 || c.ShareOfBytes != nil && *c.ShareOfBytes != here {
			return false
		}
	}
	return true
}

// sameRAM reports whether the daemon's memory (nil: unknown) is the
// probe's.
func sameRAM(daemon *int64, probed probes.Memory) bool {
	if daemon == nil || !probed.Known {
		return daemon == nil && !probed.Known
	}
	return *daemon == probed.Bytes
}
