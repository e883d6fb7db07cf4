//go:build cgo

package probes

import (
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// NVML is the CardReader of the NVIDIA management library
// (libnvidia-ml.so.1), loaded at run time at the first read: a machine
// without it answers ErrNoNVML, and its cards are only as probed.
func NVML() CardReader { return &nvmlReader{lib: nvml.New()} }

// nvmlReader reads the cards through lib, initialised once and kept.
type nvmlReader struct {
	lib nvml.Interface

	mu     sync.Mutex // one read at a time
	inited bool
}

// notAvailable is how NVML says a process's memory is not known.
const notAvailable = ^uint64(0)

func (r *nvmlReader) ReadCards() ([]CardUse, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.inited {
		switch ret := r.lib.Init(); ret {
		case nvml.SUCCESS:
			r.inited = true
		case nvml.ERROR_LIBRARY_NOT_FOUND, nvml.ERROR_DRIVER_NOT_LOADED:
			return nil, fmt.Errorf("%w (%v)", ErrNoNVML, ret)
		default:
			return nil, fmt.Errorf("start NVML: %v", ret)
		}
	}
	n, ret := r.lib.DeviceGetCount()
	if ret != nvml.SUCCESS {
		return nil, fmt.Errorf("count the cards through NVML: %v", ret)
	}
	var out []CardUse
	var errs []error
	for i := range n {
		dev, ret := r.lib.DeviceGetHandleByIndex(i)
		if ret != nvml.SUCCESS {
			errs = append(errs, fmt.Errorf("card %d: %v", i, ret))
			continue
		}
		use, err := readDevice(dev)
		if err != nil {
			errs = append(errs, fmt.Errorf("card %d: %w", i, err))
			continue
		}
		use.Index = i
		if mode, _, ret := dev.GetMigMode(); ret == nvml.SUCCESS && mode == nvml.DEVICE_MIG_ENABLE {
			use.MIG = readMIG(dev)
		}
		out = append(out, use)
	}
	if len(out) == 0 && len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return out, nil
}

// readDevice reads one card or MIG instance: its identity, memory and
// processes.
func readDevice(dev nvml.Device) (CardUse, error) {
	var use CardUse
	var ret nvml.Return
	if use.UUID, ret = dev.GetUUID(); ret != nvml.SUCCESS {
		return use, fmt.Errorf("its UUID: %v", ret)
	}
	if name, ret := dev.GetName(); ret == nvml.SUCCESS {
		use.Model = name
	}
	if pci, ret := dev.GetPciInfo(); ret == nvml.SUCCESS {
		use.PCI = pciAddress(pci.BusId[:])
	}
	if mem, ret := dev.GetMemoryInfo(); ret == nvml.SUCCESS {
		use.MemoryTotal, use.MemoryUsed = int64(mem.Total), int64(mem.Used)
	}
	seen := map[uint32]int{}
	for _, list := range []func() ([]nvml.ProcessInfo, nvml.Return){dev.GetComputeRunningProcesses, dev.GetGraphicsRunningProcesses} {
		procs, ret := list()
		if ret != nvml.SUCCESS {
			continue
		}
		for _, p := range procs {
			mem := int64(-1)
			if p.UsedGpuMemory != notAvailable {
				mem = int64(p.UsedGpuMemory)
			}
			if at, ok := seen[p.Pid]; ok {
				// In both lists (a process that computes and draws):
				// once, with what it holds.
				use.Processes[at].MemoryBytes = max(use.Processes[at].MemoryBytes, mem)
				continue
			}
			seen[p.Pid] = len(use.Processes)
			use.Processes = append(use.Processes, CardProcess{PID: int(p.Pid), MemoryBytes: mem})
		}
	}
	return use, nil
}

// readMIG reads the MIG instances of a card in MIG mode; an instance that
// cannot be read is left out.
func readMIG(dev nvml.Device) []CardUse {
	n, ret := dev.GetMaxMigDeviceCount()
	if ret != nvml.SUCCESS {
		return nil
	}
	var out []CardUse
	for i := range n {
		mig, ret := dev.GetMigDeviceHandleByIndex(i)
		if ret != nvml.SUCCESS {
			continue // ERROR_NOT_FOUND: no instance in that slot
		}
		use, err := readDevice(mig)
		if err != nil {
			continue
		}
		use.Index = i
		out = append(out, use)
	}
	return out
}

// pciAddress turns NVML's bus id ("00000000:3B:00.0", NUL padded) into the
// form sysfs and the driver's /proc use ("0000:3b:00.0").
func pciAddress(busID []int8) string {
	b := make([]byte, 0, len(busID))
	for _, c := range busID {
		if c == 0 {
			break
		}
		b = append(b, byte(c))
	}
	s := strings.ToLower(string(b))
	if domain, rest, ok := strings.Cut(s, ":"); ok && len(domain) > 4 {
		s = strings.TrimLeft(domain[:len(domain)-4], "0") + domain[len(domain)-4:] + ":" + rest
	}
	return s
}
