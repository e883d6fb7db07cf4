package watch

import (
	"io/fs"
	"syscall"

	"golang.org/x/sys/unix"
)

// stamp is what a stat says about a file's identity and content. When two
// stats give the same stamp the content is taken to be the same (the
// racy-clean exception is in scan.go). Every change of content moves mtime
// and ctime; a rename over the file moves the inode; a ConfigMap swap moves
// the device and inode behind the symlink.
type stamp struct {
	dev, ino     uint64
	size         int64
	mtime, ctime int64 // ns since the epoch
	mode         uint32
	uid, gid     uint32
}

func stampOf(st *unix.Stat_t) stamp {
	return stamp{
		dev:   st.Dev,
		ino:   st.Ino,
		size:  st.Size,
		mtime: st.Mtim.Nano(),
		ctime: st.Ctim.Nano(),
		mode:  st.Mode,
		uid:   st.Uid,
		gid:   st.Gid,
	}
}

// fileMode converts a raw st_mode to the fs.FileMode that Go reports, for
// the type tests, the permission bits and the sticky bit the rule looks at.
func fileMode(raw uint32) fs.FileMode {
	m := fs.FileMode(raw & 0o777)
	if raw&unix.S_ISVTX != 0 {
		m |= fs.ModeSticky
	}
	switch raw & unix.S_IFMT {
	case unix.S_IFDIR:
		m |= fs.ModeDir
	case unix.S_IFLNK:
		m |= fs.ModeSymlink
	case unix.S_IFIFO:
		m |= fs.ModeNamedPipe
	case unix.S_IFSOCK:
		m |= fs.ModeSocket
	case unix.S_IFCHR:
		m |= fs.ModeDevice | fs.ModeCharDevice
	case unix.S_IFBLK:
		m |= fs.ModeDevice
	case unix.S_IFREG:
	default:
		m |= fs.ModeIrregular
	}
	return m
}

// fileID is the identity of a directory the watcher has added, to notice
// when the path now names another one (removed and re-created, or a
// symlink swapped).
type fileID struct{ dev, ino uint64 }

func idOf(fi fs.FileInfo) fileID {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fileID{}
	}
	return fileID{st.Dev, st.Ino}
}
