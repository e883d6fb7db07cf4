package ctlsock

import (
	"testing"

	"golang.org/x/sys/unix"
)

// TestLimitsFor: the caps for the limits berth meets, and what holds of
// every one: the reserve is kept, the caps add up to the limit.
func TestLimitsFor(t *testing.T) {
	for _, tc := range []struct {
		nofile                 uint64
		reserve, total, perUID int
	}{
		{nofile: 65536, reserve: 64488, total: 1024, perUID: 64}, // berth.service
		{nofile: 20000, reserve: 18952, total: 1024, perUID: 64}, // this sandbox's hard limit
		{nofile: 4096, reserve: 3048, total: 1024, perUID: 64},
		{nofile: 1024, reserve: 256, total: 744, perUID: 64}, // a login shell's soft limit
		{nofile: 512, reserve: 256, total: 232, perUID: 58},
		{nofile: 270, reserve: 238, total: 8, perUID: 2}, // too low for the reserve: minTotal
		{nofile: unix.RLIM_INFINITY, reserve: maxNoFile - 1048, total: 1024, perUID: 64},
	} {
		lim := LimitsFor(tc.nofile)
		if lim.Reserve != tc.reserve || lim.Total != tc.total || lim.PerUID != tc.perUID {
			t.Errorf("LimitsFor(%d) = %+v, want reserve %d, total %d, per uid %d", tc.nofile, lim, tc.reserve, tc.total, tc.perUID)
		}
		if lim.Reserve+lim.Total+lim.Privileged+lim.Refusing != lim.NoFile {
			t.Errorf("LimitsFor(%d) = %+v: the caps and the reserve do not add up to the limit", tc.nofile, lim)
		}
		if lim.Total > minTotal && lim.Reserve < max(minReserve, lim.NoFile/reserveDivisor) {
			t.Errorf("LimitsFor(%d) = %+v: reserve under max(%d, nofile/%d)", tc.nofile, lim, minReserve, reserveDivisor)
		}
		if lim.Privileged < 1 || lim.Refusing < 1 || lim.IdleAtLimit <= 0 {
			t.Errorf("LimitsFor(%d) = %+v: no privileged allowance, refusals or idle bound", tc.nofile, lim)
		}
	}
}

// TestRuntimeRaisedNoFile pins what Current relies on instead of raising
// the limit itself: the Go runtime has raised the soft limit to the hard
// one, less one, before main (Go 1.19 and later).
func TestRuntimeRaisedNoFile(t *testing.T) {
	var r unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &r); err != nil {
		t.Fatal(err)
	}
	if r.Max == unix.RLIM_INFINITY {
		t.Skip("the hard limit is unlimited: the runtime's raise fails against fs.nr_open")
	}
	if r.Cur < r.Max-1 {
		t.Errorf("RLIMIT_NOFILE soft %d, hard %d: the Go runtime did not raise the soft limit", r.Cur, r.Max)
	}
	lim, err := Current()
	if err != nil || lim != LimitsFor(r.Cur) {
		t.Errorf("Current() = %+v, %v; want LimitsFor(%d)", lim, err, r.Cur)
	}
}
