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
// "1h30m", "1.5h", "500ms") and also accepts days ("2d", "1d12h", "1.5d",
// and, as Go takes units in any order, "12h1d"),
// because job time limits are naturally written in days. A bare number
// other than "0" (which Go takes too) is refused: "30" could be seconds or
// minutes, and guessing wrong stops a two-day run after 30 seconds.
// Negative durations are refused; whether zero is allowed is the caller's
// rule.
//
// The error is a *DurationError.
func ParseDuration(s string) (time.Duration, error) {
	fail := func(p DurationProblem) (time.Duration, error) {
		return 0, &DurationError{Input: s, Problem: p}
	}
	if len(s) > maxInputBytes {
		return fail(DurationLong)
	}
	t := strings.TrimSpace(s)
	if strings.HasPrefix(t, "-") {
		return fail(DurationNegative)
	}
	if t == "" {
		return fail(DurationMalformed)
	}
	if t == "0" || t == "+0" {
		return 0, nil // as Go reads it: zero needs no unit
	}
	if _, err := strconv.ParseFloat(t, 64); err == nil {
		return fail(DurationNoUnit)
	}
	if strings.ContainsFunc(t, unicode.IsSpace) {
		// "1h 30m" and "1 h" are meant as 1h30m and 1h, and the message
		// says so; "1 2h" is not so clear.
		for _, part := range strings.Fields(unitsJoined(t)) {
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

	// Days may come anywhere, as Go takes its own units in any order
	// ("1h1d" is "1d1h"): they are added up apart, and the rest is Go's.
	t = strings.TrimPrefix(t, "+") // as Go takes "+2h"
	var days time.Duration
	var rest strings.Builder
	wellFormed := true // every part a number and a unit Go or berth knows
	for s := t; s != ""; {
		numEnd := strings.IndexFunc(s, func(r rune) bool { return !isDurationDigit(r) })
		if numEnd <= 0 {
			return fail(DurationMalformed) // no number, or no unit
		}
		unitEnd := numEnd + strings.IndexFunc(s[numEnd:], isDurationDigit)
		if unitEnd < numEnd {
			unitEnd = len(s)
		}
		num, unit := s[:numEnd], s[numEnd:unitEnd]
		if num == "." || strings.Count(num, ".") > 1 {
			return fail(DurationMalformed)
		}
		if unit != "d" {
			wellFormed = wellFormed && durationUnits[unit]
			rest.WriteString(s[:unitEnd])
			s = s[unitEnd:]
			continue
		}
		// A day is 24 hours, so n days are 24 × n hours, which Go reads
		// with its own rules for the fraction.
		hours, err := time.ParseDuration(num + "h")
		if err != nil || hours > (math.MaxInt64-days)/24 {
			return fail(DurationTooLarge)
		}
		days += 24 * hours
		s = s[unitEnd:]
	}
	if rest.Len() == 0 {
		return days, nil
	}
	d, err := time.ParseDuration(rest.String())
	switch {
	case err != nil && wellFormed:
		return fail(DurationTooLarge) // what Go refuses of a well-formed duration
	case err != nil:
		return fail(DurationMalformed)
	case d > math.MaxInt64-days:
		return fail(DurationTooLarge)
	}
	return days + d, nil
}

func isDurationDigit(r rune) bool { return r >= '0' && r <= '9' || r == '.' }

// durationUnits are the units of Go's durations.
var durationUnits = map[string]bool{"ns": true, "us": true, "µs": true, "μs": true, "ms": true, "s": true, "m": true, "h": true}

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

// unitsJoined is t without the spaces between a number and its unit:
// "1 h 30 m" is "1h 30m".
func unitsJoined(t string) string {
	var b strings.Builder
	for i := 0; i < len(t); i++ {
		if t[i] == ' ' || t[i] == '\t' {
			j := i
			for j < len(t) && (t[j] == ' ' || t[j] == '\t') {
				j++
			}
			if i > 0 && isDurationDigit(rune(t[i-1])) && j < len(t) && !isDurationDigit(rune(t[j])) {
				i = j - 1
				continue
			}
		}
		b.WriteByte(t[i])
	}
	return b.String()
}
