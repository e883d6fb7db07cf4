package watch

import (
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"golang.org/x/sys/unix"
)

// acl builds an ACL attribute as the kernel stores it, entries in the order
// of their tags: the entries given (tag, perm, id), with user::rw-,
// group::r-- and other::r--.
func acl(entries ...[3]uint32) []byte {
	all := append([][3]uint32{{0x01, 6, 0xffffffff}, {0x04, 4, 0xffffffff}, {0x20, 4, 0xffffffff}}, entries...)
	slices.SortStableFunc(all, func(a, b [3]uint32) int { return int(a[0]) - int(b[0]) })
	b := binary.LittleEndian.AppendUint32(nil, aclVersion)
	for _, e := range all {
		b = binary.LittleEndian.AppendUint16(b, uint16(e[0]))
		b = binary.LittleEndian.AppendUint16(b, uint16(e[1]))
		b = binary.LittleEndian.AppendUint32(b, e[2])
	}
	return b
}

func TestParseACL(t *testing.T) {
	for _, tt := range []struct {
		name string
		b    []byte
		want []aclWriter
	}{
		{"a named user who may write", acl([3]uint32{aclUser, 6, 65534}, [3]uint32{aclMask, 6, 0xffffffff}), []aclWriter{{id: 65534}}},
		{"a named group who may write", acl([3]uint32{aclGroup, 7, 100}, [3]uint32{aclMask, 7, 0xffffffff}), []aclWriter{{group: true, id: 100}}},
		{"the mask takes write away", acl([3]uint32{aclUser, 6, 65534}, [3]uint32{aclMask, 4, 0xffffffff}), nil},
		{"read only", acl([3]uint32{aclUser, 4, 65534}, [3]uint32{aclMask, 6, 0xffffffff}), nil},
		{"no named entries", acl(), nil},
	} {
		got, err := parseACL(tt.b)
		if err != nil || !slices.Equal(got, tt.want) {
			t.Errorf("%s: %v, %v; want %v", tt.name, got, err, tt.want)
		}
	}
	for _, bad := range [][]byte{nil, {1, 0, 0, 0}, append(acl(), 1)} {
		if _, err := parseACL(bad); !errors.Is(err, errBadACL) {
			t.Errorf("parseACL(%x) = %v, want errBadACL", bad, err)
		}
	}
}

func FuzzParseACL(f *testing.F) {
	f.Add(acl([3]uint32{aclUser, 6, 65534}, [3]uint32{aclMask, 6, 0xffffffff}))
	f.Add([]byte{2, 0, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		writers, err := parseACL(b)
		if err == nil && len(writers) > (len(b)-4)/aclEntryLen {
			t.Fatalf("%d writers from %d bytes", len(writers), len(b))
		}
	})
}

// TestStrictModesACL: a file or a jobs directory whose ACL lets another
// user write it is refused, though its mode (the ACL's mask in the group
// bits) alone would pass: root's group, nobody in it.
func TestStrictModesACL(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root to give a file group 0")
	}
	for _, what := range []string{"file", "directory"} {
		t.Run(what, func(t *testing.T) {
			dir := jobsDir(t)
			path := filepath.Join(dir, "x.lua")
			writeFile(t, path, "job")
			target, mode := path, os.FileMode(0o664)
			if what == "directory" {
				target, mode = dir, 0o775
			}
			if err := os.Chown(target, 0, 0); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(target, mode); err != nil {
				t.Fatal(err)
			}
			s := NewScanner(dir, ScanOptions{DaemonUID: 0, Accounts: SystemAccounts{Root: "testdata/accounts"}})
			if got := scan(t, s); got.DirRefused != nil || got.Refused[path] != nil {
				t.Fatalf("refused without an ACL: %q", summary(dir, got))
			}
			// user:nobody:rw-, mask rw-: what `setfacl -m u:nobody:rw` writes.
			attr := acl([3]uint32{aclUser, 6, 65534}, [3]uint32{aclMask, 6, 0xffffffff})
			if err := unix.Setxattr(target, aclXattr, attr, 0); err != nil {
				if errors.Is(err, unix.ENOTSUP) || errors.Is(err, unix.EOPNOTSUPP) {
					t.Skipf("no ACLs on this filesystem: %v", err)
				}
				t.Fatal(err)
			}
			got := scan(t, NewScanner(dir, ScanOptions{DaemonUID: 0, Accounts: SystemAccounts{Root: "testdata/accounts"}}))
			err := got.Refused[path]
			if what == "directory" {
				err = got.DirRefused
			}
			var re *RefusedError
			if !errors.As(err, &re) || re.Reason != WritableByACL || !slices.Equal(re.ACLWriters, []string{"user uid 65534"}) {
				t.Fatalf("got %v (scan says %q), want a writable-by-ACL refusal naming uid 65534", err, summary(dir, got))
			}
			if len(got.Changed) != 0 {
				t.Fatal("a refused file was read")
			}
			t.Log(err)
		})
	}
}
