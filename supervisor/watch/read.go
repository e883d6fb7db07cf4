package watch

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
)

// ReadJobFile reads one job file named outright, as `berth check FILE`
// does, by the rules the daemon's Scanner reads the jobs directory with:
// it must be a regular file (a FIFO is never opened, a device never read),
// no bigger than opts.MaxFileBytes (and no more than that is ever read),
// owned and moded as the ownership rule says, and every directory from /
// down to it must pass the rule for a directory on the way. A link is
// followed as a link in the jobs directory is.
//
// Outcomes:
//
//	(content, nil)         read
//	(nil, *RefusedError)   refused: the error says why and what fixes it
//	(nil, err)             it does not exist (fs.ErrNotExist), or an I/O error
func ReadJobFile(path string, opts ScanOptions) ([]byte, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("read job file %s: %w", path, err)
	}
	dir, name := filepath.Split(abs)
	if name == "" {
		name = "." // "/": a directory, refused as not regular below
	}
	s := NewScanner(filepath.Dir(path), opts)
	w, err := newWalk(s.strict, s.statHook)
	if err != nil {
		return nil, err
	}
	defer w.close()
	var refused *RefusedError
	// A person's file (Owner set) is in their job directory, which is
	// theirs, as the daemon reads it; any other file's directory is one on
	// the way to it.
	last := wantDir
	if opts.Owner != 0 {
		last = wantJobsDir
	}
	switch _, _, err := w.resolve(dir, last); {
	case err == nil:
	case errors.Is(err, errMissing):
		return nil, &fs.PathError{Op: "open", Path: path, Err: fs.ErrNotExist}
	case errors.As(err, &refused):
		refused.Path, refused.Named = path, true
		return nil, refused
	default:
		return nil, err
	}
	_, content, why := s.file(w, name, path, true, seenFile{}, false, 0)
	switch {
	case why != nil:
		return nil, why
	case content == nil:
		// Gone since the walk, or kept changing between link and file.
		return nil, &fs.PathError{Op: "open", Path: path, Err: fs.ErrNotExist}
	}
	return content, nil
}
