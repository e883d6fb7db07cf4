package main

import (
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
)

// paths are where berth keeps things, resolved as DESIGN.md lays out: the
// flag, else the environment variable, else the default for root or for a
// person running berth as themselves. The client finds the daemon the same way.
type paths struct {
	Jobs   string
	State  string
	Socket string
}

// env is the part of the process environment the commands read, so that
// tests can give their own.
type env struct {
	lookup func(string) (string, bool)
	uid    int
	home   string
	user   string // the login name of uid, "" if it has none
}

func (e env) get(name string) string {
	v, _ := e.lookup(name)
	return v
}

func processEnv() env {
	home, _ := os.UserHomeDir()
	e := env{lookup: os.LookupEnv, uid: os.Getuid(), home: home}
	if u, err := user.LookupId(strconv.Itoa(e.uid)); err == nil {
		e.user = u.Username
	}
	return e
}

// adminJobsDir is the system daemon's jobs directory.
const adminJobsDir = "/etc/berth/jobs.d"

func defaultJobsDir(e env) string {
	if v := e.get("BERTH_JOBS"); v != "" {
		return v
	}
	if e.uid == 0 {
		return adminJobsDir
	}
	if v := e.get("XDG_CONFIG_HOME"); v != "" {
		return filepath.Join(v, "berth", "jobs.d")
	}
	return filepath.Join(e.home, ".config", "berth", "jobs.d")
}

func defaultStateDir(e env) string {
	if v := e.get("BERTH_STATE"); v != "" {
		return v
	}
	if e.uid == 0 {
		return "/var/lib/berth"
	}
	if v := e.get("XDG_STATE_HOME"); v != "" {
		return filepath.Join(v, "berth")
	}
	return filepath.Join(e.home, ".local", "state", "berth")
}

// defaultUserJobs is where the system daemon keeps each person's job
// directory: none for a person's own daemon. BERTH_USER_JOBS set but
// empty means none.
func defaultUserJobs(e env) string {
	if v, ok := e.lookup("BERTH_USER_JOBS"); ok {
		return v
	}
	if e.uid == 0 {
		return systemUserJobs
	}
	return ""
}

// systemUserJobs is the system daemon's directory of the people's job
// directories.
const systemUserJobs = "/var/spool/berth"

// peoplesJobs is where berth check finds the people's job directories:
// the system daemon's, whoever checks (a person checks their own files
// there as the system daemon reads them).
func peoplesJobs(e env) string {
	if v, ok := e.lookup("BERTH_USER_JOBS"); ok {
		return v
	}
	return systemUserJobs
}

// systemSocket is the system daemon's control socket.
const systemSocket = "/run/berth/berth.sock"

// clientSockets are the sockets a client tries, in order, when neither
// --socket nor BERTH_SOCKET names one: the person's own daemon, then the
// system's (DESIGN.md). Root has only the system's.
func clientSockets(e env) []string {
	if v := e.get("BERTH_SOCKET"); v != "" {
		return []string{v}
	}
	if e.uid == 0 {
		return []string{systemSocket}
	}
	return []string{defaultSocket(e), systemSocket}
}

// defaultSocket is where a daemon listens by default: the system's socket
// for root, else the person's own.
func defaultSocket(e env) string {
	if v := e.get("BERTH_SOCKET"); v != "" {
		return v
	}
	if e.uid == 0 {
		return systemSocket
	}
	if v := e.get("XDG_RUNTIME_DIR"); v != "" {
		return filepath.Join(v, "berth.sock")
	}
	return fmt.Sprintf("/tmp/berth-%d/berth.sock", e.uid)
}
