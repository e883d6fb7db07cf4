package supervisor

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/berthd/berth/supervisor/testkit"
)

// TestMailboxSleep: an owner that sleeps whenever its mailbox is empty
// misses no post, however the posts and its sleeps interleave, and never
// runs twice at once.
func TestMailboxSleep(t *testing.T) {
	t.Parallel()
	m := newMailbox[int]()
	var got atomic.Int64
	var owners, resumes atomic.Int32
	var owner func()
	owner = func() {
		for {
			<-m.wake
			for _, v := range m.drain() {
				got.Add(int64(v))
			}
			if m.sleep(func() bool { owners.Add(-1); return true }) {
				return
			}
		}
	}
	m.resume = func() {
		resumes.Add(1)
		if owners.Add(1) != 1 {
			t.Error("an owner started while one runs")
		}
		go owner()
	}
	m.mu.Lock()
	m.asleep = true // as after a sleep: the first post starts it
	m.mu.Unlock()

	const posters, each = 4, 2000
	var wg sync.WaitGroup
	for range posters {
		wg.Go(func() {
			for range each {
				m.post(1)
			}
		})
	}
	wg.Wait()
	testkit.WaitFor(t, 10*time.Second, "every post taken", func() bool { return got.Load() == posters*each })
	if resumes.Load() < 2 {
		t.Logf("the owner slept %d times: the interleavings were not tried", resumes.Load()-1)
	}
}

// TestMailboxSleepRefused: an owner does not sleep on a post it has not
// taken, nor when it may not; posts or wakeUps to one that sleeps start
// it once.
func TestMailboxSleepRefused(t *testing.T) {
	t.Parallel()
	m := newMailbox[int]()
	resumed := 0
	m.resume = func() { resumed++ }
	m.post(1)
	if m.sleep(func() bool { return true }) {
		t.Error("slept with a post not taken")
	}
	m.drain()
	if m.sleep(func() bool { return false }) {
		t.Error("slept where it may not")
	}
	if !m.sleep(func() bool { return true }) {
		t.Fatal("did not sleep with nothing posted")
	}
	m.post(2)
	m.post(3)
	if resumed != 1 {
		t.Errorf("two posts to a sleeping owner started it %d times, want 1", resumed)
	}
	// A wakeUp of an owner that sleeps starts it; of one that runs, nothing.
	m.drain()
	if !m.sleep(func() bool { return true }) {
		t.Fatal("did not sleep with nothing posted")
	}
	m.wakeUp()
	m.wakeUp()
	if resumed != 2 {
		t.Errorf("two wakeUps of a sleeping owner started it %d times, want 1", resumed-1)
	}
}

// TestMailboxEnd: what was posted before the owner ended is handed back by
// end, and what is posted after it goes to bounce at once, nothing left
// waiting on an owner that is gone.
func TestMailboxEnd(t *testing.T) {
	t.Parallel()
	m := newMailbox[int]()
	m.resume = func() { t.Error("an ended owner was started again") }
	m.post(1)
	var bounced []int
	if left := m.end(func(v int) { bounced = append(bounced, v) }); len(left) != 1 || left[0] != 1 {
		t.Errorf("end handed back %v, want [1]", left)
	}
	m.post(2)
	if len(bounced) != 1 || bounced[0] != 2 {
		t.Errorf("a post after end bounced %v, want [2]", bounced)
	}
	if left := m.drain(); len(left) != 0 {
		t.Errorf("a post after end was kept: %v", left)
	}
}
