package main

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
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

// TestSubmitKeepsAccess: a job file root saves into the administrators'
// directory keeps the mode, group and ACL of the one it replaces (who may
// read it may see its jobs' definitions); a new one is readable by all.
func TestSubmitKeepsAccess(t *testing.T) {
	t.Parallel()
	d := newTestDaemon(t, map[string]string{"shared.lua": `job "shared" { cmd = "true", cpus = 0 }`})
	d.start(daemonOptions{})
	d.waitState("shared", "done")
	path := filepath.Join(d.jobs, "shared.lua")
	if err := os.Chmod(path, 0o640); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(path, 0, 4); err != nil { // adm's gid on Debian; any will do
		t.Fatal(err)
	}
	// An ACL that lets nobody (65534) read it: setfacl -m u:nobody:r.
	acl := []byte{2, 0, 0, 0}
	for _, e := range []struct {
		tag, perm uint16
		id        uint32
	}{{0x01, 6, ^uint32(0)}, {0x02, 4, 65534}, {0x04, 4, ^uint32(0)}, {0x10, 4, ^uint32(0)}, {0x20, 0, ^uint32(0)}} {
		acl = binary.LittleEndian.AppendUint16(acl, e.tag)
		acl = binary.LittleEndian.AppendUint16(acl, e.perm)
		acl = binary.LittleEndian.AppendUint32(acl, e.id)
	}
	hasACL := unix.Setxattr(path, "system.posix_acl_access", acl, 0) == nil
	src := filepath.Join(t.TempDir(), "shared.lua")
	writeReadable(t, src, `job "shared" { cmd = "true", cpus = 0, description = "edited" }`)
	if out, errOut, code := d.cli("submit", "--replace", src); code != exitOK {
		t.Fatalf("submit --replace: exit %d\n%s%s", code, out, errOut)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o640 || fi.Sys().(*syscall.Stat_t).Gid != 4 {
		t.Errorf("the file replaced: %v, gid %d; want 0640, gid 4 as before", fi.Mode(), fi.Sys().(*syscall.Stat_t).Gid)
	}
	if hasACL {
		buf := make([]byte, 256)
		if n, err := unix.Getxattr(path, "system.posix_acl_access", buf); err != nil || !bytes.Equal(buf[:n], acl) {
			t.Errorf("the file replaced lost its ACL: %x %v", buf[:max(n, 0)], err)
		}
	} else {
		t.Log("no ACLs on this file system: not checked")
	}
	fresh := filepath.Join(t.TempDir(), "fresh.lua")
	writeReadable(t, fresh, `job "fresh" { cmd = "true", cpus = 0 }`)
	if out, errOut, code := d.cli("submit", fresh); code != exitOK {
		t.Fatalf("submit: exit %d\n%s%s", code, out, errOut)
	}
	if fi, err := os.Stat(filepath.Join(d.jobs, "fresh.lua")); err != nil || fi.Mode().Perm() != 0o644 {
		t.Errorf("a new administrators' file: %v %v, want 0644", fi.Mode(), err)
	}
	// A directory is named as one, and its files offered (trial AQ: told
	// to rename it).
	dir := filepath.Dir(fresh)
	if _, errOut, code := d.cli("submit", dir); code != exitUsage || strings.TrimSpace(errOut) != msgSubmitDir(dir) {
		t.Errorf("submit of a directory: exit %d %q", code, errOut)
	}
}
