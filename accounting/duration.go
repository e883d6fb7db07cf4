package accounting

import (
	"errors"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode"
)

// ParseDuration reads a duration the way Go's time.ParseDuration does ("90m",
// "1h30m", "1.5h", "500ms") and also accepts days ("2d", "1d12h", "1.5d"),
// because job time limits are naturally written in days. A bare number is
// refused: "30" could be seconds or minutes, and guessing wrong stops a
// two-day run after 30 seconds. Negative durations are refused; whether zero
// is allowed is the caller's rule.
//
// The error is a *DurationError.
func ParseDuration(s string) (time.Duration, error) {
	fail := func(p DurationProblem) (time.Duration, error) {
		return 0, &DurationError{Input: s, Problem: p}
	}
	t := strings.TrimSpace(s)
	if strings.HasPrefix(t, "-") {
		return fail(DurationNegative)
	}
	if t == "" {
		return fail(DurationMalformed)
	}
	if _, err := strconv.ParseFloat(t, 64); err == nil {
		return fail(DurationNoUnit)
	}
	if strings.ContainsFunc(t, unicode.IsSpace) {
		// "1h 30m" is meant as 1h30m, and the message says so; "1 h"
		// and "1 2h" are not so clear.
		for _, part := range strings.Fields(t) {
			if _, err := ParseDuration(part); err != nil {
				return fail(DurationMalformed)
			}
		}
		if _, err := ParseDuration(strings.Join(strings.Fields(t), "")); err != nil {
			var de *DurationError
			if errors.As(err, &de) && de.Problem == DurationTooLarge {
				return fail(DurationTooLarge)
			}
			return fail(DurationMalformed)
		}
		return fail(DurationSpaced)
	}

	// Days are only accepted at the front ("2d", "2d6h", "1.5d"), which is
	// how people write them and keeps the rest for time.ParseDuration.
	var days time.Duration
	if i := strings.IndexByte(t, 'd'); i >= 0 {
		n := strings.TrimPrefix(t[:i], "+") // as Go takes "+2h"
		if n == "" || strings.Trim(n, "0123456789.") != "" {
			return fail(DurationMalformed)
		}
		// A day is 24 hours, so n days are 24 × n hours, which Go reads
		// with its own rules for the fraction.
		hours, err := time.ParseDuration(n + "h")
		if err != nil {
			if strings.Count(n, ".") <= 1 && n != "." {
				return fail(DurationTooLarge)
			}
			return fail(DurationMalformed)
		}
		if hours > math.MaxInt64/24 {
			return fail(DurationTooLarge)
		}
		days = 24 * hours
		t = t[i+1:]
		if t == "" {
			return days, nil
		}
	}
	d, err := time.ParseDuration(t)
	if err != nil {
		return fail(DurationMalformed)
	}
	if d < 0 {
		return fail(DurationNegative)
	}
	if d > math.MaxInt64-days {
		return fail(DurationTooLarge)
	}
	return days + d, nil
}

// FormatDuration writes d compactly with days: "2d", "1d12h", "90m", "1.5s".
func FormatDuration(d time.Duration) string {
	const day = 24 * time.Hour
	if d < day {
		return trimZeroUnits(d.String())
	}
	days := d / day
	rest := d % day
	s := strconv.FormatInt(int64(days), 10) + "d"
	if rest != 0 {
		s += trimZeroUnits(rest.String())
	}
	return s
}

// trimZeroUnits turns Go's "1h30m0s" into "1h30m" and "2h0m0s" into "2h".
func trimZeroUnits(s string) string {
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}
