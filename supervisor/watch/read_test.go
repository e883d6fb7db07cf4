package watch

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// TestReadJobFile: a file named outright is read by the scanner's rules,
// with its directories checked as directories on the way (a sticky one
// included, so that /tmp/x.lua can be checked).
func TestReadJobFile(t *testing.T) {
	base := t.TempDir()
	ok := filepath.Join(base, "ok.lua")
	writeFile(t, ok, "job")
	fifo := filepath.Join(base, "pipe.lua")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	open := filepath.Join(base, "open")
	mkdir(t, open)
	writeFile(t, filepath.Join(open, "x.lua"), "job")
	if err := os.Chmod(open, 0o777); err != nil {
		t.Fatal(err)
	}
	sticky := filepath.Join(base, "sticky")
	mkdir(t, sticky)
	writeFile(t, filepath.Join(sticky, "x.lua"), "job")
	if err := os.Chmod(sticky, 0o777|os.ModeSticky); err != nil {
		t.Fatal(err)
	}
	opts := ScanOptions{DaemonUID: os.Getuid(), MaxFileBytes: 16}
	big := filepath.Join(base, "big.lua")
	writeFile(t, big, "0123456789abcdefX")

	for _, tc := range []struct {
		path string
		want Reason // 0: read
		at   string
		gone bool
	}{
		{path: ok},
		{path: filepath.Join(sticky, "x.lua")},
		{path: fifo, want: NotRegular},
		{path: "/dev/zero", want: NotRegular},
		{path: "/", want: NotRegular},
		{path: big, want: TooBig},
		{path: filepath.Join(open, "x.lua"), want: WritableByOthers, at: open},
		{path: filepath.Join(base, "nothing.lua"), gone: true},
		{path: filepath.Join(ok, "x.lua"), gone: true},
	} {
		t.Run(tc.path, func(t *testing.T) {
			done := make(chan struct{})
			var (
				got []byte
				err error
			)
			go func() {
				defer close(done)
				got, err = ReadJobFile(tc.path, opts)
			}()
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				t.Fatal("ReadJobFile has not returned after 10s")
			}
			var re *RefusedError
			switch {
			case tc.gone:
				if !errors.Is(err, fs.ErrNotExist) {
					t.Fatalf("got %q, %v; want fs.ErrNotExist", got, err)
				}
			case tc.want == 0:
				if err != nil || string(got) != "job" {
					t.Fatalf("got %q, %v; want it read", got, err)
				}
			case !errors.As(err, &re) || re.Reason != tc.want || re.At != tc.at || !re.Named || re.Path != tc.path:
				t.Fatalf("got %q, %#v; want a %s refusal of %s at %q", got, err, tc.want, tc.path, tc.at)
			default:
				t.Log(re)
			}
		})
	}
}
