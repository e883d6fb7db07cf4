package supervisor

import (
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// TestBinaryReplaced: the path the daemon was started by is followed as it
// is now: a file renamed over it, a link pointed elsewhere, or the file
// gone are replacements; the same file is not, however often it is asked.
func TestBinaryReplaced(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		upgrade func(t *testing.T, dir string)
	}{
		{"renamed over", func(t *testing.T, dir string) {
			writeExe(t, filepath.Join(dir, "new"))
			renameOver(t, filepath.Join(dir, "new"), filepath.Join(dir, "berth"))
		}},
		{"link pointed elsewhere", func(t *testing.T, dir string) {
			writeExe(t, filepath.Join(dir, "v2"))
			if err := os.Symlink("v2", filepath.Join(dir, "next")); err != nil {
				t.Fatal(err)
			}
			renameOver(t, filepath.Join(dir, "next"), filepath.Join(dir, "berth"))
		}},
		{"removed", func(t *testing.T, dir string) {
			if err := os.Remove(filepath.Join(dir, "berth")); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			writeExe(t, filepath.Join(dir, "v1"))
			if err := os.Symlink("v1", filepath.Join(dir, "berth")); err != nil {
				t.Fatal(err)
			}
			var st unix.Stat_t
			if err := unix.Stat(filepath.Join(dir, "v1"), &st); err != nil {
				t.Fatal(err)
			}
			b := &binary{path: filepath.Join(dir, "berth"), dev: st.Dev, ino: st.Ino}
			for range 2 {
				if replaced, first := b.check(); replaced || first {
					t.Fatalf("before the upgrade: replaced %v, first %v", replaced, first)
				}
			}
			tc.upgrade(t, dir)
			if replaced, first := b.check(); !replaced || !first {
				t.Errorf("after: replaced %v, first %v; want both", replaced, first)
			}
			if replaced, first := b.check(); !replaced || first {
				t.Errorf("asked again: replaced %v, first %v; want replaced, not first", replaced, first)
			}
		})
	}
}

func writeExe(t *testing.T, path string) {
	t.Helper()
	if err := writeFile(path, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
}

func renameOver(t *testing.T, from, to string) {
	t.Helper()
	if err := os.Rename(from, to); err != nil {
		t.Fatal(err)
	}
}
