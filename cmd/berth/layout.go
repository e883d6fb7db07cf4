package main

import (
	"io"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// This file is the layout every renderer writes through (render_*.go: what
// `berth status`, `jobs`, `show`, `history`, `flavors` and `machine` print).
// A renderer builds its output as lines of styled spans and writes them
// through writeLines, so the coloured text and the plain text come from the
// same layout: stripping the colour codes gives exactly what is printed
// without colour, and widths are counted once, on the plain text.

// renderOptions are what the caller knows about where the text goes.
type renderOptions struct {
	width int       // terminal columns; 0 = 80; wholeLines: no limit
	color bool      // ANSI colours: the caller decides (a terminal and no NO_COLOR)
	now   time.Time // for ages ("3m", "2h", "5d"); the caller passes status.Now
	// noJobs is what berth status says when it lists no job, where that
	// is not "no jobs declared" (--mine kept none).
	noJobs string
	// viewer, where known, is who looks: the hint on a failed job names
	// one whose output they may read.
	viewer *viewer
}

// renderZone is where wall-clock times are written for a person: local
// time. Tests pin it to UTC instead of changing time.Local, which every
// goroutine of the test binary reads.
var renderZone = time.Local

// wholeLines is the width of text that goes to a pipe or a file: no line
// is cut or wrapped for a width.
const wholeLines = -1

// unlimited is the width laid out for wholeLines: wider than any line, and
// far enough from the largest int that sums of widths cannot overflow.
const unlimited = 1 << 30

func (o renderOptions) columns() int {
	switch {
	case o.width == wholeLines:
		return unlimited
	case o.width <= 0:
		return 80
	}
	return o.width
}

func (o renderOptions) clock() time.Time {
	if o.now.IsZero() {
		return time.Now() // a caller without the daemon's clock; ours never is one
	}
	return o.now
}

// Select Graphic Rendition codes. Only the eight basic colours, bold and dim,
// so that the person's terminal theme decides what they look like.
const (
	sgrReset  = "\x1b[0m"
	sgrBold   = "\x1b[1m"
	sgrDim    = "\x1b[2m"
	sgrRed    = "\x1b[31m"
	sgrGreen  = "\x1b[32m"
	sgrYellow = "\x1b[33m"
)

// textSpan is a run of text in one style ("" = plain).
type textSpan struct{ text, sgr string }

// textLine is one output line, before colour is decided.
type textLine []textSpan

func ln(spans ...textSpan) textLine { return textLine(spans) }

// plainSpan and styledSpan escape their text (escape.go): much of what a
// picture shows is written by jobs and job files — a why that quotes a
// path, an error about a file, an env value — and a control character in
// it would act on the terminal, or break the layout, instead of showing.
// Escaping here, before widths are counted, keeps the columns true.
func plainSpan(s string) textSpan       { return textSpan{text: escapeText(s)} }
func styledSpan(s, sgr string) textSpan { return textSpan{text: escapeText(s), sgr: sgr} }

func (l textLine) width() int {
	n := 0
	for _, s := range l {
		n += utf8.RuneCountInString(s.text)
	}
	return n
}

// clip shortens l to at most n runes, ending it with "…" where text was cut.
// It is the last resort of the status picture at very narrow widths; the
// layout itself avoids needing it.
func (l textLine) clip(n int) textLine {
	if l.width() <= n {
		return l
	}
	var out textLine
	left := n - 1
	for _, s := range l {
		k := utf8.RuneCountInString(s.text)
		if k <= left {
			out = append(out, s)
			left -= k
			continue
		}
		out = append(out, textSpan{text: firstRunes(s.text, left) + "…", sgr: s.sgr})
		break
	}
	return out
}

// trimRight drops trailing blanks, which padding leaves after a last column.
func (l textLine) trimRight() textLine {
	out := slices.Clone(l)
	for len(out) > 0 {
		last := &out[len(out)-1]
		last.text = strings.TrimRight(last.text, " ")
		if last.text != "" {
			break
		}
		out = out[:len(out)-1]
	}
	return out
}

// writeLines prints lines, coloured when o.color, each cut to limit runes
// when limit > 0.
func (o renderOptions) writeLines(w io.Writer, lines []textLine, limit int) {
	var b strings.Builder
	for _, l := range lines {
		b.WriteString(o.lineText(l, limit))
		b.WriteByte('\n')
	}
	io.WriteString(w, b.String())
}

// lineText is l as it is printed, without its newline: coloured when
// o.color, cut to limit runes when limit > 0.
func (o renderOptions) lineText(l textLine, limit int) string {
	if limit > 0 {
		l = l.clip(limit)
	}
	var b strings.Builder
	for _, s := range l.trimRight() {
		// Escaped again, for a span made without plainSpan or
		// styledSpan: escaped text is left as it is.
		text := escapeText(s.text)
		if o.color && s.sgr != "" && strings.TrimSpace(text) != "" {
			b.WriteString(s.sgr + text + sgrReset)
		} else {
			b.WriteString(text)
		}
	}
	return b.String()
}

// firstRunes is the longest start of s that fills at most n columns of a
// terminal (runeLen).
func firstRunes(s string, n int) string {
	if n <= 0 {
		return ""
	}
	used := 0
	for k, r := range s {
		if used += runeWidth(r); used > n {
			return s[:k]
		}
	}
	return s
}

// lastRunes is the longest end of s that fills at most n columns.
func lastRunes(s string, n int) string {
	if n <= 0 {
		return ""
	}
	used, from := 0, len(s)
	for from > 0 {
		r, size := utf8.DecodeLastRuneInString(s[:from])
		if used+runeWidth(r) > n {
			break
		}
		used += runeWidth(r)
		from -= size
	}
	return s[from:]
}

// runeLen is how many columns of a terminal s fills: a wide character
// (CJK, Hangul, fullwidth forms, most emoji) fills two, a combining mark
// none, as terminals draw them.
func runeLen(s string) int {
	n := 0
	for _, r := range s {
		n += runeWidth(r)
	}
	return n
}

// runeWidth is the columns r fills: East Asian Wide and Fullwidth two,
// combining marks and zero-width characters none, the rest one.
func runeWidth(r rune) int {
	switch {
	case r < 0x1100:
		if r >= 0x300 && unicode.In(r, unicode.Mn, unicode.Me) {
			return 0
		}
		return 1
	case unicode.In(r, unicode.Mn, unicode.Me, unicode.Cf):
		return 0
	case r <= 0x115F, // Hangul Jamo leading consonants
		r >= 0x2E80 && r <= 0xA4CF && r != 0x303F, // CJK radicals … Yi
		r >= 0xAC00 && r <= 0xD7A3,                // Hangul syllables
		r >= 0xF900 && r <= 0xFAFF,                // CJK compatibility ideographs
		r >= 0xFE30 && r <= 0xFE4F,                // CJK compatibility forms
		r >= 0xFF00 && r <= 0xFF60,                // fullwidth forms
		r >= 0xFFE0 && r <= 0xFFE6,
		r >= 0x1F300 && r <= 0x1F64F, // pictographs, emoticons
		r >= 0x1F680 && r <= 0x1F6FF, // transport and map symbols
		r >= 0x1F900 && r <= 0x1F9FF,
		r >= 0x20000 && r <= 0x3FFFD: // CJK extensions
		return 2
	}
	return 1
}

// ellipsize shortens s to n runes at its end: "needs 2 gpus; 1 f…".
func ellipsize(s string, n int) string {
	switch {
	case runeLen(s) <= n:
		return s
	case n <= 0:
		return ""
	}
	return strings.TrimRight(firstRunes(s, n-1), " ") + "…"
}

// ellipsizeMiddle shortens s to n runes in its middle. Names are cut there
// because jobs of one sweep differ at the end ("sweep-lr0.01-seed1",
// "sweep-lr0.01-seed2"): cutting the end would make them look alike.
func ellipsizeMiddle(s string, n int) string {
	switch {
	case runeLen(s) <= n:
		return s
	case n <= 2:
		return ellipsize(s, n)
	}
	tail := (n - 1) / 2
	return firstRunes(s, n-1-tail) + "…" + lastRunes(s, tail)
}

// flow lays items out on lines of at most width runes, separated by sep;
// where it breaks, the line keeps the separator's mark ("," of ", ") and
// the next line starts with indent spaces.
type flowItem struct {
	sep  string
	text textLine
}

func flow(items []flowItem, width, indent int) []textLine {
	var out []textLine
	var cur textLine
	for _, it := range items {
		switch {
		case len(cur) == 0:
			cur = append(cur, it.text...)
		case cur.width()+runeLen(it.sep)+it.text.width() <= width || cur.width() <= indent:
			cur = append(cur, plainSpan(it.sep))
			cur = append(cur, it.text...)
		default:
			out = append(out, append(cur, plainSpan(strings.TrimRight(it.sep, " "))))
			cur = append(textLine{plainSpan(strings.Repeat(" ", indent))}, it.text...)
		}
	}
	if len(cur) > 0 {
		out = append(out, cur)
	}
	return out
}

// wrapWords breaks s into lines of at most width runes at spaces, the first
// after prefix and the rest after indent; a word longer than a line is cut
// where the line ends. s is escaped first: a line break in a file's name
// is shown as \n, not taken for a space.
func wrapWords(s string, width int, prefix, indent string, sgr string) []textLine {
	s = escapeText(s)
	var out []textLine
	lead := prefix
	room := func() int { return max(1, width-runeLen(lead)) }
	cur := ""
	emit := func() {
		out = append(out, ln(plainSpan(lead), styledSpan(cur, sgr)))
		lead, cur = indent, ""
	}
	for _, word := range strings.Fields(s) {
		for runeLen(word) > room() {
			if cur != "" {
				emit()
				continue
			}
			cur = firstRunes(word, room())
			word = strings.TrimPrefix(word, cur)
			emit()
		}
		switch {
		case cur == "":
			cur = word
		case runeLen(cur)+1+runeLen(word) <= room():
			cur += " " + word
		default:
			emit()
			cur = word
		}
	}
	if cur != "" || len(out) == 0 {
		emit()
	}
	return out
}
