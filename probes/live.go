package probes

import (
	"strconv"
	"strings"
)

// What the cards hold now, as the driver's management library (NVML) says
// it: asked again every few seconds, since processes berth did not start
// come and go. The daemon takes it through a CardReader; tests give it
// fixtures of real machines.

// CardUse is one card (or MIG instance) as NVML reports it now.
type CardUse struct {
	// Index is NVML's index of the card (PCI bus order).
	Index int
	UUID  string // "GPU-…", or "MIG-…" for an instance
	Model string
	// PCI is the card's bus location, "0000:3b:00.0", lower case.
	PCI string
	// MemoryTotal and MemoryUsed are bytes.
	MemoryTotal int64
	MemoryUsed  int64
	// Processes are those with a context on the card.
	Processes []CardProcess
	// MIG are the card's MIG instances, when MIG is on.
	MIG []CardUse
}

// CardProcess is one process with memory on a card.
type CardProcess struct {
	PID         int
	MemoryBytes int64 // -1 when NVML cannot say
}

// SourceNVML says the cards were named from NVML: each card by its index,
// and each MIG instance of a card in MIG mode by its UUID.
const SourceNVML = "NVML"

// WithNVML is the inventory as NVML shows the cards, when it counted them
// itself (/dev): a card in MIG mode is not one card but its instances,
// each named by its MIG UUID, which is how CUDA_VISIBLE_DEVICES takes
// them; the others keep their index. The instances' card is remembered,
// for its NUMA node. Cards the operator named (CUDA_VISIBLE_DEVICES,
// --gpus) are left as named.
func (inv Inventory) WithNVML(uses []CardUse) Inventory {
	if inv.GPUSource != SourceDev || len(uses) == 0 {
		return inv
	}
	out := inv
	out.GPUs = nil
	out.Topology.MIG = map[string]string{}
	for i, name := range inv.GPUs {
		var use *CardUse
		for k := range uses {
			if uses[k].Index == i {
				use = &uses[k]
			}
		}
		if use == nil || len(use.MIG) == 0 {
			out.GPUs = append(out.GPUs, name)
			continue
		}
		for _, m := range use.MIG {
			out.GPUs = append(out.GPUs, m.UUID)
			out.Topology.MIG[m.UUID] = use.PCI
		}
	}
	out.GPUSource, out.CardsSeen = SourceNVML, len(out.GPUs)
	return out
}

// UseOf finds card name among what NVML reported: a "GPU-…" or "MIG-…"
// name by its UUID; an index through the driver's bus location (t) where
// it describes the card, else as NVML's index (both count in PCI bus
// order).
func UseOf(uses []CardUse, t Topology, name string) (CardUse, bool) {
	if strings.HasPrefix(name, "GPU-") || strings.HasPrefix(name, "MIG-") {
		for _, u := range uses {
			if u.UUID == name {
				return u, true
			}
			for _, m := range u.MIG {
				if m.UUID == name {
					return m, true
				}
			}
		}
		return CardUse{}, false
	}
	if card, ok := t.CardNamed(name); ok {
		for _, u := range uses {
			if u.PCI == card.PCI {
				return u, true
			}
		}
		return CardUse{}, false
	}
	n, err := strconv.Atoi(name)
	if err != nil {
		return CardUse{}, false
	}
	for _, u := range uses {
		if u.Index == n {
			return u, true
		}
	}
	return CardUse{}, false
}

// CardReader reads what the cards hold now. ErrNoNVML (wrapped) says the
// library is not there: the machine's cards are then known only as the
// probes see them, and none is ever off.
type CardReader interface {
	ReadCards() ([]CardUse, error)
}

// ErrNoNVML says the NVIDIA management library could not be loaded.
var ErrNoNVML = errNoNVML{}

type errNoNVML struct{}

func (errNoNVML) Error() string {
	return "the NVIDIA management library (libnvidia-ml.so.1) is not there"
}

// wrapNoNVML is ErrNoNVML with why.
func wrapNoNVML(why string) error { return noNVMLBecause(why) }

type noNVMLBecause string

func (e noNVMLBecause) Error() string { return ErrNoNVML.Error() + ": " + string(e) }
func (e noNVMLBecause) Unwrap() error { return ErrNoNVML }
