package supervisor

import (
	"context"
	"fmt"
	"net/http/httptest"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/berthd/berth/supervisor/runner"
	"github.com/berthd/berth/supervisor/store"
)

// A job's log file is read after the file it was rotated to, and --run
// picks one run's lines out of both: those after its header, up to the
// next run's, a last line without its newline included.
func TestStreamFileRuns(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "train.log")
	start := time.Date(2026, 12, 4, 9, 0, 0, 0, time.UTC)
	h := func(run uint64) string { return runner.RunHeader(run, start) }
	if err := os.WriteFile(path+".1", []byte(h(1)+"a\n"+h(2)+"b1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte("b2\n"+h(3)+"c1\nc2"), 0o600); err != nil {
		t.Fatal(err)
	}
	d := &Daemon{log: hclog.NewNullLogger()}
	readLast := func(only *runLines, lines int) string {
		rec := httptest.NewRecorder()
		d.streamFile(rec, httptest.NewRequest("GET", "/", nil), path, false, only, lines)
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
	// Followed, a run whose output is over (a later run's header came)
	// ends the stream: the request has no deadline to end it.
	rec := httptest.NewRecorder()
	d.streamFile(rec, httptest.NewRequest("GET", "/", nil), path, true, &runLines{run: 2}, -1)
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

// Followed with a number of lines, the stream starts with the last of
// them, then passes on what is written after.
func TestStreamFileFollowLast(t *testing.T) {
	for _, tt := range []struct {
		lines         int
		before, after string // what is streamed before the file grows, and after
	}{
		{2, "3\n4", "3\n45\n6\n"},
		{0, "", "5\n6\n"}, // only what comes
	} {
		path := filepath.Join(t.TempDir(), "svc.log")
		if err := os.WriteFile(path, []byte("1\n2\n3\n4"), 0o600); err != nil {
			t.Fatal(err)
		}
		d := &Daemon{log: hclog.NewNullLogger()}
		ctx, cancel := context.WithCancel(context.Background())
		body := &watchedBody{ResponseRecorder: httptest.NewRecorder(), wrote: make(chan string, 16), flushed: make(chan struct{}, 1)}
		done := make(chan struct{})
		go func() {
			defer close(done)
			d.streamFile(body, httptest.NewRequest("GET", "/", nil).WithContext(ctx), path, true, nil, tt.lines)
		}()
		got := ""
		deadline := time.After(time.Minute)
		until := func(want string) {
			t.Helper()
			for got != want {
				if !strings.HasPrefix(want, got) {
					t.Fatalf("-n %d: the stream so far: %q, want %q", tt.lines, got, want)
				}
				select {
				case p := <-body.wrote:
					got += p
				case <-deadline:
					t.Fatalf("-n %d: the stream so far: %q, want %q", tt.lines, got, want)
				}
			}
		}
		until(tt.before)
		select { // the stream follows from here
		case <-body.flushed:
		case <-deadline:
			t.Fatalf("-n %d: the stream never started to follow", tt.lines)
		}
		f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.WriteString("5\n6\n"); err != nil {
			t.Fatal(err)
		}
		f.Close()
		until(tt.after)
		cancel()
		<-done
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
// runs are units: its lines in berth's slice, or, for a run gone before
// journald read its lines (which then have no slice), those its user
// wrote; a person's job's, those they wrote. Where that user is not known,
// the slice alone.
func TestJournalMatches(t *testing.T) {
	d, _ := runDaemon(t, `job "plain" { cmd = "true", cpus = 0 }
job "as-nobody" { cmd = "true", cpus = 0, user = "nobody" }
job "as-ghost" { cmd = "true", cpus = 0, user = "berth-no-such-user" }`, nil)
	for _, name := range []string{"plain", "as-nobody", "as-ghost"} {
		waitJob(t, d, name, "known", func(JobStatus) bool { return true })
	}
	nobody, err := user.Lookup("nobody")
	if err != nil {
		t.Skip("no user nobody here")
	}
	slice := "_SYSTEMD_SLICE=berth.slice"
	tests := []struct {
		name, owner string
		want        string
	}{
		{"plain", "", "[[SYSLOG_IDENTIFIER=plain " + slice + "] [SYSLOG_IDENTIFIER=plain _UID=" + strconv.Itoa(os.Geteuid()) + "]]"},
		{"as-nobody", "", "[[SYSLOG_IDENTIFIER=as-nobody " + slice + "] [SYSLOG_IDENTIFIER=as-nobody _UID=" + nobody.Uid + "]]"},
		{"as-ghost", "", "[[SYSLOG_IDENTIFIER=as-ghost " + slice + "]]"},
		{"removed", "", "[[SYSLOG_IDENTIFIER=removed " + slice + "]]"},
		{"root/train", "root", "[[SYSLOG_IDENTIFIER=root/train _UID=0]]"},
		{"berth-no-such-user/train", "berth-no-such-user", "[[SYSLOG_IDENTIFIER=berth-no-such-user/train " + slice + "]]"},
	}
	for _, tt := range tests {
		if got := fmt.Sprint(d.journalMatches(tt.name, tt.owner)); got != tt.want {
			t.Errorf("%s: %s, want %s", tt.name, got, tt.want)
		}
	}
}
