package testkit

import (
	"os"
	"syscall"
	"testing"
)

// WriteExecutable writes data to path with mode perm, holding
// syscall.ForkLock from the open to the close. A process forked while the
// file was open for writing would hold it so until its own exec, and
// executing the file meanwhile fails with ETXTBSY ("text file busy");
// every fork in Go takes ForkLock, so none happens then (golang/go#22315).
// Tests that run in parallel with others that fork write what they execute
// this way.
func WriteExecutable(t testing.TB, path string, data []byte, perm os.FileMode) {
	t.Helper()
	syscall.ForkLock.RLock()
	err := os.WriteFile(path, data, perm)
	syscall.ForkLock.RUnlock()
	if err != nil {
		t.Fatal(err)
	}
}

// CopyExecutable is WriteExecutable of the contents of from.
func CopyExecutable(t testing.TB, from, to string, perm os.FileMode) {
	t.Helper()
	data, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	WriteExecutable(t, to, data, perm)
}
