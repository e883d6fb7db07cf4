package supervisor

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// The copies of the job files in force: one per file, found again by a
// daemon that opens them anew, replaced by a new version, gone with the
// file; a write cut short is cleared away.
func TestKeptFiles(t *testing.T) {
	t.Parallel()
	state := t.TempDir()
	k, err := openKept(state)
	if err != nil {
		t.Fatal(err)
	}
	const path = "/etc/berth/jobs.d/train.lua"
	for _, err := range []error{
		k.keep(path, "aaaaaaaaaaaaaaaaaaaa", []byte("v1")),
		k.keep(path, "aaaaaaaaaaaaaaaaaaaa", []byte("v1")),
		k.keep(path, "bbbbbbbbbbbbbbbbbbbb", []byte("v2")),
		k.keep("/etc/berth/jobs.d/other.lua", "cccccccccccccccccccc", []byte("other")),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := writeFile(filepath.Join(state, keptDir, "cut.tmp"), []byte("half"), 0o600); err != nil {
		t.Fatal(err)
	}
	k, err = openKept(state)
	if err != nil {
		t.Fatal(err)
	}
	if src, ok := k.previous(path, "ffffffffffffffffffff"); !ok || string(src) != "v2" {
		t.Errorf("the copy of a file that fails: %q %v, want v2", src, ok)
	}
	if _, ok := k.previous(path, "bbbbbbbbbbbbbbbbbbbb"); ok {
		t.Error("the copy of the very version that fails is offered")
	}
	jobsD := map[string]bool{"/etc/berth/jobs.d": true}
	if got := k.pathsIn(jobsD); !slices.Equal(slices.Sorted(slices.Values(got)), []string{"/etc/berth/jobs.d/other.lua", path}) {
		t.Errorf("the paths of the copies, read again: %q", got)
	}
	if got := k.pathsIn(map[string]bool{"/home": true}); len(got) != 0 {
		t.Errorf("the paths of another directory's copies: %q", got)
	}
	k.forget(path)
	if _, ok := k.previous(path, "ffffffffffffffffffff"); ok {
		t.Error("a copy of a removed file is offered")
	}
	const renamed = "/etc/berth/jobs.d/renamed.lua"
	if err := k.move("/etc/berth/jobs.d/other.lua", renamed); err != nil {
		t.Fatal(err)
	}
	if k, err = openKept(state); err != nil {
		t.Fatal(err)
	}
	if got := k.pathsIn(jobsD); !slices.Equal(got, []string{renamed}) {
		t.Errorf("the paths of the copies, one removed and one renamed: %q", got)
	}
	if entries, _ := os.ReadDir(filepath.Join(state, keptDir)); len(entries) != 2 {
		t.Errorf("%d files kept, want renamed.lua's copy and its path alone: %v", len(entries), entries)
	}
}

// At a start the copies of files no longer there go, two copies of one
// file (a crash between a new one's rename and the old one's removal) are
// both dropped, and the writer keeps only bytes that are the version in
// force.
func TestKeptFilesPruned(t *testing.T) {
	t.Parallel()
	state := t.TempDir()
	k, err := openKept(state)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { k.run(func(path string, err error) { t.Errorf("%s: %v", path, err) }); close(done) }()
	a, b := "/etc/berth/jobs.d/a.lua", "/etc/berth/jobs.d/b.lua"
	k.do([]keptOp{
		{path: a, hash: sha256Hex([]byte("a")), src: []byte("a")},
		{path: b, hash: sha256Hex([]byte("b")), src: []byte("b")},
		{path: "/etc/berth/jobs.d/c.lua", hash: sha256Hex([]byte("old")), src: []byte("new")},
	})
	k.do([]keptOp{{only: map[string]bool{a: true, "/etc/berth/jobs.d/c.lua": true}}})
	k.end()
	<-done
	if _, ok := k.previous(b, ""); ok {
		t.Error("the copy of a file gone at the start is kept")
	}
	if src, ok := k.previous(a, ""); !ok || string(src) != "a" {
		t.Errorf("a's copy: %q %v", src, ok)
	}
	if _, ok := k.previous("/etc/berth/jobs.d/c.lua", ""); ok {
		t.Error("bytes that are not the version in force were kept")
	}
	ph := keptPathHash(a)
	if err := writeFile(k.keptName(ph, "ffffffffffffffff"), []byte("a2"), 0o600); err != nil {
		t.Fatal(err)
	}
	if k, err = openKept(state); err != nil {
		t.Fatal(err)
	}
	if _, ok := k.previous(a, ""); ok {
		t.Error("one of two copies of a file is offered")
	}
	if entries, _ := os.ReadDir(filepath.Join(state, keptDir)); len(entries) != 0 {
		t.Errorf("copies left: %v", entries)
	}
}

// TestNoKeptFiles: where no copies are kept (their directory could not be
// made), none is said to be kept, and the reload's rules across files ask
// without failing (the review: a nil keptFiles panicked there).
func TestNoKeptFiles(t *testing.T) {
	var k *keptFiles
	if k.keeps("/etc/berth/jobs.d/a.lua", sha256Hex([]byte("x"))) {
		t.Error("no copies, and one is kept")
	}
}

// TestJobsDirRefusedAtStart: a daemon started while its jobs directory is
// refused (writable by others) keeps in force what was in force from it,
// the kept copies of its files, as a running daemon does, and keeps them
// for the next start; fixed, the directory is read again (trial AY: every
// job of it went, done and stopped jobs with them).
func TestJobsDirRefusedAtStart(t *testing.T) {
	t.Parallel()
	lives := daemonLives{t: t, jobs: `job "persist" { cmd = "sleep 600", flavor = "small" }
job "once" { cmd = "true", cpus = 0 }`}
	// A file of flavors only: no job's record names it (trial AY's review:
	// its flavor went missing, and the jobs naming it were invalid).
	lives.tune = func(cfg *Config) {
		if lives.jobsDir == "" {
			if err := os.WriteFile(filepath.Join(cfg.JobsDir, "flavors.lua"), []byte(`flavor "small" { cpus = 1 }`), 0o600); err != nil {
				t.Fatal(err)
			}
		}
	}
	d, stop := lives.start()
	waitJob(t, d, "persist", "running", func(js JobStatus) bool { return js.State == "running" })
	waitJob(t, d, "once", "done", func(js JobStatus) bool { return js.State == "done" })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(lives.jobsDir, 0o777); err != nil {
		t.Fatal(err)
	}
	for life := range 2 { // the second: the copies were not let go of
		d, stop = lives.start()
		<-d.loaded
		waitJob(t, d, "persist", "running on the version kept", func(js JobStatus) bool { return js.State == "running" })
		if js, _ := d.jobStatus("persist"); js.Why != "" || js.CPUs != 1 {
			t.Errorf("life %d: persist %+v, want it running in its flavor, which the kept flavors.lua declares", life, js)
		}
		if js, ok := d.jobStatus("once"); !ok || js.State != "done" {
			t.Errorf("life %d: once %+v, want done, its file's version kept in force", life, js)
		}
		if !slices.ContainsFunc(d.Status().Problems, func(p Problem) bool { return p.Code == ProblemDirRefused }) {
			t.Errorf("life %d: the refused directory is not among the problems", life)
		}
		if err := stop(); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(lives.jobsDir, 0o700); err != nil {
		t.Fatal(err)
	}
	d, stop = lives.start()
	<-d.loaded
	waitJob(t, d, "persist", "running, the directory fixed", func(js JobStatus) bool { return js.State == "running" })
	if slices.ContainsFunc(d.Status().Problems, func(p Problem) bool { return p.Code == ProblemDirRefused }) {
		t.Error("the directory fixed is still refused")
	}
	if runs := runsOf(t, d, "once"); len(runs) != 1 {
		t.Errorf("once ran %d times, want once: done, it stayed so", len(runs))
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
}
