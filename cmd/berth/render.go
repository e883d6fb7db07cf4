package main

import (
	"cmp"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/berthd/berth/accounting"
	"github.com/berthd/berth/supervisor"
)

// This file turns the daemon's answers into the text a person reads:
// `berth status`, `jobs`, `show`, `history`, `flavors` and what `berth
// machine` adds while a daemon runs. Every renderer builds its output as
// lines of styled spans and writes them through one function, so the
// coloured text and the plain text come from the same layout: stripping the
// colour codes gives exactly what is printed without colour, and widths are
// counted once, on the plain text.

// renderOptions are what the caller knows about where the text goes.
type renderOptions struct {
	width int       // terminal columns; 0 = 80
	color bool      // ANSI colours: the caller decides (a terminal and no NO_COLOR)
	now   time.Time // for ages ("3m", "2h", "5d"); the caller passes status.Now
}

// renderZone is where wall-clock times are written for a person: local
// time. Tests pin it to UTC instead of changing time.Local, which every
// goroutine of the test binary reads.
var renderZone = time.Local

func (o renderOptions) columns() int {
	if o.width <= 0 {
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

func ln(spans ...textSpan) textLine     { return textLine(spans) }
func plainSpan(s string) textSpan       { return textSpan{text: s} }
func styledSpan(s, sgr string) textSpan { return textSpan{text: s, sgr: sgr} }

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
		if limit > 0 {
			l = l.clip(limit)
		}
		for _, s := range l.trimRight() {
			if o.color && s.sgr != "" && strings.TrimSpace(s.text) != "" {
				b.WriteString(s.sgr + s.text + sgrReset)
			} else {
				b.WriteString(s.text)
			}
		}
		b.WriteByte('\n')
	}
	io.WriteString(w, b.String())
}

func firstRunes(s string, n int) string {
	if n <= 0 {
		return ""
	}
	i := 0
	for k := range s {
		if i == n {
			return s[:k]
		}
		i++
	}
	return s
}

func lastRunes(s string, n int) string {
	if n <= 0 {
		return ""
	}
	k := utf8.RuneCountInString(s)
	if n >= k {
		return s
	}
	i := 0
	for j := range s {
		if i == k-n {
			return s[j:]
		}
		i++
	}
	return ""
}

func runeLen(s string) int { return utf8.RuneCountInString(s) }

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

// expectedClause is how the daemon ends a waiting head's reason.
const expectedClause = "; expected start ~"

// ellipsizeWhy shortens a reason at its end, except that when the job is
// expected to start is kept where there is room for it: "needs 2 g…; expected
// start ~14:25", then "expected start ~14:25", then "start ~14:25". When a job will start is the answer a
// person looks for, more than the detail of what it is short of.
func ellipsizeWhy(s string, n int) string {
	if runeLen(s) <= n {
		return s
	}
	if i := strings.LastIndex(s, expectedClause); i >= 0 {
		tail := s[i:]
		if room := n - runeLen(tail) - 1; room >= 4 {
			return strings.TrimRight(firstRunes(s[:i], room), " ") + "…" + tail
		}
		at := s[i+len(expectedClause):]
		for _, short := range []string{"expected start ~" + at, "start ~" + at} {
			if runeLen(short) <= n {
				return short
			}
		}
	}
	return ellipsize(s, n)
}

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
// where the line ends.
func wrapWords(s string, width int, prefix, indent string, sgr string) []textLine {
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

// stateOrder is the order in which states are counted and listed: what holds
// the machine, then what waits for it, then what needs a person, then what
// is over.
var stateOrder = []string{
	"running", "starting", "stopping", "waiting", "backoff", "failed",
	"unplaceable", "invalid", "done", "stopped", "disabled",
}

// stateGroup ranks a state for the status listing; states of one group are
// listed together.
func stateGroup(state string) int {
	switch state {
	case "running", "starting", "stopping":
		return 0
	case "waiting":
		return 1
	case "backoff":
		return 2
	case "failed":
		return 3
	case "unplaceable":
		return 4
	case "invalid":
		return 5
	case "done", "stopped", "disabled":
		return 7
	}
	return 6 // a state this client does not know: with what needs a look
}

// stateIndex orders the states of one group: running before starting, done
// before stopped. A state this client does not know comes last.
func stateIndex(state string) int {
	if i := slices.Index(stateOrder, state); i >= 0 {
		return i
	}
	return len(stateOrder)
}

func stateSGR(state string) string {
	switch state {
	case "running":
		return sgrGreen
	case "waiting", "backoff", "starting", "stopping":
		return sgrYellow
	case "failed", "unplaceable", "invalid":
		return sgrRed
	case "done", "stopped", "disabled":
		return sgrDim
	}
	return ""
}

// compareForStatus orders jobs so the ones a person looks for come first:
// what holds the machine, what waits for it (the head of the queue, the job
// with an expected start, first; then the others in the order they started
// waiting), what needs a person, and what is over. Within a state, by name.
func compareForStatus(a, b supervisor.JobStatus) int {
	if c := cmp.Compare(stateGroup(a.State), stateGroup(b.State)); c != 0 {
		return c
	}
	if c := cmp.Compare(stateIndex(a.State), stateIndex(b.State)); c != 0 {
		return c
	}
	if a.State == "waiting" {
		switch {
		case a.ExpectedStart != nil && b.ExpectedStart == nil:
			return -1
		case a.ExpectedStart == nil && b.ExpectedStart != nil:
			return 1
		case a.ExpectedStart != nil:
			if c := a.ExpectedStart.Compare(*b.ExpectedStart); c != 0 {
				return c
			}
		}
		if c := a.Since.Compare(b.Since); c != 0 {
			return c
		}
	}
	return strings.Compare(a.Name, b.Name)
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

func memoryCell(n int64) string {
	if n <= 0 {
		return "-"
	}
	return accounting.FormatSize(n)
}

// errorFile matches the "file:line:" that starts a configuration error.
var errorFile = regexp.MustCompile(`^(.+?):\d+:`)

// errorsSummary says how many files have errors, the way the daemon's status
// line does: "1 file with errors".
func errorsSummary(errs []string) string {
	files := map[string]bool{}
	for _, e := range errs {
		m := errorFile.FindStringSubmatch(e)
		if m == nil {
			return count(len(errs), "configuration error")
		}
		files[m[1]] = true
	}
	if len(files) == 1 {
		return "1 file with errors"
	}
	return fmt.Sprintf("%d files with errors", len(files))
}

// jobWhy is the WHY cell: the daemon's reason, and for a job that has been
// restarted, how often in a row.
func jobWhy(j supervisor.JobStatus) string {
	why := j.Why
	if j.State == "done" {
		why = "" // done is exit 0, which is all the daemon's reason says
	}
	if j.Restarts > 0 && j.State != "waiting" {
		r := count(j.Restarts, "restart")
		if why != "" {
			why += "; " + r
		} else {
			why = r
		}
	}
	return why
}

// renderStatus is `berth status`: a header, the machine, one line per job,
// and the configuration errors. No line is longer than o.width.
func renderStatus(w io.Writer, s supervisor.Status, o renderOptions) {
	width := o.columns()
	jobs := slices.Clone(s.Jobs)
	slices.SortStableFunc(jobs, compareForStatus)

	var out []textLine
	out = append(out, statusHeader(s, jobs, width)...)
	out = append(out, machineSummary(s.Machine, width)...)
	out = append(out, cardGrid(s.Machine.Cards, width)...)
	out = append(out, nil)
	if len(jobs) == 0 {
		out = append(out, ln(plainSpan("no jobs declared")))
	} else {
		out = append(out, statusTable(s, jobs, width, o.clock())...)
	}
	if len(s.Errors) > 0 {
		out = append(out, nil, ln(styledSpan("errors:", sgrRed)))
		for _, e := range s.Errors {
			out = append(out, wrapWords(e, width, "  ", "    ", sgrRed)...)
		}
	}
	o.writeLines(w, out, width)
}

func statusHeader(s supervisor.Status, jobs []supervisor.JobStatus, width int) []textLine {
	host := s.Host
	if host == "" {
		host = "berth"
	}
	counts := map[string]int{}
	for _, j := range jobs {
		counts[j.State]++
	}
	states := slices.Clone(stateOrder)
	for state := range counts {
		if !slices.Contains(states, state) {
			states = append(states, state)
		}
	}
	slices.Sort(states[len(stateOrder):])

	items := []flowItem{{text: ln(styledSpan(host, sgrBold))}}
	sep := " — "
	for _, state := range states {
		if counts[state] == 0 {
			continue
		}
		items = append(items, flowItem{sep: sep, text: ln(styledSpan(fmt.Sprintf("%d %s", counts[state], state), stateSGR(state)))})
		sep = ", "
	}
	if len(jobs) == 0 {
		items = append(items, flowItem{sep: sep, text: ln(plainSpan("no jobs"))})
	}
	if len(s.Errors) > 0 {
		items = append(items, flowItem{sep: " · ", text: ln(styledSpan(errorsSummary(s.Errors), sgrRed))})
	}
	return flow(items, width, 2)
}

func machineSummary(m supervisor.MachineStatus, width int) []textLine {
	items := []flowItem{{text: ln(plainSpan(fmt.Sprintf("cores %d/%d used", m.CPUs-m.CPUsFree, m.CPUs)))}}
	items = append(items, flowItem{sep: "   ", text: ln(plainSpan(memoryUse(m)))})
	return flow(items, width, 0)
}

func memoryUse(m supervisor.MachineStatus) string {
	if m.RAMBytes == nil || m.RAMFreeBytes == nil {
		return "memory not accounted"
	}
	used := max(0, *m.RAMBytes-*m.RAMFreeBytes)
	return fmt.Sprintf("memory %s/%s used", accounting.FormatSize(used), accounting.FormatSize(*m.RAMBytes))
}

// cardGrid is one cell per card, "0 train-resnet" or "3 free", all cells as
// wide so that the rows a narrow terminal wraps them onto line up, as
// nvidia-smi's do. Cells are narrowed (holders cut in the middle, never
// below a dozen runes) to fit more per row, and rows are balanced: eight
// cards at 80 columns are two rows of four, not 3+3+2.
func cardGrid(cards []supervisor.CardStatus, width int) []textLine {
	const label, gap, holderFloor = "cards  ", 3, 12
	if len(cards) == 0 {
		return []textLine{ln(plainSpan(label + "none"))}
	}
	room := max(1, width-runeLen(label))
	natural, names, holders := 0, 0, 0
	for _, c := range cards {
		holder := cmp.Or(c.Holder, "free")
		natural = max(natural, runeLen(c.Name)+1+runeLen(holder))
		names = max(names, runeLen(c.Name))
		holders = max(holders, runeLen(holder))
	}
	narrowest := min(natural, names+1+min(holders, holderFloor), room)
	perRow := max(1, min(len(cards), (room+gap)/(narrowest+gap)))
	rows := (len(cards) + perRow - 1) / perRow
	perRow = (len(cards) + rows - 1) / rows
	cell := max(1, min(natural, room, (room+gap)/perRow-gap))

	var out []textLine
	for start := 0; start < len(cards); start += perRow {
		lead := label
		if start > 0 {
			lead = strings.Repeat(" ", runeLen(label))
		}
		l := ln(plainSpan(lead))
		for i, c := range cards[start:min(start+perRow, len(cards))] {
			if i > 0 {
				l = append(l, plainSpan(strings.Repeat(" ", gap)))
			}
			l = append(l, cardCell(c, cell)...)
		}
		out = append(out, l)
	}
	return out
}

func cardCell(c supervisor.CardStatus, width int) textLine {
	holder, sgr := c.Holder, ""
	if holder == "" {
		holder, sgr = "free", sgrGreen
	}
	room := width - runeLen(c.Name) - 1
	if room < min(4, runeLen(holder)) {
		text := ellipsize(c.Name+" "+holder, width)
		return ln(plainSpan(text), plainSpan(strings.Repeat(" ", width-runeLen(text))))
	}
	holder = ellipsizeMiddle(holder, room)
	return ln(plainSpan(c.Name+" "), styledSpan(holder, sgr), plainSpan(strings.Repeat(" ", room-runeLen(holder))))
}

func statusTable(s supervisor.Status, jobs []supervisor.JobStatus, width int, now time.Time) []textLine {
	showCards := len(s.Machine.Cards) > 0
	showMemory := s.Machine.RAMBytes != nil
	showWhy := false
	for _, j := range jobs {
		showCards = showCards || len(j.GPUs) > 0
		showMemory = showMemory || j.RAMBytes > 0
		showWhy = showWhy || jobWhy(j) != ""
	}

	t := &textTable{gap: 2}
	name := len(t.cols)
	t.cols = append(t.cols, textColumn{title: "NAME", cut: ellipsizeMiddle})
	t.cols = append(t.cols, textColumn{title: "STATE"}, textColumn{title: "CORES", right: true})
	cards, memory, why := -1, -1, -1
	if showCards {
		cards = len(t.cols)
		t.cols = append(t.cols, textColumn{title: "CARDS"})
	}
	if showMemory {
		memory = len(t.cols)
		t.cols = append(t.cols, textColumn{title: "MEMORY", right: true})
	}
	age := len(t.cols)
	t.cols = append(t.cols, textColumn{title: "AGE"})
	if showWhy {
		why = len(t.cols)
		t.cols = append(t.cols, textColumn{title: "WHY", cut: ellipsizeWhy})
	}

	for _, j := range jobs {
		row := make([]textSpan, len(t.cols))
		row[name] = plainSpan(j.Name)
		row[1] = styledSpan(j.State, stateSGR(j.State))
		row[2] = plainSpan(coresCell(j.CPUs))
		if cards >= 0 {
			row[cards] = plainSpan(cardsCell(j.GPUs))
		}
		if memory >= 0 {
			row[memory] = plainSpan(memoryCell(j.RAMBytes))
		}
		if why >= 0 {
			sgr := ""
			if stateSGR(j.State) == sgrRed {
				sgr = sgrRed
			}
			row[why] = styledSpan(jobWhy(j), sgr)
		}
		row[age] = plainSpan(compactAge(j.Since, now))
		t.add(row...)
	}
	t.fitContent()
	nameFloor := runeLen("NAME")
	for _, j := range jobs {
		if n := runeLen(j.Name); n <= 20 {
			nameFloor = max(nameFloor, n)
		}
	}

	// Too wide: the reason gives way first, then long names (one outlier
	// name must not squeeze every reason), then the reason a little more.
	// Where it would still be cut below 16 runes it moves to a line of its
	// own under its job, and the names get their room back. Then names are
	// cut to ten runes; on very narrow terminals what a job holds goes (the
	// machine line still sums it up), and last the names down to four.
	below := false
	if why >= 0 {
		t.shrink(why, min(t.colWidth(why), 24), width)
		t.shrink(name, nameFloor, width)
		t.shrink(why, min(t.colWidth(why), 16), width)
		if t.total() > width {
			below = true
			t.fitContent()
			t.cols[why].width = 0
		}
	}
	t.shrink(name, nameFloor, width)
	t.shrink(name, min(t.colWidth(name), 10), width)
	for _, i := range []int{memory, cards, 2} {
		if i >= 0 && t.total() > width {
			t.cols[i].width = 0
		}
	}
	if slack := width - t.total(); slack > 0 {
		natural := runeLen("NAME")
		for _, j := range jobs {
			natural = max(natural, runeLen(j.Name))
		}
		t.cols[name].width = min(natural, t.cols[name].width+slack)
	}
	t.shrink(name, 4, width)
	if t.total() > width {
		t.gap = 1
	}
	lines := t.lines(sgrBold)
	if !below {
		return lines
	}
	out := lines[:1:1]
	for i, l := range lines[1:] {
		out = append(out, l)
		if r := t.rows[i][why]; r.text != "" {
			out = append(out, ln(plainSpan("    "), styledSpan(ellipsizeWhy(r.text, width-4), r.sgr)))
		}
	}
	return out
}

func (t *textTable) colWidth(i int) int {
	if i < 0 {
		return 0
	}
	return t.cols[i].width
}

// renderJobs is `berth jobs`: one line per job, in name order, for scripts
// as much as for people: a header, fixed columns, every cell non-empty ("-"),
// nothing cut, no colour.
func renderJobs(w io.Writer, jobs []supervisor.JobStatus, o renderOptions) {
	jobs = slices.Clone(jobs)
	slices.SortStableFunc(jobs, func(a, b supervisor.JobStatus) int { return strings.Compare(a.Name, b.Name) })
	t := &textTable{gap: 2, cols: []textColumn{
		{title: "NAME"}, {title: "STATE"}, {title: "CORES", right: true}, {title: "CARDS"},
		{title: "MEMORY", right: true}, {title: "SINCE"},
	}}
	for _, j := range jobs {
		since := "-"
		if !j.Since.IsZero() {
			since = j.Since.In(renderZone).Format(time.RFC3339)
		}
		t.add(plainSpan(j.Name), plainSpan(j.State), plainSpan(coresCell(j.CPUs)), plainSpan(cardsCell(j.GPUs)),
			plainSpan(memoryCell(j.RAMBytes)), plainSpan(since))
	}
	t.fitContent()
	renderOptions{}.writeLines(w, t.lines(""), 0)
}

// renderHistory is `berth history`: runs, newest first.
func renderHistory(w io.Writer, runs []supervisor.RunView, o renderOptions) {
	if len(runs) == 0 {
		io.WriteString(w, "no runs\n")
		return
	}
	o.writeLines(w, historyTable(runs, true, o.clock()), 0)
}

func historyTable(runs []supervisor.RunView, withJob bool, now time.Time) []textLine {
	runs = slices.Clone(runs)
	slices.SortStableFunc(runs, func(a, b supervisor.RunView) int { return cmp.Compare(b.ID, a.ID) })
	t := &textTable{gap: 2, cols: []textColumn{{title: "RUN", right: true}}}
	if withJob {
		t.cols = append(t.cols, textColumn{title: "JOB"})
	}
	t.cols = append(t.cols, textColumn{title: "START"}, textColumn{title: "DURATION", right: true},
		textColumn{title: "CORES", right: true}, textColumn{title: "CARDS"}, textColumn{title: "RESULT"})
	for _, r := range runs {
		row := []textSpan{plainSpan(strconv.FormatUint(r.ID, 10))}
		if withJob {
			row = append(row, plainSpan(r.Job))
		}
		result, sgr := runResult(r)
		row = append(row, plainSpan(r.Start.In(renderZone).Format("2006-01-02 15:04:05")),
			plainSpan(runDuration(r, now)), plainSpan(coresCell(r.CPUs)), plainSpan(cardsCell(r.GPUs)), styledSpan(result, sgr))
		t.add(row...)
	}
	t.fitContent()
	return t.lines(sgrBold)
}

// runDuration is how long a run lasted, or has lasted so far, to the second
// (to the minute past an hour: nobody reads the seconds of a day-long run).
func runDuration(r supervisor.RunView, now time.Time) string {
	end := now
	if r.End != nil {
		end = *r.End
	}
	d := max(0, end.Sub(r.Start))
	switch {
	case d == 0:
		return "0s"
	case d < time.Second:
		d = d.Round(time.Millisecond)
	case d < time.Hour:
		d = d.Round(time.Second)
	default:
		d = d.Round(time.Minute)
	}
	return accounting.FormatDuration(d)
}

// runResult is how a run ended, "failed (exit 3)", "timed out (SIGTERM)",
// with its colour.
func runResult(r supervisor.RunView) (string, string) {
	if r.End == nil {
		return "running", sgrGreen
	}
	reason := r.Reason
	if reason == "" {
		reason = "ended"
	}
	var detail string
	switch {
	case r.Signal != "":
		detail = r.Signal
	case r.ExitCode != nil:
		detail = "exit " + strconv.Itoa(*r.ExitCode)
	}
	if detail != "" {
		reason += " (" + detail + ")"
	}
	switch r.Reason {
	case "exited", "stopped":
		return reason, ""
	case "lost":
		return reason, sgrYellow
	}
	return reason, sgrRed
}

// renderFlavors is `berth flavors`.
func renderFlavors(w io.Writer, flavors []supervisor.FlavorView, o renderOptions) {
	if len(flavors) == 0 {
		io.WriteString(w, "no flavors declared\n")
		return
	}
	flavors = slices.Clone(flavors)
	slices.SortStableFunc(flavors, func(a, b supervisor.FlavorView) int { return strings.Compare(a.Name, b.Name) })
	t := &textTable{gap: 2, cols: []textColumn{
		{title: "NAME"}, {title: "CORES", right: true}, {title: "CARDS", right: true},
		{title: "MEMORY", right: true}, {title: "USED-BY"}, {title: "FILE:LINE"},
	}}
	for _, f := range flavors {
		usedBy := "-"
		if len(f.UsedBy) > 0 {
			usedBy = strings.Join(f.UsedBy, ",")
		}
		t.add(plainSpan(f.Name), plainSpan(strconv.Itoa(f.Resources.CPUs)), plainSpan(strconv.Itoa(f.Resources.GPUs)),
			plainSpan(memoryCell(f.Resources.RAMBytes)), plainSpan(usedBy), plainSpan(fileLine(f.File, f.Line)))
	}
	t.fitContent()
	o.writeLines(w, t.lines(sgrBold), 0)
}

func fileLine(file string, n int) string {
	if n > 0 {
		return file + ":" + strconv.Itoa(n)
	}
	return file
}

// renderHolders is what `berth machine` adds while a daemon runs: what is
// in use, and who holds each card. The caller separates it from what it
// printed before.
func renderHolders(w io.Writer, m supervisor.MachineStatus, o renderOptions) {
	keys := []string{"cores", "memory"}
	for i := range m.Cards {
		keys = append(keys, "card "+strconv.Itoa(i))
	}
	keyWidth, holderWidth := 0, 0
	for _, k := range keys {
		keyWidth = max(keyWidth, runeLen(k))
	}
	for _, c := range m.Cards {
		holderWidth = max(holderWidth, runeLen(cmp.Or(c.Holder, "free")))
	}
	lead := func(key string) textSpan {
		return plainSpan("  " + key + strings.Repeat(" ", keyWidth-runeLen(key)+2))
	}
	out := []textLine{
		ln(plainSpan("in use (berth daemon):")),
		ln(lead("cores"), plainSpan(fmt.Sprintf("%d/%d used", m.CPUs-m.CPUsFree, m.CPUs))),
		ln(lead("memory"), plainSpan(strings.TrimPrefix(memoryUse(m), "memory "))),
	}
	for i, c := range m.Cards {
		holder := styledSpan("free", sgrGreen)
		if c.Holder != "" {
			holder = plainSpan(c.Holder)
		}
		l := ln(lead(keys[2+i]), holder)
		// A card the daemon names otherwise than by its index (a UUID, a MIG
		// instance, "2" under CUDA_VISIBLE_DEVICES=2,3) says its name too.
		if c.Name != strconv.Itoa(i) {
			l = append(l, plainSpan(strings.Repeat(" ", holderWidth-runeLen(holder.text)+2)), styledSpan(c.Name, sgrDim))
		}
		out = append(out, l)
	}
	o.writeLines(w, out, 0)
}

// renderShow is `berth show JOB`: where the job stands, its definition as
// loaded, the environment its next run would get, its last runs and where
// its output is. Nothing is cut: this is the page a person reads to the end.
func renderShow(w io.Writer, d supervisor.JobDetail, o renderOptions) {
	st, def := d.Status, d.Definition
	name := cmp.Or(def.Name, st.Name)
	now := o.clock()

	var out []textLine
	head := ln(styledSpan(name, sgrBold), plainSpan(" — "), styledSpan(cmp.Or(st.State, "unknown"), stateSGR(st.State)))
	if !st.Since.IsZero() {
		head = append(head, plainSpan(fmt.Sprintf(" since %s (%s ago)",
			st.Since.In(renderZone).Format("2006-01-02 15:04:05"), compactAge(st.Since, now))))
	}
	out = append(out, head)

	var kv keyValues
	if st.Why != "" {
		sgr := ""
		if stateSGR(st.State) == sgrRed {
			sgr = sgrRed
		}
		kv.add("why", styledSpan(st.Why, sgr))
	}
	if st.Run != 0 && (st.PID != 0 || stateGroup(st.State) == 0) {
		run := strconv.FormatUint(st.Run, 10)
		if st.PID != 0 {
			run += ", pid " + strconv.Itoa(st.PID)
		}
		kv.add("run", plainSpan(run))
		kv.add("holds", plainSpan(holdsText(st)))
	}
	if st.Restarts > 0 {
		kv.add("restarts", plainSpan(strconv.Itoa(st.Restarts)+" in a row"))
	}
	if st.ExpectedStart != nil {
		kv.add("starts", plainSpan("~"+st.ExpectedStart.In(renderZone).Format("2006-01-02 15:04")+" (expected)"))
	}

	var def2 keyValues
	if def.Description != "" {
		def2.add("description", plainSpan(def.Description))
	}
	def2.add("cmd", plainSpan(quoteArgv(def.Cmd)))
	if def.Dir != "" {
		def2.add("dir", plainSpan(def.Dir))
	}
	if def.User != "" {
		def2.add("user", plainSpan(def.User))
	}
	if def.Group != "" {
		def2.add("group", plainSpan(def.Group))
	}
	def2.add("resources", plainSpan(resourcesText(def)))
	def2.add("restart", plainSpan(def.Restart))
	maxRestarts := "unlimited"
	if def.MaxRestarts != nil {
		maxRestarts = strconv.Itoa(*def.MaxRestarts)
	}
	def2.add("max_restarts", plainSpan(maxRestarts))
	def2.add("timeout", plainSpan(cmp.Or(def.Timeout, "none")))
	def2.add("stop_signal", plainSpan(def.StopSignal))
	def2.add("stop_timeout", plainSpan(def.StopTimeout))
	def2.add("priority", plainSpan(strconv.Itoa(def.Priority)))
	def2.add("on_change", plainSpan(def.OnChange))
	def2.add("enabled", plainSpan(strconv.FormatBool(def.Enabled)))

	keyWidth := max(kv.keyWidth(), def2.keyWidth())
	out = append(out, kv.lines(keyWidth)...)
	out = append(out, nil, ln(plainSpan("declared in "), styledSpan(fileLine(def.File, def.Line), sgrBold)))
	out = append(out, def2.lines(keyWidth)...)

	out = append(out, nil, ln(plainSpan("environment of the next run (berth: set from the grant; job: the job's env)")))
	if len(d.NextEnv) == 0 {
		out = append(out, ln(plainSpan("  (empty)")))
	}
	env := slices.Clone(d.NextEnv)
	slices.Sort(env)
	for _, kv := range env {
		key, _, _ := strings.Cut(kv, "=")
		mark := "     "
		switch {
		case hasKey(def.Env, key):
			mark = "job  "
		case derivedVar(key):
			mark = "berth"
		}
		out = append(out, ln(plainSpan("  "), styledSpan(mark, sgrDim), plainSpan("  "+kv)))
	}

	out = append(out, nil, ln(plainSpan("last runs")))
	if len(d.Runs) == 0 {
		out = append(out, ln(plainSpan("  none yet")))
	} else {
		for _, l := range historyTable(d.Runs, false, now) {
			out = append(out, append(ln(plainSpan("  ")), l...))
		}
	}

	out = append(out, nil, ln(plainSpan("logs  "), styledSpan(logsWhere(name, d.Logs), sgrBold),
		plainSpan(" (or berth logs "+quoteArg(name)+")")))
	o.writeLines(w, out, 0)
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

func holdsText(st supervisor.JobStatus) string {
	var parts []string
	if st.CPUs > 0 {
		parts = append(parts, count(st.CPUs, "core"))
	}
	if len(st.GPUs) > 0 {
		parts = append(parts, "cards "+strings.Join(st.GPUs, ","))
	}
	if st.RAMBytes > 0 {
		parts = append(parts, accounting.FormatSize(st.RAMBytes)+" memory")
	}
	if len(parts) == 0 {
		return "nothing"
	}
	return strings.Join(parts, ", ")
}

// resourcesText is what the job asks, in the words of its file, resolved
// through its flavor: `cpus 8, gpus 2, ram 32G (flavor "gpu-large")`.
func resourcesText(def supervisor.JobDefinition) string {
	r := def.Resources
	cpus := strconv.Itoa(r.CPUs)
	if r.CPUs == 0 {
		cpus += " (unaccounted: holds nothing, never waits)"
	}
	ram := "not asked"
	if r.RAMBytes > 0 {
		ram = accounting.FormatSize(r.RAMBytes)
	}
	s := fmt.Sprintf("cpus %s, gpus %d, ram %s", cpus, r.GPUs, ram)
	if def.Flavor != "" {
		s += fmt.Sprintf(" (flavor %q)", def.Flavor)
	}
	return s
}

func hasKey(m map[string]string, k string) bool {
	_, ok := m[k]
	return ok
}

// derivedVar tells the variables berth sets from a grant (DESIGN.md, "The
// environment a job is started with").
func derivedVar(key string) bool {
	return slices.Contains(accounting.ThreadVars, key) || key == "CUDA_VISIBLE_DEVICES" || strings.HasPrefix(key, "BERTH_")
}

func logsWhere(job, logs string) string {
	if logs == "journal" {
		return "journalctl -t " + quoteArg(job)
	}
	return logs
}

// quoteArgv writes a command line the way a shell would read it back.
func quoteArgv(argv []string) string {
	quoted := make([]string, len(argv))
	for i, a := range argv {
		quoted[i] = quoteArg(a)
	}
	return strings.Join(quoted, " ")
}

var shellSafe = regexp.MustCompile(`^[A-Za-z0-9_@%+=:,./-]+$`)

func quoteArg(s string) string {
	if shellSafe.MatchString(s) {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
