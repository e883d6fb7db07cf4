package testkit

import (
	"strings"
	"sync"
)

// Buffer collects what a logger writes while the test reads it.
type Buffer struct {
	mu sync.Mutex // guards b
	b  strings.Builder
}

func (l *Buffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *Buffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
