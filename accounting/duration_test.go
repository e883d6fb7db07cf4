package accounting

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestParseDuration(t *testing.T) {
	tests := []struct {
		in   string
		want time.Duration
	}{
		{"90m", 90 * time.Minute},
		{"1h30m", 90 * time.Minute},
		{"500ms", 500 * time.Millisecond},
		{"10s", 10 * time.Second},
		{"2d", 48 * time.Hour},
		{"1d12h", 36 * time.Hour},
		{"1.5d", 36 * time.Hour},
		{".5d", 12 * time.Hour},
		{"0.25d1h", 7 * time.Hour},
		{"1.5h", 90 * time.Minute},
		{"+2d", 48 * time.Hour},
		{"+2h", 2 * time.Hour},
		{"0d", 0},
		{"0s", 0},
		{"0", 0}, // as time.ParseDuration
		{"+0", 0},
		{" 12h ", 12 * time.Hour},
		// Go takes units in any order and more than once; days too.
		{"1h1d", 25 * time.Hour},
		{"1d1d", 48 * time.Hour},
		{"1h0.5d", 13 * time.Hour},
		{"30m1h", 90 * time.Minute},
		{"1d2h1d", 50 * time.Hour},
		{"1us", time.Microsecond},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseDuration(tt.in)
			if err != nil {
				t.Fatalf("ParseDuration(%q): %v", tt.in, err)
			}
			if got != tt.want {
				t.Fatalf("ParseDuration(%q) = %v, want %v", tt.in, got, tt.want)
			}
		})
	}
}

func TestParseDurationErrors(t *testing.T) {
	tests := []struct {
		in      string
		problem DurationProblem
		message string
	}{
		{"30", DurationNoUnit, `duration "30" has no unit; write e.g. "30s" or "30m"`},
		{"0.0", DurationNoUnit, `duration "0.0" has no unit; write e.g. "0.0s" or "0.0m"`},
		{"1.5", DurationNoUnit, `duration "1.5" has no unit; write e.g. "1.5s" or "1.5m"`},
		{"soon", DurationMalformed, `duration "soon" is not a duration; write a number with a unit: ns, us, ms, s, m, h or d, e.g. "90s", "1h30m", "2d"`},
		{"", DurationMalformed, `duration "" is not a duration; write a number with a unit: ns, us, ms, s, m, h or d, e.g. "90s", "1h30m", "2d"`},
		{"1.5.5d", DurationMalformed, `duration "1.5.5d" is not a duration; write a number with a unit: ns, us, ms, s, m, h or d, e.g. "90s", "1h30m", "2d"`},
		{"1e3d", DurationMalformed, `duration "1e3d" is not a duration; write a number with a unit: ns, us, ms, s, m, h or d, e.g. "90s", "1h30m", "2d"`},
		{"d", DurationMalformed, `duration "d" is not a duration; write a number with a unit: ns, us, ms, s, m, h or d, e.g. "90s", "1h30m", "2d"`},
		{"1H", DurationMalformed, `duration "1H" is not a duration (did you mean "1h"?); write a number with a unit: ns, us, ms, s, m, h or d, e.g. "90s", "1h30m", "2d"`},
		{"1H30M", DurationMalformed, `duration "1H30M" is not a duration (did you mean "1h30m"?); write a number with a unit: ns, us, ms, s, m, h or d, e.g. "90s", "1h30m", "2d"`},
		{"2w", DurationMalformed, `duration "2w" is not a duration (did you mean "14d"?); write a number with a unit: ns, us, ms, s, m, h or d, e.g. "90s", "1h30m", "2d"`},
		{"1h 30m", DurationSpaced, `duration "1h 30m" has spaces in it; write it without: "1h30m"`},
		{"2d\t6h", DurationSpaced, `duration "2d\t6h" has spaces in it; write it without: "2d6h"`},
		{"1 h", DurationSpaced, `duration "1 h" has spaces in it; write it without: "1h"`},
		{"1 h 30 m", DurationSpaced, `duration "1 h 30 m" has spaces in it; write it without: "1h30m"`},
		{"1 x", DurationMalformed, `duration "1 x" is not a duration; write a number with a unit: ns, us, ms, s, m, h or d, e.g. "90s", "1h30m", "2d"`},
		{strings.Repeat("1", 100) + "s", DurationLong, `duration "111111111111111111111111"… (101 bytes) is longer than any duration is written; write a number with a unit: ns, us, ms, s, m, h or d, e.g. "90s", "1h30m", "2d"`},
		{"1 2h", DurationMalformed, `duration "1 2h" is not a duration; write a number with a unit: ns, us, ms, s, m, h or d, e.g. "90s", "1h30m", "2d"`},
		{"106751d 100h", DurationTooLarge, `duration "106751d 100h" is too long (at most about 290 years)`},
		{"++2d", DurationMalformed, `duration "++2d" is not a duration; write a number with a unit: ns, us, ms, s, m, h or d, e.g. "90s", "1h30m", "2d"`},
		{"99999999999999999999d", DurationTooLarge, `duration "99999999999999999999d" is too long (at most about 290 years)`},
		{"106752.5d", DurationTooLarge, `duration "106752.5d" is too long (at most about 290 years)`},
		{"2dd", DurationMalformed, `duration "2dd" is not a duration; write a number with a unit: ns, us, ms, s, m, h or d, e.g. "90s", "1h30m", "2d"`},
		{"-5m", DurationNegative, `duration "-5m" is negative; write a number with a unit: ns, us, ms, s, m, h or d, e.g. "90s", "1h30m", "2d"`},
		{"200000d", DurationTooLarge, `duration "200000d" is too long (at most about 290 years)`},
		{"999999999h", DurationTooLarge, `duration "999999999h" is too long (at most about 290 years)`},
		{"1h106752d", DurationTooLarge, `duration "1h106752d" is too long (at most about 290 years)`},
		{"1h30", DurationMalformed, `duration "1h30" is not a duration; write a number with a unit: ns, us, ms, s, m, h or d, e.g. "90s", "1h30m", "2d"`},
		{"1x1d", DurationMalformed, `duration "1x1d" is not a duration; write a number with a unit: ns, us, ms, s, m, h or d, e.g. "90s", "1h30m", "2d"`},
		{"1d+1h", DurationMalformed, `duration "1d+1h" is not a duration; write a number with a unit: ns, us, ms, s, m, h or d, e.g. "90s", "1h30m", "2d"`},
		{"106000d2562047h", DurationTooLarge, `duration "106000d2562047h" is too long (at most about 290 years)`},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			_, err := ParseDuration(tt.in)
			var de *DurationError
			if !errors.As(err, &de) {
				t.Fatalf("ParseDuration(%q) error = %v, want *DurationError", tt.in, err)
			}
			if de.Problem != tt.problem {
				t.Errorf("problem = %d, want %d", de.Problem, tt.problem)
			}
			if err.Error() != tt.message {
				t.Errorf("message:\n got %s\nwant %s", err, tt.message)
			}
		})
	}
}

func TestFormatDuration(t *testing.T) {
	tests := []struct {
		in   time.Duration
		want string
	}{
		{1500 * time.Millisecond, "1.5s"},
		{90 * time.Minute, "1h30m"},
		{2 * time.Hour, "2h"},
		{48 * time.Hour, "2d"},
		{36 * time.Hour, "1d12h"},
		{24*time.Hour + 30*time.Second, "1d30s"},
	}
	for _, tt := range tests {
		if got := FormatDuration(tt.in); got != tt.want {
			t.Errorf("FormatDuration(%v) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func FuzzParseDuration(f *testing.F) {
	for _, s := range []string{"90m", "1h30m", "2d", "1d12h", "30", "-5m", "soon", "200000d", "1.5h", "0s", "1.5d", "1h 30m"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := ParseDuration(s)
		if err != nil {
			var de *DurationError
			if !errors.As(err, &de) {
				t.Fatalf("ParseDuration(%q) error %T, want *DurationError", s, err)
			}
			// What the message suggests is itself a duration.
			if de.Problem == DurationSpaced {
				if _, err := ParseDuration(strings.Join(strings.Fields(s), "")); err != nil {
					t.Fatalf("ParseDuration(%q) suggests a duration that is refused: %v", s, err)
				}
			}
			return
		}
		if d < 0 {
			t.Fatalf("ParseDuration(%q) = %v, negative", s, d)
		}
		back, err := ParseDuration(FormatDuration(d))
		if err != nil || back != d {
			t.Fatalf("round trip of %v via %q gave %v, %v", d, FormatDuration(d), back, err)
		}
	})
}
