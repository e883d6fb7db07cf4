package store

import (
	"os"
	"sync"
	"testing"
	"time"

	"github.com/berthd/berth/supervisor/testkit"
)

// goneLog records what OnGone was told.
type goneLog struct {
	mu   sync.Mutex // guards told
	told []*GoneError
}

func (g *goneLog) onGone(e *GoneError) {
	g.mu.Lock()
	g.told = append(g.told, e)
	g.mu.Unlock()
}

func (g *goneLog) get() []*GoneError {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]*GoneError(nil), g.told...)
}

// TestGoneAtCommit: the writer notices at its next commit that the state
// file was removed, then replaced, then put back, and says each once.
func TestGoneAtCommit(t *testing.T) {
	var log goneLog
	s, path := openTest(t, Options{OnGone: log.onGone})
	put := func() {
		t.Helper()
		if err := s.PutJob(JobRecord{Name: "a"}); err != nil {
			t.Fatal(err)
		}
	}
	put()
	if g := s.Gone(); g != nil {
		t.Fatalf("Gone() = %v with the file in place", g)
	}
	keep := path + ".keep"
	if err := os.Link(path, keep); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	put()
	if g := s.Gone(); g == nil || g.Path != path || g.Replaced {
		t.Fatalf("Gone() = %+v after the file was removed, want removed", g)
	}
	put()
	if err := os.WriteFile(path, []byte("another"), 0o600); err != nil {
		t.Fatal(err)
	}
	put()
	if g := s.Gone(); g == nil || !g.Replaced {
		t.Fatalf("Gone() = %+v after another file took its place, want replaced", g)
	}
	if err := os.Rename(keep, path); err != nil {
		t.Fatal(err)
	}
	put()
	if g := s.Gone(); g != nil {
		t.Fatalf("Gone() = %+v after the very file was put back", g)
	}
	told := log.get()
	if len(told) != 3 || told[0] == nil || told[0].Replaced || told[1] == nil || !told[1].Replaced || told[2] != nil {
		t.Errorf("OnGone told %v, want removed, replaced, back: once each", told)
	}
}

// TestGoneWhileIdle: with nothing committed, the writer still looks.
func TestGoneWhileIdle(t *testing.T) {
	var log goneLog
	s, path := openTest(t, Options{OnGone: log.onGone, pathCheckEvery: time.Millisecond})
	keep := path + ".keep"
	if err := os.Link(path, keep); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, 10*time.Second, "the removal to be noticed", func() bool { return s.Gone() != nil })
	if told := log.get(); len(told) != 1 || told[0].Replaced {
		t.Errorf("OnGone told %v, want removed once", told)
	}
	// Back, for the check at cleanup.
	if err := os.Rename(keep, path); err != nil {
		t.Fatal(err)
	}
}
