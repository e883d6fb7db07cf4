package probes

import (
	"bufio"
	"errors"
	"io"
	"strconv"
	"strings"
	"time"
)

const procStatPath = "proc/stat"

// errNoBootTime is a proc/stat without a btime line.
var errNoBootTime = errors.New("no btime line")

// parseBootTime reads when the machine booted from proc/stat's btime line
// (seconds since the epoch). A run recorded as started after it began in
// this boot: what is gone of it now was stopped, not lost to a reboot.
func parseBootTime(r io.Reader) (time.Time, error) {
	sc := bufio.NewScanner(io.LimitReader(r, maxProbeFileBytes))
	sc.Buffer(nil, maxProbeFileBytes)
	for sc.Scan() {
		v, ok := strings.CutPrefix(sc.Text(), "btime ")
		if !ok {
			continue
		}
		secs, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		if err != nil || secs <= 0 {
			return time.Time{}, errors.New("btime is not a time: " + strconv.Quote(v))
		}
		return time.Unix(secs, 0), nil
	}
	if err := sc.Err(); err != nil {
		return time.Time{}, err
	}
	return time.Time{}, errNoBootTime
}

// probeBootTime returns when the machine booted, the zero time where it
// cannot be read.
func probeBootTime(root string) time.Time {
	t, err := readProbeFile(root, procStatPath, parseBootTime)
	if err != nil {
		return time.Time{}
	}
	return t
}
