package store

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.etcd.io/bbolt"
)

// boltFile is the bytes of a bbolt file that fill made (nil: no
// transaction at all, as bbolt.Open leaves a new file).
func boltFile(t *testing.T, fill func(tx *bbolt.Tx) error) []byte {
	t.Helper()
	path := filepath.Join(t.TempDir(), "other.db")
	db, err := bbolt.Open(path, 0o600, &bbolt.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if fill != nil {
		err = db.Update(fill)
	}
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// TestOpenRefusesWhatBerthDidNotWrite: only a missing file starts a new
// state. A file that is there but holds no state berth wrote — empty, not
// bbolt, or bbolt without berth's metadata — is refused, and left exactly
// as it was: bbolt itself would have made an empty file a new database,
// and every batch job done before would have run again.
func TestOpenRefusesWhatBerthDidNotWrite(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	garbage := make([]byte, 4*os.Getpagesize())
	for i := range garbage {
		garbage[i] = byte(rng.Uint32())
	}
	tests := []struct {
		name string
		data []byte
		want NotState
	}{
		{"empty", []byte{}, NotStateEmpty},
		{"text", []byte("hello, not a database\n"), NotStateNotBolt},
		{"garbage", garbage, NotStateNotBolt},
		{"bbolt without buckets", boltFile(t, nil), NotStateForeign},
		{"bbolt of another program", boltFile(t, func(tx *bbolt.Tx) error {
			b, err := tx.CreateBucket([]byte("widgets"))
			if err != nil {
				return err
			}
			return b.Put([]byte("a"), []byte("b"))
		}), NotStateForeign},
		{"meta without format", boltFile(t, func(tx *bbolt.Tx) error {
			b, err := tx.CreateBucket(bucketMeta)
			if err != nil {
				return err
			}
			return b.Put(keyInstance, []byte("0123456789abcdef"))
		}), NotStateForeign},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "state.db")
			if err := os.WriteFile(path, tt.data, 0o600); err != nil {
				t.Fatal(err)
			}
			// Twice: a refusal leaves nothing locked, so the second open is
			// refused for the same reason, not as held by another daemon.
			for range 2 {
				s, err := Open(path, Options{})
				if err == nil {
					s.Close()
					t.Fatal("Open succeeded")
				}
				var ne *NotStateError
				if !errors.As(err, &ne) || !errors.Is(err, ErrNotState) {
					t.Fatalf("error %v (%T) is not a *NotStateError", err, err)
				}
				if ne.Path != path || ne.Problem != tt.want || ne.Size != int64(len(tt.data)) {
					t.Errorf("NotStateError %+v, want path %s, problem %v, size %d", ne, path, tt.want, len(tt.data))
				}
			}
			if data, err := os.ReadFile(path); err != nil || !bytes.Equal(data, tt.data) {
				t.Errorf("the refused file changed: %d bytes now, %d before (%v)", len(data), len(tt.data), err)
			}
			// What the message tells a person to do starts a new state.
			if err := os.Rename(path, path+".bad"); err != nil {
				t.Fatal(err)
			}
			s := openTestAt(t, path, Options{})
			if runs, err := s.Runs("", 0); err != nil || len(runs) != 0 {
				t.Errorf("the new state has %d runs (%v), want none", len(runs), err)
			}
		})
	}
}

// TestNewStateIsWhole: a new state file appears at its path only complete,
// with berth's metadata: a daemon killed while making it leaves no file
// there, or one it reads, never one it then refuses as not berth's.
func TestNewStateIsWhole(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "state.db")
	// What a daemon killed while making the file left behind.
	if err := os.WriteFile(path+".new", []byte("half"), 0o600); err != nil {
		t.Fatal(err)
	}
	s := openTestAt(t, path, Options{})
	if _, err := os.Stat(path + ".new"); !os.IsNotExist(err) {
		t.Errorf("the file it was made in is left behind: %v", err)
	}
	err := s.db.View(func(tx *bbolt.Tx) error {
		if meta := tx.Bucket(bucketMeta); meta == nil || !bytes.Equal(meta.Get(keyFormat), []byte{format}) {
			t.Error("the new file has no format in its meta bucket")
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestNotStateErrorIs(t *testing.T) {
	err := error(&NotStateError{Path: "/var/lib/berth/state.db", Problem: NotStateEmpty})
	if !errors.Is(err, ErrNotState) || errors.Is(err, ErrCorrupt) {
		t.Errorf("%v: errors.Is ErrNotState %v, ErrCorrupt %v", err, errors.Is(err, ErrNotState), errors.Is(err, ErrCorrupt))
	}
}

// TestOpenTruncated: a state file cut short (a copy that stopped, a full
// disk in an old bbolt) is refused as corrupt; bbolt itself reads a page
// past its end through its mapping, and the process dies of SIGBUS.
func TestOpenTruncated(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db") // no check at cleanup: it would read past the end
	s, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 200 {
		if err := s.PutJob(JobRecord{Name: fmt.Sprintf("job-%03d", i), Fingerprint: strings.Repeat("f", 200)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, size := range []int64{16384, 8192} {
		if err := os.Truncate(path, size); err != nil {
			t.Fatal(err)
		}
		_, err := Open(path, Options{})
		if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "cut short") {
			t.Errorf("open of the state cut to %d bytes of %d: %v, want it corrupt, cut short", size, fi.Size(), err)
		}
	}
}
