package supervisor

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/berthd/berth/supervisor/clock"
	"github.com/berthd/berth/supervisor/ctlsock"
	"github.com/berthd/berth/supervisor/runner"
	"github.com/berthd/berth/supervisor/store"
	"github.com/berthd/berth/supervisor/testkit"
	"github.com/berthd/berth/supervisor/units"
	"golang.org/x/sys/unix"
)

// A job's log file is read after the file it was rotated to, and --run
// picks one run's lines out of both: those after its header, up to the
// next run's, a last line without its newline included.
func TestStreamFileRuns(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "train.log")
	start := time.Date(2026, 12, 4, 9, 0, 0, 0, time.UTC)
	h := func(run uint64) string { return runner.RunHeader(run, start) }
	if err := writeFile(path+".1", []byte(h(1)+"a\n"+h(2)+"b1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := writeFile(path, []byte("b2\n"+h(3)+"c1\nc2"), 0o600); err != nil {
		t.Fatal(err)
	}
	d := &Daemon{log: hclog.NewNullLogger()}
	readLast := func(only *runLines, lines int) string {
		rec := httptest.NewRecorder()
		d.streamFile(rec, httptest.NewRequest("GET", "/", nil), path, false, only, lines, func() {}, nil, nil)
		return rec.Body.String()
	}
	read := func(only *runLines) string { return readLast(only, -1) }
	if got, want := read(nil), h(1)+"a\n"+h(2)+"b1\nb2\n"+h(3)+"c1\nc2"; got != want {
		t.Errorf("the whole log:\n%q\nwant\n%q", got, want)
	}
	for run, want := range map[uint64]string{1: "a\n", 2: "b1\nb2\n", 3: "c1\nc2", 4: ""} {
		if got := read(&runLines{run: run}); got != want {
			t.Errorf("run %d: %q, want %q", run, got, want)
		}
	}
	// A run older than the first whose header is in the files: its
	// output, if any, was rotated away. One later than that, with no
	// header of its own, wrote nothing. One whose first header there is
	// its header continued (the top of a file a rotation started) has
	// lost its start.
	hc := func(run uint64) string {
		return strings.TrimSuffix(runner.RunHeader(run, start), " ---\n") + ", continued ---\n"
	}
	rotated := filepath.Join(dir, "rotated.log")
	const gone, startGone = "gone", "start gone"
	for _, tt := range []struct {
		path, old, cur string // the files' contents; "" for the files as they are
		want           map[uint64]string
	}{
		{path, "", "", map[uint64]string{1: "", 2: "", 3: "", 4: ""}},
		{rotated, "", "b2\n" + h(3) + "c1\n", map[uint64]string{1: gone, 2: gone, 3: "", 4: ""}},
		{rotated, "", "b2\n" + h(3) + "c1\n" + h(6) + "f1\n", map[uint64]string{2: gone, 4: "", 5: "", 7: ""}},
		{rotated, "", hc(3) + "c3\n" + h(4) + "d1\n", map[uint64]string{2: gone, 3: startGone, 4: "", 5: ""}},
		{rotated, hc(3) + "c2\n", hc(3) + "c3\n" + h(4) + "d1\n", map[uint64]string{3: startGone, 4: ""}},
		{rotated, h(3) + "c1\n", hc(3) + "c2\n" + h(4) + "d1\n", map[uint64]string{2: gone, 3: "", 4: ""}},
	} {
		if tt.cur != "" {
			if err := writeFile(tt.path+".1", []byte(tt.old), 0o600); err != nil {
				t.Fatal(err)
			}
			if err := writeFile(tt.path, []byte(tt.cur), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		for run, want := range tt.want {
			rec := httptest.NewRecorder()
			d.streamFile(rec, httptest.NewRequest("GET", "/", nil), tt.path, false, &runLines{run: run}, -1, func() {}, nil, nil)
			got := ""
			switch {
			case rec.Header().Get(HeaderOutputGone) != "":
				got = gone
			case rec.Header().Get(HeaderOutputStartGone) != "":
				got = startGone
			}
			if got != want {
				t.Errorf("run %d of %q then %q: output %q, want %q", run, tt.old, tt.cur, got, want)
			}
		}
	}
	// A run whose start is gone: the rest of its output, across the files.
	if err := writeFile(rotated+".1", []byte(hc(3)+"c2\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := writeFile(rotated, []byte(hc(3)+"c3\n"+h(4)+"d1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	d.streamFile(rec, httptest.NewRequest("GET", "/", nil), rotated, false, &runLines{run: 3}, -1, func() {}, nil, nil)
	if got := rec.Body.String(); got != "c2\nc3\n" {
		t.Errorf("run 3, its start gone: %q, want the rest of its output", got)
	}

	// Followed, a run whose output is over (a later run's header came)
	// ends the stream: the request has no deadline to end it.
	rec = httptest.NewRecorder()
	d.streamFile(rec, httptest.NewRequest("GET", "/", nil), path, true, &runLines{run: 2}, -1, func() {}, nil, nil)
	if got := rec.Body.String(); got != "b1\nb2\n" {
		t.Errorf("run 2 followed: %q", got)
	}

	// The last lines: across the rotated file, of one run, a last line
	// without its newline counted as one. The runs' headers are not
	// counted, and are shown before their run's first line.
	for _, tt := range []struct {
		only  *runLines
		lines int
		want  string
	}{
		{nil, 0, ""},
		{nil, 1, "c2"},
		{nil, 2, h(3) + "c1\nc2"},
		{nil, 3, "b2\n" + h(3) + "c1\nc2"},
		{nil, 4, h(2) + "b1\nb2\n" + h(3) + "c1\nc2"},
		{nil, 5, h(1) + "a\n" + h(2) + "b1\nb2\n" + h(3) + "c1\nc2"},
		{nil, 8, h(1) + "a\n" + h(2) + "b1\nb2\n" + h(3) + "c1\nc2"},
		{nil, 100, h(1) + "a\n" + h(2) + "b1\nb2\n" + h(3) + "c1\nc2"},
		{&runLines{run: 2}, 1, "b2\n"},
		{&runLines{run: 2}, 2, "b1\nb2\n"},
		{&runLines{run: 2}, 3, "b1\nb2\n"},
		{&runLines{run: 3}, 1, "c2"},
		{&runLines{run: 1}, 0, ""},
	} {
		if got := readLast(tt.only, tt.lines); got != tt.want {
			t.Errorf("last %d lines (run %v): %q, want %q", tt.lines, tt.only, got, tt.want)
		}
	}
}

// TestStreamFileTailBound: what is held of the last lines asked for is
// bounded, whatever was asked and however long a line: the earliest of
// them are left out, a line longer than the bound is shown by its end, and
// the answer says what was left out. A run's line longer than what is held
// of a line whose end has not come is passed on whole, in pieces.
func TestStreamFileTailBound(t *testing.T) {
	defer func(was int) { maxTailBytes = was }(maxTailBytes)
	maxTailBytes = 1 << 10
	d := &Daemon{log: hclog.NewNullLogger()}
	path := filepath.Join(t.TempDir(), "train.log")
	var lines []string
	for i := range 100 {
		lines = append(lines, fmt.Sprintf("%-99d\n", i))
	}
	if err := writeFile(path, []byte(strings.Join(lines, "")), 0o600); err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	d.streamFile(rec, httptest.NewRequest("GET", "/", nil), path, false, nil, 1000, func() {}, nil, nil)
	kept := maxTailBytes / (100 + lineCost)
	if got, want := rec.Body.String(), strings.Join(lines[100-kept:], ""); got != want {
		t.Errorf("the last 1000 of 100 lines within %d bytes:\n%q\nwant the last %d:\n%q", maxTailBytes, got, kept, want)
	}
	if got := rec.Header().Get(HeaderLinesLeftOut); got != strconv.Itoa(100-kept) {
		t.Errorf("%s: %q, want %d", HeaderLinesLeftOut, got, 100-kept)
	}
	// Of the last 10 asked for, those not kept: not the earlier ones the
	// bound of 10 left out anyway.
	rec = httptest.NewRecorder()
	d.streamFile(rec, httptest.NewRequest("GET", "/", nil), path, false, nil, 10, func() {}, nil, nil)
	if got := rec.Header().Get(HeaderLinesLeftOut); got != strconv.Itoa(10-kept) || rec.Body.String() != strings.Join(lines[100-kept:], "") {
		t.Errorf("the last 10 of 100 lines within %d bytes: %s %q, want %d\n%q", maxTailBytes, HeaderLinesLeftOut, got, 10-kept, rec.Body.String())
	}

	// A line five times the bound, and longer than a piece, without its
	// end: its last maxTailBytes, less what a line costs besides.
	long := strings.Repeat("0123456789", (5*maxHeldLine)/10)
	if err := writeFile(path, []byte("before\n"+long), 0o600); err != nil {
		t.Fatal(err)
	}
	rec = httptest.NewRecorder()
	d.streamFile(rec, httptest.NewRequest("GET", "/", nil), path, false, nil, 1, func() {}, nil, nil)
	shown := maxTailBytes - lineCost
	if got := rec.Body.String(); got != long[len(long)-shown:] {
		t.Errorf("the last line, of %d bytes: %d bytes shown, want its last %d", len(long), len(got), shown)
	}
	if got := rec.Header().Get(HeaderBytesLeftOut); got != strconv.Itoa(len(long)-shown) {
		t.Errorf("%s: %q, want %d", HeaderBytesLeftOut, got, len(long)-shown)
	}

	// A long line, then a short one: the long one is cut to what the short
	// one leaves, not left out.
	if err := writeFile(path, []byte(long+"\nEND\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	rec = httptest.NewRecorder()
	d.streamFile(rec, httptest.NewRequest("GET", "/", nil), path, false, nil, 2, func() {}, nil, nil)
	shown = maxTailBytes - 2*lineCost - len("END\n")
	if got, want := rec.Body.String(), long[len(long)-shown+1:]+"\nEND\n"; got != want {
		t.Errorf("the last 2 lines, one of %d bytes: %d bytes shown, want %d", len(long)+1, len(got), len(want))
	}
	if got := rec.Header().Get(HeaderBytesLeftOut); got != strconv.Itoa(len(long)+1-shown) || rec.Header().Get(HeaderLinesLeftOut) != "" {
		t.Errorf("left out: %s %q, %s %q", HeaderBytesLeftOut, got, HeaderLinesLeftOut, rec.Header().Get(HeaderLinesLeftOut))
	}

	// One run's output, a line of it longer than a piece: whole.
	h := runner.RunHeader(1, time.Date(2026, 12, 4, 9, 0, 0, 0, time.UTC))
	if err := writeFile(path, []byte(h+long+"\n"+"end\n"+runner.RunHeader(2, time.Now())+"next\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	rec = httptest.NewRecorder()
	d.streamFile(rec, httptest.NewRequest("GET", "/", nil), path, false, &runLines{run: 1}, -1, func() {}, nil, nil)
	if got := rec.Body.String(); got != long+"\nend\n" {
		t.Errorf("run 1's output: %d bytes, want its long line and its last (%d bytes)", len(got), len(long)+5)
	}
	var held runLines
	held.Write([]byte(h + long))
	if n := len(held.lines.held); n >= maxHeldLine {
		t.Errorf("a line without its end is held by %d bytes; no more than %d", n, maxHeldLine)
	}
}

// Followed with a number of lines, the stream starts with the last of
// them, then passes on what is written after.
func TestStreamFileFollowLast(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		lines         int
		before, after string // what is streamed before the file grows, and after
	}{
		{2, "3\n4", "3\n45\n6\n"},
		{0, "", "5\n6\n"}, // only what comes
	} {
		path := filepath.Join(t.TempDir(), "svc.log")
		if err := writeFile(path, []byte("1\n2\n3\n4"), 0o600); err != nil {
			t.Fatal(err)
		}
		until := followFile(t, path, tt.lines)
		until(tt.before) // written before the stream follows
		f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.WriteString("5\n6\n"); err != nil {
			t.Fatal(err)
		}
		f.Close()
		until(tt.after)
	}
}

// watchedBody reports each write of a response as it is made, and that a
// flush was.
type watchedBody struct {
	*httptest.ResponseRecorder
	wrote   chan string
	flushed chan struct{}
}

func (b *watchedBody) Write(p []byte) (int, error) {
	b.wrote <- string(p)
	return len(p), nil
}

func (b *watchedBody) Flush() {
	select {
	case b.flushed <- struct{}{}:
	default:
	}
}

// A run's window in the journal: microseconds, a second past its end for
// what journald reads late, but not into the next run.
func TestJournalWindow(t *testing.T) {
	t.Parallel()
	start := time.Date(2026, 12, 4, 9, 0, 0, 123456000, time.Local)
	rec := store.RunRecord{Start: start}
	if got := strings.Join(journalWindow(rec, time.Time{}), " "); got != "--since 2026-12-04 09:00:00.123456" {
		t.Errorf("a run in progress: %s", got)
	}
	rec.End = start.Add(time.Minute)
	if got := strings.Join(journalWindow(rec, time.Time{}), " "); got != "--since 2026-12-04 09:00:00.123456 --until 2026-12-04 09:01:01.123456" {
		t.Errorf("an ended run: %s", got)
	}
	if got := strings.Join(journalWindow(rec, rec.End.Add(200*time.Millisecond)), " "); got != "--since 2026-12-04 09:00:00.123456 --until 2026-12-04 09:01:00.323456" {
		t.Errorf("a run the next followed at once: %s", got)
	}
}

// TestJournalMatches: what berth logs reads of the journal for a job whose
// runs are units: the lines its units wrote, by name, and those its user
// wrote under its name (a run gone before journald read its lines has no
// unit), whoever's job it is (trial AW: the lines of any unit in berth's
// slice were taken, a person's job's among them), but root (trial BC: a
// job named systemd showed PID 1's log). Where that user is not known, its
// units' alone; none where it has none on record. For the daemon's own
// children (direct), those its user wrote, root's too, and the daemon's
// user's where its user is not known (trial BC: the daemon's user alone
// showed a person none of their job's lines).
func TestJournalMatches(t *testing.T) {
	t.Parallel()
	d, dir := runDaemon(t, `job "plain" { cmd = "true", cpus = 0 }
job "as-nobody" { cmd = "true", cpus = 0, user = "nobody" }
job "as-ghost" { cmd = "true", cpus = 0, user = "berth-no-such-user" }`, nil)
	for _, name := range []string{"plain", "as-nobody", "as-ghost"} {
		waitJob(t, d, name, "known", func(JobStatus) bool { return true })
	}
	nobody, err := user.Lookup("nobody")
	if err != nil {
		t.Skip("no user nobody here")
	}
	for _, name := range []string{"plain", "as-nobody"} {
		testkit.WaitFor(t, 10*time.Second, name+"'s run recorded", func() bool { return len(runsOf(t, d, name)) > 0 })
	}
	unitsOf := func(name string) string {
		var ms []string
		for _, r := range runsOf(t, d, name) {
			ms = append(ms, "[SYSLOG_IDENTIFIER="+name+" _SYSTEMD_UNIT="+units.Name(name, r.ID)+"]")
		}
		return strings.Join(ms, " ")
	}
	me := strconv.Itoa(os.Geteuid())
	byUID := func(name, uid string) string { return "[SYSLOG_IDENTIFIER=" + name + " _UID=" + uid + "]" }
	list := func(ms ...string) string {
		return "[" + strings.Join(slices.DeleteFunc(ms, func(m string) bool { return m == "" }), " ") + "]"
	}
	rootJob := func(name string) string { return "[SYSLOG_IDENTIFIER=" + name + " _UID=0 BERTH_JOB=" + name + "]" }
	plainUnits := list(rootJob("plain"), unitsOf("plain"))
	if me != "0" {
		plainUnits = list(byUID("plain", me), unitsOf("plain"))
	}
	tests := []struct {
		name, owner   string
		units, direct string
	}{
		{"plain", "", plainUnits, list(byUID("plain", me), unitsOf("plain"))},
		{"as-nobody", "", list(byUID("as-nobody", nobody.Uid), unitsOf("as-nobody")), list(byUID("as-nobody", nobody.Uid), unitsOf("as-nobody"))},
		{"as-ghost", "", "[]", list(byUID("as-ghost", me))},
		{"removed", "", "[]", list(byUID("removed", me))},
		{"root/train", "root", list(rootJob("root/train")), list(byUID("root/train", "0"))},
		{"berth-no-such-user/train", "berth-no-such-user", "[]", list(byUID("berth-no-such-user/train", me))},
	}
	for _, tt := range tests {
		if got := fmt.Sprint(d.journalMatches(tt.name, tt.owner, false)); got != tt.units {
			t.Errorf("%s, as units: %s, want %s", tt.name, got, tt.units)
		}
		if got := fmt.Sprint(d.journalMatches(tt.name, tt.owner, true)); got != tt.direct {
			t.Errorf("%s, the daemon's children: %s, want %s", tt.name, got, tt.direct)
		}
	}
	// Removed, its runs on record: their units' lines.
	testkit.PutFile(t, filepath.Join(dir, "jobs.lua"), `job "as-nobody" { cmd = "true", cpus = 0, user = "nobody" }`)
	if _, err := d.Reload(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got, want := fmt.Sprint(d.journalMatches("plain", "", false)), list(unitsOf("plain")); got != want { // no user known: its units' alone
		t.Errorf("plain, removed: %s, want %s", got, want)
	}
}

// TestTailSlots: a caller has maxTailsPerUser requests for last lines
// under way at once, another caller's are their own, and a slot given
// back (once, however often release is called) is there again.
func TestTailSlots(t *testing.T) {
	t.Parallel()
	var s tailSlots
	var releases []func()
	for i := range maxTailsPerUser {
		release, ok := s.take(1001)
		if !ok {
			t.Fatalf("slot %d of %d refused", i+1, maxTailsPerUser)
		}
		releases = append(releases, release)
	}
	if _, ok := s.take(1001); ok {
		t.Fatalf("slot %d taken; at most %d", maxTailsPerUser+1, maxTailsPerUser)
	}
	if _, ok := s.take(1002); !ok {
		t.Fatal("another caller's slot refused")
	}
	releases[0]()
	releases[0]()
	if _, ok := s.take(1001); !ok {
		t.Fatal("a slot given back is not there again")
	}
	if _, ok := s.take(1001); ok {
		t.Fatal("a release called twice gave back two slots")
	}
}

// followFile follows path as berth logs -f does (-n lines; -1: all of
// it), and returns once the stream follows; until waits for the stream so
// far to be want, and the follow ends with the test.
func followFile(t *testing.T, path string, lines int) (until func(want string)) {
	t.Helper()
	d := &Daemon{log: hclog.NewNullLogger()}
	ctx, cancel := context.WithCancel(context.Background())
	body := &watchedBody{ResponseRecorder: httptest.NewRecorder(), wrote: make(chan string, 16), flushed: make(chan struct{}, 1)}
	done := make(chan struct{})
	go func() {
		defer close(done)
		d.streamFile(body, httptest.NewRequest("GET", "/", nil).WithContext(ctx), path, true, nil, lines, func() {}, nil, nil)
	}()
	t.Cleanup(func() { cancel(); <-done })
	select {
	case <-body.flushed: // following
	case <-time.After(time.Minute):
		t.Fatalf("-n %d: the stream never started to follow", lines)
	}
	got := ""
	return func(want string) {
		t.Helper()
		deadline := time.After(time.Minute)
		for got != want {
			if !strings.HasPrefix(want, got) {
				t.Fatalf("-n %d: the stream so far: %q, want %q", lines, got, want)
			}
			select {
			case p := <-body.wrote:
				got += p
			case <-deadline:
				t.Fatalf("-n %d: the stream so far: %q, want %q", lines, got, want)
			}
		}
	}
}

// rotate appends more to path, then rotates it as the daemon does: to
// PATH.1, and a new PATH that begins with next.
func rotate(t *testing.T, path, more, next string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(more)
	f.Close()
	if err := os.Rename(path, path+".1"); err != nil {
		t.Fatal(err)
	}
	if err := writeFile(path, []byte(next), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestStreamFileFollowRotatedTwice: a log rotated twice between two looks
// of a follower is read whole: the file it held to its end, then the
// one rotated to PATH.1 that it never held, then the new one.
func TestStreamFileFollowRotatedTwice(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "fast.log")
	if err := writeFile(path, []byte("1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	until := followFile(t, path, -1)
	rotate(t, path, "2\n", "3\n")
	rotate(t, path, "4\n", "5\n")
	until("1\n2\n3\n4\n5\n")
}

// TestStreamFileFollowFromNothing: a follow begun before the job wrote
// anything reads a file the first output filled and rotated before its
// first look, then the new one.
func TestStreamFileFollowFromNothing(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "fast.log")
	until := followFile(t, path, -1) // with no file yet
	rotate(t, path, "1\n", "2\n")
	until("1\n2\n")
}

// TestStreamFileFollowRunToItsEnd: a run followed is followed until it
// has ended, though no later run's header comes.
func TestStreamFileFollowRunToItsEnd(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "batch.log")
	if err := writeFile(path, []byte(runner.RunHeader(7, time.Now())+"a\nb"), 0o600); err != nil {
		t.Fatal(err)
	}
	d := &Daemon{log: hclog.NewNullLogger()}
	ended := make(chan struct{})
	close(ended)
	rec := httptest.NewRecorder()
	d.streamFile(rec, httptest.NewRequest("GET", "/", nil), path, true, &runLines{run: 7}, -1, func() {}, ended, nil)
	if got := rec.Body.String(); got != "a\nb" {
		t.Errorf("run 7 followed to its end: %q, want all of it", got)
	}
}

// TestStreamFileForgedHeader: a job's line that looks like a run's header
// (a job that prints a log) is its output: it names a run the job has not
// on record, or a start its run did not have. It neither ends the run's
// output nor heads another's.
func TestStreamFileForgedHeader(t *testing.T) {
	t.Parallel()
	start := time.Date(2026, 12, 4, 9, 0, 0, 0, time.UTC)
	forged := "--- berth: run 7 started 2026-01-01T00:00:00Z ---\n"
	wrongStart := runner.RunHeader(3, start.Add(time.Hour))
	path := filepath.Join(t.TempDir(), "report.log")
	body := runner.RunHeader(2, start) + "a\n" + forged + "b\n" + wrongStart + "c\n" + runner.RunHeader(3, start) + "d\n"
	if err := writeFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	d := &Daemon{log: hclog.NewNullLogger()}
	starts := runStarts{2: runner.RunStart(start), 3: runner.RunStart(start)}
	rec := httptest.NewRecorder()
	d.streamFile(rec, httptest.NewRequest("GET", "/", nil), path, false, &runLines{run: 2}, -1, func() {}, nil, starts)
	if got, want := rec.Body.String(), "a\n"+forged+"b\n"+wrongStart+"c\n"; got != want {
		t.Errorf("run 2, with lines like headers:\n%q\nwant\n%q", got, want)
	}
	rec = httptest.NewRecorder()
	d.streamFile(rec, httptest.NewRequest("GET", "/", nil), path, false, nil, 2, func() {}, nil, starts)
	if got, want := rec.Body.String(), runner.RunHeader(3, start)+"d\n"; got != "c\n"+want {
		t.Errorf("the last 2 lines, one like a header: %q, want %q", got, "c\n"+want)
	}
}

// logsRemoved runs a daemon whose job a, which says hello, has run to
// done, and removes the jobs' log directory, logs.
func logsRemoved(t *testing.T) (d *Daemon, logs string) {
	t.Helper()
	d, _ = runDaemon(t, `job "a" { cmd = { "echo", "hello" }, cpus = 0 }`, nil)
	waitJob(t, d, "a", "done", func(js JobStatus) bool { return js.State == "done" })
	logs = filepath.Join(d.cfg.StateDir, "logs")
	if err := os.RemoveAll(logs); err != nil {
		t.Fatal(err)
	}
	return d, logs
}

// TestLogDirMadeAgain: the jobs' log directory removed (to free space),
// the next run makes it again and writes its output there, rather than
// failing to start, as every job's next run would.
func TestLogDirMadeAgain(t *testing.T) {
	t.Parallel()
	d, logs := logsRemoved(t)
	start(t, d, "a")
	if r := waitRuns(t, d, "a", 2); r.Reason != store.ReasonExited {
		t.Fatalf("with its log directory removed, the run: %+v", r)
	}
	if b, err := os.ReadFile(filepath.Join(logs, "a.log")); err != nil || !strings.Contains(string(b), "hello") {
		t.Errorf("a.log: %q, %v", b, err)
	}
}

// TestLogDirUnwritable: a jobs' log directory that cannot take a run's
// output (here a file in its place) stops no run: the output is thrown
// away, and the status says so, once for the machine, until a run's log
// file can be opened there again.
func TestLogDirUnwritable(t *testing.T) {
	t.Parallel()
	d, logs := logsRemoved(t)
	if err := writeFile(logs, []byte("in the way"), 0o600); err != nil {
		t.Fatal(err)
	}
	ranTo := func(n int, what string) {
		t.Helper()
		start(t, d, "a")
		if r := waitRuns(t, d, "a", n); r.Reason != store.ReasonExited {
			t.Fatalf("%s: %+v", what, r)
		}
	}
	ranTo(2, "a run with its log directory a file")
	problem := func() bool {
		return slices.ContainsFunc(d.Status().Problems, func(p Problem) bool { return p.Code == ProblemLogsUnwritable && p.File == logs })
	}
	if !problem() {
		t.Errorf("no logs_unwritable problem: %+v", d.Status().Problems)
	}
	if err := os.Remove(logs); err != nil {
		t.Fatal(err)
	}
	ranTo(3, "a run with its log directory back")
	if problem() {
		t.Errorf("logs_unwritable still said once a run's log could be written: %+v", d.Status().Problems)
	}
}

// TestFollowNotDeclared: a follow of a job that no file declares now says
// so (a header, which the client words), sends its earlier output, and
// goes on with the output of a job declared again under its name; a
// follow of a job declared says how it rests, if it does.
func TestFollowNotDeclared(t *testing.T) {
	t.Parallel()
	d, dir := runDaemon(t, "", nil)
	path := filepath.Join(dir, "tick.lua")
	testkit.PutFile(t, path, `job "tick" { cmd = { "echo", "first" } }`)
	reload(t, d)
	waitJob(t, d, "tick", "done", func(js JobStatus) bool { return js.State == "done" })
	root := ctlsock.Peer{Ucred: unix.Ucred{Uid: 0, Gid: 0, Pid: int32(os.Getpid())}, GroupsKnown: true}
	api := d.api()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		api.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), peerKey{}, root)))
	}))
	defer srv.Close()
	follow := func() (*http.Response, context.CancelFunc) {
		t.Helper()
		ctx, cancel := context.WithCancel(context.Background())
		req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL+APIVersion+jobPath("tick")+"/logs?follow=1", nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil || resp.StatusCode != http.StatusOK {
			cancel()
			t.Fatalf("follow: %v %v", resp, err)
		}
		return resp, cancel
	}
	resp, cancel := follow()
	if h := resp.Header.Get(HeaderNotDeclared); h != "" {
		t.Errorf("a follow of tick, declared: %s %q", HeaderNotDeclared, h)
	}
	// Done: nothing more comes until it runs again, which it is told.
	if h := resp.Header.Get(HeaderAtRest); h != "done" {
		t.Errorf("a follow of tick, done: %s %q, want done", HeaderAtRest, h)
	}
	cancel()
	resp.Body.Close()

	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	reload(t, d)
	resp, cancel = follow()
	defer cancel()
	defer resp.Body.Close()
	if resp.Header.Get(HeaderNotDeclared) == "" {
		t.Errorf("a follow of tick, its file removed, has no %s header", HeaderNotDeclared)
	}
	lines := make(chan string, 64)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	want := func(line string) {
		t.Helper()
		for {
			select {
			case l := <-lines:
				if l == line {
					return
				}
			case <-time.After(20 * time.Second):
				t.Fatalf("no line %q in the followed output within 20s", line)
			}
		}
	}
	want("first")
	testkit.PutFile(t, path, `job "tick" { cmd = { "echo", "second" } }`)
	reload(t, d)
	want("second")
}

// TestStreamFileTailREADME: the README's figure for the last lines held
// for one request is what the bound keeps of short lines, each counted
// with lineCost besides its text (trial AT: the README said 2 MiB of
// lines, which is some 29 000 of seq's, not 260 000).
func TestStreamFileTailREADME(t *testing.T) {
	t.Parallel()
	d := &Daemon{log: hclog.NewNullLogger()}
	path := filepath.Join(t.TempDir(), "seq.log")
	var b strings.Builder
	for i := 4_900_001; i <= 5_000_000; i++ {
		fmt.Fprintf(&b, "%d\n", i) // 8 bytes, as seq 1 5000000 ends
	}
	if err := writeFile(path, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	d.streamFile(rec, httptest.NewRequest("GET", "/", nil), path, false, nil, 1_000_000, func() {}, nil, nil)
	kept := strings.Count(rec.Body.String(), "\n")
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	said := fmt.Sprintf("the last %d %03d)", kept/1000, kept%1000)
	if !strings.Contains(string(readme), said) || !strings.Contains(string(readme), fmt.Sprintf("each line counted with %d bytes", lineCost)) {
		t.Errorf("the README does not say %q of the last lines held (%d bytes, each line counted with %d more)", said, maxTailBytes, lineCost)
	}
}

// TestStreamFileFollowRunNotIntoNext: a run followed to its end stops at
// the header of the run begun at once after it (a restart), though that
// run was not on record when the follow began; a line like a header that
// the daemon did not write last is the job's own (trial AT: --run N -f
// printed run N+1's header and first lines).
func TestStreamFileFollowRunNotIntoNext(t *testing.T) {
	t.Parallel()
	start := time.Date(2026, 12, 4, 9, 0, 0, 0, time.UTC)
	forged := runner.RunHeader(9, start.Add(time.Minute))
	next := runner.RunHeader(8, start.Add(time.Second))
	path := filepath.Join(t.TempDir(), "svc.log")
	body := runner.RunHeader(7, start) + "a\n" + forged + "b\n" + next + "c\n"
	if err := writeFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	d := &Daemon{log: hclog.NewNullLogger()}
	d.headers.note("svc", next)
	ended := make(chan struct{})
	close(ended)
	starts := runStarts{7: runner.RunStart(start)} // as the follow began
	only := &runLines{run: 7, later: func(line []byte) bool { return d.headers.wrote("svc", line) }}
	rec := httptest.NewRecorder()
	d.streamFile(rec, httptest.NewRequest("GET", "/", nil), path, true, only, -1, func() {}, ended, starts)
	if got, want := rec.Body.String(), "a\n"+forged+"b\n"; got != want {
		t.Errorf("run 7 followed, run 8 begun after it:\n%q\nwant\n%q", got, want)
	}
}

// steppingClock is the real clock's timers, and a time that moves a second
// on at every reading: what two readings of a real clock a moment apart
// give when a second begins between them.
type steppingClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *steppingClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(time.Second)
	return c.t
}

func (c *steppingClock) NewTimer(d time.Duration) clock.Timer { return clock.Real.NewTimer(d) }

// TestRunHeaderIsItsRecordsStart: a run's header in its log carries the
// start its record has, to the second, whatever the clock reads as the
// process starts: berth logs --run tells the run's header by it (the
// review: the header read the clock again, and a second begun in between
// made the run's own output look gone).
func TestRunHeaderIsItsRecordsStart(t *testing.T) {
	t.Parallel()
	clk := &steppingClock{t: time.Date(2026, 12, 7, 9, 0, 0, 0, time.UTC)}
	d, dir := runDaemon(t, "", func(cfg *Config) { cfg.Clock = clk })
	testkit.PutFile(t, filepath.Join(dir, "hello.lua"), `job "hello" { cmd = { "echo", "hello" }, cpus = 0 }`)
	reload(t, d)
	waitJob(t, d, "hello", "done", func(js JobStatus) bool { return js.State == "done" })
	// Run again: the first run's header is not the one written last,
	// which the daemon knows without its record.
	root := ctlsock.Peer{Ucred: unix.Ucred{Uid: 0, Gid: 0, Pid: int32(os.Getpid())}, GroupsKnown: true}
	if code, body := asPeer(d, root, "POST", jobPath("hello")+"/start", ""); code != http.StatusOK {
		t.Fatalf("start: %d %s", code, body)
	}
	var runs []store.RunRecord
	testkit.WaitFor(t, 20*time.Second, "hello's second run to end", func() bool {
		var err error
		runs, err = d.store.Runs("hello", 0)
		return err == nil && len(runs) == 2 && !runs[0].End.IsZero() && !runs[1].End.IsZero()
	})
	first := runs[len(runs)-1].ID
	req := httptest.NewRequest(http.MethodGet, "http://berth"+APIVersion+jobPath("hello")+"/logs?run="+strconv.FormatUint(first, 10), nil)
	req = req.WithContext(context.WithValue(req.Context(), peerKey{}, root))
	rec := httptest.NewRecorder()
	d.api().ServeHTTP(rec, req)
	if rec.Code != http.StatusOK || rec.Body.String() != "hello\n" || rec.Header().Get(HeaderOutputGone) != "" {
		t.Errorf("berth logs --run %d: %d %q (%s %q), want its line", first, rec.Code, rec.Body, HeaderOutputGone, rec.Header().Get(HeaderOutputGone))
	}
}
