package store

import (
	"bufio"
	"io"
	"strconv"
	"strings"
)

// parseLocks finds, in the text of /proc/locks, the pid of the process
// holding a flock on the file with inode ino on device major:minor; 0 when
// none is found or the kernel could not name it (a holder in another pid
// namespace shows as 0 or -1).
//
// Lines look like `1: FLOCK  ADVISORY  WRITE 1234 fd:01:5678 0 EOF`
// (device as hex major:minor, then the inode in decimal); processes
// waiting for a lock have `->` after the number and are skipped. Only
// FLOCK lines count: bbolt locks with flock(2), and a POSIX lock on the same
// file does not conflict with it. Some filesystems (btrfs subvolumes,
// overlayfs) report in /proc/locks a device other than the one stat shows,
// so when nothing matches device and inode both, the inode alone decides,
// provided every such line names the same process.
func parseLocks(r io.Reader, major, minor uint32, ino uint64) int {
	exact, byInode := 0, 0
	inodeAmbiguous := false
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 6 || f[1] == "->" || f[1] != "FLOCK" {
			continue
		}
		pid, err := strconv.Atoi(f[4])
		if err != nil || pid <= 0 {
			continue
		}
		dev := strings.Split(f[5], ":")
		if len(dev) != 3 {
			continue
		}
		lino, err := strconv.ParseUint(dev[2], 10, 64)
		if err != nil || lino != ino {
			continue
		}
		maj, err1 := strconv.ParseUint(dev[0], 16, 32)
		mnr, err2 := strconv.ParseUint(dev[1], 16, 32)
		if err1 == nil && err2 == nil && uint32(maj) == major && uint32(mnr) == minor {
			exact = pid
			continue
		}
		if byInode != 0 && byInode != pid {
			inodeAmbiguous = true
		}
		byInode = pid
	}
	switch {
	case exact != 0:
		return exact
	case !inodeAmbiguous:
		return byInode
	}
	return 0
}
