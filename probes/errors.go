package probes

import (
	"errors"
	"fmt"
	"strings"
)

// ErrCoresUnknown is returned by Probe when neither the kernel's list of
// online CPUs nor /proc/cpuinfo can be read or understood. It is wrapped
// together with both causes.
var ErrCoresUnknown = errors.New("cannot determine the number of cores")

// OverrideError is returned by Inventory.Apply when an override is outside
// the values that flag accepts.
type OverrideError struct {
	Flag  string // "--cpus", "--gpus", "--ram" or "--gpu-mem"
	Value int64  // as given; bytes for --ram and --gpu-mem
	Min   int64  // the smallest value accepted
	Max   int64  // the largest value accepted; 0 for no bound
}

func (e *OverrideError) Error() string {
	unit := "cores"
	if e.Flag == "--gpus" {
		unit = "cards"
	}
	var accepted string
	switch {
	case e.Flag == "--ram":
		return fmt.Sprintf("--ram of %d bytes is not accepted: give a size above 0, or leave --ram out to use what this machine has (berth machine shows it)", e.Value)
	case e.Flag == "--gpu-mem":
		return fmt.Sprintf("--gpu-mem of %d bytes is not accepted: give each card's memory as a size above 0, e.g. 80G, or leave --gpu-mem out to use what the driver says (berth machine shows it)", e.Value)
	case e.Max > 0:
		accepted = fmt.Sprintf("give %d to %d %s", e.Min, e.Max, unit)
	default:
		accepted = fmt.Sprintf("give %d or more %s", e.Min, unit)
	}
	return fmt.Sprintf("%s %d is not accepted: %s, or leave %s out to use what this machine has (berth machine shows it)",
		e.Flag, e.Value, accepted, e.Flag)
}

// GPUListError is returned by Inventory.Apply when --gpus asks for more cards
// than the daemon's own CUDA_VISIBLE_DEVICES names: the daemon may only hand
// out cards it can see, so counting past the list would invent cards.
type GPUListError struct {
	Asked  int      // the --gpus value
	Listed []string // the cards CUDA_VISIBLE_DEVICES names, as written
}

func (e *GPUListError) Error() string {
	var names string
	switch len(e.Listed) {
	case 0:
		names = "names no cards"
	case 1:
		names = fmt.Sprintf("names only 1 card (%s)", e.Listed[0])
	default:
		names = fmt.Sprintf("names only %d cards (%s)", len(e.Listed), strings.Join(e.Listed, ","))
	}
	accepted := fmt.Sprintf("give --gpus %d or fewer", len(e.Listed))
	if len(e.Listed) == 0 {
		accepted = "give --gpus 0"
	}
	return fmt.Sprintf("--gpus %d asks for more cards than the daemon may use: its CUDA_VISIBLE_DEVICES %s; %s, or change CUDA_VISIBLE_DEVICES in the daemon's environment (systemctl edit berth)",
		e.Asked, names, accepted)
}
