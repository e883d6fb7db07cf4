package luaapi

import (
	"time"

	"golang.org/x/sys/unix"
)

// processCPUTime is the CPU time this process has used, all threads
// together. The budget reads it: in the evaluating child, which runs
// nothing but the file, it is the file's.
func processCPUTime() time.Duration {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_PROCESS_CPUTIME_ID, &ts); err != nil {
		return 0
	}
	return time.Duration(ts.Nano())
}
