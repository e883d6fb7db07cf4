package probes

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
)

// SourceMeminfo is Memory.Source when physical memory was the bound.
const SourceMeminfo = "/proc/meminfo"

const meminfoPath = "proc/meminfo"

var errNoMemTotal = errors.New("no MemTotal line")

// parseMeminfo returns MemTotal from /proc/meminfo in bytes.
func parseMeminfo(r io.Reader) (totalBytes int64, err error) {
	sc := bufio.NewScanner(io.LimitReader(r, maxProbeFileBytes))
	sc.Buffer(nil, maxProbeFileBytes)
	for sc.Scan() {
		value, ok := strings.CutPrefix(sc.Text(), "MemTotal:")
		if !ok {
			continue
		}
		return parseMeminfoValue(strings.TrimSpace(value))
	}
	if err := sc.Err(); err != nil {
		return 0, fmt.Errorf("read meminfo: %w", err)
	}
	return 0, errNoMemTotal
}

// parseMeminfoValue reads "24683656 kB". The kernel writes kB meaning KiB;
// a bare number is taken as bytes.
func parseMeminfoValue(s string) (int64, error) {
	number, unit, _ := strings.Cut(s, " ")
	n, err := strconv.ParseInt(number, 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("parse MemTotal %q: not a size", s)
	}
	switch strings.TrimSpace(unit) {
	case "":
		return n, nil
	case "kB":
		if n > math.MaxInt64/1024 {
			return 0, fmt.Errorf("parse MemTotal %q: too large", s)
		}
		return n * 1024, nil
	default:
		return 0, fmt.Errorf("parse MemTotal %q: unknown unit", s)
	}
}

// probeMemory applies the memory rule: the lower of physical memory and the
// lowest cgroup limit that binds the daemon, less ReservedRAM. Physical memory
// wins a tie. With neither readable, memory is unknown, and jobs' ram is not
// accounted, rather than guessed.
func probeMemory(root string) Memory {
	physBytes, errPhys := readProbeFile(root, meminfoPath, parseMeminfo)
	limit, limited := cgroupMemoryLimit(root)

	var m Memory
	switch {
	case errPhys == nil && (!limited || physBytes <= limit.bytes):
		m = Memory{Bytes: physBytes, Known: true, Source: SourceMeminfo}
	case limited:
		m = Memory{Bytes: limit.bytes, Known: true, Source: limit.source}
	default:
		return Memory{}
	}
	m.Bytes = max(m.Bytes-ReservedRAM, 0)
	return m
}
