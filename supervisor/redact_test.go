package supervisor

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/berthd/berth/supervisor/store"
	"github.com/berthd/berth/supervisor/testkit"
)

// TestReaderHidesWhatItMayNotRead: the status shows a problem's sentence,
// which quotes its file, only to one who may read the file; anyone else
// learns where and what kind of problem it is.
func TestReaderHidesWhatItMayNotRead(t *testing.T) {
	t.Parallel()
	d, jobsDir := runDaemon(t, `job "fine" { cmd = "sleep 100", cpus = 0 }`, nil)
	secret := filepath.Join(jobsDir, "secret.lua")
	open := filepath.Join(jobsDir, "open.lua")
	for path, src := range map[string]string{
		secret: "job \"s\" { cmd = \"true\", ram = \"hunter2secret\" }\n",
		open:   "job \"o\" { cmd = \"true\", ram = \"plainmistake\" }\n",
	} {
		if err := writeFile(path, []byte(src), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	// The file's owner is whoever runs the test; the reader below is
	// another user, in no group of the file's.
	if err := os.Chmod(open, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Reload(t.Context()); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, 10*time.Second, "both files' problems", func() bool { return len(d.Status().Problems) == 2 })

	all := (&reader{all: true}).status(d.Status())
	if !strings.Contains(strings.Join(all.Errors, "\n"), "hunter2secret") {
		t.Fatalf("the daemon's own reader does not see the problem as it is: %q", all.Errors)
	}
	other := func() *reader {
		return &reader{uid: uint32(os.Getuid()) + 54321, gids: map[uint32]bool{54321: true}, seen: map[string]bool{}}
	}
	// The jobs directory is 0700: no file in it is anyone else's to read.
	if s := other().status(d.Status()); strings.Contains(strings.Join(s.Errors, "\n"), "plainmistake") {
		t.Errorf("a reader who may not search the jobs directory is shown a file in it: %q", s.Errors)
	}
	for dir := jobsDir; dir != os.TempDir() && dir != "/"; dir = filepath.Dir(dir) {
		if err := os.Chmod(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	s := other().status(d.Status())
	shown := strings.Join(s.Errors, "\n")
	for _, p := range s.Problems {
		shown += "\n" + p.Text
	}
	if strings.Contains(shown, "hunter2secret") {
		t.Errorf("a reader who may not read secret.lua is shown its content:\n%s", shown)
	}
	if !strings.Contains(shown, "plainmistake") {
		t.Errorf("a reader who may read open.lua is not shown its problem:\n%s", shown)
	}
	if !strings.Contains(shown, secret+":1: job \"s\": a problem (bad value) whose details quote a file you may not read") {
		t.Errorf("the hidden problem does not say where and what:\n%s", shown)
	}
}

// TestReaderHidesDefinitions: berth show leaves out what a job's file says
// (command, environment, directory, description, the next run's
// environment) for a caller who may not read the file.
func TestReaderHidesDefinitions(t *testing.T) {
	t.Parallel()
	d, _ := runDaemon(t, `job "tok" { cmd = "sleep 100", env = { HF_TOKEN = "hf_secret" }, description = "private", dir = "/tmp", cpus = 0 }`, nil)
	testkit.WaitFor(t, 10*time.Second, "the job to run", func() bool {
		js, ok := d.jobStatus("tok")
		return ok && js.State == "running"
	})
	j, _ := d.resolve(caller{}, "tok")
	jd, ok := d.detail(j)
	if !ok {
		t.Fatal("no detail")
	}
	other := &reader{uid: uint32(os.Getuid()) + 54321, gids: map[uint32]bool{}, seen: map[string]bool{}}
	hidden := other.detail(jd)
	// Left empty, as a definition without them is: JSON's [] and {}, not null.
	if hidden.Hidden == "" || hidden.Definition.Cmd == nil || len(hidden.Definition.Cmd) != 0 || hidden.Definition.Env == nil || len(hidden.Definition.Env) != 0 ||
		hidden.Definition.Description != "" || hidden.Definition.Dir != "" || len(hidden.NextEnv) != 0 {
		t.Errorf("shown to a reader who may not read the file: %+v", hidden)
	}
	if shown := (&reader{all: true}).detail(jd); shown.Hidden != "" || shown.Definition.Env["HF_TOKEN"] != "hf_secret" {
		t.Errorf("hidden from the daemon's own reader: %+v", shown)
	}
}

// TestReaderHidesWhyItCannotStart: why a job could not start quotes its
// definition (a program, a directory), in its status and in its runs; one
// who may not read its file is told only that it could not.
func TestReaderHidesWhyItCannotStart(t *testing.T) {
	t.Parallel()
	d, _ := runDaemon(t, `job "hid" { cmd = { "/opt/secret-tool/run" }, cpus = 0 }`, nil)
	js := waitJob(t, d, "hid", "failed to start", func(js JobStatus) bool { return js.State == "failed" })
	other := &reader{uid: uint32(os.Getuid()) + 54321, gids: map[uint32]bool{}, seen: map[string]bool{}}
	if all := (&reader{all: true}).jobs([]JobStatus{js})[0]; !strings.Contains(all.Why, "/opt/secret-tool/run") {
		t.Fatalf("the daemon's own reader is not told why: %q", all.Why)
	}
	if hidden := other.jobs([]JobStatus{js})[0]; hidden.Why != msgStartHidden(js.File) {
		t.Errorf("why, to a reader who may not read %s: %q", js.File, hidden.Why)
	}
	var runs []store.RunRecord
	testkit.WaitFor(t, 10*time.Second, "the run's end on record", func() bool {
		runs, _ = d.store.Runs("hid", 1)
		return len(runs) == 1 && runs[0].Cause != ""
	})
	views := []RunView{runViewOf(runs[0])}
	fileOf := func(string) string { return js.File }
	if shown := (&reader{all: true}).runs(slices.Clone(views), fileOf); !strings.Contains(shown[0].Cause, "/opt/secret-tool/run") {
		t.Errorf("the run's cause, to the daemon's own reader: %q", shown[0].Cause)
	}
	if hidden := other.runs(slices.Clone(views), fileOf); hidden[0].Cause != msgStartHidden(js.File) {
		t.Errorf("the run's cause, to a reader who may not read %s: %q", js.File, hidden[0].Cause)
	}
}

// TestReaderSeesWhyAFileIsRefused: why a file is refused (its mode, its
// owner, where a link leads) is shown to whoever may list its directory,
// though the file itself may be one they cannot read: a person's link to
// /etc/shadow in their own directory. Others learn only where it is.
func TestReaderSeesWhyAFileIsRefused(t *testing.T) {
	t.Parallel()
	dir, elsewhere := t.TempDir(), t.TempDir()
	target := filepath.Join(elsewhere, "shadow")
	if err := writeFile(target, nil, 0o000); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "shadow.lua")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	refused := []Problem{{Code: ProblemFileRefused, File: link, Text: link + " is a symbolic link to " + target}}
	owner := &reader{uid: uint32(os.Getuid()), gids: map[uint32]bool{}, seen: map[string]bool{}}
	if owner.canRead(link) {
		t.Fatal("the link's target is readable: the test proves nothing")
	}
	if got := owner.problems(refused)[0].Text; got != refused[0].Text {
		t.Errorf("the directory's owner is shown %q, want %q", got, refused[0].Text)
	}
	other := &reader{uid: uint32(os.Getuid()) + 54321, gids: map[uint32]bool{54321: true}, seen: map[string]bool{}}
	if got := other.problems(refused)[0].Text; strings.Contains(got, target) {
		t.Errorf("one who may not list the directory is shown where the link leads: %q", got)
	}
}

// TestRunViewExitCode: a run's exit code is shown however it ended where
// it has one: a run stopped or timed out may have caught the signal and
// exited with a code of its own. A lost run, one that never started and
// one a later daemon finished have none.
func TestRunViewExitCode(t *testing.T) {
	t.Parallel()
	end := time.Date(2026, 12, 6, 9, 0, 0, 0, time.UTC)
	for _, tt := range []struct {
		rec  store.RunRecord
		want string
	}{
		{store.RunRecord{ExitCode: 5, Reason: store.ReasonStopped}, "5"},
		{store.RunRecord{ExitCode: 0, Reason: store.ReasonStopped, Cause: "stopped on request (berth stop)"}, "0"},
		{store.RunRecord{ExitCode: 0, Reason: store.ReasonTimedOut}, "0"},
		{store.RunRecord{ExitCode: 3, Reason: store.ReasonFailed}, "3"},
		{store.RunRecord{Signal: "SIGTERM", Reason: store.ReasonStopped}, "none"},
		{store.RunRecord{Reason: store.ReasonLost}, "none"},
		{store.RunRecord{Reason: store.ReasonSpawnError, Cause: "no such file"}, "none"},
		{store.RunRecord{Reason: store.ReasonStopped, Cause: "its daemon went away during the stop, and the next one finished it"}, "none"},
	} {
		tt.rec.End = end
		got := "none"
		if v := runViewOf(tt.rec); v.ExitCode != nil {
			got = strconv.Itoa(*v.ExitCode)
		}
		if got != tt.want {
			t.Errorf("%+v: exit code %s, want %s", tt.rec, got, tt.want)
		}
	}
}
