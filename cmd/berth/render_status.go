package main

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/berthd/berth/accounting"
	"github.com/berthd/berth/supervisor"
	"github.com/berthd/berth/supervisor/store"
)

// renderStatus is `berth status`: a header, the machine, one line per job,
// and the configuration errors. No line is longer than o.width.
func renderStatus(w io.Writer, s supervisor.Status, o renderOptions) {
	o.writeLines(w, layoutStatus(s, o).lines(), o.columns())
}

// statusPicture is berth status laid out, in parts, so that a screen
// shorter than the whole (berth status --watch) can cut the job list.
type statusPicture struct {
	top  []textLine   // the header, the machine, the runner, a blank line
	head []textLine   // the job table's title row, or "no jobs declared"
	jobs [][]textLine // each job's line (two where its why goes below)
	// errors are the configuration errors' lines, each error's, said
	// below the jobs shown but those their lines say (tail): saidBy, for
	// each job's lines, the error they say (-1: none).
	errors [][]textLine
	saidBy []int
	// hint, where a job failed, names the commands that say why; shown
	// where every job is, and there is room.
	hint []textLine
}

// viewer is the person who runs the client.
type viewer struct {
	uid  int
	name string
}

// mayRead says whether v may read the output of job, whose daemon runs
// as daemonUID: root and the daemon's own user every job's, a person
// their own.
func (v *viewer) mayRead(j supervisor.JobStatus, daemonUID int) bool {
	return v == nil || v.uid == 0 || v.uid == daemonUID || j.Owner != "" && j.Owner == v.name
}

func layoutStatus(s supervisor.Status, o renderOptions) statusPicture {
	width := o.columns()
	jobs := slices.Clone(s.Jobs)
	slices.SortStableFunc(jobs, compareForStatus)

	var p statusPicture
	p.top = append(p.top, statusHeader(s, jobs, width)...)
	p.top = append(p.top, machineSummary(s.Machine, width)...)
	p.top = append(p.top, cardGrid(s.Machine.Cards, width)...)
	p.top = append(p.top, foreignUse(s.Machine.Cards, width)...)
	p.top = append(p.top, cardShares(s.Machine.Cards, width)...)
	if s.Runner != "" {
		sgr := sgrDim
		if s.Runner != "units" {
			sgr = sgrYellow
		}
		p.top = append(p.top, wrapWords(msgRunner(s.Runner, s.CoresByAffinity), width, "", "  ", sgr)...)
	}
	if s.Daemon.Stopping {
		p.top = append(p.top, wrapWords(msgDaemonStopping(s.Runner == "units"), width, "", "  ", sgrYellow)...)
	}
	if s.Daemon.Loading {
		p.top = append(p.top, wrapWords(msgDaemonLoading(), width, "", "  ", sgrYellow)...)
	}
	if s.Daemon.BinaryReplaced {
		p.top = append(p.top, wrapWords(msgBinaryReplaced(s.Daemon, s.Runner, version), width, "", "  ", sgrYellow)...)
	}
	p.top = append(p.top, nil)
	if len(jobs) == 0 {
		none := "no jobs declared"
		if s.Daemon.Loading {
			none = "no jobs yet"
		}
		p.head = []textLine{ln(plainSpan(cmp.Or(o.noJobs, none)))}
	} else {
		p.head, p.jobs = statusTable(s, jobs, width, o.clock())
	}
	// A failed job whose output the viewer may read (trial AN: bob was
	// pointed to berth logs of root's job, which he is refused), and that
	// wrote some (trial AO: one that could not be started, its why naming
	// berth show, was sent to berth logs).
	if i := slices.IndexFunc(jobs, func(j supervisor.JobStatus) bool {
		return j.State == store.StateFailed.String() && o.viewer.mayRead(j, s.Daemon.UID) && !strings.HasPrefix(j.Why, supervisor.CannotStart)
	}); i >= 0 {
		p.hint = wrapWords(msgFailedHint(jobs[i].Name, jobs[i].Array != nil), width, "", "  ", sgrDim)
	}
	p.errors = make([][]textLine, len(s.Problems))
	for i, pr := range s.Problems {
		p.errors[i] = wrapWords(pr.Text, width, "  ", "    ", sgrRed)
	}
	p.saidBy = saidOnLines(s.Problems, jobs[:len(p.jobs)], p.jobs)
	return p
}

// saidOnLines is, for each job's rows, which of ps its line says whole as
// its why: a job that fits no machine, or whose user is unknown. -1 for
// none.
func saidOnLines(ps []supervisor.Problem, jobs []supervisor.JobStatus, rows [][]textLine) []int {
	row := make(map[string]int, len(jobs))
	for i, j := range jobs {
		row[j.Name] = i
	}
	said := make([]int, len(jobs))
	for i := range said {
		said[i] = -1
	}
	for k, p := range ps {
		i, ok := row[p.Job]
		if p.Kind != "job" || !ok || said[i] >= 0 {
			continue
		}
		text := escapeText(p.Text)
		for _, l := range rows[i] {
			for _, sp := range l {
				if strings.Contains(sp.text, text) {
					said[i] = k
				}
			}
		}
	}
	return said
}

// said is which errors the lines of the first shown jobs say, whole, as
// their whys.
func (p statusPicture) said(shown int) map[int]bool {
	said := make(map[int]bool, shown)
	for _, k := range p.saidBy[:shown] {
		if k >= 0 {
			said[k] = true
		}
	}
	return said
}

// tail is the configuration errors below the first shown of the jobs'
// lines, in at most room lines (-1: no bound): each but those a shown
// job's line says already, those that fit whole, then a line that says
// how many more there are. A job that fits no machine, or whose user is
// unknown, is said once (10 000 such jobs were 20 000 lines: trial AF); a
// why cut to fit the terminal, or a job's line left off the screen, leaves
// its problem here.
func (p statusPicture) tail(shown, room int) []textLine {
	said := p.said(shown)
	if len(said) == len(p.errors) || room == 0 {
		return nil
	}
	out := []textLine{nil, ln(styledSpan("errors:", sgrRed))}
	left := len(p.errors) - len(said)
	for k, e := range p.errors {
		if said[k] {
			continue
		}
		// The last may take the line the count of the rest would.
		if room >= 0 && len(out)+len(e)+min(1, left-1) > room {
			out = append(out, ln(styledSpan(msgMoreErrors(left), sgrDim)))
			break
		}
		out = append(out, e...)
		left--
	}
	return out
}

// lines is the whole picture.
func (p statusPicture) lines() []textLine {
	out := slices.Concat(p.top, p.head)
	for _, j := range p.jobs {
		out = append(out, j...)
	}
	if len(p.hint) > 0 {
		out = append(append(out, nil), p.hint...)
	}
	return append(out, p.tail(len(p.jobs), -1)...)
}

// fit is the picture in at most height lines. Where it is taller, the job
// list is cut, the jobs a person looks for first (compareForStatus) kept,
// and a line says how many more there are; what still does not fit (a
// screen of a few lines) is cut at the bottom. The errors below say what
// the jobs shown do not: the most jobs are shown that leave room for them.
func (p statusPicture) fit(height int) []textLine {
	all := p.lines()
	if len(all) <= height {
		return all
	}
	// How many lines the errors take with the first n jobs shown: all of
	// them, less those the jobs' lines say, less their heading once none
	// is left; at most half the screen where jobs are cut for them, the
	// rest counted on a line (10 000 jobs that fit no machine left no room
	// for any job: the review).
	total := 2 // the blank line and the heading
	for _, e := range p.errors {
		total += len(e)
	}
	tailLen := func(n int) int {
		said := p.said(n)
		if len(said) == len(p.errors) {
			return 0
		}
		lines := total
		for k := range said {
			lines -= len(p.errors[k])
		}
		return lines
	}
	errRoom := max(4, height/2)
	moreLine := func(n int) int { // the line that says how many more jobs
		if n < len(p.jobs) {
			return 1
		}
		return 0
	}
	shown := 0
	for n, used := 1, 0; n <= len(p.jobs); n++ {
		used += len(p.jobs[n-1])
		if used > height {
			break // no more can fit, whatever they leave out
		}
		if len(p.top)+len(p.head)+used+moreLine(n)+min(tailLen(n), errRoom) <= height {
			shown = n
		}
	}
	rest := height - len(p.top) - len(p.head) - moreLine(shown)
	for _, j := range p.jobs[:shown] {
		rest -= len(j)
	}
	out := slices.Concat(p.top, p.head)
	for _, j := range p.jobs[:shown] {
		out = append(out, j...)
	}
	if more := len(p.jobs) - shown; more > 0 {
		out = append(out, ln(styledSpan(msgMoreJobs(more), sgrDim)))
	}
	// The hint where every job is shown, and there is room for it.
	if hint := len(p.hint) + 1; len(p.hint) > 0 && shown == len(p.jobs) && rest-tailLen(shown) >= hint {
		out = append(append(out, nil), p.hint...)
		rest -= hint
	}
	out = append(out, p.tail(shown, max(0, rest))...)
	return out[:min(len(out), max(0, height))]
}

func statusHeader(s supervisor.Status, jobs []supervisor.JobStatus, width int) []textLine {
	host := s.Host
	if host == "" {
		host = "berth"
	}
	counts := countStates(jobs)
	items := []flowItem{{text: ln(styledSpan(host, sgrBold))}}
	sep := " — "
	for _, state := range statesOf(counts) {
		items = append(items, flowItem{sep: sep, text: ln(styledSpan(fmt.Sprintf("%d %s", counts[state], state), stateSGR(state)))})
		sep = ", "
	}
	if len(jobs) == 0 {
		none := "no jobs"
		if s.Daemon.Loading {
			none = "no jobs yet" // as the list below says (trial AI)
		}
		items = append(items, flowItem{sep: sep, text: ln(plainSpan(none))})
	}
	if len(s.Problems) > 0 {
		items = append(items, flowItem{sep: " · ", text: ln(styledSpan(errorsSummary(s.Problems), sgrRed))})
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
		holder, _ := cardHolder(c)
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

// cardHolder is what a card's cell says of who holds it, and its colour:
// its holder, those who share it ("infer+embed"), "in use" (by a process
// berth did not start), "kept for" the head of the queue, which holds it
// back for itself, or "free".
func cardHolder(c supervisor.CardStatus) (string, string) {
	switch {
	case c.Holder != "":
		return c.Holder, ""
	case len(c.Shares) == 0 && c.KeptFor != "" && (c.RoomBytes == nil || *c.RoomBytes == 0):
		// Not free to the jobs behind it (trial AR: "free" beside five
		// waiting for a card).
		return "kept for " + c.KeptFor, sgrYellow
	case len(c.Shares) > 0:
		holders := make([]string, len(c.Shares))
		for i, sh := range c.Shares {
			holders[i] = sh.Holder
		}
		return strings.Join(holders, "+"), ""
	case c.Off:
		return "in use", sgrYellow
	}
	return "free", sgrGreen
}

func cardCell(c supervisor.CardStatus, width int) textLine {
	holder, sgr := cardHolder(c)
	room := width - runeLen(c.Name) - 1
	if room < min(4, runeLen(holder)) {
		text := ellipsize(c.Name+" "+holder, width)
		return ln(plainSpan(text), plainSpan(strings.Repeat(" ", width-runeLen(text))))
	}
	holder = ellipsizeMiddle(holder, room)
	return ln(plainSpan(c.Name+" "), styledSpan(holder, sgr), plainSpan(strings.Repeat(" ", room-runeLen(holder))))
}

// foreignUse is a line for each process on a card that berth did not
// start: yellow where it keeps the card from every job.
func foreignUse(cards []supervisor.CardStatus, width int) []textLine {
	var out []textLine
	for _, c := range cards {
		for _, f := range c.Foreign {
			sgr := sgrDim
			if c.Off {
				sgr = sgrYellow
			}
			out = append(out, wrapWords(msgForeignUse(c.Name, f, c.Off), width, "  ", "    ", sgr)...)
		}
	}
	return out
}

// cardShares is a line for each card shared by memory: who holds how
// much, and what is left for another share.
func cardShares(cards []supervisor.CardStatus, width int) []textLine {
	var out []textLine
	for _, c := range cards {
		partKept := c.KeptFor != "" && c.RoomBytes != nil && *c.RoomBytes > 0 && c.ShareOfBytes != nil
		if len(c.Shares) > 0 || partKept {
			out = append(out, wrapWords(msgCardShares(c), width, "  ", "    ", sgrDim)...)
		}
	}
	return out
}

// statusTable is the job table: its title row, and each job's lines.
func statusTable(s supervisor.Status, jobs []supervisor.JobStatus, width int, now time.Time) (head []textLine, rows [][]textLine) {
	showCards := len(s.Machine.Cards) > 0
	showMemory := s.Machine.RAMBytes != nil
	showWhy, showOwner := false, false
	for _, j := range jobs {
		showOwner = showOwner || j.Owner != ""
		showCards = showCards || len(j.GPUs) > 0
		showMemory = showMemory || j.RAMBytes > 0
		showWhy = showWhy || jobWhy(j, now) != ""
	}

	t := &textTable{gap: 2}
	name := len(t.cols)
	t.cols = append(t.cols, textColumn{title: "NAME", cut: ellipsizeMiddle})
	owner := -1
	if showOwner {
		// The people's jobs are OWNER/NAME; the column lets a glance
		// down it find whose is what, and admins' jobs are "-".
		owner = len(t.cols)
		t.cols = append(t.cols, textColumn{title: "OWNER"})
	}
	state := len(t.cols)
	t.cols = append(t.cols, textColumn{title: "STATE"}, textColumn{title: "CORES", right: true})
	cores := state + 1
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
		if owner >= 0 {
			row[owner] = plainSpan(cmp.Or(j.Owner, "-"))
		}
		row[state] = styledSpan(j.State, stateSGR(j.State))
		if j.Array != nil {
			// An array's state is in its colour; how its indices
			// stand, in words, leads its why.
			row[state] = styledSpan("array", stateSGR(j.State))
		}
		row[cores] = plainSpan(coresUsed(j, now) + coresCell(j.CPUs))
		if cards >= 0 {
			row[cards] = plainSpan(shareCell(j.GPUs, j.GPUMemBytes, j.GPUMemUsedBytes))
		}
		if memory >= 0 {
			row[memory] = plainSpan(memoryUsed(j) + memoryCell(j.RAMBytes))
		}
		if why >= 0 {
			sgr := ""
			if supervisor.IsProblem(stateOf(j.State)) {
				sgr = sgrRed
			}
			row[why] = styledSpan(jobWhy(j, now), sgr)
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
	// rowBelow are the rows whose why goes under them although the
	// others' stay in the column: an array's, where the column cannot
	// hold how its indices stand whole.
	rowBelow := make([]bool, len(jobs))
	if why >= 0 {
		t.shrink(why, min(t.colWidth(why), 24), width)
		t.shrink(name, nameFloor, width)
		t.shrink(why, min(t.colWidth(why), 16), width)
		if t.total() > width {
			below = true
			t.fitContent()
			t.cols[why].width = 0
		}
		inline := false
		for i, j := range jobs {
			cell := &t.rows[i][why]
			switch {
			case j.Array == nil:
				inline = inline || !below && cell.text != ""
			case below || t.cols[why].width < runeLen(arrayCountsText(j.Array)):
				rowBelow[i], cell.text = true, ""
			default:
				cell.text = arrayWhyCut(j, now, t.cols[why].width)
				inline = true
			}
		}
		if !inline {
			t.cols[why].width = 0 // every why is under its job
		}
	}
	t.shrink(name, nameFloor, width)
	t.shrink(name, min(t.colWidth(name), 10), width)
	for _, i := range []int{owner, memory, cards, cores} {
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
	rows = make([][]textLine, len(jobs))
	for i, l := range lines[1:] {
		rows[i] = []textLine{l}
		if why < 0 {
			continue
		}
		r := t.rows[i][why]
		switch {
		case rowBelow[i]:
			rows[i] = append(rows[i], ln(plainSpan("    "), styledSpan(arrayWhyCut(jobs[i], now, width-4), r.sgr)))
		case below && r.text != "":
			rows[i] = append(rows[i], ln(plainSpan("    "), styledSpan(ellipsizeWhy(r.text, width-4), r.sgr)))
		}
	}
	return lines[:1], rows
}

// arrayWhyCut is an array's why in at most n runes: how its indices stand
// kept whole where it fits, and the daemon's reason after it cut as
// ellipsizeWhy cuts a job's. The text is escaped, as plainSpan escapes
// it, before it is measured.
func arrayWhyCut(j supervisor.JobStatus, now time.Time, n int) string {
	counts := escapeText(arrayCountsText(j.Array))
	rest := escapeText(singleWhy(j, now))
	full := counts
	if rest != "" {
		full += "; " + rest
	}
	room := n - runeLen(counts) - 2
	switch {
	case runeLen(full) <= n:
		return full
	case room >= 4:
		return counts + "; " + ellipsizeWhy(rest, room)
	case runeLen(counts) <= n:
		return counts // the reason is in berth show
	}
	return ellipsize(counts, n)
}

// compareForStatus orders jobs so the ones a person looks for come first:
// what holds the machine, what waits for it (the head of the queue, the job
// with an expected start, first; then the others in the order they started
// waiting), what needs a person, and what is over. Within a state, by name.
func compareForStatus(a, b supervisor.JobStatus) int {
	if c := cmp.Compare(stateRank(a.State), stateRank(b.State)); c != 0 {
		return c
	}
	if stateOf(a.State) == store.StateWaiting {
		// In the machine's queue: in its order, the head first.
		switch {
		case a.QueuePosition > 0 && b.QueuePosition > 0:
			return cmp.Compare(a.QueuePosition, b.QueuePosition)
		case a.QueuePosition > 0:
			return -1
		case b.QueuePosition > 0:
			return 1
		}
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

// errorsSummary says how many files have errors, the way the daemon's status
// line does: "1 file with errors"; or, when a problem is not about a job
// file, how many problems there are. A state that is not recorded (a full
// disk, a state file removed) is no configuration error, and is said apart.
func errorsSummary(problems []supervisor.Problem) string {
	var parts []string
	kept := 0
	config := make([]supervisor.Problem, 0, len(problems))
	for _, p := range problems {
		switch p.Code {
		case supervisor.ProblemNotRecording, supervisor.ProblemStateGone:
			if !slices.Contains(parts, "state not recorded") {
				parts = append(parts, "state not recorded")
			}
			continue
		case supervisor.ProblemLogsUnwritable:
			parts = append(parts, "job output not kept")
			continue
		case supervisor.ProblemOrphanKept:
			// No mistake of its own: kept for a file's that may declare it.
			kept++
			continue
		}
		config = append(config, p)
	}
	if len(config) > 0 {
		files := map[string]bool{}
		for _, p := range config {
			files[p.File] = true
		}
		if slices.ContainsFunc(config, func(p supervisor.Problem) bool { return !p.InAJobFile() }) {
			parts = append(parts, count(len(config), "configuration error"))
		} else {
			parts = append(parts, count(len(files), "file")+" with errors")
		}
	}
	if kept > 0 {
		parts = append(parts, supervisor.MsgRunsKept(kept))
	}
	return strings.Join(parts, " · ")
}

// jobWhy is the WHY cell: the daemon's reason, and for a job that has been
// restarted, how often in a row. An array's starts with how its indices
// stand, which its line is read for first and which is cut last.
func jobWhy(j supervisor.JobStatus, now time.Time) string {
	why := singleWhy(j, now)
	if j.Array == nil {
		return why
	}
	if why == "" {
		return arrayCountsText(j.Array)
	}
	return arrayCountsText(j.Array) + "; " + why
}

// singleWhy is jobWhy without an array's counts.
func singleWhy(j supervisor.JobStatus, now time.Time) string {
	why := reason(j, now)
	if stateOf(j.State) == store.StateDone && j.RunsAgainAfter == "" && !j.Unrecorded {
		why = "" // done is exit 0, which is all the daemon's reason says
	}
	if over := msgOverShare(j); over != "" {
		why = strings.TrimPrefix(why+"; "+over, "; ")
	}
	if j.ExpectedStart != nil {
		why += expectedClause + clockTime(expectedAt(*j.ExpectedStart), now)
	}
	if j.QueuePosition > 1 && j.Quota == nil {
		// Behind others: a core freed goes to the head first.
		why = strings.TrimPrefix(why+"; "+msgInLine(j.QueuePosition), "; ")
	}
	if j.RetryAt != nil {
		why = strings.TrimPrefix(why+"; "+msgRetryIn(j.RetryAt.Sub(now)), "; ")
	}
	if j.KillAt != nil {
		why = strings.TrimPrefix(why+"; "+msgKillIn(j.KillAt.Sub(now)), "; ")
	}
	if (j.Restarts > 0 || j.GaveUp) && stateOf(j.State) != store.StateWaiting {
		r := count(j.Restarts, "restart")
		switch {
		case j.Array != nil:
			// Each index's, added up: not to be read against
			// max_restarts, which holds for each.
			r = msgArrayRestarts(j.Restarts, j.GaveUp)
		case j.GaveUp:
			r = msgGaveUp(j.Restarts)
		}
		if why != "" {
			why += "; " + r
		} else {
			why = r
		}
	}
	return why
}

// withAfterWhy fills the why of each job that waits for other jobs, which
// the daemon leaves to the client to word from after (reason), for the
// JSON a script reads (trial AO: jq's .why was null for exactly the jobs
// that wait on a parent).
func withAfterWhy(jobs []supervisor.JobStatus, now time.Time) {
	for i := range jobs {
		if j := &jobs[i]; j.Why == "" && len(j.After) > 0 {
			j.Why = reason(*j, now)
		}
	}
}

// reason is why a job is where it is: for a waiting job, worded here from
// what it is short of; otherwise as the daemon says it.
func reason(j supervisor.JobStatus, now time.Time) string {
	if len(j.After) > 0 {
		why := msgAfter(j.Name, j.File, j.After, now)
		if j.AfterLeftOut > 0 {
			why += "; " + msgAfterLeftOut(j.Name, j.AfterLeftOut)
		}
		return why
	}
	if j.Quota != nil {
		return supervisor.MsgQuotaWait(j.Owner, *j.Quota, j.Asked)
	}
	if j.Short != nil {
		// The daemon may say more after the shortfall (which cards are in
		// use outside berth): kept.
		short := supervisor.MsgShort(j.Asked, *j.Short)
		if strings.HasPrefix(j.Why, short) {
			return j.Why
		}
		return short
	}
	return j.Why
}

// expectedAt is when a job is expected to start, in the client's zone, to
// the nearest minute: ~21:06 for 21:06:55 would read as now.
func expectedAt(t time.Time) time.Time { return t.Round(time.Minute).In(renderZone) }

// expectedClause is how jobWhy ends a waiting head's reason, in the
// client's time zone.
const expectedClause = "; expected start ~"

// ellipsizeWhy shortens a reason at its end, except that when the job is
// expected to start is kept where there is room for it: "needs 2 g…;
// expected start ~14:25", then "expected start ~14:25", then "start
// ~14:25". When a job will start is the answer a person looks for, more
// than the detail of what it is short of.
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
