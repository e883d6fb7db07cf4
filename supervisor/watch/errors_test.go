package watch

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"syscall"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/messages.golden")

// TestMessagesGolden pins every sentence a person reads from this package:
// one refusal of each reason and variant.
func TestMessagesGolden(t *testing.T) {
	const f = "jobs.d/x.lua"
	perm := &fs.PathError{Op: "open", Path: f, Err: syscall.EACCES}
	cases := []*RefusedError{
		{Path: f, Reason: NotOwned, UID: 1001, GID: 1001},
		{Path: f, Reason: NotOwned, UID: 1001, GID: 1001, Owner: "bob"},
		{Path: f, Reason: NotOwned, UID: 1001, GID: 1001, Owner: "bob", DaemonUID: 1000, DaemonUser: "alice"},
		{Path: f, Reason: NotOwned, UID: 1001, GID: 1001, DaemonUID: 1000},
		{Path: "jobs.d", Dir: true, Reason: NotOwned, UID: 65534, Owner: "nobody"},
		{Path: f, Reason: WritableByOthers, Mode: 0o666},
		{Path: "jobs.d", Dir: true, Reason: WritableByOthers, Mode: fs.ModeDir | 0o777},
		{Path: f, Reason: WritableByGroup, GID: 100, Group: "devs", Owner: "alice", OtherMembers: []string{"bob"}},
		{Path: f, Reason: WritableByGroup, GID: 100, Group: "users", Owner: "alice"},
		{Path: f, Reason: WritableByGroup, GID: 4242, Owner: "alice", GroupUnlisted: true},
		{Path: f, Reason: WritableByGroup, GID: 5000, Group: "ml", Owner: "alice", GroupUnlisted: true},
		{Path: f, Reason: NotRegular, Kind: "directory"},
		{Path: f, Reason: NotRegular, Kind: "named pipe"},
		{Path: f, Reason: TooBig, Size: 1048577, MaxBytes: 1 << 20},
		{Path: f, Reason: TooBig, Size: 3000, MaxBytes: 2500},
		{Path: f, Reason: Unreadable, Err: perm},
		{Path: "jobs.d", Dir: true, Reason: Unreadable, Err: perm},
		{Path: f, Reason: Unreadable, Err: &fs.PathError{Op: "read", Path: f, Err: syscall.EIO}},
		{Path: f, Reason: DanglingLink, Target: "..data/x.lua"},
		{Path: "jobs.d", Dir: true, Reason: NotDirectory, Kind: "regular file"},
		{Path: f, Reason: 99},
	}
	var b bytes.Buffer
	for _, e := range cases {
		fmt.Fprintf(&b, "%s\t%s\n", e.Reason, e.Error())
	}
	const golden = "testdata/messages.golden"
	if *update {
		if err := os.WriteFile(golden, b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (go test ./supervisor/watch -update creates it)", err)
	}
	if !bytes.Equal(b.Bytes(), want) {
		t.Errorf("messages differ from %s\n--- got\n%s--- want\n%s", golden, b.Bytes(), want)
	}
}

func TestRefusedErrorUnwrap(t *testing.T) {
	e := &RefusedError{Path: "x.lua", Reason: Unreadable, Err: &fs.PathError{Op: "open", Path: "x.lua", Err: syscall.EACCES}}
	if !errors.Is(e, fs.ErrPermission) {
		t.Error("an Unreadable refusal does not unwrap to its cause")
	}
}
