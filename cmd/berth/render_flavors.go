package main

import (
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/berthd/berth/accounting"
	"github.com/berthd/berth/supervisor"
)

// renderFlavors is `berth flavors`.
func renderFlavors(w io.Writer, flavors []supervisor.FlavorView, o renderOptions) {
	if len(flavors) == 0 {
		io.WriteString(w, "no flavors declared\n")
		return
	}
	flavors = slices.Clone(flavors)
	slices.SortStableFunc(flavors, func(a, b supervisor.FlavorView) int { return strings.Compare(a.Name, b.Name) })
	t := &textTable{gap: 2, cols: []textColumn{
		{title: "NAME"}, {title: "CORES", right: true}, {title: "CARDS", right: true},
		{title: "MEMORY", right: true}, {title: "USED-BY"}, {title: "FILE:LINE"},
	}}
	for _, f := range flavors {
		usedBy := "-"
		if len(f.UsedBy) > 0 {
			usedBy = strings.Join(f.UsedBy, ",")
		}
		cards := strconv.Itoa(f.Resources.GPUs)
		if f.Resources.GPUMemBytes > 0 {
			cards = accounting.FormatSize(f.Resources.GPUMemBytes) + " of one" // a share (gpu_mem)
		}
		t.add(plainSpan(f.Name), plainSpan(strconv.Itoa(f.Resources.CPUs)), plainSpan(cards),
			plainSpan(memoryCell(f.Resources.RAMBytes)), plainSpan(usedBy), plainSpan(fileLine(f.File, f.Line)))
	}
	t.fitContent()
	o.writeLines(w, t.lines(sgrBold), 0)
}
