package probes

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
)

const (
	procCgroupPath = "proc/self/cgroup"
	cgroupMount    = "sys/fs/cgroup"
	// Under the hybrid layout the unified hierarchy is mounted here and the
	// v1 controllers beside it.
	hybridUnifiedMount = "sys/fs/cgroup/unified"
	v1MemoryMount      = "sys/fs/cgroup/memory"

	v2LimitFile = "memory.max"
	v1LimitFile = "memory.limit_in_bytes"
)

// v1Unlimited is the least value taken as "no limit" in v1. The kernel
// reports an unset limit as the largest page-aligned int64
// (9223372036854771712); anything this large limits nothing real anyway.
const v1Unlimited = 1 << 62

// cgroupPaths is where the daemon sits in each hierarchy, from
// /proc/self/cgroup. "" means that hierarchy is not in use.
type cgroupPaths struct {
	v1Memory string // in the v1 memory controller's hierarchy
	v2       string // in the unified hierarchy
}

// parseProcCgroup reads /proc/self/cgroup: lines "ID:controllers:path", where
// ID 0 with no controllers is the unified hierarchy. Paths are cleaned and
// kept absolute, so a path like "/../x" (seen from inside a cgroup namespace)
// cannot climb above the hierarchy's mount.
func parseProcCgroup(r io.Reader) (cgroupPaths, error) {
	var p cgroupPaths
	sc := bufio.NewScanner(io.LimitReader(r, maxProbeFileBytes))
	sc.Buffer(nil, maxProbeFileBytes)
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			continue
		}
		// The path is last and may itself contain colons.
		fields := strings.SplitN(line, ":", 3)
		if len(fields) != 3 || !strings.HasPrefix(fields[2], "/") {
			return cgroupPaths{}, fmt.Errorf("parse cgroup line %q: want ID:controllers:/path", line)
		}
		id, controllers, cgPath := fields[0], fields[1], path.Clean(fields[2])
		if id == "0" && controllers == "" {
			p.v2 = cgPath
			continue
		}
		for c := range strings.SplitSeq(controllers, ",") {
			if c == "memory" {
				p.v1Memory = cgPath
			}
		}
	}
	if err := sc.Err(); err != nil {
		return cgroupPaths{}, fmt.Errorf("read cgroup: %w", err)
	}
	return p, nil
}

// parseCgroupLimit reads memory.max (v2) or memory.limit_in_bytes (v1).
// limited is false for v2's "max" and for v1's unlimited sentinel.
func parseCgroupLimit(r io.Reader) (limitBytes int64, limited bool, err error) {
	b, err := io.ReadAll(io.LimitReader(r, 64))
	if err != nil {
		return 0, false, fmt.Errorf("read cgroup limit: %w", err)
	}
	s := strings.TrimSpace(string(b))
	if s == "max" {
		return 0, false, nil
	}
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		var numErr *strconv.NumError
		if errors.As(err, &numErr) && numErr.Err == strconv.ErrRange && strings.TrimLeft(s, "0123456789") == "" {
			return 0, false, nil // beyond uint64 is beyond the sentinel too
		}
		return 0, false, fmt.Errorf("parse cgroup limit %q: not a number of bytes or \"max\"", s)
	}
	if n >= v1Unlimited {
		return 0, false, nil
	}
	return int64(n), true, nil
}

// cgroupLimit is one limit found, and what to call it in Memory.Source.
type cgroupLimit struct {
	bytes  int64
	source string
}

// cgroupMemoryLimit returns the lowest memory limit on the daemon's cgroup or
// any of its ancestors, in either hierarchy. The ancestors matter because a
// limit on a slice (MemoryMax= on system.slice or a user slice) binds every
// process below it, the daemon's jobs included. Walking up to the mount also
// finds a container's own limit when the runtime mounted the container's
// cgroup as the hierarchy's root without a cgroup namespace, and so without
// the path in /proc/self/cgroup existing under the mount.
//
// Anything unreadable, at any level, is skipped: a missing or forbidden file
// is no evidence of a limit.
func cgroupMemoryLimit(root string) (cgroupLimit, bool) {
	paths, err := readProbeFile(root, procCgroupPath, parseProcCgroup)
	if err != nil {
		return cgroupLimit{}, false
	}
	var best cgroupLimit
	found := false
	take := func(l cgroupLimit, ok bool) {
		if ok && (!found || l.bytes < best.bytes) {
			best, found = l, true
		}
	}
	if paths.v2 != "" {
		if mount, ok := unifiedMount(root); ok {
			take(lowestLimit(mount, paths.v2, v2LimitFile, "cgroup v2 "+v2LimitFile))
		}
	}
	if paths.v1Memory != "" {
		take(lowestLimit(filepath.Join(root, v1MemoryMount), paths.v1Memory, v1LimitFile, "cgroup v1 "+v1LimitFile))
	}
	return best, found
}

// unifiedMount finds the unified hierarchy: at sys/fs/cgroup on a v2-only
// system, at sys/fs/cgroup/unified on a hybrid one. cgroup.controllers exists
// only in a v2 hierarchy, which tells it from v1's tmpfs of controller
// directories.
func unifiedMount(root string) (string, bool) {
	for _, rel := range []string{cgroupMount, hybridUnifiedMount} {
		mount := filepath.Join(root, rel)
		if _, err := os.Stat(filepath.Join(mount, "cgroup.controllers")); err == nil {
			return mount, true
		}
	}
	return "", false
}

// lowestLimit walks from cgPath up to the hierarchy's root and returns the
// lowest limit in file along the way. The root cgroup has no memory.max in
// v2, and an unlimited one in v1.
func lowestLimit(mount, cgPath, file, what string) (cgroupLimit, bool) {
	var best cgroupLimit
	found := false
	for p := cgPath; ; p = path.Dir(p) {
		l, err := readProbeFile(mount, filepath.Join(p, file), func(r io.Reader) (cgroupLimit, error) {
			n, limited, err := parseCgroupLimit(r)
			if !limited {
				n = -1
			}
			return cgroupLimit{bytes: n}, err
		})
		if err == nil && l.bytes >= 0 && (!found || l.bytes < best.bytes) {
			best, found = cgroupLimit{bytes: l.bytes, source: what + " " + p}, true
		}
		if p == "/" {
			return best, found
		}
	}
}
