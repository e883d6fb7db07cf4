package probes

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"strconv"
	"strings"
	"time"
)

const (
	procStatPath     = "proc/stat"
	procInitStatPath = "proc/1/stat"
)

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

// userHZ is the unit of a process's start time in proc/PID/stat: clock
// ticks of 10 ms, on every Linux (USER_HZ is part of its ABI).
const userHZ = 100

// maxStartTicks bounds a start time read: a century of ticks, far past any
// uptime, and far below what a time.Duration holds.
const maxStartTicks = 100 * 365 * 24 * 3600 * userHZ

// parseStartTicks reads when a process started from its proc/PID/stat, in
// clock ticks after the kernel booted: the 22nd field, counted past the
// command's name, which may hold spaces and parentheses of its own.
func parseStartTicks(r io.Reader) (uint64, error) {
	b, err := io.ReadAll(io.LimitReader(r, maxProbeFileBytes))
	if err != nil {
		return 0, err
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, errors.New("no command name in parentheses")
	}
	// The first field past the name is the 3rd (the state): the 22nd is
	// the 20th of these.
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 20 {
		return 0, errors.New("fewer than 22 fields")
	}
	n, err := strconv.ParseUint(f[19], 10, 64)
	if err != nil || n > maxStartTicks {
		return 0, errors.New("the start time is not a count of ticks: " + strconv.Quote(f[19]))
	}
	return n, nil
}

// probeInitStarted returns when PID 1 started, the zero time where it
// cannot be read: the start of the systemd whose units berth's runs are,
// which no unit outlives. On a machine it is its boot; in a container,
// the container's, whose kernel booted long before (booted).
func probeInitStarted(root string, booted time.Time) time.Time {
	if booted.IsZero() {
		return time.Time{}
	}
	ticks, err := readProbeFile(root, procInitStatPath, parseStartTicks)
	if err != nil {
		return time.Time{}
	}
	return StartedAt(booted, ticks)
}

// StartedAt is when a process started, from its start time in clock ticks
// (the 22nd field of its proc/PID/stat) and when the kernel booted.
func StartedAt(booted time.Time, ticks uint64) time.Time {
	return booted.Add(time.Duration(ticks) * (time.Second / userHZ))
}
