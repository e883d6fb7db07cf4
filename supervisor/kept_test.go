package supervisor

import (
	"os"
	"path/filepath"
	"testing"
)

// The copies of the job files in force: one per file, found again by a
// daemon that opens them anew, replaced by a new version, gone with the
// file; a write cut short is cleared away.
func TestKeptFiles(t *testing.T) {
	state := t.TempDir()
	k, err := openKept(state)
	if err != nil {
		t.Fatal(err)
	}
	const path = "/etc/berth/jobs.d/train.lua"
	for _, err := range []error{
		k.keep(path, "aaaaaaaaaaaaaaaaaaaa", []byte("v1")),
		k.keep(path, "aaaaaaaaaaaaaaaaaaaa", []byte("v1")),
		k.keep(path, "bbbbbbbbbbbbbbbbbbbb", []byte("v2")),
		k.keep("/etc/berth/jobs.d/other.lua", "cccccccccccccccccccc", []byte("other")),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(state, keptDir, "cut.tmp"), []byte("half"), 0o600); err != nil {
		t.Fatal(err)
	}
	k, err = openKept(state)
	if err != nil {
		t.Fatal(err)
	}
	if src, ok := k.previous(path, "ffffffffffffffffffff"); !ok || string(src) != "v2" {
		t.Errorf("the copy of a file that fails: %q %v, want v2", src, ok)
	}
	if _, ok := k.previous(path, "bbbbbbbbbbbbbbbbbbbb"); ok {
		t.Error("the copy of the very version that fails is offered")
	}
	k.forget(path)
	if _, ok := k.previous(path, "ffffffffffffffffffff"); ok {
		t.Error("a copy of a removed file is offered")
	}
	if entries, _ := os.ReadDir(filepath.Join(state, keptDir)); len(entries) != 1 {
		t.Errorf("%d files kept, want other.lua's alone: %v", len(entries), entries)
	}
}
