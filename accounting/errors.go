package accounting

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"
)

// ErrUnknownGrant is returned by Book.Give when the grant was not taken from
// that book, or was already given back.
var ErrUnknownGrant = errors.New("grant is not held in this book")

// SizeProblem says what is wrong with a size string.
type SizeProblem uint8

// The ways a size can be wrong.
const (
	SizeNoUnit   SizeProblem = 1 // a bare number: "32"
	SizeBadUnit  SizeProblem = 2 // "32X", "32 gigs"
	SizeNoNumber SizeProblem = 3 // "G", "", "1.2.3G"
	SizeNegative SizeProblem = 4 // "-1G"
	SizeTooLarge SizeProblem = 5 // beyond 8 EiB
	SizeFraction SizeProblem = 6 // "1.3B": part of a byte
	SizeLong     SizeProblem = 7 // longer than any size is written (maxInputBytes)
)

// maxInputBytes is the longest a size or a duration is read from: no
// size or duration is written longer, and a message about a longer one
// quotes no more than its beginning.
const maxInputBytes = 64

// shownInput is the beginning of a string too long to be a size or a
// duration, as a message quotes it, and its length.
func shownInput(in string) string {
	cut := 24
	for cut > 0 && !utf8.RuneStart(in[cut]) {
		cut--
	}
	return fmt.Sprintf("%q… (%d bytes)", in[:cut], len(in))
}

// SizeError is returned when a size string cannot be read. It carries the
// input so that a message can suggest the likely fix.
type SizeError struct {
	Input   string
	Problem SizeProblem
}

// SizeUnits is what ParseSize accepts, for messages.
const SizeUnits = `K, M, G or T (base 1024, optionally followed by "B" or "iB")`

func (e *SizeError) Error() string {
	switch e.Problem {
	case SizeLong:
		return fmt.Sprintf("size %s is longer than any size is written; write a number with a unit, e.g. \"512M\", \"32G\" or \"1.5T\"", shownInput(e.Input))
	case SizeNoUnit:
		in := strings.TrimSpace(e.Input)
		if n, err := strconv.ParseInt(in, 10, 64); err == nil && n >= MiB {
			// Bytes, most likely (machine.ram is): the same size in a unit.
			return fmt.Sprintf("size %q has no unit; if it is bytes, write %q; the units are %s", e.Input, bytesInUnit(n), SizeUnits)
		}
		// Small: which unit was meant is anyone's guess (trial AJ: "512"
		// suggested "512G" alone).
		if !strings.ContainsAny(in, ".,") {
			return fmt.Sprintf("size %q has no unit; write it with one of %s, e.g. %q or %q (%q is bytes)", e.Input, SizeUnits, in+"M", in+"G", in+"B")
		}
		// A fraction is of a unit, never of a byte (trial AO: "0.5"
		// suggested "0.5B", which is refused).
		return fmt.Sprintf("size %q has no unit; write it with one of %s, e.g. %q or %q", e.Input, SizeUnits, in+"M", in+"G")
	case SizeBadUnit:
		if n, ok := scientificSize(e.Input); ok {
			return fmt.Sprintf("size %q is in scientific notation, which a size is not written in; write %q; the units are %s", e.Input, bytesInUnit(n), SizeUnits)
		}
		if in := strings.TrimSpace(e.Input); strings.Count(in, ",") == 1 {
			whole, rest, _ := strings.Cut(in, ",")
			digits := len(rest) - len(strings.TrimLeft(rest, "0123456789"))
			// "1,024M" is a thousand and twenty-four, "1,5G" one and a half.
			fixed, what := whole+"."+rest, "a decimal comma"
			switch digits {
			case 0: // "1,G"
				fixed, what = whole+rest, "a stray comma"
			case 3:
				fixed, what = whole+rest, "a comma between thousands"
			}
			if _, err := ParseSize(fixed); err == nil {
				return fmt.Sprintf("size %q has %s; write %q", e.Input, what, fixed)
			}
		}
		return fmt.Sprintf("size %q has an unknown unit; use %s, e.g. \"32G\"", e.Input, SizeUnits)
	case SizeNegative:
		return fmt.Sprintf("size %q is negative; a size is zero or more, e.g. \"512M\"", e.Input)
	case SizeTooLarge:
		return fmt.Sprintf("size %q is too large; a size is at most %dT", e.Input, math.MaxInt64>>40)
	case SizeFraction:
		// "B" is bytes, not billions: "1.3B" is most likely 1.3 GB.
		num := strings.TrimRight(strings.TrimSpace(e.Input), "bB \t")
		return fmt.Sprintf("size %q is a fraction of a byte (B is bytes); for %s gigabytes write %q, or whole bytes", e.Input, num, num+"G")
	default:
		return fmt.Sprintf("size %q is not a number with a unit; write e.g. \"512M\", \"32G\" or \"1.5T\"", e.Input)
	}
}

// scientificSize reads "1e9" or "1.5e3M" as bytes, for a suggestion:
// false where it is not such a number, or under a MiB.
func scientificSize(in string) (int64, bool) {
	t := strings.TrimSpace(in)
	if !strings.ContainsAny(t, "eE") {
		return 0, false
	}
	mult := int64(1)
	if i := strings.LastIndexAny(t, "0123456789"); i >= 0 && i < len(t)-1 {
		m, ok := sizeUnit(strings.TrimSpace(t[i+1:]))
		if !ok {
			return 0, false
		}
		t, mult = t[:i+1], m
	}
	f, err := strconv.ParseFloat(t, 64)
	if err != nil || f <= 0 || f*float64(mult) >= math.MaxInt64 || f*float64(mult) < float64(MiB) {
		return 0, false
	}
	return int64(f * float64(mult)), true
}

// bytesInUnit is n bytes in the largest unit that holds it whole, or in
// MiB, rounded down, where none does.
func bytesInUnit(n int64) string {
	for _, u := range []struct {
		suffix string
		size   int64
	}{{"T", TiB}, {"G", GiB}, {"M", MiB}} {
		if n%u.size == 0 {
			return strconv.FormatInt(n/u.size, 10) + u.suffix
		}
	}
	return strconv.FormatInt(n/MiB, 10) + "M"
}

// DurationProblem says what is wrong with a duration string.
type DurationProblem uint8

// The ways a duration can be wrong.
const (
	DurationNoUnit    DurationProblem = 1 // a bare number: "30"
	DurationMalformed DurationProblem = 2 // "soon", "1x", ""
	DurationNegative  DurationProblem = 3 // "-5m"
	DurationTooLarge  DurationProblem = 4 // beyond about 290 years
	DurationSpaced    DurationProblem = 5 // "1h 30m": a duration, once its spaces go
	DurationLong      DurationProblem = 6 // longer than any duration is written (maxInputBytes)
)

// DurationError is returned when a duration string cannot be read.
type DurationError struct {
	Input   string
	Problem DurationProblem
}

// DurationUnits is what ParseDuration accepts, for messages.
const DurationUnits = `a number with a unit: ns, us, ms, s, m, h or d, e.g. "90s", "1h30m", "2d"`

func (e *DurationError) Error() string {
	switch e.Problem {
	case DurationLong:
		return fmt.Sprintf("duration %s is longer than any duration is written; write %s", shownInput(e.Input), DurationUnits)
	case DurationNoUnit:
		return fmt.Sprintf("duration %q has no unit; write e.g. %q or %q", e.Input, strings.TrimSpace(e.Input)+"s", strings.TrimSpace(e.Input)+"m")
	case DurationNegative:
		return fmt.Sprintf("duration %q is negative; write %s", e.Input, DurationUnits)
	case DurationTooLarge:
		return fmt.Sprintf("duration %q is too long (at most about 290 years)", e.Input)
	case DurationSpaced:
		return fmt.Sprintf("duration %q has spaces in it; write it without: %q", e.Input, strings.Join(strings.Fields(e.Input), ""))
	default:
		if hint := durationHint(e.Input); hint != "" {
			return fmt.Sprintf("duration %q is not a duration (did you mean %q?); write %s", e.Input, hint, DurationUnits)
		}
		return fmt.Sprintf("duration %q is not a duration; write %s", e.Input, DurationUnits)
	}
}

// durationHint is what a malformed duration likely meant: its units in
// lower case ("1H"), or weeks as days ("2w"); "" where nothing is likely.
func durationHint(in string) string {
	t := strings.TrimSpace(in)
	if n, ok := strings.CutSuffix(strings.ToLower(t), "w"); ok {
		if w, err := strconv.Atoi(n); err == nil && w > 0 && w < 1<<20 {
			return strconv.Itoa(7*w) + "d"
		}
	}
	if lower := strings.ToLower(t); lower != t {
		if _, err := ParseDuration(lower); err == nil {
			return lower
		}
	}
	return ""
}

// UnplaceableError is returned by the Placer, at once, when a request could
// not be granted by any machine even if all of them were idle. Largest is the
// machine that came closest.
//
// Quota, when set, is why instead: the request asks more than the quota of
// its owner allows at all, on a machine that could grant it.
type UnplaceableError struct {
	Asked   Resources
	Largest Capacity
	Owner   string
	Quota   *Quota
}

func (e *UnplaceableError) Error() string {
	if e.Quota != nil {
		return e.quotaError()
	}
	type part struct{ asked, has, hasBare string }
	var short []part
	if e.Asked.CPUs > e.Largest.CPUs() {
		short = append(short, part{Count(e.Asked.CPUs, "core"), Count(e.Largest.CPUs(), "core"), fmt.Sprint(e.Largest.CPUs())})
	}
	if e.Asked.GPUs > e.Largest.GPUs {
		p := part{Count(e.Asked.GPUs, "GPU"), Count(e.Largest.GPUs, "GPU"), fmt.Sprint(e.Largest.GPUs)}
		if e.Largest.GPUs == 0 {
			p.has, p.hasBare = "no GPU", "no GPU" // as a share is told
		}
		short = append(short, p)
	}
	if e.Largest.RAMKnown && e.Asked.RAMBytes > e.Largest.RAMBytes {
		has := FormatSize(e.Largest.RAMBytes)
		short = append(short, part{FormatSize(e.Asked.RAMBytes) + " of memory", has + " of memory", has})
	}
	if e.Asked.Shares() && e.Asked.GPUMemBytes > e.Largest.LargestCardMem() {
		asked := FormatSize(e.Asked.GPUMemBytes) + " of one GPU's memory"
		switch most := e.Largest.LargestCardMem(); {
		case e.Largest.GPUs == 0:
			short = append(short, part{asked, "no GPU", "no GPU"})
		case most == 0 && len(short) == 0:
			// Not short: unknown. Said apart, with what tells berth.
			return "asks for " + asked + ", and the memory of this machine's GPUs is not known: berth reads it through NVML (libnvidia-ml.so.1), or from --gpu-mem SIZE"
		case most == 0:
			short = append(short, part{asked, "GPUs of unknown memory", "GPUs of unknown memory"})
		default:
			has := FormatSize(most)
			short = append(short, part{asked, "GPUs of at most " + has, "GPUs of at most " + has})
		}
	}
	if e.Asked.Shares() && e.Asked.GPUs > 0 {
		return "asks for whole GPUs and a share of one (gpus and gpu_mem); ask for one or the other"
	}
	switch len(short) {
	case 0:
		return "asks for more than any machine has"
	case 1:
		// "asks for 4 GPUs; this machine has 2"
		return fmt.Sprintf("asks for %s; this machine has %s", short[0].asked, short[0].hasBare)
	}
	asked, has := make([]string, len(short)), make([]string, len(short))
	for i, p := range short {
		asked[i], has[i] = p.asked, p.has
	}
	return fmt.Sprintf("asks for %s; this machine has %s", andList(asked), andList(has))
}

// quotaError says what of a request is past its owner's quota: "asks for
// 4 GPUs; alice's quota allows 2".
func (e *UnplaceableError) quotaError() string {
	q := *e.Quota
	switch {
	case q.CPUs >= 0 && e.Asked.Unaccounted():
		return fmt.Sprintf("asks for no cores (cpus = 0: unaccounted, it would hold none and escape %s's quota of %s); ask for cores, cpus = 1 or more", e.Owner, Count(q.CPUs, "core"))
	case q.RAMBytes >= 0 && e.Asked.RAMBytes == 0:
		return fmt.Sprintf("asks for no memory, and %s's quota bounds their jobs' memory (%s): say how much it needs, as ram = \"512M\"", e.Owner, FormatSize(q.RAMBytes))
	}
	var asked, allows []string
	if q.CPUs >= 0 && e.Asked.CPUs > q.CPUs {
		asked, allows = append(asked, Count(e.Asked.CPUs, "core")), append(allows, strconv.Itoa(q.CPUs))
	}
	if q.GPUs >= 0 && e.Asked.GPUs > q.GPUs {
		asked, allows = append(asked, Count(e.Asked.GPUs, "GPU")), append(allows, strconv.Itoa(q.GPUs))
	}
	if q.RAMBytes >= 0 && e.Asked.RAMBytes > q.RAMBytes {
		asked, allows = append(asked, FormatSize(e.Asked.RAMBytes)+" of memory"), append(allows, FormatSize(q.RAMBytes))
	}
	if q.GPUMemBytes >= 0 && e.Asked.GPUMemBytes > q.GPUMemBytes {
		asked, allows = append(asked, FormatSize(e.Asked.GPUMemBytes)+" of GPU memory"), append(allows, FormatSize(q.GPUMemBytes))
	}
	if q.GPUMemBytes < 0 && q.GPUs >= 0 && e.Asked.GPUMemBytes > 0 && len(asked) == 0 {
		// A share counts against gpus as its part of a card.
		card := e.Largest.LargestCardMem()
		asked = append(asked, FormatSize(e.Asked.GPUMemBytes)+" of GPU memory")
		allows = append(allows, fmt.Sprintf("%s (%s of shares)", Count(q.GPUs, "GPU"), FormatSize(int64(q.GPUs)*card)))
	}
	return fmt.Sprintf("asks for %s; %s's quota allows %s", andList(asked), e.Owner, andList(allows))
}

// andList writes "a", "a and b", "a, b and c".
func andList(xs []string) string {
	if len(xs) == 1 {
		return xs[0]
	}
	return strings.Join(xs[:len(xs)-1], ", ") + " and " + xs[len(xs)-1]
}
