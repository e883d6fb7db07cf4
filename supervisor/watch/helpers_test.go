package watch

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestMain lets the test binary double as a CPU hog for BenchmarkQuiet's
// loaded runs (Go's own helperCommand pattern), so the load is real
// processes competing for the CPUs without depending on stress(1).
func TestMain(m *testing.M) {
	if os.Getenv("BERTH_WATCH_SPIN") == "1" {
		for {
		}
	}
	os.Exit(m.Run())
}

// fakeAccounts answers the ownership rule's lookups from tables.
type fakeAccounts struct {
	users  map[int]string
	groups map[int]fakeGroup
}

type fakeGroup struct {
	name     string
	members  []string
	unlisted bool
}

func (f fakeAccounts) UserName(uid int) (string, error) {
	if n, ok := f.users[uid]; ok {
		return n, nil
	}
	return "", fmt.Errorf("uid %d has no name", uid)
}

func (f fakeAccounts) Group(gid int) (string, []string, error) {
	g, ok := f.groups[gid]
	if !ok {
		return "", nil, ErrGroupUnlisted
	}
	if g.unlisted {
		return g.name, nil, ErrGroupUnlisted
	}
	return g.name, g.members, nil
}

// writeFile writes a job file with mode 0644 whatever the umask, because
// the ownership rule would refuse a group-writable file under umask 002.
func writeFile(t testing.TB, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
}

func mkdir(t testing.TB, path string) {
	t.Helper()
	if err := os.MkdirAll(path, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, 0o755); err != nil {
		t.Fatal(err)
	}
}

// jobsDir is a fresh jobs directory that passes the ownership rule. It is
// a child of t.TempDir() so that tests can remove and re-create it.
func jobsDir(t testing.TB) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "jobs.d")
	mkdir(t, dir)
	return dir
}

// openToAll lets others through every directory from os.TempDir() down to
// dir (t.TempDir() makes them 0700), so that a link to a file there passes
// the rule that a link's target be readable by everyone.
func openToAll(t testing.TB, dir string) {
	t.Helper()
	tmp := filepath.Clean(os.TempDir())
	for d := filepath.Clean(dir); strings.HasPrefix(d, tmp+"/"); d = filepath.Dir(d) {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
}

func newTestScanner(dir string) *Scanner {
	return NewScanner(dir, ScanOptions{DaemonUID: os.Getuid()})
}

func scan(t testing.TB, s *Scanner) Scan {
	t.Helper()
	got, err := s.Scan()
	if err != nil {
		t.Fatalf("Scan: %v", err)
	}
	return got
}

// summary renders a Scan compactly and deterministically, for comparisons
// and failure messages: "changed a.lua=x b.lua=y; removed c.lua; refused d.lua(too big)".
func summary(dir string, s Scan) string {
	rel := func(p string) string { return strings.TrimPrefix(p, dir+"/") }
	var parts []string
	if len(s.Changed) > 0 {
		var c []string
		for p, b := range s.Changed {
			c = append(c, rel(p)+"="+string(b))
		}
		sort.Strings(c)
		parts = append(parts, "changed "+strings.Join(c, " "))
	}
	if len(s.Removed) > 0 {
		var r []string
		for _, p := range s.Removed {
			r = append(r, rel(p))
		}
		parts = append(parts, "removed "+strings.Join(r, " "))
	}
	if len(s.Refused) > 0 {
		var r []string
		for p, err := range s.Refused {
			var re *RefusedError
			reason := "?"
			if errors.As(err, &re) {
				reason = re.Reason.String()
			}
			r = append(r, rel(p)+"("+reason+")")
		}
		sort.Strings(r)
		parts = append(parts, "refused "+strings.Join(r, " "))
	}
	if s.DirMissing {
		parts = append(parts, "dir missing")
	}
	return strings.Join(parts, "; ")
}

// startWatcher creates a Watcher on dir and runs it until the test ends;
// the cleanup waits for Run to return, so no goroutine outlives the test.
func startWatcher(t testing.TB, dir string, opts WatchOptions) *Watcher {
	t.Helper()
	w, err := NewWatcher(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	runWatcher(t, w)
	return w
}

func runWatcher(t testing.TB, w *Watcher) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Run: %v", err)
			}
		case <-time.After(5 * time.Second):
			t.Error("Run did not return after its context ended")
		}
	})
}

// waitSignal waits for a receive on Changes, failing the test at the
// deadline.
func waitSignal(t testing.TB, w *Watcher, within time.Duration) {
	t.Helper()
	select {
	case <-w.Changes():
	case <-time.After(within):
		t.Fatalf("no signal within %v", within)
	}
}

// drainQuiet consumes signals until none has come for `quiet`: after it,
// every burst that was in flight has been delivered, so a signal that
// follows comes from what the test does next.
func drainQuiet(w *Watcher, quiet time.Duration) {
	for {
		select {
		case <-w.Changes():
		case <-time.After(quiet):
			return
		}
	}
}

// view is what a daemon would know about the directory, kept by applying
// scans: path → content.
type view map[string]string

func (v view) apply(s Scan) {
	for _, p := range s.Removed {
		delete(v, p)
	}
	for p, b := range s.Changed {
		v[p] = string(b)
	}
}

// settle does what the daemon does (on each signal, scan) until the view
// equals want, and returns every scan made. It fails at the deadline.
func settle(t testing.TB, w *Watcher, s *Scanner, v view, want view, within time.Duration) []Scan {
	t.Helper()
	deadline := time.After(within)
	var scans []Scan
	for !maps.Equal(v, want) {
		select {
		case <-w.Changes():
		case <-deadline:
			t.Fatalf("view after %d scans is %v, want %v", len(scans), v, want)
		}
		sc := scan(t, s)
		scans = append(scans, sc)
		v.apply(sc)
	}
	return scans
}

// logRecorder collects Logf calls from the watcher's goroutine.
type logRecorder struct {
	mu   sync.Mutex // guards msgs
	msgs []string
	seen chan string // every message, for tests that wait for one
}

func newLogRecorder() *logRecorder { return &logRecorder{seen: make(chan string, 1024)} }

func (r *logRecorder) logf(msg string, kv ...any) {
	r.mu.Lock()
	r.msgs = append(r.msgs, msg)
	r.mu.Unlock()
	select {
	case r.seen <- msg:
	default:
	}
}

func (r *logRecorder) waitFor(t testing.TB, msg string, within time.Duration) {
	t.Helper()
	deadline := time.After(within)
	for {
		select {
		case got := <-r.seen:
			if got == msg {
				return
			}
		case <-deadline:
			r.mu.Lock()
			defer r.mu.Unlock()
			t.Fatalf("no log %q within %v; got %q", msg, within, r.msgs)
		}
	}
}
