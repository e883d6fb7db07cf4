package supervisor

import "sync"

// mailbox is an unbounded queue with a coalescing wake-up: the daemon's
// loop posts to a job without ever blocking on it, and the job drains
// everything posted each time it wakes.
//
// Its owner may also sleep: end its goroutine while it has nothing to do
// but wait (sleep), to be started again by resume at the next post or
// wakeUp. A thousand running jobs then cost no goroutine, nor the 4 KiB of
// stack that each parks with at least.
type mailbox[T any] struct {
	mu    sync.Mutex // guards items and asleep
	items []T
	wake  chan struct{} // capacity 1; a pending wake-up covers every item
	// asleep: the owner's goroutine has ended, and resume starts it again.
	asleep bool
	resume func()
	// bounce, once set by end, takes what is posted after the owner's
	// goroutine ended for good, at once and in the poster's goroutine.
	bounce func(T)
}

func newMailbox[T any]() *mailbox[T] {
	return &mailbox[T]{wake: make(chan struct{}, 1)}
}

func (m *mailbox[T]) post(item T) {
	m.mu.Lock()
	if m.bounce != nil {
		m.mu.Unlock()
		m.bounce(item)
		return
	}
	m.items = append(m.items, item)
	asleep := m.asleep
	m.asleep = false
	m.mu.Unlock()
	select {
	case m.wake <- struct{}{}:
	default:
	}
	if asleep {
		m.resume()
	}
}

// wakeUp starts the owner's goroutine again if it sleeps: something it
// waits for other than a message has happened (it must see that without
// blocking, as a closed channel). It does not block.
func (m *mailbox[T]) wakeUp() {
	m.mu.Lock()
	asleep := m.asleep
	m.asleep = false
	m.mu.Unlock()
	if asleep {
		m.resume()
	}
}

// sleep, called by the owner's goroutine, says whether it may end now:
// nothing is posted and may is true, both under the lock that post and
// wakeUp take, so that what comes after is not missed. may must not block
// or post.
func (m *mailbox[T]) sleep(may func() bool) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.items) > 0 || !may() {
		return false
	}
	m.asleep = true
	return true
}

// end, called by the owner's goroutine as it ends for good, returns what
// is still posted; what is posted from then on is handed to bounce (which
// must not post to m), so that nothing waits on an owner that is gone.
func (m *mailbox[T]) end(bounce func(T)) []T {
	m.mu.Lock()
	defer m.mu.Unlock()
	items := m.items
	m.items, m.bounce = nil, bounce
	return items
}

func (m *mailbox[T]) drain() []T {
	m.mu.Lock()
	defer m.mu.Unlock()
	items := m.items
	m.items = nil
	return items
}

// signal is a coalescing "something changed" notification: any number of
// raises before the receiver looks count as one.
type signal chan struct{}

func newSignal() signal { return make(signal, 1) }

func (s signal) raise() {
	select {
	case s <- struct{}{}:
	default:
	}
}
