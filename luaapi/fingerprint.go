package luaapi

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"hash"
	"sort"
)

// The fingerprints decide what a reload does to a running job, and they are
// compared across daemon restarts, so the encoding is canonical and
// versioned: every string is length-prefixed (no two different jobs can
// encode alike), env keys are sorted, and a change of the encoding itself
// must change the version tag.

// ProcessFingerprint identifies what makes the process what it is: cmd, dir,
// env, user, group, and the flavor name when a flavor is used or the direct
// resources otherwise. Editing a flavor's numbers therefore does not change
// the fingerprint of the jobs that use it: an edited flavor applies to the
// next placement, and running grants are kept.
func (j *Job) ProcessFingerprint() string {
	c := newCanon("berth/process/v1")
	c.strs("cmd", j.Cmd)
	c.str("dir", j.Dir)
	keys := make([]string, 0, len(j.Env))
	for k := range j.Env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	c.int("env", int64(len(keys)))
	for _, k := range keys {
		c.raw(k)
		c.raw(j.Env[k])
	}
	c.str("user", j.User)
	c.str("group", j.Group)
	if j.Flavor != "" {
		c.str("flavor", j.Flavor)
	} else {
		c.int("cpus", int64(j.Resources.CPUs))
		c.int("gpus", int64(j.Resources.GPUs))
		c.int("ram", j.Resources.RAMBytes)
		if j.Resources.GPUMemBytes > 0 {
			// Only when asked, so that the fingerprints of definitions
			// from before shares existed stay as they were.
			c.int("gpu_mem", j.Resources.GPUMemBytes)
		}
	}
	if j.SwapBytes >= 0 {
		// Only when said, so that the fingerprints of definitions from
		// before swap existed stay as they were.
		c.int("swap", j.SwapBytes)
	}
	return c.sum()
}

// PolicyFingerprint identifies the policy that applies in place on an edit:
// restart, max_restarts, timeout, priority, stop_signal, stop_timeout,
// on_change, description, enabled, after, after_any, array and
// max_parallel.
func (j *Job) PolicyFingerprint() string {
	c := newCanon("berth/policy/v1")
	c.int("restart", int64(j.Restart))
	c.int("max_restarts", int64(j.MaxRestarts))
	c.int("timeout", int64(j.Timeout))
	c.int("priority", int64(j.Priority))
	c.int("stop_signal", int64(j.StopSignal))
	c.int("stop_timeout", int64(j.StopTimeout))
	c.int("on_change", int64(j.OnChange))
	c.str("description", j.Description)
	enabled := int64(0)
	if j.Enabled {
		enabled = 1
	}
	c.int("enabled", enabled)
	if j.HasDeps() {
		// Only when said, so that the fingerprints of jobs without
		// dependencies stay as they were.
		c.strs("after", j.After)
		c.strs("after_any", j.AfterAny)
	}
	if j.Array != nil {
		// Likewise: only for an array.
		c.int("array_from", int64(j.Array.From))
		c.int("array_to", int64(j.Array.To))
		c.int("max_parallel", int64(j.MaxParallel))
	}
	return c.sum()
}

// canon writes tagged, length-prefixed values into a hash.
type canon struct {
	h   hash.Hash
	buf [binary.MaxVarintLen64]byte
}

func newCanon(version string) *canon {
	c := &canon{h: sha256.New()}
	c.raw(version)
	return c
}

func (c *canon) raw(s string) {
	n := binary.PutUvarint(c.buf[:], uint64(len(s)))
	c.h.Write(c.buf[:n])
	c.h.Write([]byte(s))
}

func (c *canon) varint(v int64) {
	n := binary.PutVarint(c.buf[:], v)
	c.h.Write(c.buf[:n])
}

func (c *canon) str(tag, s string) {
	c.raw(tag)
	c.raw(s)
}

func (c *canon) int(tag string, v int64) {
	c.raw(tag)
	c.varint(v)
}

func (c *canon) strs(tag string, xs []string) {
	c.int(tag, int64(len(xs)))
	for _, x := range xs {
		c.raw(x)
	}
}

func (c *canon) sum() string { return hex.EncodeToString(c.h.Sum(nil)) }
