package store

import (
	"os"

	"golang.org/x/sys/unix"
)

// lockHolder names the process holding the flock on path, from
// /proc/locks; 0 when it cannot tell. It is best effort by nature: the
// holder may exit between the failed lock and this read.
func lockHolder(path string) int {
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return 0
	}
	f, err := os.Open("/proc/locks")
	if err != nil {
		return 0
	}
	defer f.Close()
	return parseLocks(f, unix.Major(st.Dev), unix.Minor(st.Dev), st.Ino)
}
