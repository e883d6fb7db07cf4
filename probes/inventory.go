package probes

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// ReservedCPUs is how many cores the daemon keeps for itself and the
// interrupts: the lowest-numbered ones.
const ReservedCPUs = 2

// ReservedRAM is the memory the daemon keeps for itself and the system, in
// bytes.
const ReservedRAM int64 = 1 << 30

// maxOverride bounds --cpus and --gpus, which become one ID or name each:
// a typo of a few extra digits must not make the daemon allocate gigabytes.
const maxOverride = maxCPUs

// oversubscribeFactor is how far --cpus may exceed the real core count before
// Apply warns.
const oversubscribeFactor = 4

// Inventory is what this machine offers jobs.
type Inventory struct {
	// CPUs is the number of cores jobs may be given: the online CPUs the
	// daemon may run on (its Cpus_allowed_list, where readable), less
	// ReservedCPUs, at least 1.
	CPUs int
	// CPUIDs are those cores' IDs, ascending; len(CPUIDs) == CPUs. The daemon
	// keeps the lowest IDs, since core 0 usually takes the interrupts. After a
	// --cpus override above what the machine has, the IDs past the highest
	// online CPU are virtual: they let the books count, but cannot be pinned.
	CPUIDs []int
	// OnlineCPUs is the number of online CPUs the daemon may run on, before
	// the reserve: the real count an override is compared with.
	OnlineCPUs int
	// GPUs names the cards jobs may be given, in the form a job's
	// CUDA_VISIBLE_DEVICES takes: as written in the daemon's own
	// CUDA_VISIBLE_DEVICES ("2", "GPU-…", "MIG-…"), or "0".."n-1".
	GPUs []string
	// GPUSource says where GPUs came from: SourceCUDAVisibleDevices,
	// SourceDev or SourceOverride.
	GPUSource string
	// GPUsCut says where the daemon's CUDA_VISIBLE_DEVICES ended before
	// the cards it names later, or on a repeat; nil where it did not.
	GPUsCut *CardsCut
	// CardsSeen is how many cards the probe found, before any override:
	// with --gpus 0 jobs are given none of them, and must see none.
	CardsSeen int
	// GPUMem is each card's memory in bytes, by its place in GPUs, 0
	// where unknown; nil where none is known. It is what NVML says
	// (WithCardMemory), or --gpu-mem for every card. Only a card whose
	// memory is known is shared by memory (gpu_mem).
	GPUMem []int64
	// GPUMemSource says where GPUMem came from: SourceNVML or
	// SourceOverride; "" where none is known.
	GPUMemSource string
	// GPUMemTotal is each card's memory as NVML says it, by the place of
	// its name in GPUs (0 where it does not say); nil without NVML. It is
	// GPUMem but where --gpu-mem books another amount: the part of the
	// card a share is, for the frameworks, is of this.
	GPUMemTotal []int64
	RAM         Memory
	// Hostname is the host's name, "" where it could not be read.
	Hostname string
	// Booted is when the machine booted, the zero time where it could not
	// be read.
	Booted time.Time
	// InitStarted is when PID 1 started: the start of the systemd whose
	// units are berth's runs, which no unit outlives. It is Booted, or
	// later in a container (a reboot of the container is not one of its
	// kernel). The zero time where it could not be read.
	InitStarted time.Time
	// Topology is the machine's NUMA nodes and the cards the driver
	// describes (all of them, whichever GPUs names); empty where they
	// cannot be read.
	Topology Topology

	// highestOnlineID is where virtual core IDs start after.
	highestOnlineID int
	// coresUnknown is set when the probe could not count the cores: the
	// IDs a --cpus override then gives are all virtual.
	coresUnknown bool
}

// Memory is the memory jobs may be given: a value, or unknown. Unknown is not
// zero: unknown memory is not accounted at all, while zero grants nothing.
type Memory struct {
	Bytes int64 // meaningful only when Known
	Known bool
	// Source says what bound Bytes: SourceMeminfo, a cgroup limit such as
	// "cgroup v2 memory.max /system.slice/berth.service", or SourceOverride.
	// It is "" when memory is unknown.
	Source string
}

// Probe reads the inventory of the machine whose filesystem is at root ("/"
// in production). lookupEnv reads the daemon's own environment (os.LookupEnv
// in production; nil reads nothing); only CUDA_VISIBLE_DEVICES is looked up,
// and set-but-empty is told from unset: empty means no cards, unset means
// count them in /dev.
//
// The outcomes:
//
//	(inv, nil)  the cores were found; memory may be unknown and cards none
//	(inv, err)  no core count at all (err wraps ErrCoresUnknown); the rest
//	            of inv was probed, and an Apply with Overrides.CPUs makes
//	            it whole: the operator said how many cores there are
func Probe(root string, lookupEnv func(string) (string, bool)) (Inventory, error) {
	gpus, gpuSource, cut := probeGPUs(root, lookupEnv)
	inv := Inventory{
		GPUs:      gpus,
		GPUSource: gpuSource,
		GPUsCut:   cut,
		CardsSeen: len(gpus),
		RAM:       probeMemory(root),
		Hostname:  probeHostname(root),
		Booted:    probeBootTime(root),
		Topology:  probeTopology(root),
	}
	inv.InitStarted = probeInitStarted(root, inv.Booted)
	cpus, err := probeCPUs(root)
	if err != nil {
		inv.coresUnknown = true
		return inv, err
	}
	inv.CPUIDs = jobCPUs(cpus.usable)
	inv.CPUs = len(inv.CPUIDs)
	inv.OnlineCPUs = len(cpus.usable)
	inv.highestOnlineID = cpus.highestOnline
	return inv, nil
}

// Overrides are the daemon's --cpus, --gpus, --ram and --gpu-mem. A nil
// field is not overridden.
type Overrides struct {
	CPUs     *int
	GPUs     *int
	RAMBytes *int64
	// GPUMemBytes is the memory of every card, where the driver's library
	// cannot say it (or to share less of each card than it has).
	GPUMemBytes *int64
}

// WarningKind says which warning a Warning is. The values are explicit so
// that they never shift when one is added.
type WarningKind int

// The warnings Apply gives.
const (
	// CoresOversubscribed: --cpus is more than 4 times the online cores.
	CoresOversubscribed WarningKind = 1
	// CardsLeftOut: the daemon's CUDA_VISIBLE_DEVICES ended before cards
	// it names later, or on a repeat (Inventory.GPUsCut).
	CardsLeftOut WarningKind = 2
)

func (k WarningKind) String() string {
	switch k {
	case CoresOversubscribed:
		return "cores-oversubscribed"
	case CardsLeftOut:
		return "cards-left-out"
	default:
		return fmt.Sprintf("WarningKind(%d)", int(k))
	}
}

// Warning is something allowed but probably not meant, with the facts that
// make it so.
type Warning struct {
	Kind   WarningKind
	Flag   string // "--cpus"
	Asked  int    // the value given
	Online int    // the real count it was compared with
	// CardsLeftOut: where the list ended, and the cards read before it.
	Cut   *CardsCut
	Cards []string
}

func (w Warning) String() string {
	switch w.Kind {
	case CoresOversubscribed:
		cores := "cores"
		if w.Online == 1 {
			cores = "core"
		}
		return fmt.Sprintf("%s %d is more than %d times the %d %s this machine has; jobs will be oversubscribed",
			w.Flag, w.Asked, oversubscribeFactor, w.Online, cores)
	case CardsLeftOut:
		c := w.Cut
		at := strconv.Quote(c.At)
		if c.At == "" {
			at = "an empty entry"
		}
		meant := cudaVisibleDevices + "=" + strings.Join(append(slices.Clone(w.Cards), c.Left...), ",")
		if len(c.Left) == 0 {
			// Named as first written, and how else (trial AJ: "1,01"
			// named card 01 twice).
			twice := "card " + c.At + " twice"
			if i := slices.IndexFunc(w.Cards, sameCard(c.At)); i >= 0 && w.Cards[i] != c.At {
				twice = fmt.Sprintf("card %s twice (as %s and %s)", w.Cards[i], w.Cards[i], c.At)
			}
			return fmt.Sprintf("%s=%s names %s; the daemon's cards end at the second, as CUDA's do (write each card once: %s)",
				cudaVisibleDevices, c.Value, twice, meant)
		}
		why := "an entry CUDA cannot read"
		if c.Repeated {
			why = "a card named twice"
		}
		return fmt.Sprintf("%s=%s: the cards after %s (%s) are not the daemon's, as CUDA reads the list no further than %s; write %s if they are meant to be",
			cudaVisibleDevices, c.Value, at, strings.Join(c.Left, ", "), why, meant)
	default:
		return fmt.Sprintf("%s %d: %v", w.Flag, w.Asked, w.Kind)
	}
}

// Apply returns the inventory with the overrides applied, and the warnings
// for overrides that are allowed but probably not meant. Every invalid
// override is reported, joined in one error of *OverrideError and
// *GPUListError values; then the inventory is the zero value. The receiver
// is not changed.
func (inv Inventory) Apply(o Overrides) (Inventory, []Warning, error) {
	out := inv
	out.CPUIDs = slices.Clone(inv.CPUIDs)
	out.GPUs = slices.Clone(inv.GPUs)
	var warnings []Warning
	var errs []error
	if inv.GPUsCut != nil {
		warnings = append(warnings, Warning{Kind: CardsLeftOut, Cut: inv.GPUsCut, Cards: slices.Clone(inv.GPUs)})
	}

	if o.CPUs != nil {
		n := *o.CPUs
		switch {
		case n < 1 || n > maxOverride:
			errs = append(errs, &OverrideError{Flag: "--cpus", Value: int64(n), Min: 1, Max: maxOverride})
		default:
			out.CPUs, out.CPUIDs = n, inv.overrideCPUIDs(n)
			if inv.OnlineCPUs > 0 && n > oversubscribeFactor*inv.OnlineCPUs {
				warnings = append(warnings, Warning{Kind: CoresOversubscribed, Flag: "--cpus", Asked: n, Online: inv.OnlineCPUs})
			}
		}
	}

	if o.GPUs != nil {
		n := *o.GPUs
		switch {
		case n < 0 || n > maxOverride:
			errs = append(errs, &OverrideError{Flag: "--gpus", Value: int64(n), Min: 0, Max: maxOverride})
		case inv.GPUSource == SourceCUDAVisibleDevices && n > len(inv.GPUs):
			errs = append(errs, &GPUListError{Asked: n, Listed: slices.Clone(inv.GPUs)})
		case inv.GPUSource == SourceCUDAVisibleDevices:
			// The daemon may only hand out the cards it was given, so
			// the override picks among them rather than renaming them.
			out.GPUs = nil
			if n > 0 {
				out.GPUs = slices.Clone(inv.GPUs[:n])
			}
		default:
			out.GPUs, out.GPUSource = indexNames(n), SourceOverride
		}
	}

	if o.RAMBytes != nil {
		n := *o.RAMBytes
		if n <= 0 {
			errs = append(errs, &OverrideError{Flag: "--ram", Value: n, Min: 1})
		} else {
			out.RAM = Memory{Bytes: n, Known: true, Source: SourceOverride}
		}
	}

	if o.GPUMemBytes != nil {
		n := *o.GPUMemBytes
		if n <= 0 {
			errs = append(errs, &OverrideError{Flag: "--gpu-mem", Value: n, Min: 1})
		} else {
			out.GPUMem, out.GPUMemSource = make([]int64, len(out.GPUs)), SourceOverride
			for i := range out.GPUMem {
				out.GPUMem[i] = n
			}
		}
	} else if len(out.GPUs) != len(inv.GPUs) {
		// Other cards than those whose memory was known.
		out.GPUMem, out.GPUMemSource = nil, ""
	}
	if len(out.GPUs) != len(inv.GPUs) {
		out.GPUMemTotal = nil
	}

	if len(errs) > 0 {
		return Inventory{}, nil, errors.Join(errs...)
	}
	return out, warnings, nil
}

// WithCardMemory is the inventory with each card's memory as NVML reports
// it (uses), where --gpu-mem did not say it already. A card NVML does not
// describe keeps 0: unknown.
func (inv Inventory) WithCardMemory(uses []CardUse) Inventory {
	if len(uses) == 0 {
		return inv
	}
	out := inv
	out.GPUMemTotal = make([]int64, len(inv.GPUs))
	known := false
	for i, name := range inv.GPUs {
		if use, ok := UseOf(uses, inv.Topology, name); ok && use.MemoryTotal > 0 {
			out.GPUMemTotal[i], known = use.MemoryTotal, true
		}
	}
	switch {
	case !known:
		out.GPUMemTotal = nil
	case inv.GPUMemSource != SourceOverride:
		out.GPUMem, out.GPUMemSource = out.GPUMemTotal, SourceNVML
	}
	return out
}

// CardShareOf is the memory of card i a share is a part of: what NVML
// says it has, else what the books count; 0 where neither is known.
func (inv Inventory) CardShareOf(i int) int64 {
	if i < len(inv.GPUMemTotal) && inv.GPUMemTotal[i] > 0 {
		return inv.GPUMemTotal[i]
	}
	if i < len(inv.GPUMem) {
		return inv.GPUMem[i]
	}
	return 0
}

// Pinnable returns those of ids that are real cores, which a job can be
// pinned to: not the virtual ones a --cpus above the machine's count adds.
// An inventory whose cores could not be probed has none that are known to
// be real; one that was not probed at all (a test's) takes all of ids.
func (inv Inventory) Pinnable(ids []int) []int {
	if inv.coresUnknown {
		return nil
	}
	if inv.OnlineCPUs == 0 {
		return ids
	}
	highest := max(inv.highestOnlineID, inv.OnlineCPUs-1)
	if !slices.ContainsFunc(ids, func(id int) bool { return id > highest }) {
		return ids // all real, as they are but for a --cpus above the count
	}
	var real []int
	for _, id := range ids {
		if id <= highest {
			real = append(real, id)
		}
	}
	return real
}

// overrideCPUIDs returns n core IDs: the first n usable ones, then virtual
// IDs counting up from past the highest online CPU, which no real core has.
func (inv Inventory) overrideCPUIDs(n int) []int {
	if n <= len(inv.CPUIDs) {
		return slices.Clone(inv.CPUIDs[:n])
	}
	ids := make([]int, 0, n)
	ids = append(ids, inv.CPUIDs...)
	next := max(inv.highestOnlineID, inv.OnlineCPUs-1) + 1
	if inv.coresUnknown {
		next = 0 // no core is known, so none is in the way
	}
	if len(inv.CPUIDs) > 0 {
		next = max(next, inv.CPUIDs[len(inv.CPUIDs)-1]+1)
	}
	for len(ids) < n {
		ids = append(ids, next)
		next++
	}
	return ids
}
