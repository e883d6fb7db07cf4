package accounting

import (
	"errors"
	"strconv"
	"strings"
	"testing"
)

func TestParseSize(t *testing.T) {
	tests := []struct {
		in   string
		want int64
	}{
		{"512M", 512 * MiB},
		{"32G", 32 * GiB},
		{"32g", 32 * GiB},
		{"32GB", 32 * GiB},
		{"32GiB", 32 * GiB},
		{"32gib", 32 * GiB},
		{"1T", TiB},
		{"1.5G", GiB + GiB/2},
		{"0.5K", 512},
		{"100B", 100},
		{"0G", 0},
		{" 4 G ", 4 * GiB},
		{"7K", 7 * KiB},
		{"8388607T", 8388607 * TiB},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseSize(tt.in)
			if err != nil {
				t.Fatalf("ParseSize(%q): %v", tt.in, err)
			}
			if got != tt.want {
				t.Fatalf("ParseSize(%q) = %d, want %d", tt.in, got, tt.want)
			}
		})
	}
}

func TestParseSizeErrors(t *testing.T) {
	tests := []struct {
		in      string
		problem SizeProblem
		message string
	}{
		{"32", SizeNoUnit, `size "32" has no unit; write it with one of K, M, G or T (base 1024, optionally followed by "B" or "iB"), e.g. "32M" or "32G" ("32B" is bytes)`},
		{"0.5", SizeNoUnit, `size "0.5" has no unit; write it with one of K, M, G or T (base 1024, optionally followed by "B" or "iB"), e.g. "0.5M" or "0.5G"`},
		{"34359738368", SizeNoUnit, `size "34359738368" has no unit; if it is bytes, write "32G"; the units are K, M, G or T (base 1024, optionally followed by "B" or "iB")`},
		{"1000000000", SizeNoUnit, `size "1000000000" has no unit; if it is bytes, write "953M"; the units are K, M, G or T (base 1024, optionally followed by "B" or "iB")`},
		{"32X", SizeBadUnit, `size "32X" has an unknown unit; use K, M, G or T (base 1024, optionally followed by "B" or "iB"), e.g. "32G"`},
		{"1e9", SizeBadUnit, `size "1e9" is in scientific notation, which a size is not written in; write "953M"; the units are K, M, G or T (base 1024, optionally followed by "B" or "iB")`},
		{"1e3M", SizeBadUnit, `size "1e3M" is in scientific notation, which a size is not written in; write "1000M"; the units are K, M, G or T (base 1024, optionally followed by "B" or "iB")`},
		{"1,5G", SizeBadUnit, `size "1,5G" has a decimal comma; write "1.5G"`},
		{"1,G", SizeBadUnit, `size "1,G" has a stray comma; write "1G"`},
		{"1,024M", SizeBadUnit, `size "1,024M" has a comma between thousands; write "1024M"`},
		{"1,5,2G", SizeBadUnit, `size "1,5,2G" has an unknown unit; use K, M, G or T (base 1024, optionally followed by "B" or "iB"), e.g. "32G"`},
		{"32 gigs", SizeBadUnit, `size "32 gigs" has an unknown unit; use K, M, G or T (base 1024, optionally followed by "B" or "iB"), e.g. "32G"`},
		{"G", SizeNoNumber, `size "G" is not a number with a unit; write e.g. "512M", "32G" or "1.5T"`},
		{"", SizeNoNumber, `size "" is not a number with a unit; write e.g. "512M", "32G" or "1.5T"`},
		{"1.2.3G", SizeNoNumber, `size "1.2.3G" is not a number with a unit; write e.g. "512M", "32G" or "1.5T"`},
		{".G", SizeNoNumber, `size ".G" is not a number with a unit; write e.g. "512M", "32G" or "1.5T"`},
		{".", SizeNoNumber, `size "." is not a number with a unit; write e.g. "512M", "32G" or "1.5T"`},
		{"-1G", SizeNegative, `size "-1G" is negative; a size is zero or more, e.g. "512M"`},
		{strings.Repeat("9", 65) + "G", SizeLong, `size "999999999999999999999999"… (66 bytes) is longer than any size is written; write a number with a unit, e.g. "512M", "32G" or "1.5T"`},
		{"1.3B", SizeFraction, `size "1.3B" is a fraction of a byte (B is bytes); for 1.3 gigabytes write "1.3G", or whole bytes`},
		{" 0.5 b", SizeFraction, `size " 0.5 b" is a fraction of a byte (B is bytes); for 0.5 gigabytes write "0.5G", or whole bytes`},
		{"8388608T", SizeTooLarge, `size "8388608T" is too large; a size is at most 8388607T`},
		{"99999999999999999999K", SizeTooLarge, `size "99999999999999999999K" is too large; a size is at most 8388607T`},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			_, err := ParseSize(tt.in)
			var se *SizeError
			if !errors.As(err, &se) {
				t.Fatalf("ParseSize(%q) error = %v, want *SizeError", tt.in, err)
			}
			if se.Problem != tt.problem {
				t.Errorf("problem = %d, want %d", se.Problem, tt.problem)
			}
			if err.Error() != tt.message {
				t.Errorf("message:\n got %s\nwant %s", err, tt.message)
			}
		})
	}
}

func TestFormatSize(t *testing.T) {
	tests := []struct {
		in   int64
		want string
	}{
		{0, "0B"},
		{100, "100B"},
		{KiB, "1K"},
		{512 * MiB, "512M"},
		{32 * GiB, "32G"},
		{GiB + GiB/2, "1.5G"},
		{3 * TiB, "3T"},
	}
	for _, tt := range tests {
		if got := FormatSize(tt.in); got != tt.want {
			t.Errorf("FormatSize(%d) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func FuzzParseSize(f *testing.F) {
	for _, s := range []string{"512M", "1.5GiB", "32", "34359738368", "-1G", "0.0001T", "9223372036854775807B", "1e9G", " 4 g"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := ParseSize(s)
		if err != nil {
			var se *SizeError
			if !errors.As(err, &se) {
				t.Fatalf("ParseSize(%q) error %T, want *SizeError", s, err)
			}
			if se.Error() == "" {
				t.Fatal("empty message")
			}
			// A number of bytes is given back in a unit: the same size,
			// or less by under a MiB.
			if b, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64); err == nil && b >= MiB {
				if got, err := ParseSize(bytesInUnit(b)); err != nil || got > b || b-got >= MiB {
					t.Fatalf("%d bytes suggested as %q: %d, %v", b, bytesInUnit(b), got, err)
				}
			}
			return
		}
		if n < 0 {
			t.Fatalf("ParseSize(%q) = %d, negative", s, n)
		}
		// What FormatSize writes reads back, to within its one decimal.
		back, err := ParseSize(FormatSize(n))
		if err != nil {
			t.Fatalf("ParseSize(FormatSize(%d) = %q): %v", n, FormatSize(n), err)
		}
		if diff := back - n; diff > n/10+1 || -diff > n/10+1 {
			t.Fatalf("round trip of %d gave %d", n, back)
		}
	})
}
