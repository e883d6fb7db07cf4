package supervisor

import (
	"context"
	"testing"
	"time"
)

// TestOneEach: a caller's second take waits for their first to end;
// another caller's does not.
func TestOneEach(t *testing.T) {
	t.Parallel()
	var o perCaller
	ctx := context.Background()
	first, ok := o.take(ctx, 1001)
	if !ok {
		t.Fatal("the first take failed")
	}
	if _, ok := o.take(ctx, 1002); !ok {
		t.Fatal("another caller waited for the first")
	}
	// While the first is held, a take of the same caller waits until its
	// context ends, and fails then.
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if _, ok := o.take(short, 1001); ok {
		t.Fatal("a second take of the same caller went through while the first is held")
	}
	first()
	second, ok := o.take(ctx, 1001)
	if !ok {
		t.Fatal("the caller's take after the first ended failed")
	}
	second()
}
