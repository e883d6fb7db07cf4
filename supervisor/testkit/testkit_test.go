package testkit

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// recorder stands in for a test, to see what WaitFor and Golden report.
// What it does not override goes to the real test.
type recorder struct {
	testing.TB
	errors []string
	fatal  bool
}

func (r *recorder) Helper() {}

func (r *recorder) Errorf(format string, args ...any) {
	r.errors = append(r.errors, fmt.Sprintf(format, args...))
}

func (r *recorder) Fatalf(format string, args ...any) {
	r.Errorf(format, args...)
	r.fatal = true
	runtime.Goexit()
}

func (r *recorder) Fatal(args ...any) { r.Fatalf("%s", fmt.Sprint(args...)) }

func (r *recorder) Logf(string, ...any) {}

// record runs f with a recorder on a goroutine of its own, as the testing
// package runs a test, so that a Fatalf ends f and not the real test.
func record(t *testing.T, f func(tb testing.TB)) *recorder {
	r := &recorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		f(r)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the helper did not return within 10s")
	}
	return r
}

func TestWaitForHolds(t *testing.T) {
	calls := 0
	r := record(t, func(tb testing.TB) {
		WaitFor(tb, 5*time.Second, "the third call", func() bool { calls++; return calls == 3 })
	})
	if len(r.errors) != 0 || calls != 3 {
		t.Fatalf("errors %q after %d calls, want none after 3", r.errors, calls)
	}
}

func TestWaitForTimesOut(t *testing.T) {
	calls := 0
	began := time.Now()
	r := record(t, func(tb testing.TB) {
		WaitFor(tb, 300*time.Millisecond, "something that never happens", func() bool { calls++; return false })
	})
	took := time.Since(began)
	if !r.fatal || len(r.errors) != 1 || r.errors[0] != "timed out after 300ms waiting for something that never happens" {
		t.Fatalf("fatal %v, errors %q", r.fatal, r.errors)
	}
	if took < 300*time.Millisecond {
		t.Errorf("gave up after %v, before its timeout", took)
	}
	// 1+2+4+…+32 ms, then a look every 50 ms: about a dozen, not the 300
	// a fixed millisecond pause would make, nor the one a long sleep would.
	if calls < 3 || calls > 30 {
		t.Errorf("%d looks in 300ms, want between 3 and 30", calls)
	}
}

func TestGoldenEqual(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.golden")
	os.WriteFile(path, []byte("one\ntwo\n"), 0o644)
	r := record(t, func(tb testing.TB) { Golden(tb, path, []byte("one\ntwo\n")) })
	if len(r.errors) != 0 {
		t.Fatalf("errors %q for equal contents", r.errors)
	}
}

func TestGoldenDiffers(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.golden")
	os.WriteFile(path, []byte("a\nb\nc\nd\ne\nf\n"), 0o644)
	r := record(t, func(tb testing.TB) { Golden(tb, path, []byte("a\nb\nc\nd\nE\nf\n")) })
	if r.fatal || len(r.errors) != 1 {
		t.Fatalf("fatal %v, errors %q; want one error", r.fatal, r.errors)
	}
	msg := r.errors[0]
	for _, want := range []string{
		path + " differs",
		"go test ./supervisor/testkit -run '^TestGoldenDiffers$' -update rewrites it",
		"     2  b\n     3  c\n     4  d\n-    5  e\n+    5  E\n",
		"(lines: 6 in the golden file, 6 got)",
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("the message lacks %q:\n%s", want, msg)
		}
	}
	if strings.Contains(msg, "  a\n") {
		t.Errorf("the message shows more than 3 lines of context:\n%s", msg)
	}
}

func TestGoldenMissing(t *testing.T) {
	path := filepath.Join(t.TempDir(), "none.golden")
	r := record(t, func(tb testing.TB) { Golden(tb, path, []byte("x\n")) })
	if !r.fatal || len(r.errors) != 1 || !strings.Contains(r.errors[0], "-update creates it") {
		t.Fatalf("fatal %v, errors %q", r.fatal, r.errors)
	}
}

func TestGoldenUpdate(t *testing.T) {
	defer func(was bool) { *update = was }(*update)
	*update = true
	path := filepath.Join(t.TempDir(), "new", "x.golden")
	r := record(t, func(tb testing.TB) { Golden(tb, path, []byte("fresh\n")) })
	if len(r.errors) != 0 {
		t.Fatalf("errors %q", r.errors)
	}
	if b, err := os.ReadFile(path); err != nil || string(b) != "fresh\n" {
		t.Fatalf("wrote %q, %v", b, err)
	}
}

func TestFirstDiff(t *testing.T) {
	for _, tc := range []struct {
		name, want, got, diff string
	}{
		{"first line", "x\n", "y\n",
			"-    1  x\n+    1  y\n(lines: 1 in the golden file, 1 got)"},
		{"a line more", "a\n", "a\nb\n",
			"     1  a\n-    2  (end of file)\n+    2  b\n(lines: 1 in the golden file, 2 got)"},
		{"no final newline", "a\nb\n", "a\nb",
			"     1  a\n-    2  \"b\\n\"\n+    2  \"b\"\n(lines: 2 in the golden file, 2 got)"},
		{"trailing blank", "a \n", "a\n",
			"-    1  \"a \\n\"\n+    1  \"a\\n\"\n(lines: 1 in the golden file, 1 got)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := firstDiff(tc.want, tc.got); got != tc.diff {
				t.Errorf("firstDiff:\n%s\nwant:\n%s", got, tc.diff)
			}
		})
	}
}
