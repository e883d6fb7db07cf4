package testkit

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// PutFile writes text to path, 0600, as one step: written aside, then
// renamed into place. A daemon watching the directory never reads it half
// written (an empty file declares nothing, and a job it declared would be
// removed, then declared again).
func PutFile(t testing.TB, path, text string) {
	t.Helper()
	tmp := filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+".tmp")
	// With no fork between the open and the close: a daemon of the test
	// process that forks meanwhile would hand its child the file open for
	// writing, and its scan take the file for one being saved.
	syscall.ForkLock.RLock()
	err := os.WriteFile(tmp, []byte(text), 0o600)
	syscall.ForkLock.RUnlock()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}
