package runner

import (
	"sync"
	"time"
)

// KillTimer is when a stop under way sends its SIGKILL: its stop_timeout
// after the stop signal, or wherever MoveKill puts it meanwhile (the
// stop_timeout was edited). The zero value is ready; it is armed once, by
// the first Start.
type KillTimer struct {
	mu      sync.Mutex
	at      time.Time // when the SIGKILL comes; zero until Start or Move
	timer   *time.Timer
	stopped bool // by Stop: a Move arms nothing
	fired   chan struct{}
	once    sync.Once
}

// Start arms the timer for timeout from now, unless Move set it before
// (a stop_timeout edited before the stop's waiting began), and returns a
// channel closed when it fires. A later Start returns the same channel
// and moves nothing.
func (k *KillTimer) Start(timeout time.Duration) <-chan struct{} {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.fired == nil {
		k.fired = make(chan struct{})
		if k.at.IsZero() {
			k.at = time.Now().Add(timeout)
		}
		k.timer = time.AfterFunc(time.Until(k.at), k.fire)
	}
	return k.fired
}

// Move puts the SIGKILL left from now (at once where left is zero or
// less). A timer that has fired stays fired: its SIGKILL was sent.
func (k *KillTimer) Move(left time.Duration) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.at = time.Now().Add(left)
	if k.timer != nil && !k.stopped {
		k.timer.Reset(left)
	}
}

// Stop disarms the timer: the stop is over.
func (k *KillTimer) Stop() {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.stopped = true
	if k.timer != nil {
		k.timer.Stop()
	}
}

func (k *KillTimer) fire() { k.once.Do(func() { close(k.fired) }) }
