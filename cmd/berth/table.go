package main

import (
	"strconv"
	"strings"
	"time"

	"github.com/berthd/berth/accounting"
	"github.com/berthd/berth/supervisor"
)

// This file is the table the listings are laid out in: columns sized to
// their content and shrunk to a width, the aligned key-value block of
// `berth show`, and the cells every listing writes the same way.

// textTable is columns sized to their content, with a header row.
type textTable struct {
	cols []textColumn
	rows [][]textSpan
	gap  int
}

type textColumn struct {
	title string
	right bool                     // numbers align right
	cut   func(string, int) string // how a cell is shortened to fit; nil: ellipsize
	width int                      // 0: hidden
}

func (t *textTable) add(cells ...textSpan) { t.rows = append(t.rows, cells) }

// fitContent sizes every column to its widest cell or title.
func (t *textTable) fitContent() {
	for i := range t.cols {
		t.cols[i].width = runeLen(t.cols[i].title)
		for _, r := range t.rows {
			t.cols[i].width = max(t.cols[i].width, runeLen(r[i].text))
		}
	}
}

// total is the width of a line that fills every visible column.
func (t *textTable) total() int {
	n, visible := 0, 0
	for _, c := range t.cols {
		if c.width > 0 {
			n += c.width
			visible++
		}
	}
	return n + t.gap*max(0, visible-1)
}

// shrink narrows column i, never below floor, by what the table is over
// limit.
func (t *textTable) shrink(i, floor, limit int) {
	over := t.total() - limit
	if i < 0 || over <= 0 || t.cols[i].width <= floor {
		return
	}
	t.cols[i].width = max(floor, t.cols[i].width-over)
}

func (t *textTable) lines(headerSGR string) []textLine {
	header := make([]textSpan, len(t.cols))
	for i, c := range t.cols {
		header[i] = styledSpan(c.title, headerSGR)
	}
	out := []textLine{t.row(header)}
	for _, r := range t.rows {
		out = append(out, t.row(r))
	}
	return out
}

func (t *textTable) row(cells []textSpan) textLine {
	var l textLine
	last := -1
	for i, c := range t.cols {
		if c.width > 0 {
			last = i
		}
	}
	first := true
	for i, c := range t.cols {
		if c.width == 0 {
			continue
		}
		if !first {
			l = append(l, plainSpan(strings.Repeat(" ", t.gap)))
		}
		first = false
		cut := c.cut
		if cut == nil {
			cut = ellipsize
		}
		text := cut(cells[i].text, c.width)
		pad := strings.Repeat(" ", c.width-runeLen(text))
		switch {
		case c.right:
			l = append(l, plainSpan(pad), styledSpan(text, cells[i].sgr))
		case i == last:
			l = append(l, styledSpan(text, cells[i].sgr))
		default:
			l = append(l, styledSpan(text, cells[i].sgr), plainSpan(pad))
		}
	}
	return l
}

func (t *textTable) colWidth(i int) int {
	if i < 0 {
		return 0
	}
	return t.cols[i].width
}

// keyValues is an aligned block of "  key  value" lines.
type keyValues []struct {
	key   string
	value textSpan
}

func (kv *keyValues) add(key string, value textSpan) {
	*kv = append(*kv, struct {
		key   string
		value textSpan
	}{key, value})
}

func (kv keyValues) keyWidth() int {
	n := 0
	for _, e := range kv {
		n = max(n, runeLen(e.key))
	}
	return n
}

func (kv keyValues) lines(keyWidth int) []textLine {
	var out []textLine
	for _, e := range kv {
		out = append(out, ln(plainSpan("  "+e.key+strings.Repeat(" ", keyWidth-runeLen(e.key)+2)), e.value))
	}
	return out
}

// compactAge writes how long ago t was in its largest whole unit, as
// kubectl does: "45s", "12m", "5h" (up to two days), "9d".
func compactAge(t, now time.Time) string {
	if t.IsZero() {
		return "-"
	}
	d := max(0, now.Sub(t))
	switch {
	case d < time.Minute:
		return strconv.Itoa(int(d/time.Second)) + "s"
	case d < time.Hour:
		return strconv.Itoa(int(d/time.Minute)) + "m"
	case d < 48*time.Hour:
		return strconv.Itoa(int(d/time.Hour)) + "h"
	}
	return strconv.Itoa(int(d/(24*time.Hour))) + "d"
}

// The grant a job holds, one cell each; "-" where it holds none.
func coresCell(n int) string {
	if n <= 0 {
		return "-"
	}
	return strconv.Itoa(n)
}

func cardsCell(cards []string) string {
	if len(cards) == 0 {
		return "-"
	}
	return strings.Join(cards, ",")
}

// shareCell is cardsCell with a share's size after its card, and what its
// processes hold before the size where the driver says: "1 12G/10G".
func shareCell(cards []string, share int64, used *int64) string {
	s := cardsCell(cards)
	if share <= 0 || len(cards) != 1 {
		return s // an array's shares together are on several cards
	}
	s += " "
	if used != nil && *used >= 0 {
		s += accounting.FormatSize(*used) + "/"
	}
	return s + accounting.FormatSize(share)
}

// coresUsed and memoryUsed put what a run uses before what it was granted,
// "1.7/2" and "120M/256M", where its unit's cgroup says: the cores it kept
// busy on average over its age, and its memory now.
func coresUsed(j supervisor.JobStatus, now time.Time) string {
	if j.Used == nil || j.Used.CPUSeconds == nil || j.CPUs <= 0 {
		return ""
	}
	age := now.Sub(j.Since).Seconds()
	if age <= 0 {
		return ""
	}
	return strconv.FormatFloat(*j.Used.CPUSeconds/age, 'f', 1, 64) + "/"
}

func memoryUsed(j supervisor.JobStatus) string {
	if j.Used == nil || j.Used.MemoryBytes == nil {
		return ""
	}
	return accounting.FormatSize(*j.Used.MemoryBytes) + "/"
}

func memoryCell(n int64) string {
	if n <= 0 {
		return "-"
	}
	return accounting.FormatSize(n)
}

func fileLine(file string, n int) string {
	if n > 0 {
		return file + ":" + strconv.Itoa(n)
	}
	return file
}
