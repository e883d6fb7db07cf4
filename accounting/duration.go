package accounting

import (
	"math"
	"strconv"
	"strings"
	"time"
)

// ParseDuration reads a duration the way Go's time.ParseDuration does ("90m",
// "1h30m", "500ms") and also accepts days ("2d", "1d12h"), because job time
// limits are naturally written in days. A bare number is refused: "30" could be
// seconds or minutes, and guessing wrong stops a two-day run after 30 seconds.
// Negative durations are refused; whether zero is allowed is the caller's rule.
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

	// Days are only accepted as a leading whole number ("2d", "2d6h"), which is
	// how people write them and keeps the rest for time.ParseDuration.
	var days int64
	if i := strings.IndexByte(t, 'd'); i >= 0 {
		n, err := strconv.ParseInt(t[:i], 10, 64)
		if err != nil || n < 0 {
			return fail(DurationMalformed)
		}
		if n > math.MaxInt64/int64(24*time.Hour) {
			return fail(DurationTooLarge)
		}
		days = n
		t = t[i+1:]
		if t == "" {
			return time.Duration(days) * 24 * time.Hour, nil
		}
	}
	d, err := time.ParseDuration(t)
	if err != nil {
		return fail(DurationMalformed)
	}
	if d < 0 {
		return fail(DurationNegative)
	}
	total := time.Duration(days) * 24 * time.Hour
	if d > math.MaxInt64-total {
		return fail(DurationTooLarge)
	}
	return total + d, nil
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
