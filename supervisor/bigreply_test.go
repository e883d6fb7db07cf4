package supervisor

import (
	"context"
	"path/filepath"
	"runtime"
	"testing"
	"time"
)

// TestHugeDeclarationRefused: a file whose declarations are larger than the
// daemon takes from one file (36 MB of arguments, each job's within its
// own bounds) is refused, and the daemon does not hold it.
func TestHugeDeclarationRefused(t *testing.T) {
	// Budget enough to build the string under the race detector on a
	// busy machine: the size, not the time, is what is tested.
	d, jobsDir := runDaemon(t, "", func(cfg *Config) { cfg.Evaluator.Budget = 20 * time.Second })
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, err := d.Reload(ctx); err != nil {
		t.Fatal(err)
	}
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	// A job's arguments are bounded at 128 KiB each and 1 MiB in all,
	// so many of them: 36 MB in all.
	src := `local s = string.rep("a", 130000)
for i = 1, 40 do job("big-" .. i) { cmd = { "true", s, s, s, s, s, s, s }, enabled = false } end
`
	if err := writeFile(filepath.Join(jobsDir, "big.lua"), []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	res, err := d.Reload(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var peak runtime.MemStats
	runtime.ReadMemStats(&peak)
	runtime.GC()
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	t.Logf("reload %v errors=%d added=%v; heap before %d MiB, HeapSys after reload %d MiB, live after GC %d MiB",
		time.Since(start), len(res.Errors), res.Added, before.HeapAlloc>>20, peak.HeapSys>>20, after.HeapAlloc>>20)
	// A ratio and a floor: what the runtime keeps varies by a few MiB
	// from run to run; the file would hold 36.
	if after.HeapAlloc > 2*before.HeapAlloc && after.HeapAlloc-before.HeapAlloc > 16<<20 {
		t.Errorf("one job file holds %d MiB in the daemon", (after.HeapAlloc-before.HeapAlloc)>>20)
	}
	if len(res.Problems) != 1 || res.Problems[0].Code != "too_large" || len(res.Added) != 0 {
		t.Errorf("the file is not refused for its size: %+v", res)
	}
}
