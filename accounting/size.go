package accounting

import (
	"math"
	"math/bits"
	"strconv"
	"strings"
)

// Size units, all base 1024 as in systemd's MemoryMax= and Slurm's --mem.
const (
	KiB int64 = 1 << (10 * (iota + 1))
	MiB
	GiB
	TiB
)

// ParseSize reads a memory size written with a unit: "512M", "32G", "1.5TiB",
// "64GB". The unit is one of K, M, G, T (either case), optionally followed by
// B or iB; all are powers of 1024. A bare number is refused rather than read as
// bytes, because "32" meaning 32 bytes is never what the person meant.
//
// The error is a *SizeError.
func ParseSize(s string) (int64, error) {
	fail := func(p SizeProblem) (int64, error) { return 0, &SizeError{Input: s, Problem: p} }
	if len(s) > maxInputBytes {
		return fail(SizeLong)
	}

	t := strings.TrimSpace(s)
	numEnd := 0
	for numEnd < len(t) && (t[numEnd] >= '0' && t[numEnd] <= '9' || t[numEnd] == '.') {
		numEnd++
	}
	num, unit := t[:numEnd], strings.TrimSpace(t[numEnd:])
	if strings.Trim(num, ".") == "" && num != "" {
		return fail(SizeNoNumber) // ".", "..G": no digit to suggest a unit for
	}
	if num == "" {
		if strings.HasPrefix(t, "-") {
			return fail(SizeNegative)
		}
		return fail(SizeNoNumber)
	}
	if unit == "" {
		return fail(SizeNoUnit)
	}
	mult, ok := sizeUnit(unit)
	if !ok {
		return fail(SizeBadUnit)
	}

	whole, frac, _ := strings.Cut(num, ".")
	if strings.Contains(frac, ".") || whole == "" && frac == "" {
		return fail(SizeNoNumber)
	}
	var n int64
	if whole != "" {
		w, err := strconv.ParseInt(whole, 10, 64)
		if err != nil || w > math.MaxInt64/mult {
			return fail(SizeTooLarge)
		}
		n = w * mult
	}
	// The fraction is applied in integers, so "1.5G" is exact and no float
	// rounding can make "0.1T" differ between two machines. Digits past the
	// eighteenth are finer than a byte at any unit and are dropped.
	if frac != "" && mult == 1 {
		return fail(SizeFraction)
	}
	if len(frac) > 18 {
		frac = frac[:18]
	}
	if frac != "" {
		f, err := strconv.ParseUint(frac, 10, 64)
		if err != nil {
			return fail(SizeNoNumber)
		}
		hi, lo := bits.Mul64(uint64(mult), f)
		add, _ := bits.Div64(hi, lo, pow10(len(frac)))
		if n > math.MaxInt64-int64(add) {
			return fail(SizeTooLarge)
		}
		n += int64(add)
	}
	return n, nil
}

func pow10(k int) uint64 {
	p := uint64(1)
	for range k {
		p *= 10
	}
	return p
}

func sizeUnit(u string) (int64, bool) {
	switch strings.ToUpper(u) {
	case "B":
		return 1, true
	case "K", "KB", "KIB":
		return KiB, true
	case "M", "MB", "MIB":
		return MiB, true
	case "G", "GB", "GIB":
		return GiB, true
	case "T", "TB", "TIB":
		return TiB, true
	}
	return 0, false
}

// FormatSize writes n bytes in the largest unit that keeps it readable:
// "32G", "1.5G", "512M", "100B". The one decimal is truncated, never rounded
// up, so ParseSize reads back at most n.
func FormatSize(n int64) string {
	units := []struct {
		suffix string
		size   int64
	}{{"T", TiB}, {"G", GiB}, {"M", MiB}, {"K", KiB}}
	for _, u := range units {
		if n >= u.size {
			s := strconv.FormatInt(n/u.size, 10)
			if tenth := n % u.size * 10 / u.size; tenth != 0 {
				s += "." + strconv.FormatInt(tenth, 10)
			}
			return s + u.suffix
		}
	}
	return strconv.FormatInt(n, 10) + "B"
}
