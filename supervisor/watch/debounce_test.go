package watch

import (
	"testing"
	"time"
)

func TestDebouncer(t *testing.T) {
	const q = 10 * time.Millisecond
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	type ev struct {
		ms   int
		name string
		p    presence
	}
	cases := []struct {
		name   string
		events []ev
		want   int // ms after t0
	}{
		{"one event", []ev{{0, "f.lua", present}}, 10},
		{"a burst: quiet after the last", []ev{{0, "f.lua", present}, {3, "f.lua", present}, {8, "f.lua", present}}, 18},
		{"a stream: bounded by maxWait after the first", []ev{{0, "", unknown}, {9, "", unknown}, {18, "", unknown}, {27, "", unknown}, {36, "", unknown}, {45, "", unknown}, {54, "", unknown}, {63, "", unknown}, {72, "", unknown}, {81, "", unknown}, {90, "", unknown}, {99, "", unknown}}, 100},
		{"a removal waits the grace", []ev{{0, "f.lua", absent}}, 50},
		{"emptied: waits the grace", []ev{{0, "f.lua", absent}, {1, "f.lua", unknown}}, 51},
		{"vim: renamed away, then back", []ev{
			{0, "", present}, {0, "", absent}, // 4913
			{1, "f.lua", absent}, {1, "", present}, // f.lua~
			{2, "f.lua", present}, {2, "f.lua", present}, {3, "", absent},
		}, 13},
		{"one back, another still gone", []ev{{0, "a.lua", absent}, {1, "b.lua", absent}, {2, "a.lua", present}}, 52},
		{"the grace is bounded too", []ev{{0, "", unknown}, {80, "f.lua", absent}}, 100},
		{"an empty file written to is back", []ev{{0, "f.lua", absent}, {1, "f.lua", present}}, 11},
		{"chmod does not bring a file back", []ev{{0, "f.lua", absent}, {1, "f.lua", unknown}}, 51},
	}
	// A grace past maxWait (RemovalGrace is) holds through a stream.
	long := newDebouncer(q, 100*q, 10*q)
	for _, ms := range []int{0, 9, 18, 27, 36, 45, 54, 63, 72, 81, 90, 99, 108} {
		name := ""
		if ms == 9 {
			name = "f.lua" // emptied, and not yet written again
		}
		long.note(at(ms), name, absent)
	}
	if got := long.deadline(); !got.Equal(at(1000)) {
		t.Errorf("a file emptied amid a stream: deadline at %v, want the grace after the first event, 1000ms", got.Sub(t0))
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := newDebouncer(q, 5*q, 10*q)
			for _, e := range tc.events {
				d.note(at(e.ms), e.name, e.p)
			}
			if got := d.deadline(); !got.Equal(at(tc.want)) {
				t.Fatalf("deadline at %v, want %dms", got.Sub(t0), tc.want)
			}
			// After firing, a new burst starts from scratch.
			d.fired()
			d.note(at(1000), "g.lua", present)
			if got := d.deadline(); !got.Equal(at(1010)) {
				t.Fatalf("after firing: deadline at %v, want 1010ms", got.Sub(t0))
			}
		})
	}
}
