//go:build cgo

package probes

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxa100"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/gpus"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"
)

// busID is a bus id as NVML writes it: an 8-digit domain, upper case,
// NUL padded.
func busID(s string) [32]int8 {
	var b [32]int8
	for i, c := range []byte(s) {
		b[i] = int8(c)
	}
	return b
}

// fake completes go-nvml's mock of a machine with what the mock leaves
// out: each card's bus id, the processes on each (procs, by card index)
// and, for the cards in migs, MIG mode with two instances, each with a
// process of its own.
func fake(s *server.Server, procs map[int][]nvml.ProcessInfo, migs ...int) {
	for i, d := range s.Devices {
		dev := d.(*server.Device)
		id := busID(fmt.Sprintf("00000000:%02X:00.0", 0x07+0x10*i))
		dev.GetPciInfoFunc = func() (nvml.PciInfo, nvml.Return) { return nvml.PciInfo{BusId: id}, nvml.SUCCESS }
		list := procs[i]
		dev.GetComputeRunningProcessesFunc = func() ([]nvml.ProcessInfo, nvml.Return) { return list, nvml.SUCCESS }
		dev.GetGraphicsRunningProcessesFunc = func() ([]nvml.ProcessInfo, nvml.Return) { return nil, nvml.SUCCESS }
		if !slices.Contains(migs, i) {
			continue
		}
		dev.SetMigMode(nvml.DEVICE_MIG_ENABLE)
		instances := make([]nvml.Device, 2)
		for k := range instances {
			uuid := fmt.Sprintf("MIG-%d-%d", i, k)
			pid := uint32(7000 + 10*i + k)
			instances[k] = &mock.Device{
				GetUUIDFunc:       func() (string, nvml.Return) { return uuid, nvml.SUCCESS },
				GetNameFunc:       func() (string, nvml.Return) { return "NVIDIA A100-SXM4-40GB MIG 3g.20gb", nvml.SUCCESS },
				GetPciInfoFunc:    func() (nvml.PciInfo, nvml.Return) { return nvml.PciInfo{BusId: id}, nvml.SUCCESS },
				GetMemoryInfoFunc: func() (nvml.Memory, nvml.Return) { return nvml.Memory{Total: 20 << 30, Used: 3 << 30}, nvml.SUCCESS },
				GetComputeRunningProcessesFunc: func() ([]nvml.ProcessInfo, nvml.Return) {
					return []nvml.ProcessInfo{{Pid: pid, UsedGpuMemory: 3 << 30}}, nvml.SUCCESS
				},
				GetGraphicsRunningProcessesFunc: func() ([]nvml.ProcessInfo, nvml.Return) { return nil, nvml.ERROR_NOT_SUPPORTED },
			}
		}
		dev.GetMaxMigDeviceCountFunc = func() (int, nvml.Return) { return 7, nvml.SUCCESS }
		dev.GetMigDeviceHandleByIndexFunc = func(k int) (nvml.Device, nvml.Return) {
			if k < len(instances) {
				return instances[k], nvml.SUCCESS
			}
			return nil, nvml.ERROR_NOT_FOUND
		}
	}
}

// TestNVMLDGXA100: an 8-card box with MIG on two cards, through go-nvml's
// mock of a DGX A100: every card with its UUID, model, memory and bus
// address as sysfs writes it; the processes, one in two lists once, one
// whose memory NVML cannot say; the MIG instances of cards 6 and 7.
func TestNVMLDGXA100(t *testing.T) {
	s := dgxa100.New()
	fake(s, map[int][]nvml.ProcessInfo{
		1: {{Pid: 4242, UsedGpuMemory: 21 << 30}, {Pid: 4243, UsedGpuMemory: ^uint64(0)}},
	}, 6, 7)
	// A process that draws and computes is in both lists.
	dev1 := s.Devices[1].(*server.Device)
	dev1.GetGraphicsRunningProcessesFunc = func() ([]nvml.ProcessInfo, nvml.Return) {
		return []nvml.ProcessInfo{{Pid: 4242, UsedGpuMemory: 1 << 30}}, nvml.SUCCESS
	}
	r := &nvmlReader{lib: s}
	cards, err := r.ReadCards()
	if err != nil {
		t.Fatal(err)
	}
	if len(cards) != 8 {
		t.Fatalf("%d cards", len(cards))
	}
	for i, c := range cards {
		want := fmt.Sprintf("0000:%02x:00.0", 0x07+0x10*i)
		if c.Index != i || c.PCI != want || c.UUID != s.Devices[i].(*server.Device).UUID || c.Model != "Mock NVIDIA A100-SXM4-40GB" || c.MemoryTotal != 40960<<20 {
			t.Errorf("card %d: %+v; want bus %s", i, c, want)
		}
		if wantMIG := i >= 6; (len(c.MIG) == 2) != wantMIG {
			t.Errorf("card %d: %d MIG instances", i, len(c.MIG))
		}
	}
	if got := cards[1].Processes; !slices.Equal(got, []CardProcess{{PID: 4242, MemoryBytes: 21 << 30}, {PID: 4243, MemoryBytes: -1}}) {
		t.Errorf("card 1's processes: %+v", got)
	}
	if m := cards[7].MIG[1]; m.UUID != "MIG-7-1" || m.MemoryTotal != 20<<30 || len(m.Processes) != 1 || m.Processes[0].PID != 7071 {
		t.Errorf("card 7's second instance: %+v", m)
	}
	// As the daemon takes it: counted in /dev, cards 6 and 7 become their
	// instances, and each card's memory is what NVML says of it (of an
	// instance, its own).
	inv := Inventory{GPUs: indexNames(8), GPUSource: SourceDev, CardsSeen: 8}.WithNVML(cards).WithCardMemory(cards)
	wantMem := []int64{40960 << 20, 40960 << 20, 40960 << 20, 40960 << 20, 40960 << 20, 40960 << 20, 20 << 30, 20 << 30, 20 << 30, 20 << 30}
	if !slices.Equal(inv.GPUMem, wantMem) || inv.GPUs[9] != "MIG-7-1" {
		t.Errorf("the daemon's cards %v, their memory %v; want %v", inv.GPUs, inv.GPUMem, wantMem)
	}
	// Read again: initialised once, the same answer.
	again, err := r.ReadCards()
	if err != nil || len(again) != 8 {
		t.Errorf("second read: %d cards, %v", len(again), err)
	}
}

// TestNVMLWorkstation: the 4-card workstation with a hand-started server
// holding 21 GB of card 1.
func TestNVMLWorkstation(t *testing.T) {
	rtx := gpus.Config{Name: "NVIDIA GeForce RTX 4090", Architecture: nvml.DEVICE_ARCH_ADA, Brand: nvml.BRAND_GEFORCE, MemoryMB: 24564}
	s, err := server.New(server.WithGPUs(rtx, rtx, rtx, rtx))
	if err != nil {
		t.Fatal(err)
	}
	fake(s, map[int][]nvml.ProcessInfo{1: {{Pid: 4242, UsedGpuMemory: 21 << 30}}})
	cards, err := (&nvmlReader{lib: s}).ReadCards()
	if err != nil {
		t.Fatal(err)
	}
	if len(cards) != 4 || len(cards[1].Processes) != 1 || cards[1].Processes[0].MemoryBytes != 21<<30 || cards[0].Processes != nil {
		t.Errorf("%+v", cards)
	}
}

// TestNVMLAbsent: without the library, ErrNoNVML.
func TestNVMLAbsent(t *testing.T) {
	lib := &mock.Interface{InitFunc: func() nvml.Return { return nvml.ERROR_LIBRARY_NOT_FOUND }}
	_, err := (&nvmlReader{lib: lib}).ReadCards()
	if !errors.Is(err, ErrNoNVML) {
		t.Errorf("err %v", err)
	}
}

func TestPCIAddress(t *testing.T) {
	for in, want := range map[string]string{
		"00000000:3B:00.0": "0000:3b:00.0",
		"0000:3b:00.0":     "0000:3b:00.0",
		"00010000:01:00.1": "10000:01:00.1",
		"":                 "",
	} {
		id := busID(in)
		if got := pciAddress(id[:]); got != want {
			t.Errorf("pciAddress(%q) = %q, want %q", in, got, want)
		}
	}
}
