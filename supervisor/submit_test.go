package supervisor

import (
	"context"
	"testing"
)

// TestOneEach: a caller's second take waits for their first to end;
// another caller's does not.
func TestOneEach(t *testing.T) {
	var o oneEach
	ctx := context.Background()
	first, ok := o.take(ctx, 1001)
	if !ok {
		t.Fatal("the first take failed")
	}
	if _, ok := o.take(ctx, 1002); !ok {
		t.Fatal("another caller waited for the first")
	}
	second := make(chan func())
	go func() {
		release, _ := o.take(ctx, 1001)
		second <- release
	}()
	// While the first is held, a take of the same caller with a deadline
	// gives up.
	short, cancel := context.WithCancel(ctx)
	cancel()
	if _, ok := o.take(short, 1001); ok {
		t.Fatal("a second take of the same caller went through while the first is held")
	}
	select {
	case <-second:
		t.Fatal("the same caller's second take went through while the first is held")
	default:
	}
	first()
	(<-second)()
}
