package luaapi

import (
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// IsJobFile reports whether a directory entry name is a job file: it ends in
// ".lua" and is neither hidden nor an editor's leftover (".#f.lua",
// "f.lua~", "f.lua.swp", "f.lua.tmp"). Editors save through such files, and
// loading one would declare every job twice.
func IsJobFile(name string) bool {
	switch {
	case !strings.HasSuffix(name, ".lua"), strings.HasPrefix(name, "."):
		return false
	case strings.HasSuffix(name, "~"), strings.HasSuffix(name, ".swp"), strings.HasSuffix(name, ".tmp"):
		return false
	}
	return true
}

// Load evaluates every job file in dir, in lexical order, and combines them.
// Each file stands alone: one that fails is reported in the Set and does not
// stop the others. The error is only for failing to read dir itself. Paths
// in messages are filepath.Join(dir, name), as the caller spelled dir.
func Load(dir string, opts Options) (*Set, error) {
	files, err := EvalDir(dir, opts)
	if err != nil {
		return nil, err
	}
	return Combine(files), nil
}

// EvalDir evaluates every job file in dir, in lexical order, without the
// cross-file rules, so that a caller can combine them with files from
// elsewhere. The error is only for failing to read dir itself.
func EvalDir(dir string, opts Options) ([]*File, error) {
	entries, err := os.ReadDir(dir) // sorted by name
	if err != nil {
		return nil, errReadDir(dir, err)
	}
	files := make([]*File, 0, len(entries))
	for _, e := range entries {
		if !IsJobFile(e.Name()) {
			continue
		}
		path := filepath.Join(dir, e.Name())
		src, skip, err := readJobFile(path, e)
		switch {
		case skip:
		case err != nil:
			files = append(files, &File{Path: path, Errors: []*Error{err}})
		default:
			files = append(files, Eval(path, src, opts))
		}
	}
	return files, nil
}

// readJobFile reads one entry. A directory named like a job file is skipped;
// anything else that is not a regular file (a FIFO would block the read
// forever) is an error. Links are followed, because a Kubernetes ConfigMap
// mounts every file as one.
func readJobFile(path string, e fs.DirEntry) (src []byte, skip bool, _ *Error) {
	mode := e.Type()
	if mode&fs.ModeSymlink != 0 {
		st, err := os.Stat(path)
		if err != nil {
			return nil, false, errUnreadable(path, err)
		}
		mode = st.Mode().Type()
	}
	if mode.IsDir() {
		return nil, true, nil
	}
	if !mode.IsRegular() {
		return nil, false, errNotRegular(path)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, false, errUnreadable(path, err)
	}
	defer f.Close()
	// One byte more than a job file may hold is enough to know it is too
	// large, without reading a file of any size.
	src, err = io.ReadAll(io.LimitReader(f, maxSourceBytes+1))
	if err != nil {
		return nil, false, errUnreadable(path, err)
	}
	if len(src) > maxSourceBytes {
		size := len(src)
		if st, err := f.Stat(); err == nil {
			size = int(st.Size())
		}
		return nil, false, errFileTooLarge(path, size, maxSourceBytes)
	}
	return src, false, nil
}
