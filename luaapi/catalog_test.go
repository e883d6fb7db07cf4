package luaapi

import (
	"strings"
	"testing"
	"time"

	"github.com/berthd/berth/supervisor/testkit"
)

// TestParentCatalog pins the sentences for what the evaluating child could
// not report itself (the kernel or its parent ended it): no job file
// produces them in testdata/invalid.
func TestParentCatalog(t *testing.T) {
	const path = "/etc/berth/jobs.d/x.lua"
	var lines []string
	for _, e := range []*Error{
		ErrCPULimit(path, time.Second),
		errBudget(path, 3, time.Second, 1<<30, 256<<20),
		errBudget(path, 3, time.Second, 63<<20, 256<<20),
		ErrWallLimit(path, 12*time.Second, time.Second),
		ErrMemoryLimit(path, 512<<20),
		ErrReloadDeadline(path, time.Minute),
		ErrNotEvaluated(path, time.Minute),
		ErrCheckDeadline(path, 10*time.Second),
		ErrCheckTimeUp(path, 10*time.Second),
		ErrShareSpent("/var/spool/berth/alice/x.lua", "alice", 2*time.Second),
		ErrEvaluator(path, "it answered out of turn"),
		ErrDeclaresTooMuch(path, 8<<20),
	} {
		lines = append(lines, e.Problem.String()+": "+e.Error())
	}
	testkit.Golden(t, "testdata/catalog.golden", []byte(strings.Join(lines, "\n")+"\n"))
}
