package runner

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
)

// When the kernel refuses to start a job, the child reports one errno for
// whichever step failed (switching user, entering the directory, executing
// the program), and os.StartProcess names the program whatever it was. So
// the cause is found afterwards, by walking to the directory and to the
// program as the job's user would. This runs only once a start has failed:
// the walk reads mode bits, not ACLs, so it must never be a reason to
// refuse a start the kernel would allow — it only says why one was refused.

// explain turns a failed start of path into a DirError or a ProgramError
// where the walk finds the cause, and otherwise into a ProgramError that
// carries what the kernel said.
func explain(spec Spec, path string, err error) error {
	var errno syscall.Errno
	if !errors.As(err, &errno) {
		return &ProgramError{Program: spec.Argv[0], Path: path, Err: err}
	}
	who := identityOf(spec.Credential)
	if spec.Dir != "" {
		if b, ok := walk(spec.Dir, who, true); !ok {
			return &DirError{Dir: spec.Dir, Blocked: b, Who: who, Err: errno}
		}
	}
	abs := path
	if !filepath.IsAbs(abs) {
		dir := spec.Dir
		if dir == "" {
			dir, _ = os.Getwd()
		}
		abs = filepath.Join(dir, abs)
	}
	pe := &ProgramError{Program: spec.Argv[0], Path: abs, Who: who, Err: errno}
	if b, ok := walk(abs, who, false); !ok {
		pe.Blocked = b
		return pe
	}
	if errno == syscall.ENOENT {
		// The program is there, so what is missing is what the kernel
		// runs it with.
		if interp, ok := readInterpreter(abs); ok && filepath.IsAbs(interp) {
			if b, ok := walk(interp, who, false); !ok && b.Problem == PathMissing {
				pe.Interpreter = interp
			}
		}
	}
	return pe
}

// MissingDir returns the *DirError of a working directory dir (absolute,
// or "" for none) that does not exist, or is no directory, as the daemon
// sees it; nil otherwise. Whether the job's user may enter it is left to
// the kernel, which reads ACLs where the walk reads mode bits.
func MissingDir(dir string, cred *syscall.Credential) error {
	if dir == "" {
		return nil
	}
	if b, ok := walk(dir, identityOf(cred), true); !ok && (b.Problem == PathMissing || b.Problem == PathNotDir) {
		return &DirError{Dir: dir, Blocked: b, Who: identityOf(cred), Err: syscall.ENOENT}
	}
	return nil
}

// identityOf is who a process started with cred runs as: cred's IDs, or the
// daemon's own.
func identityOf(cred *syscall.Credential) Identity {
	if cred != nil {
		return Identity{UID: cred.Uid, GID: cred.Gid, Groups: cred.Groups}
	}
	id := Identity{UID: uint32(os.Geteuid()), GID: uint32(os.Getegid())}
	groups, _ := os.Getgroups()
	for _, g := range groups {
		id.Groups = append(id.Groups, uint32(g))
	}
	return id
}

// walk goes from / to path, an absolute path, as who would: every
// directory on the way must exist and be searchable by who. The end must be
// a directory who may enter when dir is set, and otherwise a regular file
// who may execute. ok is false with where and why it stopped.
func walk(path string, who Identity, dir bool) (b Blocked, ok bool) {
	path = filepath.Clean(path)
	cur := "/"
	parts := strings.Split(strings.TrimPrefix(path, "/"), "/")
	if path == "/" {
		parts = nil
	}
	for i := 0; ; i++ {
		var st syscall.Stat_t
		switch err := syscall.Stat(cur, &st); err {
		case nil:
		case syscall.ENOENT:
			return Blocked{Problem: PathMissing, At: cur}, false
		case syscall.ENOTDIR:
			return Blocked{Problem: PathNotDir, At: cur}, false
		default:
			// The daemon cannot see further itself: nothing to say.
			return Blocked{}, true
		}
		b := Blocked{At: cur, Mode: os.FileMode(st.Mode & 0o7777), UID: st.Uid, GID: st.Gid}
		isDir := st.Mode&syscall.S_IFMT == syscall.S_IFDIR
		last := i == len(parts)
		switch {
		case !last || dir:
			if !isDir {
				b.Problem = PathNotDir
				return b, false
			}
			if !who.may(st, 1) {
				b.Problem = PathDenied
				return b, false
			}
		case st.Mode&syscall.S_IFMT != syscall.S_IFREG:
			b.Problem = PathNotRegular
			return b, false
		case !who.may(st, 1):
			b.Problem = PathNotExecutable
			return b, false
		}
		if last {
			return Blocked{}, true
		}
		cur = filepath.Join(cur, parts[i])
	}
}

// may reports whether who has the permission bit (4 read, 2 write,
// 1 execute or search) on a file, by its mode bits. Root may search every
// directory, and execute a file that anyone may.
func (who Identity) may(st syscall.Stat_t, bit uint32) bool {
	mode := st.Mode & 0o777
	switch {
	case who.UID == 0 && bit == 1:
		return st.Mode&syscall.S_IFMT == syscall.S_IFDIR || mode&0o111 != 0
	case who.UID == 0:
		return true
	case st.Uid == who.UID:
		return mode>>6&bit != 0
	case st.Gid == who.GID || slices.Contains(who.Groups, st.Gid):
		return mode>>3&bit != 0
	}
	return mode&bit != 0
}

// readInterpreter reads the interpreter a script's #! line names.
func readInterpreter(path string) (string, bool) {
	f, err := os.Open(path)
	if err != nil {
		return "", false
	}
	defer f.Close()
	head := make([]byte, maxShebang)
	n, _ := io.ReadFull(f, head)
	return parseShebang(head[:n])
}

// maxShebang is how much of a #! line Linux reads (BINPRM_BUF_SIZE).
const maxShebang = 256

// parseShebang reads the interpreter from the start of a file: "#!", blanks,
// then the interpreter's path up to a blank or the end of the line, as the
// kernel reads it. ok is false when the file does not start with "#!" or
// names no interpreter.
func parseShebang(head []byte) (string, bool) {
	rest, found := bytes.CutPrefix(head, []byte("#!"))
	if !found {
		return "", false
	}
	if i := bytes.IndexByte(rest, '\n'); i >= 0 {
		rest = rest[:i]
	}
	rest = bytes.TrimLeft(rest, " \t")
	if i := bytes.IndexAny(rest, " \t"); i >= 0 {
		rest = rest[:i]
	}
	if len(rest) == 0 || bytes.IndexByte(rest, 0) >= 0 {
		return "", false
	}
	return string(rest), true
}
