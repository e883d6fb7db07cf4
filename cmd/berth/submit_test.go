package main

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// TestReadSubmitted: berth submit reads a regular file, and refuses a FIFO
// (it waited on one for a writer that never came) and a directory at once.
func TestReadSubmitted(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo.lua")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := readSubmitted(fifo); !errors.Is(err, errNotRegular) {
		t.Errorf("a FIFO: %v, want %v", err, errNotRegular)
	}
	if _, err := readSubmitted(dir); !errors.Is(err, syscall.EISDIR) {
		t.Errorf("a directory: %v, want EISDIR", err)
	}
	file := filepath.Join(dir, "train.lua")
	if err := os.WriteFile(file, []byte(`job "train" { cmd = "true" }`), 0o600); err != nil {
		t.Fatal(err)
	}
	if b, err := readSubmitted(file); err != nil || string(b) != `job "train" { cmd = "true" }` {
		t.Errorf("a file: %q, %v", b, err)
	}
}
