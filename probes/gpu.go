package probes

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// Where the names of an inventory's cards came from, for `berth machine` to
// explain them.
const (
	SourceCUDAVisibleDevices = "CUDA_VISIBLE_DEVICES" // the daemon's own variable, names kept as written
	SourceDev                = "/dev"                 // counted device nodes, named "0".."n-1"
	SourceOverride           = "override"             // --gpus, --cpus or --ram
)

// cudaVisibleDevices is the only variable of the daemon's environment that
// probes reads.
const cudaVisibleDevices = "CUDA_VISIBLE_DEVICES"

// parseCUDAVisibleDevices returns the cards a CUDA_VISIBLE_DEVICES value makes
// visible, named as written so that a job can be handed "2" or "GPU-…" exactly
// as the daemon was.
//
// CUDA documents that only the devices before the first invalid entry are
// visible ("0,2,-1,1" shows 0 and 2), which is also why "", "-1", "none" and
// "NoDevFiles" show none. An entry is taken as valid when it is a plain index
// or a "GPU-"/"MIG-" name; a repeated entry ("1" after "01" too) also ends
// the list, because the books would otherwise hand out the same card twice.
//
// cut is nil unless the list ended on a repeat, or before cards it names
// later ("0,-1,2", "2,,3"): most likely a slip, which the daemon warns of.
func parseCUDAVisibleDevices(value string) (names []string, cut *CardsCut) {
	entries := strings.Split(value, ",")
	for i, entry := range entries {
		entry = strings.TrimSpace(entry)
		valid := validCUDAEntry(entry)
		repeated := valid && slices.ContainsFunc(names, sameCard(entry))
		if valid && !repeated {
			names = append(names, entry)
			continue
		}
		c := &CardsCut{Value: value, At: entry, Repeated: repeated}
		for _, later := range entries[i+1:] {
			later = strings.TrimSpace(later)
			if validCUDAEntry(later) && !slices.ContainsFunc(names, sameCard(later)) && !slices.ContainsFunc(c.Left, sameCard(later)) {
				c.Left = append(c.Left, later)
			}
		}
		if c.Repeated || len(c.Left) > 0 {
			cut = c
		}
		break
	}
	return names, cut
}

// CardsCut is where the daemon's CUDA_VISIBLE_DEVICES stopped being read
// before cards it names: At, the entry that ended it (a repeat of a card
// named before it where Repeated), and Left, the cards named after it,
// which are not the daemon's.
type CardsCut struct {
	Value    string
	At       string
	Repeated bool
	Left     []string
}

// sameCard matches the entries that name the card a does: an index by
// its number, as CUDA reads it ("01" is 1), a name as written.
func sameCard(a string) func(string) bool {
	return func(b string) bool {
		if a == b {
			return true
		}
		x, errA := strconv.ParseUint(a, 10, 64)
		y, errB := strconv.ParseUint(b, 10, 64)
		return errA == nil && errB == nil && x == y
	}
}

func validCUDAEntry(entry string) bool {
	if entry == "" {
		return false
	}
	if strings.HasPrefix(entry, "GPU-") || strings.HasPrefix(entry, "MIG-") {
		return len(entry) > len("GPU-")
	}
	return strings.TrimLeft(entry, "0123456789") == ""
}

// countNvidiaNodes counts the per-card device nodes among the names in /dev:
// nvidia0, nvidia1, …. nvidiactl, nvidia-uvm, nvidia-uvm-tools,
// nvidia-modeset and nvidia-caps/ belong to the driver, not to a card. Only
// names are looked at, so fixture trees can use plain files.
func countNvidiaNodes(names []string) int {
	n := 0
	for _, name := range names {
		digits, ok := strings.CutPrefix(name, "nvidia")
		if ok && digits != "" && strings.TrimLeft(digits, "0123456789") == "" {
			n++
		}
	}
	return n
}

// probeGPUs names the cards the daemon may hand out. CUDA_VISIBLE_DEVICES,
// where set at all (even empty), is the daemon's statement of which cards are
// its. Otherwise the cards are named by CUDA index, "0".."n-1", not by the
// number in the node's name: CUDA numbers the cards it sees from 0, whatever
// minors the driver gave them. An unreadable /dev gives no cards.
func probeGPUs(root string, lookupEnv func(string) (string, bool)) (names []string, source string, cut *CardsCut) {
	if lookupEnv != nil {
		if value, ok := lookupEnv(cudaVisibleDevices); ok {
			names, cut := parseCUDAVisibleDevices(value)
			return names, SourceCUDAVisibleDevices, cut
		}
	}
	// ReadDir returns what it read before an error; those names still count.
	entries, _ := os.ReadDir(filepath.Join(root, "dev"))
	dev := make([]string, len(entries))
	for i, e := range entries {
		dev[i] = e.Name()
	}
	return indexNames(countNvidiaNodes(dev)), SourceDev, nil
}

// indexNames returns "0".."n-1", nil for n ≤ 0.
func indexNames(n int) []string {
	if n <= 0 {
		return nil
	}
	names := make([]string, n)
	for i := range names {
		names[i] = strconv.Itoa(i)
	}
	return names
}
