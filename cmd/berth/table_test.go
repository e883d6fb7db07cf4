package main

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/berthd/berth/accounting"
)

// TestCountdownAddsUpWithAge: a stop's AGE and its "SIGKILL in" add up to
// its stop_timeout, and a backoff's AGE and its "runs again in" to its
// delay, whenever they are read (trial AI: 2s and 17s of a 20 s stop).
func TestCountdownAddsUpWithAge(t *testing.T) {
	began := time.Date(2026, 12, 7, 3, 0, 0, 0, time.UTC)
	const total = 20 * time.Second
	for _, gone := range []time.Duration{0, 100 * time.Millisecond, 2900 * time.Millisecond, 3 * time.Second, 17500 * time.Millisecond, 19999 * time.Millisecond} {
		age, _ := strconv.Atoi(strings.TrimSuffix(compactAge(began, began.Add(gone)), "s"))
		for _, msg := range []string{msgKillIn(total - gone), msgRetryIn(total - gone)} {
			f := strings.Fields(msg)
			if f[len(f)-1] == "now" {
				t.Errorf("%v into a %v wait: %q, with time left (trial AX: \"now\" with 0.8 s left)", gone, total, msg)
				continue
			}
			left, err := accounting.ParseDuration(f[len(f)-1])
			if err != nil {
				t.Fatalf("%q: %v", msg, err)
			}
			if sum := time.Duration(age)*time.Second + left; sum != total {
				t.Errorf("%v into a %v wait: AGE %ds and %q add up to %v", gone, total, age, msg, sum)
			}
		}
	}
}
