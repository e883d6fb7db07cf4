package watch

import (
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fsnotify/fsnotify"
)

// settleWithin bounds every wait for a signal: generous, because a loaded
// machine under -race is slow, and a passing test never waits it out.
const settleWithin = 10 * time.Second

// Editor save styles, each a function of the directory that turns f.lua's
// content into content. They make the same system calls, in the same
// order, as the editors they are named after.
var saves = map[string]func(t testing.TB, dir, content string){
	// echo new > f.lua, and editors that write in place (VS Code, nano):
	// truncate, then write.
	"truncate+write": func(t testing.TB, dir, content string) {
		f, err := os.OpenFile(filepath.Join(dir, "f.lua"), os.O_WRONLY|os.O_TRUNC|os.O_CREATE, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.WriteString(content); err != nil {
			t.Fatal(err)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
	},
	// vim with writebackup: probe the directory with "4913", move the file
	// to f.lua~, write a new f.lua (fsync), restore its mode, drop the
	// backup.
	"vim": func(t testing.TB, dir, content string) {
		p := func(name string) string { return filepath.Join(dir, name) }
		probe, err := os.OpenFile(p("4913"), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		probe.Close()
		if err := os.Remove(p("4913")); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(p("f.lua"), p("f.lua~")); err != nil {
			t.Fatal(err)
		}
		writeSynced(t, p("f.lua"), content)
		if err := os.Chmod(p("f.lua"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Remove(p("f.lua~")); err != nil {
			t.Fatal(err)
		}
	},
	// Atomic save (JetBrains' safe write, most libraries' "write file
	// atomically"): write a hidden temporary, fsync, rename over.
	"atomic": func(t testing.TB, dir, content string) {
		tmp := filepath.Join(dir, ".f.lua.tmp")
		writeSynced(t, tmp, content)
		if err := os.Chmod(tmp, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, filepath.Join(dir, "f.lua")); err != nil {
			t.Fatal(err)
		}
	},
}

// writeSynced creates or truncates path, writes content and fsyncs it, as
// editors that care do before they rename or drop a backup.
func writeSynced(t testing.TB, path, content string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(content); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// configMap lays out dir as kubelet's AtomicWriter does for a ConfigMap
// volume: the files live in a timestamped hidden directory, "..data" points
// to it, and each visible name is a link through "..data". An update writes
// a new timestamped directory, swaps "..data" by rename, and removes the
// old one; no event names f.lua.
type configMap struct {
	dir     string
	version int
}

func (c *configMap) publish(t testing.TB, content string) {
	t.Helper()
	c.version++
	ts := "..2026_01_01_00_00_00." + strconv.Itoa(c.version)
	mkdir(t, filepath.Join(c.dir, ts))
	writeFile(t, filepath.Join(c.dir, ts, "f.lua"), content)
	tmp := filepath.Join(c.dir, "..data_tmp")
	if err := os.Symlink(ts, tmp); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(c.dir, "..data")); err != nil {
		t.Fatal(err)
	}
	if c.version == 1 {
		if err := os.Symlink("..data/f.lua", filepath.Join(c.dir, "f.lua")); err != nil {
			t.Fatal(err)
		}
		return
	}
	old := "..2026_01_01_00_00_00." + strconv.Itoa(c.version-1)
	if err := os.RemoveAll(filepath.Join(c.dir, old)); err != nil {
		t.Fatal(err)
	}
}

// TestWatchEditorSaves: each way of saving yields a signal, and the scan
// after it reports exactly the new content of f.lua: no scan ever sees the
// file missing or empty on the way, nor anything else.
func TestWatchEditorSaves(t *testing.T) {
	type scenario struct {
		setup func(t *testing.T, dir string)
		save  func(t *testing.T, dir string)
	}
	scenarios := map[string]scenario{}
	for name, save := range saves {
		scenarios[name] = scenario{
			setup: func(t *testing.T, dir string) { writeFile(t, filepath.Join(dir, "f.lua"), "old") },
			save:  func(t *testing.T, dir string) { save(t, dir, "new") },
		}
	}
	var cm *configMap
	scenarios["configmap"] = scenario{
		setup: func(t *testing.T, dir string) { cm = &configMap{dir: dir}; cm.publish(t, "old") },
		save:  func(t *testing.T, dir string) { cm.publish(t, "new") },
	}

	for name, sc := range scenarios {
		t.Run(name, func(t *testing.T) {
			dir := jobsDir(t)
			sc.setup(t, dir)
			f := filepath.Join(dir, "f.lua")
			s := newTestScanner(dir)
			v := view{}
			v.apply(scan(t, s))
			if !maps.Equal(v, view{f: "old"}) {
				t.Fatalf("initial view %v", v)
			}
			w := startWatcher(t, dir, WatchOptions{})

			start := time.Now()
			sc.save(t, dir)
			scans := settle(t, w, s, v, view{f: "new"}, settleWithin)
			t.Logf("%d scan(s), %v from the start of the save", len(scans), time.Since(start).Round(time.Millisecond))
			for i, got := range scans {
				// An empty scan is a signal that came while the save had
				// not changed f.lua yet (an fsync of the temporary): harmless.
				if sum := summary(dir, got); sum != "changed f.lua=new" && sum != "" {
					t.Errorf("scan %d says %q: a state in the middle of the save", i, sum)
				}
			}
		})
	}
}

// TestWatchDirRemovedAndRecreated: removing the jobs directory signals;
// re-creating it with files signals and the scan sees them; and the watch
// is re-added, so later edits still signal.
func TestWatchDirRemovedAndRecreated(t *testing.T) {
	dir := jobsDir(t)
	p := func(name string) string { return filepath.Join(dir, name) }
	writeFile(t, p("a.lua"), "a1")
	s := newTestScanner(dir)
	v := view{}
	v.apply(scan(t, s))
	logs := newLogRecorder()
	w := startWatcher(t, dir, WatchOptions{Logf: logs.logf})

	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	settle(t, w, s, v, view{}, settleWithin)
	logs.waitFor(t, "jobs directory missing; waiting for it", settleWithin)

	mkdir(t, dir)
	writeFile(t, p("a.lua"), "a2")
	writeFile(t, p("b.lua"), "b1")
	settle(t, w, s, v, view{p("a.lua"): "a2", p("b.lua"): "b1"}, settleWithin)
	logs.waitFor(t, "jobs directory is back; watching it", settleWithin)
	if !slices.Contains(w.fsw.WatchList(), dir) {
		t.Fatalf("watching %q, not the re-created directory", w.fsw.WatchList())
	}

	// Every burst so far has been delivered once nothing comes for longer
	// than the longest a burst can be held; a signal after that is the edit's.
	drainQuiet(w, 10*DefaultQuiet+100*time.Millisecond)
	writeFile(t, p("c.lua"), "c1")
	waitSignal(t, w, settleWithin)
	if got, want := summary(dir, scan(t, s)), "changed c.lua=c1"; got != want {
		t.Fatalf("after an edit in the re-created directory: scan says %q, want %q", got, want)
	}
}

// TestWatchDirMissingAtStart: neither the directory nor its parent exists
// when the watcher starts; it waits on the nearest ancestor and follows the
// directory into existence.
func TestWatchDirMissingAtStart(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "etc", "berth", "jobs.d")
	logs := newLogRecorder()
	w, err := NewWatcher(dir, WatchOptions{Logf: logs.logf})
	if err != nil {
		t.Fatal(err)
	}
	logs.waitFor(t, "jobs directory missing; waiting for it", settleWithin)
	if got := w.fsw.WatchList(); !slices.Equal(got, []string{root}) {
		t.Fatalf("watching %q, want only the nearest existing ancestor %q", got, root)
	}
	runWatcher(t, w)
	s := newTestScanner(dir)
	if got := scan(t, s); !got.DirMissing {
		t.Fatalf("scan says %q, want the directory missing", summary(dir, got))
	}

	mkdir(t, filepath.Dir(dir))
	mkdir(t, dir)
	writeFile(t, filepath.Join(dir, "x.lua"), "x1")
	settle(t, w, s, view{}, view{filepath.Join(dir, "x.lua"): "x1"}, settleWithin)
	logs.waitFor(t, "jobs directory is back; watching it", settleWithin)

	drainQuiet(w, 10*DefaultQuiet+100*time.Millisecond)
	writeFile(t, filepath.Join(dir, "y.lua"), "y1")
	waitSignal(t, w, settleWithin)
	if got, want := summary(dir, scan(t, s)), "changed y.lua=y1"; got != want {
		t.Fatalf("scan says %q, want %q", got, want)
	}
	// Only the directory and its parent are watched now.
	got := w.fsw.WatchList()
	slices.Sort(got)
	if want := []string{filepath.Dir(dir), dir}; !slices.Equal(got, want) {
		t.Fatalf("watching %q, want %q", got, want)
	}
}

// TestWatchSymlinkedDirSwapped: the jobs directory is a symlink, pointed
// elsewhere by an atomic rename; the watch follows it to the new target.
func TestWatchSymlinkedDirSwapped(t *testing.T) {
	root := t.TempDir()
	for i, content := range []string{"one", "two"} {
		real := filepath.Join(root, "real"+strconv.Itoa(i+1))
		mkdir(t, real)
		writeFile(t, filepath.Join(real, "a.lua"), content)
	}
	dir := filepath.Join(root, "jobs.d")
	if err := os.Symlink("real1", dir); err != nil {
		t.Fatal(err)
	}
	s := newTestScanner(dir)
	v := view{}
	v.apply(scan(t, s))
	w := startWatcher(t, dir, WatchOptions{})

	if err := os.Symlink("real2", dir+".tmp"); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(dir+".tmp", dir); err != nil {
		t.Fatal(err)
	}
	settle(t, w, s, v, view{filepath.Join(dir, "a.lua"): "two"}, settleWithin)

	drainQuiet(w, 10*DefaultQuiet+100*time.Millisecond)
	writeFile(t, filepath.Join(root, "real2", "b.lua"), "b")
	waitSignal(t, w, settleWithin)
	if got, want := summary(dir, scan(t, s)), "changed b.lua=b"; got != want {
		t.Fatalf("after an edit in the new target: scan says %q, want %q", got, want)
	}
}

// TestWatchIgnoresSiblings: events on the parent about other entries do
// not signal (the parent of /etc/berth/jobs.d holds other things).
func TestWatchIgnoresSiblings(t *testing.T) {
	dir := jobsDir(t)
	w := startWatcher(t, dir, WatchOptions{})
	writeFile(t, filepath.Join(filepath.Dir(dir), "berth.conf"), "x")
	mkdir(t, filepath.Join(filepath.Dir(dir), "other.d"))
	// A later event in the directory is the first signal: the sibling
	// events before it would have fired one already, 10 ms after them.
	select {
	case <-w.Changes():
		t.Fatal("a sibling of the jobs directory caused a signal")
	case <-time.After(10*DefaultQuiet + 100*time.Millisecond):
	}
	writeFile(t, filepath.Join(dir, "x.lua"), "x")
	waitSignal(t, w, settleWithin)
}

// TestWatchBurst: a burst of writes to several files yields a signal
// without anybody receiving meanwhile (the sends never block the watcher),
// and the one scan after it sees the end state.
func TestWatchBurst(t *testing.T) {
	dir := jobsDir(t)
	w := startWatcher(t, dir, WatchOptions{})
	for i := range 200 {
		writeFile(t, filepath.Join(dir, "f"+strconv.Itoa(i%7)+".lua"), strconv.Itoa(i))
	}
	waitSignal(t, w, settleWithin)
	s := newTestScanner(dir)
	want := "changed f0.lua=196 f1.lua=197 f2.lua=198 f3.lua=199 f4.lua=193 f5.lua=194 f6.lua=195"
	if got := summary(dir, scan(t, s)); got != want {
		t.Fatalf("scan says %q, want %q", got, want)
	}
}

// TestWatchRescan: the periodic safety net signals with no events at all.
func TestWatchRescan(t *testing.T) {
	dir := jobsDir(t)
	w := startWatcher(t, dir, WatchOptions{Rescan: 20 * time.Millisecond})
	for range 3 {
		waitSignal(t, w, settleWithin)
	}
}

// TestWatchOverflow fills the kernel's inotify queue while nobody reads it;
// the watcher logs the overflow and signals, so the daemon rescans.
func TestWatchOverflow(t *testing.T) {
	if testing.Short() {
		t.Skip("generates tens of thousands of events")
	}
	raw, err := os.ReadFile("/proc/sys/fs/inotify/max_queued_events")
	if err != nil {
		t.Skipf("cannot read the queue size: %v", err)
	}
	limit, err := strconv.Atoi(strings.TrimSpace(string(raw)))
	if err != nil || limit > 1<<20 {
		t.Skipf("queue size %q is too large to fill in a test", raw)
	}
	dir := jobsDir(t)
	a, b := filepath.Join(dir, "a.lua"), filepath.Join(dir, "b.lua")
	writeFile(t, a, "a")
	writeFile(t, b, "b")
	logs := newLogRecorder()
	w, err := NewWatcher(dir, WatchOptions{Logf: logs.logf})
	if err != nil {
		t.Fatal(err)
	}
	// Alternate two files: the kernel merges an event identical to the one
	// queued just before it.
	for i := range limit + 5000 { // fsnotify's reader holds a few thousand before it blocks
		p := a
		if i%2 == 1 {
			p = b
		}
		if err := os.Chmod(p, 0o644); err != nil { // IN_ATTRIB even when the mode stays
			t.Fatal(err)
		}
	}
	runWatcher(t, w)
	logs.waitFor(t, "watch overflow; rescanning", settleWithin)
	waitSignal(t, w, settleWithin)
}

// realSaves are saves by the real programs, where this machine has them:
// their timing between system calls is theirs, not a test's.
func realSaves(t testing.TB) map[string]func(t testing.TB, dir, content string) {
	run := func(t testing.TB, dir, name string, args ...string) {
		cmd := exec.Command(name, args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "HOME="+dir) // no viminfo, no user vimrc
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%s: %v\n%s", name, err, out)
		}
	}
	found := map[string]func(t testing.TB, dir, content string){}
	if _, err := exec.LookPath("sed"); err == nil {
		// GNU sed -i writes a temporary "sedXXXXXX" and renames it over.
		found["sed -i"] = func(t testing.TB, dir, content string) {
			run(t, dir, "sed", "-i", "s/.*/"+content+"/", "f.lua")
		}
	}
	if _, err := exec.LookPath("vim"); err == nil {
		found["vim"] = func(t testing.TB, dir, content string) {
			run(t, dir, "vim", "-u", "NONE", "-N", "-n", "-es", "-c", "%s/.*/"+content+"/", "-c", "wq", "f.lua")
		}
	}
	return found
}

// TestWatchRealEditors is TestWatchEditorSaves with the real programs:
// twenty saves each, and no scan may see a state in the middle of one.
func TestWatchRealEditors(t *testing.T) {
	editors := realSaves(t)
	if len(editors) == 0 {
		t.Skip("neither sed nor vim is installed")
	}
	for name, save := range editors {
		t.Run(name, func(t *testing.T) {
			dir := jobsDir(t)
			f := filepath.Join(dir, "f.lua")
			writeFile(t, f, "v0\n")
			s := newTestScanner(dir)
			v := view{}
			v.apply(scan(t, s))
			w := startWatcher(t, dir, WatchOptions{})
			for i := 1; i <= 20; i++ {
				want := "v" + strconv.Itoa(i)
				save(t, dir, want)
				for j, got := range settle(t, w, s, v, view{f: want + "\n"}, settleWithin) {
					if sum := summary(dir, got); sum != "changed f.lua="+want+"\n" && sum != "" {
						t.Errorf("save %d, scan %d says %q: a state in the middle of the save", i, j, sum)
					}
				}
			}
		})
	}
}

// TestWatchWithoutInotify: when inotify cannot be had (the user is out of
// instances), the watcher says so and signals at every poll instead, so the
// daemon's scans still find what changed.
func TestWatchWithoutInotify(t *testing.T) {
	dir := jobsDir(t)
	logs := newLogRecorder()
	w, err := NewWatcher(dir, WatchOptions{Logf: logs.logf, Poll: 20 * time.Millisecond,
		newInotify: func() (*fsnotify.Watcher, error) { return nil, syscall.EMFILE }})
	if err != nil {
		t.Fatal(err)
	}
	logs.waitFor(t, "cannot use inotify; scanning the jobs directory at intervals instead", settleWithin)
	runWatcher(t, w)
	for range 3 {
		waitSignal(t, w, settleWithin)
	}
}

// TestWatchSetDirs: once the watcher has taken up more directories (it
// signals then), a change in any of them is a signal; a directory taken
// out of the set again is not watched any more.
func TestWatchSetDirs(t *testing.T) {
	dir := jobsDir(t)
	people := filepath.Join(t.TempDir(), "spool")
	alice, bob := filepath.Join(people, "alice"), filepath.Join(people, "bob")
	mkdir(t, alice)
	w := startWatcher(t, dir, WatchOptions{})
	w.SetDirs([]string{alice, bob}) // bob's does not exist yet
	waitSignal(t, w, settleWithin)

	writeFile(t, filepath.Join(alice, "a.lua"), "x")
	waitSignal(t, w, settleWithin)
	mkdir(t, bob) // the parent is watched: bob's directory appearing is a change
	waitSignal(t, w, settleWithin)
	drainQuiet(w, 10*DefaultQuiet)
	writeFile(t, filepath.Join(bob, "b.lua"), "x")
	waitSignal(t, w, settleWithin)

	w.SetDirs([]string{bob})
	waitSignal(t, w, settleWithin)
	drainQuiet(w, 10*DefaultQuiet)
	writeFile(t, filepath.Join(alice, "a.lua"), "y")
	select {
	case <-w.Changes():
		t.Fatal("a change in a directory taken out of the set caused a signal")
	case <-time.After(10*DefaultQuiet + 100*time.Millisecond):
	}
	writeFile(t, filepath.Join(dir, "x.lua"), "x")
	waitSignal(t, w, settleWithin)
}

// TestWatchDirIsAFile: a file where the jobs directory should be (a job
// file given as --jobs) is said to be no directory, not to be missing.
func TestWatchDirIsAFile(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "train.lua")
	writeFile(t, dir, `job "train" { cmd = "true" }`)
	logs := newLogRecorder()
	w, err := NewWatcher(dir, WatchOptions{Logf: logs.logf})
	if err != nil {
		t.Fatal(err)
	}
	runWatcher(t, w)
	logs.waitFor(t, "jobs directory is not a directory; waiting for one there", settleWithin)
}
