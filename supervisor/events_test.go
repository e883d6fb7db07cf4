package supervisor

import (
	"testing"
	"time"
)

// TestChangeFeed: a reader sees the latest change and is woken by the next
// one; one slower than the changes skips to the latest, with a larger
// sequence number; after end, every reader, present or to come, is told
// the feed is over, and a publish changes nothing.
func TestChangeFeed(t *testing.T) {
	t.Parallel()
	f := newChangeFeed()
	first, next, ended := f.latest()
	if ended || first.Seq == 0 || first.Kind != ChangeStatus {
		t.Fatalf("a new feed: %+v, ended %v", first, ended)
	}
	select {
	case <-next:
		t.Fatal("woken before any change")
	default:
	}
	for range 3 {
		f.publish(ChangeStatus)
	}
	select {
	case <-next:
	case <-time.After(time.Second):
		t.Fatal("not woken by a change")
	}
	c, next, _ := f.latest()
	if c.Seq != first.Seq+3 {
		t.Errorf("after three changes seq %d, want %d", c.Seq, first.Seq+3)
	}
	f.publish(ChangeStopping)
	f.end()
	<-next
	last, over, ended := f.latest()
	if !ended || last.Kind != ChangeStopping {
		t.Errorf("after end: %+v, ended %v", last, ended)
	}
	<-over // closed for good: a reader that comes after end does not wait
	f.publish(ChangeStatus)
	f.end()
	if again, _, _ := f.latest(); again != last {
		t.Errorf("a publish after end changed the feed: %+v", again)
	}
}
