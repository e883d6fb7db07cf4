package main

import (
	"cmp"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/berthd/berth/accounting"
	"github.com/berthd/berth/probes"
	"github.com/berthd/berth/supervisor"
)

// renderHolders is what `berth machine` adds while a daemon runs: what is
// in use, and who holds each card. The caller separates it from what it
// printed before.
func renderHolders(w io.Writer, m supervisor.MachineStatus, o renderOptions) {
	keys := []string{"cores", "memory"}
	for i := range m.Cards {
		keys = append(keys, "card "+strconv.Itoa(i))
	}
	keyWidth, holderWidth := 0, 0
	for _, k := range keys {
		keyWidth = max(keyWidth, runeLen(k))
	}
	// As berth status says it: its holder, those who share it, "in use"
	// by a process berth did not start, or "free".
	holderOf := func(c supervisor.CardStatus) (string, string) {
		if c.Holder != "" && c.Owner != "" {
			return c.Holder + " (" + c.Owner + "'s)", ""
		}
		return cardHolder(c)
	}
	booksWidth := 0
	for _, c := range m.Cards {
		text, _ := holderOf(c)
		holderWidth = max(holderWidth, runeLen(text))
		booksWidth = max(booksWidth, runeLen(msgCardBooks(c)))
	}
	lead := func(key string) textSpan {
		return plainSpan("  " + key + strings.Repeat(" ", keyWidth-runeLen(key)+2))
	}
	out := []textLine{
		ln(plainSpan("in use (berth daemon):")),
		ln(lead("cores"), plainSpan(fmt.Sprintf("%d/%d used", m.CPUs-m.CPUsFree, m.CPUs))),
		ln(lead("memory"), plainSpan(strings.TrimPrefix(memoryUse(m), "memory "))),
	}
	for i, c := range m.Cards {
		holder := styledSpan(holderOf(c))
		l := ln(lead(keys[2+i]), holder)
		// The memory the books give it for shares (NVML's, or --gpu-mem:
		// trial AZ, a share refused for its size pointed here, and it was
		// not said), and what shares booked of it.
		books := msgCardBooks(c)
		if books != "" {
			l = append(l, plainSpan(strings.Repeat(" ", holderWidth-runeLen(holder.text)+2)), plainSpan(books))
		}
		// A card the daemon names otherwise than by its index (a UUID, a MIG
		// instance, "2" under CUDA_VISIBLE_DEVICES=2,3) says its name too.
		if c.Name != strconv.Itoa(i) {
			pad := holderWidth - runeLen(holder.text) + 2
			if booksWidth > 0 {
				pad = booksWidth - runeLen(books) + 2
				if books == "" {
					pad += holderWidth - runeLen(holder.text) + 2
				}
			}
			l = append(l, plainSpan(strings.Repeat(" ", pad)), styledSpan(c.Name, sgrDim))
		}
		out = append(out, l)
	}
	o.writeLines(w, out, 0)
}

// printMachine is the first part of `berth machine`: what this machine has,
// as probed and overridden. renderHolders adds what a daemon has handed out.
//
// uses, where NVML answered, is what the cards hold now: each card's line
// says its memory in use, and the processes on it follow.
func printMachine(w io.Writer, inv probes.Inventory, uses []probes.CardUse) {
	host := inv.Hostname
	if host == "" {
		host = "(unknown)"
	}
	fmt.Fprintf(w, "host    %s\n", host)
	fmt.Fprintf(w, "cores   %d (%s)\n", inv.CPUs, describeCores(inv))
	switch len(inv.GPUs) {
	case 0:
		fmt.Fprintf(w, "cards   none%s\n", gpuSource(inv))
	default:
		fmt.Fprintf(w, "cards   %d%s\n", len(inv.GPUs), gpuSource(inv))
		width := 0
		for _, name := range inv.GPUs {
			width = max(width, len(name))
		}
		for i, name := range inv.GPUs {
			use, live := probes.UseOf(uses, inv.Topology, name)
			line := describeCard(inv.Topology, name)
			switch {
			case live && inv.GPUMemSource != probes.SourceOverride:
				line += fmt.Sprintf("  memory %s/%s used", accounting.FormatSize(use.MemoryUsed), accounting.FormatSize(use.MemoryTotal))
			case live:
				line += fmt.Sprintf("  memory %s used, %s shared (--gpu-mem)", accounting.FormatSize(use.MemoryUsed), accounting.FormatSize(inv.GPUMem[i]))
			case i < len(inv.GPUMem) && inv.GPUMem[i] > 0:
				line += fmt.Sprintf("  memory %s (--gpu-mem)", accounting.FormatSize(inv.GPUMem[i]))
			}
			fmt.Fprintf(w, "  card %d  %-*s%s\n", i, width, name, line)
			for _, p := range use.Processes {
				held := "memory unknown"
				if p.MemoryBytes >= 0 {
					held = accounting.FormatSize(p.MemoryBytes)
				}
				fmt.Fprintf(w, "    pid %d  %s\n", p.PID, held)
			}
		}
		if inv.GPUMem == nil {
			fmt.Fprintln(w, "  the cards' memory is unknown, so no job shares a card by memory (gpu_mem): NVML (libnvidia-ml.so.1) says it, or --gpu-mem SIZE")
		}
	}
	if inv.RAM.Known {
		fmt.Fprintf(w, "memory  %s (%s)\n", accounting.FormatSize(inv.RAM.Bytes), describeMemory(inv.RAM))
	} else {
		fmt.Fprintln(w, "memory  unknown (not accounted: jobs' ram is not checked; give --ram SIZE to account it)")
	}
}

// describeCard is what the driver says of the card name means: its model,
// bus location, NUMA node and local cores; "" where it says nothing.
func describeCard(t probes.Topology, name string) string {
	card, ok := t.CardNamed(name)
	if !ok {
		if strings.HasPrefix(name, "MIG-") && len(t.Cards) > 0 {
			return "  (a MIG instance: which card holds it is not known without NVML)"
		}
		return ""
	}
	out := "  " + card.Model + "  " + card.PCI
	if card.NUMANode >= 0 {
		out += fmt.Sprintf("  node %d", card.NUMANode)
	}
	if len(card.LocalCPUs) > 0 {
		out += " (cores " + formatIDs(card.LocalCPUs) + ")"
	}
	return out
}

func describeCores(inv probes.Inventory) string {
	ids := "IDs " + formatIDs(inv.CPUIDs)
	if inv.OnlineCPUs == 0 {
		return ids + "; from --cpus: this machine's cores could not be counted, so no job is pinned to them"
	}
	if inv.CPUs > inv.OnlineCPUs {
		return fmt.Sprintf("%s; overridden, this machine has %d online", ids, inv.OnlineCPUs)
	}
	return fmt.Sprintf("%s; %d online, %d kept for the daemon", ids, inv.OnlineCPUs, inv.OnlineCPUs-inv.CPUs)
}

func gpuSource(inv probes.Inventory) string {
	switch inv.GPUSource {
	case probes.SourceCUDAVisibleDevices:
		return " (from CUDA_VISIBLE_DEVICES in this environment, as a daemon started in it reads it)"
	case probes.SourceDev:
		return " (from /dev/nvidia*)"
	case probes.SourceOverride:
		return " (from --gpus)"
	case probes.SourceNVML:
		return " (from /dev/nvidia* and NVML: a card in MIG mode is its instances)"
	}
	return ""
}

func describeMemory(m probes.Memory) string {
	switch m.Source {
	case probes.SourceOverride:
		return "from --ram"
	case probes.SourceMeminfo:
		return "physical, less 1G kept for the daemon"
	}
	return m.Source + ", less 1G kept for the daemon"
}

// formatIDs writes core IDs as ranges: "2-15", "1,3,5-7"; "none" for none.
func formatIDs(ids []int) string {
	return cmp.Or(accounting.Ranges(ids), "none")
}
