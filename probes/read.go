package probes

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// maxProbeFileBytes bounds how much of any one probed file is read. The files
// are a few kilobytes; the bound only matters when root points somewhere odd.
const maxProbeFileBytes = 1 << 20

// readProbeFile opens root/rel and hands it to parse. os.Open only reads: no
// probe may open anything for writing.
func readProbeFile[T any](root, rel string, parse func(io.Reader) (T, error)) (T, error) {
	var zero T
	path := filepath.Join(root, rel)
	f, err := os.Open(path)
	if err != nil {
		return zero, err // a *PathError already names the operation and path
	}
	defer f.Close()
	v, err := parse(f)
	if err != nil {
		return zero, fmt.Errorf("%s: %w", path, err)
	}
	return v, nil
}
