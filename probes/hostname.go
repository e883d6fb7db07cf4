package probes

import (
	"bufio"
	"fmt"
	"io"
	"strings"
)

const hostnamePath = "proc/sys/kernel/hostname"

// parseHostname reads the first line of proc/sys/kernel/hostname. That file,
// unlike os.Hostname, can be read below any root, and it is the UTS name the
// daemon's own namespace reports.
func parseHostname(r io.Reader) (string, error) {
	sc := bufio.NewScanner(io.LimitReader(r, maxProbeFileBytes))
	sc.Buffer(nil, maxProbeFileBytes)
	if sc.Scan() {
		return strings.TrimSpace(sc.Text()), nil
	}
	if err := sc.Err(); err != nil {
		return "", fmt.Errorf("read hostname: %w", err)
	}
	return "", nil
}

// probeHostname returns the host's name, "" where it cannot be read: a name
// only labels `berth machine` output and is no reason to fail.
func probeHostname(root string) string {
	name, err := readProbeFile(root, hostnamePath, parseHostname)
	if err != nil {
		return ""
	}
	return name
}
