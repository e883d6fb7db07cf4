package runner

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// procStat is the part of /proc/PID/stat that identifies a process.
type procStat struct {
	state      byte   // field 3: R, S, … Z for a zombie
	pgrp       int    // field 5
	startTicks uint64 // field 22
}

func readStat(pid int) (procStat, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return procStat{}, err
	}
	return parseStat(b)
}

// parseStat reads fields 5 and 22 of a /proc/PID/stat line. The command
// name, field 2, is in parentheses and may itself hold spaces and
// parentheses, so fields are counted from the last ')'.
func parseStat(b []byte) (procStat, error) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return procStat{}, errors.New("parse /proc stat: no ')' after the command name")
	}
	f := bytes.Fields(b[i+1:]) // f[0] is field 3
	if len(f) < 22-2 {
		return procStat{}, fmt.Errorf("parse /proc stat: %d fields after the command name, want at least 20", len(f))
	}
	pgrp, err := strconv.Atoi(string(f[5-3]))
	if err != nil {
		return procStat{}, fmt.Errorf("parse /proc stat: pgrp: %w", err)
	}
	ticks, err := strconv.ParseUint(string(f[22-3]), 10, 64)
	if err != nil {
		return procStat{}, fmt.Errorf("parse /proc stat: starttime: %w", err)
	}
	var state byte
	if len(f[0]) > 0 {
		state = f[0][0]
	}
	return procStat{state: state, pgrp: pgrp, startTicks: ticks}, nil
}

// groupLive reports whether process group pgid has a member that has not
// ended: kill(-pgid, 0) also counts the zombies, which whoever inherited
// them may be slow to reap (or, as some container inits, never).
func groupLive(pgid int) bool {
	if unix.Kill(-pgid, 0) == unix.ESRCH {
		return false
	}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return true // cannot tell: as kill says
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if st, err := readStat(pid); err == nil && st.pgrp == pgid && st.state != 'Z' && st.state != 'X' {
			return true
		}
	}
	return false
}

// KillLeftover sends SIGKILL to the process group of a run that a previous
// daemon started and can no longer reap, recognised by its PID and the
// start ticks recorded then (Process.StartTicks):
//
//	(true, nil)   it was still there; its group has been sent SIGKILL
//	(false, nil)  it is gone, or the PID now belongs to another process
//	(false, err)  /proc could not be read, or the signal failed
//
// Pdeathsig usually kills a run's leader with the daemon that started it,
// and then there is nothing here to find: KillLeftover catches the leaders
// that survived (Pdeathsig is cleared by executing a set-user-ID program),
// not their groups. A group whose leader is gone cannot be told apart
// from a later one with the same ID; under systemd the unit's cgroup is
// what ends those.
func KillLeftover(pid int, startTicks uint64) (bool, error) {
	// kill(-1) is every process the daemon may signal, and kill(-0) its
	// own group: neither may ever come from a corrupt record.
	if pid <= 1 || pid == os.Getpid() {
		return false, fmt.Errorf("kill leftover pid %d: not a job's process id", pid)
	}
	st, err := readStat(pid)
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, unix.ESRCH) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("kill leftover pid %d: %w", pid, err)
	}
	if st.startTicks != startTicks {
		return false, nil
	}
	target := -pid
	if st.pgrp != pid {
		// It moved itself out of its group; what is in group pid now is
		// not known to be the run's.
		target = pid
	}
	// The process could end and its PID be reused between the read above
	// and this kill. With PIDs cycling through /proc/sys/kernel/pid_max
	// that window is accepted, as every PID-based supervisor accepts it.
	if err := unix.Kill(target, unix.SIGKILL); err != nil {
		if err == unix.ESRCH {
			return false, nil
		}
		return false, fmt.Errorf("kill leftover pid %d: %w", pid, err)
	}
	return true, nil
}

// FindByEnv returns, for each value of values, the processes whose
// environment holds key=value and every pair of also: the daemon gives
// every run BERTH_RUN=<id> and BERTH_INSTANCE=<its state's>, and a run's
// process tree keeps them, so this finds what is left of runs a previous
// daemon lost whether or not their process IDs were recorded, and the
// descendants that outlived their leader or left its group. The daemon's
// own process is never returned. Processes whose environment cannot be read
// (another user's, as a non-root daemon) or that end during the scan are
// skipped.
func FindByEnv(also map[string]string, key string, values map[string]bool) (map[string][]int, error) {
	return findByEnv("/proc", also, key, values)
}

func findByEnv(proc string, also map[string]string, key string, values map[string]bool) (map[string][]int, error) {
	found := map[string][]int{}
	if len(values) == 0 {
		return found, nil
	}
	err := scanEnv(proc, also, key, func(pid int, v string, _ []byte) {
		if values[v] {
			found[v] = append(found[v], pid)
		}
	})
	return found, err
}

// Tagged is a process FindTagged found: its PID, its start time in clock
// ticks since boot (0 where it ended meanwhile), and the values of the keys
// asked for, in their order ("" for a key it lacks).
type Tagged struct {
	PID        int
	StartTicks uint64
	PGID       int // its process group as it was found
	// UID is whose the process is (its /proc entry's owner, the
	// effective uid): its environment is whatever it says.
	UID    int
	Values []string
}

// FindTagged returns every process whose environment holds the first of
// keys and every pair of also, with the values of keys: every process of
// every run of this daemon's state still alive, whether its run is on
// record or not. The daemon's own process is never returned; processes
// whose environment cannot be read are skipped, as by FindByEnv.
func FindTagged(also map[string]string, keys ...string) ([]Tagged, error) {
	return findTagged("/proc", also, keys...)
}

func findTagged(proc string, also map[string]string, keys ...string) ([]Tagged, error) {
	if len(keys) == 0 {
		return nil, nil
	}
	var out []Tagged
	err := scanEnv(proc, also, keys[0], func(pid int, first string, env []byte) {
		t := Tagged{PID: pid, UID: -1, Values: []string{first}}
		if fi, err := os.Stat(proc + "/" + strconv.Itoa(pid)); err == nil {
			if st, ok := fi.Sys().(*syscall.Stat_t); ok {
				t.UID = int(st.Uid)
			}
		}
		for _, k := range keys[1:] {
			v, _ := environEntry(env, []byte(k+"="))
			t.Values = append(t.Values, v)
		}
		if b, err := os.ReadFile(proc + "/" + strconv.Itoa(pid) + "/stat"); err == nil {
			if st, err := parseStat(b); err == nil {
				t.StartTicks, t.PGID = st.startTicks, st.pgrp
			}
		}
		out = append(out, t)
	})
	return out, err
}

// scanEnv calls found for every process but the daemon's own whose
// environment holds key and every pair of also, with key's value and the
// whole environment.
func scanEnv(proc string, also map[string]string, key string, found func(pid int, value string, env []byte)) error {
	entries, err := os.ReadDir(proc)
	if err != nil {
		return fmt.Errorf("find leftover processes: %w", err)
	}
	prefix := []byte(key + "=")
	self := os.Getpid()
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		env, err := os.ReadFile(proc + "/" + e.Name() + "/environ")
		if err != nil {
			continue
		}
		v, ok := environEntry(env, prefix)
		if !ok || !matchesAll(env, also) {
			continue
		}
		found(pid, v, env)
	}
	return nil
}

// matchesAll reports whether env holds every pair of want.
func matchesAll(env []byte, want map[string]string) bool {
	for k, v := range want {
		if got, ok := environEntry(env, []byte(k+"=")); !ok || got != v {
			return false
		}
	}
	return true
}

// environEntry finds the entry starting with prefix in a NUL-separated
// environment block.
func environEntry(env, prefix []byte) (string, bool) {
	for len(env) > 0 {
		entry, rest, _ := bytes.Cut(env, []byte{0})
		if bytes.HasPrefix(entry, prefix) {
			return string(entry[len(prefix):]), true
		}
		env = rest
	}
	return "", false
}

// EnvValues is the value of each of keys in process pid's environment as
// it started ("" where it has none), read once; false when the environment
// cannot be read.
func EnvValues(pid int, keys ...string) ([]string, bool) {
	env, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ")
	if err != nil {
		return nil, false
	}
	out := make([]string, len(keys))
	for i, k := range keys {
		out[i], _ = environEntry(env, []byte(k+"="))
	}
	return out, true
}

// Describe is process pid's command name and the uid that owns it; ""
// and -1 where they cannot be read (it ended).
func Describe(pid int) (comm string, uid int) {
	dir := "/proc/" + strconv.Itoa(pid)
	b, err := os.ReadFile(dir + "/comm")
	if err != nil {
		return "", -1
	}
	var st unix.Stat_t
	if err := unix.Stat(dir, &st); err != nil {
		return strings.TrimSpace(string(b)), -1
	}
	return strings.TrimSpace(string(b)), int(st.Uid)
}
