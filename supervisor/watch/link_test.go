package watch

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"golang.org/x/sys/unix"
)

// TestScanLinkTargetOnTheWay: a link in the jobs directory is followed only
// through directories that pass the rule for a directory on the way, as
// the jobs directory's own parents must: whoever may rename what such a
// directory holds could put any file in the target's place.
func TestScanLinkTargetOnTheWay(t *testing.T) {
	x := testIDs()
	accounts := fakeAccounts{
		users:  map[int]string{0: "root", x.daemon: "alice"},
		groups: map[int]fakeGroup{0: {name: "root", members: []string{"root"}}, x.group: {name: "devs", members: []string{"alice", "bob"}}},
	}
	for _, tc := range []struct {
		name     string
		uid      int
		mode     os.FileMode
		want     Reason
		needRoot bool
	}{
		{name: "0755", uid: x.daemon, mode: 0o755},
		{name: "0775 in a shared group", uid: x.daemon, mode: 0o775, want: WritableByGroup},
		{name: "0777", uid: x.daemon, mode: 0o777, want: WritableByOthers},
		{name: "1777, sticky", uid: x.daemon, mode: 0o777 | os.ModeSticky},
		{name: "0755 owned by nobody", uid: 65534, mode: 0o755, want: NotOwned, needRoot: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.needRoot && !x.root {
				t.Skip("needs root to chown a directory")
			}
			dir := jobsDir(t)
			shared := filepath.Join(filepath.Dir(dir), "shared")
			mkdir(t, shared)
			openToAll(t, shared)
			target := filepath.Join(shared, "x.lua")
			writeFile(t, target, "job")
			for p, uid := range map[string]int{dir: x.daemon, target: x.daemon, shared: tc.uid} {
				if err := os.Chown(p, uid, x.group); err != nil {
					t.Fatal(err)
				}
			}
			if err := os.Chmod(shared, tc.mode); err != nil {
				t.Fatal(err)
			}
			link := filepath.Join(dir, "x.lua")
			if err := os.Symlink("../shared/x.lua", link); err != nil {
				t.Fatal(err)
			}
			got := scan(t, NewScanner(dir, ScanOptions{DaemonUID: x.daemon, Accounts: accounts}))
			if tc.want == 0 {
				if got.Refused[link] != nil || string(got.Changed[link]) != "job" {
					t.Fatalf("scan says %q, %v; want x.lua read", summary(dir, got), got.Refused[link])
				}
				return
			}
			var re *RefusedError
			if !errors.As(got.Refused[link], &re) || re.Reason != tc.want {
				t.Fatalf("scan says %q, %v; want a %s refusal", summary(dir, got), got.Refused[link], tc.want)
			}
			if msg := re.Error(); !strings.Contains(msg, " "+shared+")") && !strings.Contains(msg, " "+shared+", or ") {
				t.Errorf("%q does not name the command that fixes %s", msg, shared)
			}
			if len(got.Changed) != 0 {
				t.Fatal("a refused link was read")
			}
			t.Log(re)
		})
	}
}

// TestScanLinkToSecret: a link to a file that root owns and nobody else may
// write passes the owner rules, but not everyone may read it, and berth
// shows what it reads to every client (a syntax error quotes the token it
// stopped at). The link is refused, and nothing of the file is shown.
func TestScanLinkToSecret(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root to own the secret (TestScanLinkToSecretFaked fakes it)")
	}
	const secret = "root:$y$j9T$SECRETHASH:19000:0:99999:7:::"
	dir := jobsDir(t)
	private := filepath.Join(filepath.Dir(dir), "etc")
	mkdir(t, private)
	openToAll(t, private)
	shadow := filepath.Join(private, "shadow")
	writeFile(t, shadow, secret)
	if err := os.Chmod(shadow, 0o640); err != nil {
		t.Fatal(err)
	}
	readable := filepath.Join(private, "readable.lua")
	writeFile(t, readable, "job")
	for name, target := range map[string]string{"shadow.lua": shadow, "readable.lua": readable} {
		if err := os.Symlink(target, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	got := scan(t, NewScanner(dir, ScanOptions{DaemonUID: 0}))
	if want := "changed readable.lua=job; refused shadow.lua(private)"; summary(dir, got) != want {
		t.Fatalf("scan says %q, want %q", summary(dir, got), want)
	}
	if msg := got.Refused[filepath.Join(dir, "shadow.lua")].Error(); strings.Contains(msg, "SECRET") {
		t.Fatalf("the refusal shows the file: %s", msg)
	}
	// Closing a directory on the way closes the file too.
	if err := os.Chmod(private, 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(shadow, 0o644); err != nil {
		t.Fatal(err)
	}
	got = scan(t, NewScanner(dir, ScanOptions{DaemonUID: 0}))
	if want := "refused readable.lua(private) shadow.lua(private)"; summary(dir, got) != want {
		t.Fatalf("with %s 0750: scan says %q, want %q", private, summary(dir, got), want)
	}
}

// TestScanLinkIntoPrivateDir: a link into a directory others may not pass
// is refused for that alone: neither whether its target exists nor how
// large it is is said, for berth tells its clients what it says.
func TestScanLinkIntoPrivateDir(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root: the daemon's rule for a link's target is root's")
	}
	dir := jobsDir(t)
	private := filepath.Join(filepath.Dir(dir), "private")
	mkdir(t, private)
	if err := os.Chmod(private, 0o700); err != nil {
		t.Fatal(err)
	}
	big := filepath.Join(private, "big.bin")
	writeFile(t, big, strings.Repeat("x", 2<<20))
	if err := os.Chmod(big, 0o644); err != nil {
		t.Fatal(err)
	}
	for name, target := range map[string]string{"big.lua": big, "none.lua": filepath.Join(private, "none")} {
		if err := os.Symlink(target, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	got := scan(t, NewScanner(dir, ScanOptions{DaemonUID: 0}))
	if want := "refused big.lua(private) none.lua(private)"; summary(dir, got) != want {
		t.Fatalf("scan says %q, want %q", summary(dir, got), want)
	}
	for _, name := range []string{"big.lua", "none.lua"} {
		if msg := got.Refused[filepath.Join(dir, name)].Error(); strings.Contains(msg, "bytes") || strings.Contains(msg, "does not exist") {
			t.Errorf("%s: %s", name, msg)
		}
	}
}

// TestScanLinkToKernelFile: a file of procfs says mode 0444 whoever may
// read it (/proc/PID/maps is root's alone), so a link to one is refused
// for where it is, and nothing of it is shown.
func TestScanLinkToKernelFile(t *testing.T) {
	dir := jobsDir(t)
	if err := os.Symlink("/proc/version", filepath.Join(dir, "proc.lua")); err != nil {
		t.Fatal(err)
	}
	got := scan(t, NewScanner(dir, ScanOptions{DaemonUID: os.Getuid()}))
	if want := "refused proc.lua(a kernel file)"; summary(dir, got) != want {
		t.Fatalf("scan says %q, want %q", summary(dir, got), want)
	}
	msg := got.Refused[filepath.Join(dir, "proc.lua")].Error()
	if !strings.Contains(msg, "(on proc)") || strings.Contains(msg, "Linux") {
		t.Errorf("the refusal: %s", msg)
	}
	// A link that names the reader's own process is said as it is
	// written, then as the daemon followed it (trial AL: a person's
	// /proc/self/environ was named by the daemon's pid alone).
	if err := os.Symlink("/proc/self/environ", filepath.Join(dir, "self.lua")); err != nil {
		t.Fatal(err)
	}
	got = scan(t, NewScanner(dir, ScanOptions{DaemonUID: os.Getuid()}))
	want := fmt.Sprintf("is a symbolic link to /proc/self/environ (/proc/%d/environ, as the daemon follows it), which", os.Getpid())
	if msg := got.Refused[filepath.Join(dir, "self.lua")].Error(); !strings.Contains(msg, want) {
		t.Errorf("the refusal of a link to /proc/self/environ: %s\nwant %q", msg, want)
	}
}

// TestScanLinkPrivateFaked runs the rule for a link's target without root:
// the stat hook says who owns the target.
func TestScanLinkPrivateFaked(t *testing.T) {
	const daemon = 4321 // a person's own daemon, not root
	for _, tc := range []struct {
		name   string
		owner  uint32
		mode   uint32 // the target's permission bits
		inside bool   // the target is in a subdirectory of the jobs directory, as a ConfigMap's are
		want   Reason
	}{
		{name: "root's 0644", owner: 0, mode: 0o644},
		{name: "root's 0640", owner: 0, mode: 0o640, want: Private},
		{name: "root's 0600 inside the jobs directory", owner: 0, mode: 0o600, inside: true},
		{name: "the daemon's user's 0600", owner: daemon, mode: 0o600},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := jobsDir(t)
			where := filepath.Join(filepath.Dir(dir), "shared")
			rel := "../shared/x.lua"
			if tc.inside {
				where, rel = filepath.Join(dir, "..data"), "..data/x.lua"
			}
			mkdir(t, where)
			openToAll(t, where)
			target := filepath.Join(where, "x.lua")
			writeFile(t, target, "job")
			link := filepath.Join(dir, "x.lua")
			if err := os.Symlink(rel, link); err != nil {
				t.Fatal(err)
			}
			me := uint32(os.Getuid())
			hook := func(path string, st *unix.Stat_t) {
				switch {
				case path == target:
					st.Uid, st.Mode = tc.owner, unix.S_IFREG|tc.mode
				case st.Uid == me:
					st.Uid = daemon
				}
			}
			got := scan(t, NewScanner(dir, ScanOptions{DaemonUID: daemon, statHook: hook}))
			if tc.want == 0 {
				if got.Refused[link] != nil || string(got.Changed[link]) != "job" {
					t.Fatalf("scan says %q, %v; want x.lua read", summary(dir, got), got.Refused[link])
				}
				return
			}
			var re *RefusedError
			if !errors.As(got.Refused[link], &re) || re.Reason != tc.want || re.At != target || !re.AtTarget {
				t.Fatalf("scan says %q, %#v; want a %s refusal of %s", summary(dir, got), got.Refused[link], tc.want, target)
			}
		})
	}
}

// TestScanNameNotText: a job file whose name is not valid UTF-8 is refused
// unread, its name escaped in the sentence (trial AN: it reached the
// evaluator mangled, "answered out of turn", and the log raw).
func TestScanNameNotText(t *testing.T) {
	dir := jobsDir(t)
	name := "\xffx.lua"
	if err := os.WriteFile(filepath.Join(dir, name), []byte(`job "x" { cmd = "true" }`), 0o644); err != nil {
		t.Fatal(err)
	}
	got := scan(t, NewScanner(dir, ScanOptions{DaemonUID: os.Getuid()}))
	var why *RefusedError
	if !errors.As(got.Refused[filepath.Join(dir, name)], &why) || why.Reason != NameNotText || len(got.Changed) != 0 {
		t.Fatalf("scan of a file named %q: refused %v, read %d", name, why, len(got.Changed))
	}
	if msg := why.Error(); !utf8.ValidString(msg) || !strings.Contains(msg, `\xffx.lua"`) {
		t.Errorf("the refusal: %q", msg)
	}
}
