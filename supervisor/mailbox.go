package supervisor

import "sync"

// mailbox is an unbounded queue with a coalescing wake-up: the daemon's
// loop posts to a job without ever blocking on it, and the job drains
// everything posted each time it wakes.
type mailbox[T any] struct {
	mu    sync.Mutex // guards items
	items []T
	wake  chan struct{} // capacity 1; a pending wake-up covers every item
}

func newMailbox[T any]() *mailbox[T] {
	return &mailbox[T]{wake: make(chan struct{}, 1)}
}

func (m *mailbox[T]) post(item T) {
	m.mu.Lock()
	m.items = append(m.items, item)
	m.mu.Unlock()
	select {
	case m.wake <- struct{}{}:
	default:
	}
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
