package supervisor

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
)

// A file that fails keeps its previous version in force until it is fixed
// or removed, and that holds across a restart of the daemon too: the
// daemon keeps a copy of the version of each job file that is in force,
// under the state directory, and a file that fails at the first reload
// after a restart falls back on its copy. Without it, a typo saved while
// the daemon was down, or an upgrade's restart while a file was broken,
// would take that file's jobs away.
//
// keptFiles holds the copies: one file per job file, named after a hash
// of the job file's path and of the copy's content, so that what is kept
// is known from the directory's listing alone and a version already kept
// is not written again; and beside each, a file that says the path, so
// that the copies of a directory refused at the start are found whether
// or not a job's record names their file (a file of flavors only). The
// copies are written and removed by a goroutine of their own (run), in
// the order the loop asks (do): a first start with a thousand files
// writes a thousand copies, which took READY=1 from 378 to 540 ms when
// the loop wrote them itself.
type keptFiles struct {
	dir  string
	mu   sync.Mutex
	have map[string]string // hash of a path → hash of the content kept
	path map[string]string // hash of a path → the path, where it is kept
	ops  chan []keptOp
	done chan struct{}
}

// keptOp is a copy to keep (src), or, with forget, to remove; or, with
// only, to remove every copy but those of the paths only holds.
type keptOp struct {
	path, hash string
	src        []byte
	forget     bool
	only       map[string]bool
	from       string // the copy of from is path's now (a rename)
}

const keptDir = "kept"

// openKept opens the copies under stateDir, making the directory if need
// be.
func openKept(stateDir string) (*keptFiles, error) {
	k := &keptFiles{dir: filepath.Join(stateDir, keptDir), have: map[string]string{}, path: map[string]string{}, ops: make(chan []keptOp, 16), done: make(chan struct{})}
	if err := os.Mkdir(k.dir, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		return nil, fmt.Errorf("create %s: %w", k.dir, err)
	}
	entries, err := os.ReadDir(k.dir)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", k.dir, err)
	}
	for _, e := range entries {
		if ph, isPath := strings.CutSuffix(e.Name(), pathSuffix); isPath && e.Type().IsRegular() {
			if b, err := os.ReadFile(filepath.Join(k.dir, e.Name())); err == nil && keptPathHash(string(b)) == ph {
				k.path[ph] = string(b)
			} else {
				_ = os.Remove(filepath.Join(k.dir, e.Name())) // a write the machine's going down cut short
			}
			continue
		}
		name, isCopy := strings.CutSuffix(e.Name(), ".lua")
		pathHash, content, ok := strings.Cut(name, ".")
		if !isCopy || !ok || !e.Type().IsRegular() {
			_ = os.Remove(filepath.Join(k.dir, e.Name())) // a write cut short
			continue
		}
		if was, twice := k.have[pathHash]; twice {
			// A crash between a new copy's rename and the old one's
			// removal: neither is known to be the newer.
			_ = os.Remove(k.keptName(pathHash, was))
			_ = os.Remove(filepath.Join(k.dir, e.Name()))
			delete(k.have, pathHash)
			continue
		}
		k.have[pathHash] = content
	}
	for ph := range k.path {
		if _, ok := k.have[ph]; !ok {
			_ = os.Remove(k.pathName(ph)) // its copy's removal came first
			delete(k.path, ph)
		}
	}
	return k, nil
}

// pathSuffix ends the name of the file that says which path a copy is of.
const pathSuffix = ".path"

func (k *keptFiles) pathName(pathHash string) string {
	return filepath.Join(k.dir, pathHash+pathSuffix)
}

// notePath writes the file that says path is the path of its copies,
// unless it is there: before the copy, so that no copy lacks it but one
// kept by a daemon older than it, which its next keep mends.
func (k *keptFiles) notePath(ph, path string) error {
	k.mu.Lock()
	known := k.path[ph] == path
	k.mu.Unlock()
	if known {
		return nil
	}
	tmp := filepath.Join(k.dir, ph+".tmp")
	if err := os.WriteFile(tmp, []byte(path), 0o600); err != nil {
		return err
	}
	if err := os.Rename(tmp, k.pathName(ph)); err != nil {
		_ = os.Remove(tmp)
		return err
	}
	k.mu.Lock()
	k.path[ph] = path
	k.mu.Unlock()
	return nil
}

// forgetPath removes the file that says the path of ph's copies, once
// they are gone.
func (k *keptFiles) forgetPath(ph string) {
	k.mu.Lock()
	_, ok := k.path[ph]
	delete(k.path, ph)
	k.mu.Unlock()
	if ok {
		_ = os.Remove(k.pathName(ph))
	}
}

// pathsIn returns the paths of the copies kept of the files of dirs.
func (k *keptFiles) pathsIn(dirs map[string]bool) []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	var paths []string
	for ph, path := range k.path {
		if _, ok := k.have[ph]; ok && dirs[filepath.Dir(path)] {
			paths = append(paths, path)
		}
	}
	return paths
}

func keptPathHash(path string) string {
	h := sha256.Sum256([]byte(path))
	return hex.EncodeToString(h[:12])
}

// keptName names the copy of path with content hash (luaapi.File's Hash).
func (k *keptFiles) keptName(pathHash, hash string) string {
	return filepath.Join(k.dir, pathHash+"."+hash[:min(len(hash), 16)]+".lua")
}

// run does what do is given, until end; warn is told what fails.
func (k *keptFiles) run(warn func(path string, err error)) {
	defer close(k.done)
	for ops := range k.ops {
		for _, op := range ops {
			switch {
			case op.only != nil:
				k.prune(op.only)
			case op.forget:
				k.forget(op.path)
			case op.from != "":
				if err := k.move(op.from, op.path); err != nil {
					warn(op.path, err)
				}
			case sha256Hex(op.src) != op.hash:
				// The version in force is not these bytes (their
				// evaluation was called off): nothing to keep.
			default:
				if err := k.keep(op.path, op.hash, op.src); err != nil {
					warn(op.path, err)
				}
			}
		}
	}
}

// do hands ops to run.
func (k *keptFiles) do(ops []keptOp) {
	if len(ops) > 0 {
		k.ops <- ops
	}
}

// end waits until run has done everything it was given, and ends it.
func (k *keptFiles) end() {
	close(k.ops)
	<-k.done
}

// keep keeps src, of content hash, as path's version in force, unless it
// is kept already.
func (k *keptFiles) keep(path, hash string, src []byte) error {
	ph := keptPathHash(path)
	short := hash[:min(len(hash), 16)]
	if err := k.notePath(ph, path); err != nil {
		return err
	}
	k.mu.Lock()
	old, had := k.have[ph]
	k.mu.Unlock()
	if had && old == short {
		return nil
	}
	tmp := filepath.Join(k.dir, ph+".tmp")
	if err := os.WriteFile(tmp, src, 0o600); err != nil {
		return err
	}
	if err := os.Rename(tmp, k.keptName(ph, hash)); err != nil {
		_ = os.Remove(tmp)
		return err
	}
	if had {
		_ = os.Remove(k.keptName(ph, old))
	}
	k.mu.Lock()
	k.have[ph] = short
	k.mu.Unlock()
	return nil
}

// forget removes path's copy: the file was removed.
func (k *keptFiles) forget(path string) {
	ph := keptPathHash(path)
	k.mu.Lock()
	old, ok := k.have[ph]
	delete(k.have, ph)
	k.mu.Unlock()
	if ok {
		_ = os.Remove(k.keptName(ph, old))
	}
	k.forgetPath(ph)
}

// move makes the copy of from to's: a file renamed as it was.
func (k *keptFiles) move(from, to string) error {
	fh, th := keptPathHash(from), keptPathHash(to)
	k.mu.Lock()
	short, ok := k.have[fh]
	old, had := k.have[th]
	k.mu.Unlock()
	if !ok {
		return nil
	}
	if err := k.notePath(th, to); err != nil {
		return err
	}
	if err := os.Rename(k.keptName(fh, short), k.keptName(th, short)); err != nil {
		return err
	}
	if had && old != short {
		_ = os.Remove(k.keptName(th, old))
	}
	k.mu.Lock()
	delete(k.have, fh)
	k.have[th] = short
	k.mu.Unlock()
	k.forgetPath(fh)
	return nil
}

// prune removes the copies of every path but those of paths: the files
// removed while the daemon was down, whose copies no removal reached.
func (k *keptFiles) prune(paths map[string]bool) {
	hashes := make(map[string]bool, len(paths))
	for p := range paths {
		hashes[keptPathHash(p)] = true
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	for ph, short := range k.have {
		if !hashes[ph] {
			_ = os.Remove(k.keptName(ph, short))
			delete(k.have, ph)
		}
	}
	for ph := range k.path {
		if !hashes[ph] {
			_ = os.Remove(k.pathName(ph))
			delete(k.path, ph)
		}
	}
}

func sha256Hex(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

// previous returns the copy of path, if one is kept and it is not the
// version of content hash.
func (k *keptFiles) previous(path, hash string) ([]byte, bool) {
	if k.keeps(path, hash) {
		return nil, false
	}
	return k.copyOf(path)
}

// holds says whether src is the copy of path kept: the version in force.
func (k *keptFiles) holds(path string, src []byte) bool { return k.keeps(path, sha256Hex(src)) }

// keeps says whether the copy of path kept is the version of content
// hash; none is where no copies are kept (nil: their directory could not
// be made).
func (k *keptFiles) keeps(path, hash string) bool {
	if k == nil {
		return false
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	short, ok := k.have[keptPathHash(path)]
	return ok && short == hash[:min(len(hash), 16)]
}

// has says whether a copy of path is kept.
func (k *keptFiles) has(path string) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	_, ok := k.have[keptPathHash(path)]
	return ok
}

// copyOf returns the copy of path, if one is kept.
func (k *keptFiles) copyOf(path string) ([]byte, bool) {
	ph := keptPathHash(path)
	k.mu.Lock()
	short, ok := k.have[ph]
	k.mu.Unlock()
	if !ok {
		return nil, false
	}
	src, err := os.ReadFile(k.keptName(ph, short))
	return src, err == nil
}
