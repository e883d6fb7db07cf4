package supervisor

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/berthd/berth/supervisor/testkit"
)

// TestReaderHidesWhatItMayNotRead: the status shows a problem's sentence,
// which quotes its file, only to one who may read the file; anyone else
// learns where and what kind of problem it is.
func TestReaderHidesWhatItMayNotRead(t *testing.T) {
	d, jobsDir := runDaemon(t, `job "fine" { cmd = "sleep 100", cpus = 0 }`, nil)
	secret := filepath.Join(jobsDir, "secret.lua")
	open := filepath.Join(jobsDir, "open.lua")
	for path, src := range map[string]string{
		secret: "job \"s\" { cmd = \"true\", ram = \"hunter2secret\" }\n",
		open:   "job \"o\" { cmd = \"true\", ram = \"plainmistake\" }\n",
	} {
		if err := os.WriteFile(path, []byte(src), 0o600); err != nil {
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
// (command, environment, description, the next run's environment) for a
// caller who may not read the file.
func TestReaderHidesDefinitions(t *testing.T) {
	d, _ := runDaemon(t, `job "tok" { cmd = "sleep 100", env = { HF_TOKEN = "hf_secret" }, description = "private", cpus = 0 }`, nil)
	testkit.WaitFor(t, 10*time.Second, "the job to run", func() bool {
		js, ok := d.jobStatus("tok")
		return ok && js.State == "running"
	})
	jd, ok := d.detail("tok")
	if !ok {
		t.Fatal("no detail")
	}
	other := &reader{uid: uint32(os.Getuid()) + 54321, gids: map[uint32]bool{}, seen: map[string]bool{}}
	hidden := other.detail(jd)
	if hidden.Hidden == "" || len(hidden.Definition.Cmd) != 0 || hidden.Definition.Env != nil ||
		hidden.Definition.Description != "" || len(hidden.NextEnv) != 0 {
		t.Errorf("shown to a reader who may not read the file: %+v", hidden)
	}
	if shown := (&reader{all: true}).detail(jd); shown.Hidden != "" || shown.Definition.Env["HF_TOKEN"] != "hf_secret" {
		t.Errorf("hidden from the daemon's own reader: %+v", shown)
	}
}
