package runner

import (
	"cmp"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
)

// defaultPath is what a job gets when its environment has no PATH at all:
// systemd's default for services, so that a job behaves the same whether
// the daemon passed PATH on or not. A PATH that is set but empty is
// respected as empty.
const defaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// lookPath finds file the way exec.LookPath does, but in the job's PATH
// rather than the daemon's. Relative entries are resolved against dir,
// where the child will run, only to refuse them (ErrRelativePath).
//
// The daemon looks as who, the job's user, would: an entry of PATH that
// who may not enter (by its mode bits, and those of the directories above
// it) is passed over, as execvp passes over a directory it is refused.
// Looked at as root, a program in a directory of another person's that
// the job's user may not enter was found, and its start failed saying it
// was there: one person could learn what another keeps private. Not
// found, the error names the entries passed over, whether the program is
// in them or not. (A directory that only an ACL opens to who is passed
// over too; the program's full path in cmd leaves it to the kernel.)
func lookPath(file, pathEnv, dir string, who Identity) (string, error) {
	if strings.Contains(file, "/") {
		// The kernel resolves a relative name after the child's chdir, as
		// os/exec documents for Cmd.Path; checking here too would only
		// duplicate the error Start reports anyway.
		return file, nil
	}
	for _, d := range filepath.SplitList(pathEnv) {
		if d == "" {
			d = "."
		}
		path := filepath.Join(d, file)
		probe := path
		if !filepath.IsAbs(d) {
			probe = filepath.Join(dir, path)
		}
		if !isExecutable(probe) || closed(filepath.Dir(probe), who) {
			continue
		}
		if !filepath.IsAbs(d) {
			return "", &ProgramError{Program: file, SearchPath: pathEnv, Err: ErrRelativePath}
		}
		return path, nil
	}
	return "", &ProgramError{Program: file, SearchPath: pathEnv, Err: ErrNotFound, Closed: closedEntries(pathEnv, dir, who), Who: who}
}

// closed says whether who may not enter dir, by the walk's reading of the
// mode bits of it and the directories above it.
func closed(dir string, who Identity) bool {
	if who.UID == 0 || !filepath.IsAbs(dir) {
		return false
	}
	b, ok := walk(dir, who, true)
	return !ok && b.Problem == PathDenied
}

// closedEntries are the entries of pathEnv that who may not enter, a
// relative one as it would be found from dir.
func closedEntries(pathEnv, dir string, who Identity) []string {
	var out []string
	for _, d := range filepath.SplitList(pathEnv) {
		at := d
		if !filepath.IsAbs(d) {
			at = filepath.Join(dir, d)
		}
		if !slices.Contains(out, d) && closed(at, who) {
			out = append(out, cmp.Or(d, "(empty)"))
		}
	}
	return out
}

// isExecutable checks the mode bits rather than access(2): the daemon may be
// root and the job may run as someone else, so the daemon's own permission
// says nothing about the job's. The kernel has the last word at exec.
func isExecutable(path string) bool {
	fi, err := os.Stat(path)
	if err != nil {
		return false
	}
	return fi.Mode().IsRegular() && fi.Mode()&0o111 != 0
}

// envValue returns the last value of key in env, the one the child's
// environment keeps after dedupEnv.
func envValue(env []string, key string) (string, bool) {
	for i := len(env) - 1; i >= 0; i-- {
		if k, v, ok := strings.Cut(env[i], "="); ok && k == key {
			return v, true
		}
	}
	return "", false
}

// dedupEnv keeps the last of each key, as os/exec does: with duplicates
// the C library's getenv would see the first and the lookup of Argv[0] the
// last, and the two must agree.
func dedupEnv(env []string) []string {
	if uniqueSorted(env) {
		// The daemon's environments come sorted from a map: nothing to
		// drop, and no map to build for each start.
		return env
	}
	seen := make(map[string]bool, len(env))
	out := make([]string, 0, len(env))
	for i := len(env) - 1; i >= 0; i-- {
		k, _, _ := strings.Cut(env[i], "=")
		if seen[k] {
			continue
		}
		seen[k] = true
		out = append(out, env[i])
	}
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return out
}

// uniqueSorted reports whether env's keys are in increasing order, each
// once.
func uniqueSorted(env []string) bool {
	prev := ""
	for i, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		if i > 0 && k <= prev {
			return false
		}
		prev = k
	}
	return true
}

// Program is the file that Start would execute for argv0 with env and dir,
// as cred (nil: the daemon's own IDs): a name without a slash is looked up
// in env's PATH (or defaultPath), never in the daemon's. The units runner
// asks it, so that a job runs the same program whichever runner starts it.
func Program(argv0 string, env []string, dir string, cred *syscall.Credential) (string, error) {
	pathEnv, ok := envValue(dedupEnv(env), "PATH")
	if !ok {
		pathEnv = defaultPath
	}
	return lookPath(argv0, pathEnv, dir, identityOf(cred))
}
