package main

import (
	"bufio"
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/berthd/berth/supervisor"
	"github.com/berthd/berth/supervisor/testkit"
)

// cli runs a client command in-process against the test daemon.
func (d *testDaemon) cli(args ...string) (stdout, stderr string, code int) {
	d.t.Helper()
	return berth(d.t.(*testing.T), map[string]string{"BERTH_SOCKET": d.socket}, args...)
}

func TestClientCommands(t *testing.T) {
	t.Parallel()
	d := newTestDaemon(t, map[string]string{
		"jobs.lua": `
flavor "small" { cpus = 1, ram = "64M" }
job "hello" { cmd = { "sh", "-c", "echo hello from the job" }, flavor = "small" }
` + service("svc", ""),
	})
	d.start(daemonOptions{args: []string{"--cpus", "4", "--gpus", "2", "--gpu-mem", "16G"}})
	d.waitState("hello", "done")
	d.waitState("svc", "running")

	// Every listing, as text and as JSON.
	for _, tt := range []struct {
		args []string
		text string
		into any
	}{
		{[]string{"status"}, "svc", &supervisor.Status{}},
		{[]string{"jobs"}, "hello", &[]supervisor.JobStatus{}},
		{[]string{"show", "hello"}, "echo hello from the job", &supervisor.JobDetail{}},
		{[]string{"history"}, "hello", &[]supervisor.RunView{}},
		{[]string{"history", "hello", "-n", "1"}, "hello", &[]supervisor.RunView{}},
		{[]string{"flavors"}, "small", &[]supervisor.FlavorView{}},
		{[]string{"version"}, "\ndaemon " + version + " (pid ", &versionJSON{}},
		// Its books are not this machine's probe: it says which it places against.
		{[]string{"machine"}, "the daemon's books differ from what is found above: 4 cores, 2 cards of 16G", &machineJSON{}},
		// And what each card has for shares, by its books (trial AZ).
		{[]string{"machine"}, "\n  card 1  free  16G for shares\n", &machineJSON{}},
	} {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			out, errOut, code := d.cli(tt.args...)
			if code != exitOK || !strings.Contains(out, tt.text) {
				t.Fatalf("exit %d, stderr %q, output lacks %q:\n%s", code, errOut, tt.text, out)
			}
			out, _, code = d.cli(append(tt.args, "--json")...)
			if code != exitOK {
				t.Fatalf("--json: exit %d", code)
			}
			if err := json.Unmarshal([]byte(out), tt.into); err != nil {
				t.Fatalf("--json is not JSON: %v\n%s", err, out)
			}
		})
	}

	var v versionJSON
	if out, _, _ := d.cli("version", "--json"); json.Unmarshal([]byte(out), &v) != nil || v.Daemon == nil || v.Daemon.PID != d.cmd.Process.Pid {
		t.Errorf("version --json does not give the daemon's pid %d:\n%s", d.cmd.Process.Pid, out)
	}
	// Without a daemon, the client's alone, and that none answers.
	none := filepath.Join(t.TempDir(), "none.sock")
	if out, _, code := berth(t, map[string]string{"BERTH_SOCKET": none}, "version"); code != exitOK || out != "berth "+version+"\n"+msgVersionNoDaemon(none)+"\n" {
		t.Errorf("version without a daemon: exit %d\n%s", code, out)
	}

	// The jobs without an owner are the daemon's account's.
	if me, err := user.Current(); err == nil {
		if out, _, code := d.cli("jobs", "--owner", me.Username); code != exitOK || !strings.Contains(out, "hello") || !strings.Contains(out, "svc") {
			t.Errorf("jobs --owner %s, the daemon's account: exit %d\n%s", me.Username, code, out)
		}
	}
	if out, _, code := d.cli("status", "--owner", "nobody"); code != exitOK || !strings.Contains(out, "none of the daemon's 2 jobs is nobody's (berth status without --mine or --owner shows them)") {
		t.Errorf("status --owner of someone with no jobs: exit %d\n%s", code, out)
	}
	// A name no account has is a typo, not a person without jobs: what
	// was asked about does not exist (1, as id(1) and squeue -u say).
	if _, errOut, code := d.cli("jobs", "--owner", "nobody-here"); code != exitFailed || errOut != "berth jobs: no account is named \"nobody-here\"; berth status shows each job's owner\n" {
		t.Errorf("jobs --owner of no account: exit %d\n%s", code, errOut)
	}
	if out, _, code := d.cli("history", "--json", "--owner", "nobody-here"); code != exitFailed || !strings.Contains(out, `"code": "failed"`) {
		t.Errorf("history --json --owner of no account: exit %d\n%s", code, out)
	}
	for _, args := range [][]string{{"--mine", "--owner", "nobody"}, {"--owner", "nobody", "--mine"}} {
		if _, errOut, code := d.cli(append([]string{"status"}, args...)...); code != exitUsage || !strings.Contains(errOut, errMineAndOwner.Error()) {
			t.Errorf("status %s: exit %d\n%s", strings.Join(args, " "), code, errOut)
		}
	}

	var detail supervisor.JobDetail
	out, _, _ := d.cli("show", "hello", "--json")
	json.Unmarshal([]byte(out), &detail)
	if detail.Definition.Flavor != "small" || detail.Definition.Resources.CPUs != 1 || len(detail.Runs) != 1 || *detail.Runs[0].ExitCode != 0 {
		t.Errorf("show hello: %+v", detail)
	}
	if !containsLine(detail.NextEnv, "OMP_NUM_THREADS=1") || !containsLine(detail.NextEnv, "CUDA_VISIBLE_DEVICES=") {
		t.Errorf("next env: %q", detail.NextEnv)
	}

	// logs, from the file (no journald here).
	out, _, code := d.cli("logs", "hello")
	if code != exitOK || !strings.Contains(out, "hello from the job") {
		t.Errorf("logs: exit %d:\n%s", code, out)
	}
	// Each run's output starts with its header; --run N gives that run's.
	if !strings.HasPrefix(out, "--- berth: run ") {
		t.Errorf("logs: no run's header first:\n%s", out)
	}
	run := strconv.FormatUint(detail.Runs[0].ID, 10)
	if out, errOut, code := d.cli("logs", "hello", "--run", run); code != exitOK || out != "hello from the job\n" {
		t.Errorf("logs --run %s: exit %d %q %q", run, code, out, errOut)
	}
	if _, errOut, code := d.cli("logs", "hello", "--run", "999999"); code != exitFailed || !strings.Contains(errOut, "has no run 999999") {
		t.Errorf("logs --run of no run: exit %d %q", code, errOut)
	}
	// -n N: the last N lines, as tail's; the run's header, its first
	// line's, is shown and not counted.
	if out, errOut, code := d.cli("logs", "hello", "-n", "1"); code != exitOK || !strings.HasPrefix(out, "--- berth: run "+run+" started ") || !strings.HasSuffix(out, " ---\nhello from the job\n") {
		t.Errorf("logs -n 1: exit %d %q %q", code, out, errOut)
	}
	if out, errOut, code := d.cli("logs", "hello", "-n", "0"); code != exitOK || out != "" {
		t.Errorf("logs -n 0: exit %d %q %q", code, out, errOut)
	}
	if _, errOut, code := d.cli("logs", "hello", "-n", "-3"); code != exitUsage || !strings.Contains(errOut, `invalid value "-3" for flag -n: not a number of lines, 0 or more`) {
		t.Errorf("logs -n -3: exit %d %q", code, errOut)
	}

	// Control.
	if _, _, code := d.cli("stop", "svc"); code != exitOK {
		t.Fatalf("stop: exit %d", code)
	}
	d.waitState("svc", "stopped")
	if out, _, code := d.cli("stop", "svc"); code != exitOK || out != "svc: already stopped (berth status shows it)\n" {
		t.Errorf("stop of a stopped job: exit %d %q", code, out)
	}
	// With --json, the daemon's answer; a failure's code tells a job not
	// there from one not the caller's.
	var ans supervisor.ControlAnswer
	if out, _, code := d.cli("stop", "svc", "--json"); code != exitOK || json.Unmarshal([]byte(out), &ans) != nil || ans.Job != "svc" || ans.Already != "stopped" {
		t.Errorf("stop --json of a stopped job: exit %d %q", code, out)
	}
	var failed jsonFailure
	if out, _, code := d.cli("start", "nope", "--json"); code != exitFailed || json.Unmarshal([]byte(out), &failed) != nil || failed.Code != supervisor.CodeNoSuchJob {
		t.Errorf("start --json of no job: exit %d %q", code, out)
	}
	if _, _, code := d.cli("start", "svc"); code != exitOK {
		t.Fatalf("start: exit %d", code)
	}
	d.waitState("svc", "running")
	if out, _, code := d.cli("start", "svc"); code != exitOK || out != "svc: already running (berth status shows it)\n" {
		t.Errorf("start of a running job: exit %d %q", code, out)
	}
	before, _ := d.job("svc")
	if _, _, code := d.cli("restart", "svc"); code != exitOK {
		t.Fatalf("restart: exit %d", code)
	}
	d.waitJob("svc", "restarted", func(j supervisor.JobStatus) bool { return j.State == "running" && j.Run != before.Run })

	// Every job at once: the running one stops and stays stopped; the done
	// one is left as it is.
	if out, errOut, code := d.cli("stop", "--all"); code != exitOK || out != "1 job: stop requested (berth status shows them; berth start --all starts them again)\n" {
		t.Fatalf("stop --all: exit %d %q %q", code, out, errOut)
	}
	d.waitState("svc", "stopped")
	d.waitState("hello", "done")
	if _, _, code := d.cli("stop", "--all", "svc"); code != exitUsage {
		t.Errorf("stop --all svc: exit %d", code)
	}
	if out, _, code := d.cli("stop", "svc"); code != exitOK || out != "svc: already stopped (berth status shows it)\n" {
		t.Errorf("stop of a stopped job: exit %d %q", code, out)
	}
	if _, _, code := d.cli("start", "svc"); code != exitOK {
		t.Fatalf("start: exit %d", code)
	}
	d.waitState("svc", "running")
	if out, _, code := d.cli("start", "svc"); code != exitOK || out != "svc: already running (berth status shows it)\n" {
		t.Errorf("start of a running job: exit %d %q", code, out)
	}
	// Its runs past those shown are said to be there.
	if out, errOut, code := d.cli("history", "svc", "-n", "1"); code != exitOK || strings.Count(out, "\n") != 2 ||
		!strings.Contains(errOut, "the newest 1 run, and there are more (berth history svc -n 100 shows more)") {
		t.Errorf("history -n 1 of a job that ran thrice: exit %d\n%s%s", code, out, errOut)
	}
	if _, errOut, _ := d.cli("history", "svc", "-n", "100"); errOut != "" {
		t.Errorf("history -n 100 of a job that ran thrice says %q", errOut)
	}
	var one []supervisor.RunView
	if out, errOut, _ := d.cli("history", "svc", "-n", "1", "--json"); json.Unmarshal([]byte(out), &one) != nil || len(one) != 1 ||
		!strings.Contains(errOut, "there are more") {
		t.Errorf("history -n 1 --json: %s%s", out, errOut)
	}

	// Things that do not exist, and a broken reload.
	for _, args := range [][]string{{"show", "nope"}, {"stop", "nope"}, {"history", "nope"}} {
		_, errOut, code := d.cli(args...)
		if code != exitFailed || !strings.Contains(errOut, `no job named "nope" (berth jobs lists them)`) {
			t.Errorf("%v: exit %d, %q", args, code, errOut)
		}
	}
	out, _, code = d.cli("show", "nope", "--json")
	var failure jsonFailure
	if err := json.Unmarshal([]byte(out), &failure); err != nil || code != exitFailed || failure.Code != supervisor.CodeNoSuchJob ||
		!strings.HasPrefix(failure.Error, `no job named "nope"`) {
		t.Errorf("show nope --json: exit %d, %v, stdout:\n%s", code, err, out)
	}
	out, _, code = d.cli("reload")
	if code != exitOK || !strings.HasPrefix(out, "reloaded 1 file: nothing changed since the daemon last read them") {
		t.Errorf("reload: exit %d %q", code, out)
	}
	out, _, _ = d.cli("reload", "--json")
	if !strings.Contains(out, `"added": []`) || !strings.Contains(out, `"errors": []`) {
		t.Errorf("reload --json lists must be [] when empty:\n%s", out)
	}
	if _, _, code := d.cli("history", "-n", "0"); code != exitUsage {
		t.Errorf("history -n 0: exit %d, want %d", code, exitUsage)
	}
	d.write("broken.lua", `job "x" {`)
	out, _, code = d.cli("reload")
	if code != exitFailed || !strings.Contains(out, "broken.lua:1:") {
		t.Errorf("reload of a broken file: exit %d %q", code, out)
	}
	// The jobs directory refused as a whole: none of its files is read.
	if err := os.Remove(filepath.Join(d.jobs, "broken.lua")); err != nil {
		t.Fatal(err)
	}
	if out, _, code := d.cli("reload"); code != exitOK {
		t.Errorf("reload with the broken file gone: exit %d %q", code, out)
	}
	if err := os.Chmod(d.jobs, 0o777); err != nil {
		t.Fatal(err)
	}
	out, _, code = d.cli("reload")
	if code != exitFailed || !strings.Contains(out, "writable by others") {
		t.Errorf("reload of a jobs directory writable by others: exit %d %q", code, out)
	}
	if err := os.Chmod(d.jobs, 0o755); err != nil {
		t.Fatal(err)
	}
	if _, _, code := d.cli("show"); code != exitUsage {
		t.Errorf("show without a job: exit %d", code)
	}
	d.stop()
}

func containsLine(lines []string, want string) bool {
	for _, l := range lines {
		if l == want {
			return true
		}
	}
	return false
}

func TestClientNoDaemon(t *testing.T) {
	socket := filepath.Join(t.TempDir(), "none.sock")
	_, errOut, code := berth(t, map[string]string{"BERTH_SOCKET": socket}, "status")
	if code != exitNoDaemon {
		t.Errorf("exit %d, want %d", code, exitNoDaemon)
	}
	want := "berth: no daemon answers on " + socket + "; start one with systemctl start berth, or berth daemon (give --socket PATH or set BERTH_SOCKET if it listens elsewhere)\n"
	if errOut != want {
		t.Errorf("stderr:\n got %s\nwant %s", errOut, want)
	}
}

// TestClientForeignUIDRefused runs the client as nobody against a socket
// whose mode was loosened: the daemon must still refuse it.
func TestClientForeignUIDRefused(t *testing.T) {
	t.Parallel()
	if os.Getuid() != 0 {
		t.Skip("needs root to run the client as nobody")
	}
	d := newTestDaemon(t, map[string]string{})
	d.start(daemonOptions{})
	// nobody must reach the socket and the binary: open the path up.
	for p := d.dir; p != "/" && p != os.TempDir(); p = filepath.Dir(p) {
		os.Chmod(p, 0o755)
	}
	bin := filepath.Join(d.dir, "berth")
	testkit.CopyExecutable(t, os.Args[0], bin, 0o755)
	asNobody := func(socket ...string) ([]byte, error) {
		cmd := exec.Command(bin, "status")
		cmd.Env = []string{"BERTH_TEST_BE_BERTH=1", "BERTH_SOCKET=" + cmp.Or(append(socket, d.socket)...)}
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
		return cmd.CombinedOutput()
	}
	// The socket's own mode keeps nobody out first, and says so.
	out, err := asNobody()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != exitFailed || !strings.Contains(string(out), "permission denied on "+d.socket) {
		t.Errorf("as nobody, socket 0660: %v\n%s", err, out)
	}
	// A directory on the way that nobody may not enter is what keeps
	// them out, not the socket's group.
	private := filepath.Join(d.dir, "private")
	if err := os.Mkdir(private, 0o700); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(private, "berth.sock")
	if err := os.Symlink(d.socket, link); err != nil {
		t.Fatal(err)
	}
	out, err = asNobody(link)
	if want := msgSocketBlocked(link, private); !errors.As(err, &exit) || exit.ExitCode() != exitFailed || !strings.Contains(string(out), want) {
		t.Errorf("as nobody, through %s 0700: %v\n%s\nwant %s", private, err, out, want)
	}
	// So too through a link, in a directory nobody may enter, into it:
	// the directory named is the one the link leads into.
	open := filepath.Join(d.dir, "open.sock")
	if err := os.Symlink(filepath.Join("private", "berth.sock"), open); err != nil {
		t.Fatal(err)
	}
	out, err = asNobody(open)
	if want := msgSocketBlocked(open, private); !errors.As(err, &exit) || exit.ExitCode() != exitFailed || !strings.Contains(string(out), want) {
		t.Errorf("as nobody, through a link into %s: %v\n%s\nwant %s", private, err, out, want)
	}
	os.Chmod(d.socket, 0o666)
	out, err = asNobody()
	if !errors.As(err, &exit) || exit.ExitCode() != exitFailed {
		t.Fatalf("as nobody: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "uid 65534 may not use this berth daemon") {
		t.Errorf("refusal says: %s", out)
	}
	d.stop()
}

func TestDaemonSocketIsGuarded(t *testing.T) {
	t.Parallel()
	d := newTestDaemon(t, map[string]string{})
	// A stale socket (nothing listening) is cleaned up.
	if l, err := net.Listen("unix", d.socket); err != nil {
		t.Fatal(err)
	} else {
		l.(*net.UnixListener).SetUnlinkOnClose(false)
		l.Close()
	}
	d.start(daemonOptions{})
	info, err := os.Stat(d.socket)
	if err != nil || info.Mode().Perm() != 0o660 {
		t.Errorf("socket mode %v (%v), want 0660", info.Mode().Perm(), err)
	}
	second := func(args ...string) ([]byte, error) {
		cmd := exec.Command(os.Args[0], append([]string{"daemon", "--jobs", d.jobs}, args...)...)
		cmd.Env = append(os.Environ(), "BERTH_TEST_BE_BERTH=1", "NOTIFY_SOCKET=")
		return cmd.CombinedOutput()
	}
	// A second daemon on the live socket refuses to start.
	out, err := second("--state", filepath.Join(d.dir, "other-state"), "--socket", d.socket)
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != exitFailed || !strings.Contains(string(out), "another berth daemon is listening on it") {
		t.Errorf("second daemon: %v\n%s", err, out)
	}
	// Something that is not a socket in the way is never removed.
	notes := filepath.Join(d.dir, "notes.txt")
	os.WriteFile(notes, []byte("keep me"), 0o644)
	out, _ = second("--state", filepath.Join(d.dir, "third-state"), "--socket", notes)
	if data, _ := os.ReadFile(notes); string(data) != "keep me" || !strings.Contains(string(out), "is not a socket is in the way") {
		t.Errorf("a file at the socket path: %s (file now %q)", out, data)
	}
	// A socket's directory that another may write in is refused: they
	// could put their own socket in the daemon's place.
	if os.Geteuid() == 0 {
		theirs := filepath.Join(d.dir, "theirs")
		if err := os.Mkdir(theirs, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(theirs, 65534, 65534); err != nil {
			t.Fatal(err)
		}
		out, err = second("--state", filepath.Join(d.dir, "fourth-state"), "--socket", filepath.Join(theirs, "berth.sock"))
		if !errors.As(err, &exit) || exit.ExitCode() != exitFailed || !strings.Contains(string(out), "its directory "+theirs+" is not the daemon's alone (it is owned by uid 65534)") {
			t.Errorf("a socket's directory of another's: %v\n%s", err, out)
		}
	}
	// A second daemon on the same state fails at once, naming the holder.
	out, err = second("--state", d.state, "--socket", filepath.Join(d.dir, "other.sock"))
	if !errors.As(err, &exit) || !strings.Contains(string(out), "is held by another berth daemon (pid "+strconv.Itoa(d.cmd.Process.Pid)+")") {
		t.Errorf("second daemon on the same state: %v\n%s", err, out)
	}
	d.stop()
}

// TestOwnSocketDirNotYours: with no XDG_RUNTIME_DIR, a person's own
// daemon's socket is in /tmp/berth-UID, which anyone may make first: the
// client tries it only where the directory is theirs alone, and says so
// where it is not (a daemon there would be sent their job files).
func TestOwnSocketDirNotYours(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root, to make a directory of another's")
	}
	const uid = 48211 // no one's
	dir := fmt.Sprintf("/tmp/berth-%d", uid)
	os.RemoveAll(dir)
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	var errOut strings.Builder
	c := &cli{stderr: &errOut, env: env{lookup: func(string) (string, bool) { return "", false }, uid: uid}}
	if socks := c.sockets(""); !slices.Equal(socks, []string{systemSocket}) {
		t.Errorf("sockets %q, want the system's alone", socks)
	}
	c.sockets("")
	if want := msgWarning(msgSocketDirNotYours(dir, "it is owned by uid 0", "remove it")) + "\n"; errOut.String() != want {
		t.Errorf("said %q, want once %q", errOut.String(), want)
	}
	// Theirs, it is tried first.
	if err := os.Chown(dir, uid, uid); err != nil {
		t.Fatal(err)
	}
	if socks := c.sockets(""); !slices.Equal(socks, []string{dir + "/berth.sock", systemSocket}) {
		t.Errorf("sockets %q, want theirs, then the system's", socks)
	}
}

// TestClientFindsTheDaemon: with no socket named, the client talks to the
// first daemon that answers, a person's own before the system's, and when
// none does it names every place it looked. Flags may come before the
// command.
func TestClientFindsTheDaemon(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	none := filepath.Join(dir, "none.sock")
	stale := filepath.Join(dir, "stale.sock") // a socket file nobody listens on
	l, err := net.Listen("unix", stale)
	if err != nil {
		t.Fatal(err)
	}
	l.(*net.UnixListener).SetUnlinkOnClose(false)
	l.Close()
	d := newTestDaemon(t, map[string]string{"jobs.lua": service("svc", "")})
	d.start(daemonOptions{})
	d.waitState("svc", "running")

	var s supervisor.Status
	if err := newClient(none, stale, d.socket).get("/status", nil, &s); err != nil || len(s.Jobs) != 1 {
		t.Fatalf("through the third socket: %v, %d jobs", err, len(s.Jobs))
	}
	var said bytes.Buffer
	c := &cli{stdout: io.Discard, stderr: &said}
	if code := c.fail(newClient(none, stale).get("/status", nil, &s)); code != exitNoDaemon || said.String() != msgNothingListens(stale)+"\n" {
		t.Errorf("no daemon, a socket nobody listens on: exit %d\n%s", code, said.String())
	}
	// A socket file nobody listens on is said as such (trial AK: killed,
	// and systemd starting it again, it was told to start one).
	said.Reset()
	if code := c.fail(newClient(none).get("/status", nil, &s)); code != exitNoDaemon || said.String() != msgNoDaemon(none)+"\n" {
		t.Errorf("no daemon, no socket: exit %d\n%s", code, said.String())
	}
	// A path that is no socket at all: a wrong --socket or BERTH_SOCKET,
	// not a daemon gone (trial AQ).
	for _, path := range []string{t.TempDir(), filepath.Join(t.TempDir(), "plain")} {
		if err := os.WriteFile(filepath.Join(filepath.Dir(path), "plain"), nil, 0o600); err != nil {
			t.Fatal(err)
		}
		said.Reset()
		if code := c.fail(newClient(path).get("/status", nil, &s)); code != exitNoDaemon ||
			!strings.Contains(said.String(), path+" is a ") || !strings.Contains(said.String(), ", not a socket: no daemon listens there") {
			t.Errorf("%s, no socket: exit %d\n%s", path, code, said.String())
		}
	}
	var nd *noDaemonError
	if err := newClient(none, stale).get("/status", nil, &s); !errors.As(err, &nd) || len(nd.sockets) != 2 {
		t.Errorf("no daemon: %v, want both sockets named", err)
	}
	if msg := msgNoDaemon(none, stale); !strings.Contains(msg, none+" or "+stale) {
		t.Errorf("the message does not name both: %s", msg)
	}

	// A global flag before the command.
	out, errOut, code := berth(t, nil, "--socket", d.socket, "jobs")
	if code != exitOK || !strings.Contains(out, "svc") {
		t.Errorf("berth --socket S jobs: exit %d, %s%s", code, out, errOut)
	}
}

func TestCommandFirst(t *testing.T) {
	for _, tt := range []struct{ in, want []string }{
		{[]string{"status"}, []string{"status"}},
		{[]string{"--socket", "/x", "status", "--json"}, []string{"status", "--socket", "/x", "--json"}},
		{[]string{"--json", "jobs"}, []string{"jobs", "--json"}},
		{[]string{"--socket=/x", "show", "train"}, []string{"show", "--socket=/x", "train"}},
		{[]string{"--nope"}, []string{"--nope"}},
	} {
		if got := commandFirst(tt.in); !slices.Equal(got, tt.want) {
			t.Errorf("commandFirst(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// TestShowRunOfEarlierDefinition: with on_change = "finish", an edit
// leaves the run in progress as it was; berth show shows the new
// definition, and says the run is of an earlier one.
func TestShowRunOfEarlierDefinition(t *testing.T) {
	t.Parallel()
	d := newTestDaemon(t, map[string]string{"svc.lua": service("svc", `, on_change = "finish"`)})
	d.start(daemonOptions{args: []string{"--cpus", "2"}})
	d.waitFile("svc.pid")
	if detail := d.detail("svc"); detail.Outdated {
		t.Errorf("a run of the definition shown is said to be of an earlier one: %+v", detail)
	}
	d.write("svc.lua", service("svc", `, on_change = "finish", env = { EDITED = "1" }`))
	testkit.WaitFor(t, waitLong, "the edit to be in force", func() bool {
		return d.detail("svc").Definition.Env["EDITED"] == "1"
	})
	detail := d.detail("svc")
	if !detail.Outdated || detail.Status.State != "running" {
		t.Errorf("after the edit: outdated %v, state %s", detail.Outdated, detail.Status.State)
	}
	if out, _, _ := d.cli("show", "svc"); !strings.Contains(out, "this run started from an earlier definition") {
		t.Errorf("berth show svc says nothing of the run's earlier definition:\n%s", out)
	}
	// The status says so too, and what applies the new one: a
	// service's run never ends by itself (trial AD).
	if j, _ := d.job("svc"); !strings.HasPrefix(j.Why, "runs an earlier definition") || !strings.Contains(j.Why, "berth restart svc applies") {
		t.Errorf("the status's why of svc: %q", j.Why)
	}
	d.cli("restart", "svc")
	testkit.WaitFor(t, waitLong, "the new definition to run", func() bool {
		j, _ := d.job("svc")
		return j.State == "running" && j.Why == "" && !d.detail("svc").Outdated
	})
	d.stop()
}

// TestLogsOfNothing: berth logs of a job that has written nothing says
// so on stderr, rather than printing nothing at all, and of one that has
// not run, that it has not; once it has written, only its output is
// printed.
func TestLogsOfNothing(t *testing.T) {
	t.Parallel()
	d := newTestDaemon(t, map[string]string{"a.lua": `
job "idle" { cmd = { "/bin/true" }, enabled = false }
job "quiet" { cmd = { "/bin/true" } }
job "says" { cmd = "echo hello" }
`})
	d.start(daemonOptions{args: []string{"--cpus", "2"}})
	out, errOut, code := d.cli("logs", "idle")
	if want := msgNeverRan("idle"); code != exitOK || out != "" || strings.TrimSpace(errOut) != want {
		t.Errorf("logs of a job never run: exit %d, %q, %q; want %d, nothing, and %q", code, out, errOut, exitOK, want)
	}
	testkit.WaitFor(t, waitLong, "quiet and says to be done", func() bool {
		return d.detail("quiet").Status.State == "done" && d.detail("says").Status.State == "done"
	})
	out, errOut, code = d.cli("logs", "quiet")
	if want := msgNoOutput("quiet", 0, false); code != exitOK || out != "" || strings.TrimSpace(errOut) != want {
		t.Errorf("logs of a job that ran and wrote nothing: exit %d, %q, %q; want %d, nothing, and %q", code, out, errOut, exitOK, want)
	}
	out, errOut, code = d.cli("logs", "says")
	if code != exitOK || !strings.Contains(out, "hello") || errOut != "" {
		t.Errorf("logs of a job that wrote: exit %d, %q, %q", code, out, errOut)
	}
	if _, errOut, _ := d.cli("logs", "says", "-n", "0"); errOut != "" {
		t.Errorf("logs -n 0 asks for nothing, yet says %q", errOut)
	}
	d.stop()
}

// TestLogsLinesOldDaemon: a daemon that predates ?lines= sends the whole
// output; berth logs -n says it is older than the client, and prints none
// of it.
func TestLogsLinesOldDaemon(t *testing.T) {
	socket := fakeDaemon(t, func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte("1\n2\n3\n"))
	})
	out, errOut, code := berth(t, map[string]string{"BERTH_SOCKET": socket}, "logs", "svc", "-n", "1")
	if want := msgDaemonTooOld(socket, "GET /v1/jobs/svc/logs with Berth-Lines"); code != exitFailed || out != "" || !strings.Contains(errOut, want) {
		t.Errorf("exit %d, %q, %q; want %d, nothing, and %q", code, out, errOut, exitFailed, want)
	}
	// Without -n, all of it, as ever.
	if out, _, code := berth(t, map[string]string{"BERTH_SOCKET": socket}, "logs", "svc"); code != exitOK || out != "1\n2\n3\n" {
		t.Errorf("logs without -n: exit %d, %q", code, out)
	}
}

// TestLogsRunStartGone: the output of a run whose start was rotated away,
// or whose files were removed as it ran, is shown, after a word on stderr
// that it is not all of it, which names both (trial AT: a removal was
// said to be the bound on the files' size).
func TestLogsRunStartGone(t *testing.T) {
	socket := fakeDaemon(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("run") == "7" {
			w.Header().Set(supervisor.HeaderOutputStartGone, "1")
		}
		w.Write([]byte("rest\n"))
	})
	out, errOut, code := berth(t, map[string]string{"BERTH_SOCKET": socket}, "logs", "svc", "--run", "7")
	if code != exitOK || out != "rest\n" || errOut != msgRunOutputStartGone("svc", 7)+"\n" ||
		!strings.Contains(errOut, "bounded in size") || !strings.Contains(errOut, "removed") {
		t.Errorf("exit %d, %q, %q", code, out, errOut)
	}
}

// TestStopAllStopsTheNew: berth stop --all stops a job declared a moment
// ago whose wait has not begun ("new"): right after the daemon's start,
// it stopped nothing, and the jobs started a moment later (trial AV). It
// stops too the run the daemon shows kept though no file in force
// declares its job (trial AW).
func TestStopAllStopsTheNew(t *testing.T) {
	var stopped, kept atomic.Bool
	socket := fakeDaemon(t, func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.Method == http.MethodGet && r.URL.Path == supervisor.APIVersion+"/status":
			w.Write([]byte(`{"problems":[{"code":"orphan_kept","kind":"job","job":"gone","text":"…"}]}`))
		case r.Method == http.MethodGet:
			w.Write([]byte(`[{"name":"fresh","state":"new"}]`))
		case r.URL.Path == supervisor.APIVersion+"/jobs/fresh/stop":
			stopped.Store(true)
			w.Write([]byte(`{"job":"fresh","requested":"stop"}`))
		case r.URL.Path == supervisor.APIVersion+"/jobs/gone/stop":
			kept.Store(true)
			w.Write([]byte(`{"job":"gone","requested":"stop"}`))
		default:
			http.NotFound(w, r)
		}
	})
	out, errOut, code := berth(t, map[string]string{"BERTH_SOCKET": socket}, "stop", "--all")
	if code != exitOK || !stopped.Load() || !kept.Load() {
		t.Errorf("stop --all of a job just declared and a run kept: exit %d, stopped %v and %v\n%s%s", code, stopped.Load(), kept.Load(), out, errOut)
	}
	if want := msgStoppedAll(1, 0, 0) + "\n" + msgStoppedKept(1); out != want+"\n" {
		t.Errorf("stop --all said %q, want %q", out, want)
	}
}

// TestListsWhileLoading: berth jobs and berth flavors of a daemon still
// reading its job files at start say on stderr that the list is not all
// there is yet (they listed nothing, or a part, and said nothing).
func TestListsWhileLoading(t *testing.T) {
	var loading atomic.Bool
	loading.Store(true)
	socket := fakeDaemon(t, func(w http.ResponseWriter, r *http.Request) {
		if loading.Load() {
			w.Header().Set(supervisor.HeaderLoading, "1")
		}
		w.Write([]byte(`[]`))
	})
	for _, args := range [][]string{{"jobs"}, {"jobs", "--json"}, {"flavors"}} {
		out, errOut, code := berth(t, map[string]string{"BERTH_SOCKET": socket}, args...)
		if want := msgListLoading(args[0]) + "\n"; code != exitOK || errOut != want {
			t.Errorf("%v while loading: exit %d, %q, %q; want %d and %q", args, code, out, errOut, exitOK, want)
		}
	}
	loading.Store(false)
	if _, errOut, code := berth(t, map[string]string{"BERTH_SOCKET": socket}, "jobs"); code != exitOK || errOut != "" {
		t.Errorf("jobs once loaded: exit %d, %q", code, errOut)
	}
}

// fakeDaemon serves h on a control socket of its own, as a daemon of
// another version would answer, and returns the socket's path.
func fakeDaemon(t *testing.T, h http.HandlerFunc) string {
	t.Helper()
	socket := filepath.Join(t.TempDir(), "old.sock")
	l, err := net.Listen("unix", socket)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	return socket
}

// TestStopAllStartsNothing: berth stop --all stops what waits before what
// runs, so that no waiting job starts on what a stopped run gave back.
func TestStopAllStartsNothing(t *testing.T) {
	t.Parallel()
	d := newTestDaemon(t, map[string]string{
		// a, first by name, runs: it comes first in the list.
		"jobs.lua": `job "a" { cmd = "sleep 600", cpus = 1, priority = 1 }
for i = 1, 30 do job("w" .. i) { cmd = "sleep 600", cpus = 1 } end
job "sweep" { cmd = "sleep 600", cpus = 1, array = 4 }`,
	})
	d.start(daemonOptions{args: []string{"--cpus", "1"}})
	testkit.WaitFor(t, waitLong, "one running, 34 waiting", func() bool {
		s := d.status()
		return s.Counts["running"] == 1 && s.Counts["waiting"] == 34
	})
	// The jobs as berth status lists them, an array once.
	if out, errOut, code := d.cli("stop", "--all"); code != exitOK || out != "32 jobs, one an array (4 indices in all): stop requested (berth status shows them; berth start --all starts them again)\n" {
		t.Fatalf("stop --all: exit %d %q %q", code, out, errOut)
	}
	testkit.WaitFor(t, waitLong, "every job stopped", func() bool { return d.status().Counts["stopped"] == 35 })
	if runs := d.history(""); len(runs) != 1 || runs[0].Job != "a" {
		t.Errorf("the runs: %+v, want a's alone", runs)
	}
	d.stop()
}

// TestStopAllStopsWhatIsStopping: a job stopping for an edit's restart
// is stopped too, and rests stopped once its run ends (it ran again).
func TestStopAllStopsWhatIsStopping(t *testing.T) {
	t.Parallel()
	stubborn := `job "stubborn" { cmd = { "sh", "-c", "trap '' TERM; touch OUT/trapped; while true; do sleep 1; done" }, cpus = 0, stop_timeout = "1m", env = { V = "%d" } }`
	d := newTestDaemon(t, map[string]string{"jobs.lua": fmt.Sprintf(stubborn, 1)})
	d.start(daemonOptions{})
	j := d.waitJob("stubborn", "its run", func(j supervisor.JobStatus) bool { return j.State == "running" && j.PID > 0 })
	d.waitFile("trapped") // a stop before would end it at once
	d.write("jobs.lua", fmt.Sprintf(stubborn, 2))
	d.cli("reload")
	d.waitState("stubborn", "stopping")
	if out, errOut, code := d.cli("stop", "--all"); code != exitOK || out != "1 job: stop requested (berth status shows them; berth start --all starts them again)\n" {
		t.Fatalf("stop --all: exit %d %q %q", code, out, errOut)
	}
	if err := syscall.Kill(-j.PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	d.waitState("stubborn", "stopped")
	if runs := d.history("stubborn"); len(runs) != 1 {
		t.Errorf("the runs: %+v, want the first alone", runs)
	}
}

// TestCheckDaemonMemoryUnknown: beside a daemon that accounts no memory
// (it could not read it), berth check does not hold ram to what this
// machine has: the daemon runs such a job.
func TestCheckDaemonMemoryUnknown(t *testing.T) {
	socket := fakeDaemon(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != supervisor.APIVersion+"/status" {
			http.NotFound(w, r)
			return
		}
		json.NewEncoder(w).Encode(supervisor.Status{Machine: supervisor.MachineStatus{CPUs: 4}})
	})
	file := filepath.Join(t.TempDir(), "big.lua")
	if err := os.WriteFile(file, []byte(`job "big" { cmd = "true", ram = "100T" }`), 0o644); err != nil {
		t.Fatal(err)
	}
	// The daemon named by BERTH_SOCKET, by --socket after the command or
	// before it.
	for _, args := range [][]string{{"check", file}, {"check", "--socket", socket, file}, {"--socket", socket, "check", file}} {
		env := map[string]string{"BERTH_SOCKET": socket}
		if args[0] == "--socket" || args[1] == "--socket" {
			env = nil
		}
		out, errOut, code := berth(t, env, args...)
		if code != exitOK || errOut != msgCheckAgainstDaemon(false)+"\n" {
			t.Errorf("berth %q, of a 100T job beside a daemon that accounts no memory: exit %d\n%s%s", args, code, out, errOut)
		}
	}
}

// TestCheckKeepsNamesWhereInForce: a name declared in two files stays,
// in the daemon, with the file that holds it in force; berth check beside
// it refuses the same file, not the one that sorts later.
func TestCheckKeepsNamesWhereInForce(t *testing.T) {
	t.Parallel()
	d := newTestDaemon(t, map[string]string{"10-env.lua": `job "plain" { cmd = "sleep 600" }`})
	d.start(daemonOptions{})
	d.waitState("plain", "running")
	d.write("05-early.lua", `job "early" { cmd = "sleep 600" }
job "plain" { cmd = "echo impostor" }`)
	d.cli("reload")
	taken := filepath.Join(d.jobs, "05-early.lua") + `:2: job "plain" is already declared in ` + filepath.Join(d.jobs, "10-env.lua") + ":1, which is in force"
	if st := d.status(); !slices.ContainsFunc(st.Problems, func(p supervisor.Problem) bool { return strings.HasPrefix(p.Text, taken) }) {
		t.Fatalf("the daemon refuses the newcomer: %+v", st.Errors)
	}
	out, errOut, code := d.cli("check", d.jobs)
	if code != exitFailed || !strings.HasPrefix(out, taken) || strings.Contains(out, "10-env.lua:1: ") ||
		!strings.HasSuffix(out, "2 files, 1 job, 0 flavors, 1 error\n") {
		t.Errorf("check beside the daemon should refuse 05-early.lua, as the daemon does: exit %d\n%s%s", code, out, errOut)
	}
	// No daemon: the file that sorts later, as at a first start.
	d.stop()
	out, _, code = d.cli("check", d.jobs)
	if code != exitFailed || !strings.HasPrefix(out, filepath.Join(d.jobs, "10-env.lua")+`:1: job "plain": already declared`) {
		t.Errorf("check without a daemon should refuse the file that sorts later: exit %d\n%s", code, out)
	}
}

// TestCheckAgainstTheDaemonsBooks: with a daemon answering and no --cpus,
// berth check measures jobs against the daemon's books, which they must
// fit, not against the machine as probed here.
func TestCheckAgainstTheDaemonsBooks(t *testing.T) {
	t.Parallel()
	d := newTestDaemon(t, nil)
	d.start(daemonOptions{args: []string{"--cpus", "40", "--gpus", "2", "--gpu-mem", "40G"}})
	file := filepath.Join(t.TempDir(), "wide.lua")
	if err := os.WriteFile(file, []byte(`job "wide" { cmd = "true", cpus = 30 }
job "share" { cmd = "true", gpu_mem = "20G" }`), 0o644); err != nil {
		t.Fatal(err)
	}
	// The daemon's books, shares of its cards included, and no warning
	// about values the person did not give.
	out, errOut, code := d.cli("check", file)
	if code != exitOK || errOut != msgCheckAgainstDaemon(false)+"\n" {
		t.Errorf("check of a 30-core job and a 20G share beside a 40-core daemon of 40G cards: exit %d\n%s%s", code, out, errOut)
	}
	if out, _, code := d.cli("check", "--cpus", "8", file); code != exitFailed || !strings.Contains(out, "this machine has 8") {
		t.Errorf("check --cpus 8: exit %d\n%s", code, out)
	}
	// Nothing to check: nothing is checked against the books.
	missing := filepath.Join(t.TempDir(), "missing.lua")
	if out, errOut, code := d.cli("check", missing); code != exitFailed || errOut != "" || !strings.HasSuffix(out, "0 files, 0 jobs, 0 flavors, 1 error\n") {
		t.Errorf("check of a missing file beside a daemon: exit %d\n%s%s", code, out, errOut)
	}

	// A file on its own may name the flavors of the daemon's jobs
	// directory, wherever its --jobs put it.
	d.write("flavors.lua", `flavor "wide" { cpus = 30 }`)
	d.cli("reload")
	named := filepath.Join(d.jobs, "named.lua")
	if err := os.WriteFile(named, []byte(`job "named" { cmd = "true", flavor = "wide" }`), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, errOut, code := d.cli("check", named); code != exitOK || out != "1 file, 1 job, 0 flavors, 0 errors\n" {
		t.Errorf("check of a file naming the daemon's flavor: exit %d\n%s%s", code, out, errOut)
	}
	// Against another machine, a file elsewhere still names the daemon's
	// flavors and waits for its jobs (trial AJ: refused both once
	// --cpus was given).
	d.write("prepare.lua", `job "prepare" { cmd = "true", cpus = 0 }`)
	d.cli("reload")
	other := filepath.Join(t.TempDir(), "other.lua")
	if err := os.WriteFile(other, []byte(`job "other" { cmd = "true", flavor = "wide", after = "prepare" }`), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, errOut, code := d.cli("check", "--cpus", "64", other); code != exitOK || errOut != msgCheckAgainstDaemon(true)+"\n" {
		t.Errorf("check --cpus 64 of a file naming the daemon's flavor and job: exit %d\n%s%s", code, out, errOut)
	}
	if out, _, code := d.cli("check", "--cpus", "8", other); code != exitFailed || !strings.Contains(out, "this machine has 8") {
		t.Errorf("check --cpus 8 of it: exit %d\n%s", code, out)
	}
	d.stop()
}

// TestOwnerFilterProblems: status --mine and --owner keep the problems of
// the person's jobs and files, and the machine's, not another person's.
func TestOwnerFilterProblems(t *testing.T) {
	s := supervisor.Status{Daemon: supervisor.DaemonStatus{JobsDir: "/etc/berth/jobs.d", UserJobs: "/var/spool/berth"},
		Problems: []supervisor.Problem{
			{Code: supervisor.ProblemNotRecording, File: "/var/lib/berth", Text: "machine"},
			{Code: "unknown_field", File: "/var/spool/berth/alice/a.lua", Job: "alice/x", Text: "alice's job"},
			{Code: "syntax", File: "/var/spool/berth/alice/b.lua", Text: "alice's file"},
			{Code: "unknown_field", File: "/var/spool/berth/bob/c.lua", Job: "bob/y", Text: "bob's job"},
			{Code: "syntax", File: "/var/spool/berth/bob/d.lua", Text: "bob's file"},
			{Code: "syntax", File: "/etc/berth/jobs.d/e.lua", Text: "the administrators' file"},
		}}
	for _, c := range []struct {
		mine  bool
		owner string
		want  []string
	}{
		{true, "", []string{"machine", "alice's job", "alice's file"}},
		{false, "bob", []string{"machine", "bob's job", "bob's file"}},
		{false, "root", []string{"machine", "the administrators' file"}},
	} {
		f := &ownerFilter{mine: &c.mine, owner: &c.owner,
			me: &supervisor.Me{User: "alice", Owner: "alice", JobsDir: "/var/spool/berth/alice", DaemonUser: "root"}}
		var got []string
		for _, p := range f.status(nil, s).Problems {
			got = append(got, p.Text)
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("mine %v, owner %q: %q, want %q", c.mine, c.owner, got, c.want)
		}
	}
}

// TestShowVersionInForce: berth show of a job whose file's latest version
// is refused says that what it shows is the version before, in force
// (trial AC: it showed it as what the file says).
func TestShowVersionInForce(t *testing.T) {
	t.Parallel()
	d := newTestDaemon(t, map[string]string{"k.lua": `job "kjob" { cmd = { "sleep", "600" }, cpus = 1 }`})
	d.start(daemonOptions{})
	d.waitState("kjob", "running")
	const note = "(the version in force: the file's latest is refused; berth status says why)"
	if out, _, _ := d.cli("show", "kjob"); strings.Contains(out, note) {
		t.Errorf("show of a job whose file is fine:\n%s", out)
	}
	d.write("k.lua", `job "kjob" { cmd = { "sleep", "600" }, cpu = 1 }`)
	d.cli("reload")
	out, _, code := d.cli("show", "kjob")
	if code != exitOK || !strings.Contains(out, "declared in "+filepath.Join(d.jobs, "k.lua")+":1 "+note) || !strings.Contains(out, "sleep 600") {
		t.Errorf("show of a job whose file's latest is refused: exit %d\n%s", code, out)
	}
	var detail supervisor.JobDetail
	if out, _, _ := d.cli("show", "kjob", "--json"); json.Unmarshal([]byte(out), &detail) != nil || !detail.FileRefused {
		t.Errorf("show --json: %s", out)
	}
	d.stop()
}

// TestEditRacedAndLinked: berth edit does not write over a file saved by
// someone else while the editor was open (its edit is kept, and it says
// how to compare), and edits a file that is a link through it, the link
// kept (trial AD: the colleague's job was removed and its run stopped;
// the link was replaced by a copy).
func TestEditRacedAndLinked(t *testing.T) {
	t.Parallel()
	d := newTestDaemon(t, map[string]string{"fresh.lua": `job "fresh" { cmd = "echo fresh", cpus = 0 }`})
	d.start(daemonOptions{})
	d.waitState("fresh", "done")
	target := filepath.Join(d.jobs, "fresh.lua")
	editor := func(script string) map[string]string {
		path := filepath.Join(t.TempDir(), "editor")
		if err := os.WriteFile(path, []byte("#!/bin/sh\n"+script), 0o755); err != nil {
			t.Fatal(err)
		}
		return map[string]string{"BERTH_SOCKET": d.socket, "EDITOR": path, "VISUAL": ""}
	}
	colleague := `job "colleague" { cmd = "sleep 600", cpus = 0 }`
	theirs := filepath.Join(t.TempDir(), "theirs.lua")
	if err := os.WriteFile(theirs, []byte("\n"+colleague+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, errOut, code := berth(t, editor("cat "+theirs+" >> "+target+"\nsed -i 's/echo fresh/echo edited/' \"$1\"\n"), "edit", "fresh")
	if code != exitFailed || !strings.Contains(errOut, target+" was changed while you edited it, and is not written over; your edit is kept in ") {
		t.Errorf("an edit raced by another save: exit %d\n%s", code, errOut)
	}
	if m := regexp.MustCompile(`your edit is kept in (/\S+)/fresh\.lua`).FindStringSubmatch(errOut); m != nil {
		os.RemoveAll(m[1])
	}
	if now, _ := os.ReadFile(target); !strings.Contains(string(now), colleague) || strings.Contains(string(now), "echo edited") {
		t.Errorf("the file after the raced edit:\n%s", now)
	}
	// An edit with more errors than are listed counts those listed.
	broken := filepath.Join(t.TempDir(), "broken.lua")
	if err := os.WriteFile(broken, []byte(`for i = 1, 60 do job("b" .. i) { cmd = "true", cpu = 1 } end`), 0o644); err != nil {
		t.Fatal(err)
	}
	_, errOut, code = berth(t, editor("cp "+broken+" \"$1\"\n"), "edit", "fresh")
	if code != exitFailed || !strings.Contains(errOut, "not written: 50 problems listed, and more;") {
		t.Errorf("an edit of 60 errors: exit %d\n%s", code, errOut)
	}
	if m := regexp.MustCompile(`your edit is kept in (/\S+)/fresh\.lua`).FindStringSubmatch(errOut); m != nil {
		os.RemoveAll(m[1])
	}

	// A job file that is a link into a checkout: edited there.
	// (Every directory on the way open to everyone: the daemon follows a
	// link only to a file anyone may read.)
	for _, dir := range []string{filepath.Dir(d.dir), d.dir} {
		if err := os.Chmod(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	repo := filepath.Join(d.dir, "repo")
	if err := os.Mkdir(repo, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(repo, "lk.lua"), []byte(`job "lk" { cmd = "echo fresh", cpus = 0 }`), 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(d.jobs, "lk.lua")
	if err := os.Symlink(filepath.Join(repo, "lk.lua"), link); err != nil {
		t.Fatal(err)
	}
	d.cli("reload")
	out, errOut, code := berth(t, editor("sed -i 's/echo fresh/echo edited/' \"$1\"\n"), "edit", "lk")
	if code != exitOK || !strings.Contains(out, "saved "+link+", through its link, in "+filepath.Join(repo, "lk.lua")) {
		t.Errorf("an edit through a link: exit %d\n%s%s", code, out, errOut)
	}
	if fi, err := os.Lstat(link); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Errorf("the link after the edit: %v, %v", fi, err)
	}
	if got, _ := os.ReadFile(filepath.Join(repo, "lk.lua")); !strings.Contains(string(got), "echo edited") {
		t.Errorf("the linked file after the edit: %s", got)
	}
	// Not through a link to another's file: edited there by its owner.
	if os.Geteuid() == 0 {
		if err := os.Chown(filepath.Join(repo, "lk.lua"), 65534, 65534); err != nil {
			t.Fatal(err)
		}
		if _, errOut, code := berth(t, editor("sed -i 's/echo edited/echo again/' \"$1\"\n"), "edit", "lk"); code != exitFailed ||
			!strings.Contains(errOut, "which is not a file of yours alone to write") {
			t.Errorf("an edit through a link to another's file: exit %d\n%s", code, errOut)
		}
	}
	d.stop()
}

// TestStartAllAfterStopAll: berth start --all is the way back from stop
// --all: the jobs stopped start, an array's stopped indices (not its done
// ones again), and a job done stays done (trial AD: one berth start a job,
// in a shell loop).
func TestStartAllAfterStopAll(t *testing.T) {
	t.Parallel()
	d := newTestDaemon(t, map[string]string{"jobs.lua": `job "once" { cmd = "true", cpus = 0 }
job "svc" { cmd = "sleep 600", cpus = 0 }
job "own" { cmd = "sleep 600", cpus = 0 }
job "own2" { cmd = "sleep 600", cpus = 0 }
job "sw" { cmd = { "sh", "-c", "[ $BERTH_ARRAY_INDEX = 1 ] || exec sleep 600" }, cpus = 0, array = 3 }`})
	d.start(daemonOptions{})
	d.waitState("once", "done")
	d.waitState("svc", "running")
	d.waitJob("sw", "one index done, two running", func(j supervisor.JobStatus) bool {
		return j.Array != nil && j.Array.Counts["done"] == 1 && j.Array.Counts["running"] == 2
	})
	// own was stopped on its own, before: start --all leaves it so (trial
	// AG: it started a job a person had stopped on purpose).
	d.waitState("own", "running")
	if _, _, code := d.cli("stop", "own"); code != exitOK {
		t.Fatal("stop own")
	}
	d.waitState("own", "stopped")
	d.waitState("own2", "running")
	if out, _, code := d.cli("stop", "--all"); code != exitOK || !strings.HasPrefix(out, "3 jobs, one an array (2 indices in all): stop requested") {
		t.Fatalf("stop --all: exit %d\n%s", code, out)
	}
	d.waitState("svc", "stopped")
	// own2, stopped by stop --all, then on its own: start --all leaves it
	// (the review).
	d.waitState("own2", "stopped")
	if _, _, code := d.cli("stop", "own2"); code != exitOK {
		t.Fatal("stop own2")
	}
	d.waitJob("sw", "two indices stopped", func(j supervisor.JobStatus) bool { return j.Array.Counts["stopped"] == 2 })
	// What stop --all stopped is known to the next daemon too.
	d.stop()
	d.start(daemonOptions{})
	d.waitState("svc", "stopped")
	if out, _, code := d.cli("start", "--all"); code != exitOK || out != "2 jobs, one an array (2 indices stopped in all): start requested (berth status shows them)\n" {
		t.Errorf("start --all: exit %d\n%s", code, out)
	}
	d.waitState("svc", "running")
	d.waitJob("sw", "two indices running again, one done", func(j supervisor.JobStatus) bool {
		return j.Array.Counts["running"] == 2 && j.Array.Counts["done"] == 1
	})
	if runs := d.history("sw[1]"); len(runs) != 1 {
		t.Errorf("the done index ran again: %+v", runs)
	}
	if runs := d.history("once"); len(runs) != 1 {
		t.Errorf("the done job ran again: %+v", runs)
	}
	if out, _, code := d.cli("start", "sw", "--stopped"); code != exitOK || out != "no stopped index in sw: nothing to start (berth show sw lists its indices by state)\n" {
		t.Errorf("start sw --stopped with none stopped: exit %d\n%s", code, out)
	}
	// Of one index, or a job that is not an array: only if stopped.
	for _, job := range []string{"sw[1]", "once"} {
		if out, _, code := d.cli("start", job, "--stopped"); code != exitOK || out != job+": not stopped but done, and left so (berth start "+quoteArg(job)+" without --stopped runs it)\n" {
			t.Errorf("start %s --stopped, done: exit %d\n%s", job, code, out)
		}
		if runs := d.history(job); len(runs) != 1 {
			t.Errorf("%s ran again: %+v", job, runs)
		}
	}
	if out, _, code := d.cli("start", "--all"); code != exitOK || !strings.HasPrefix(out, "no job to start: none you may start rests stopped by berth stop --all") {
		t.Errorf("start --all with none stopped by stop --all: exit %d\n%s", code, out)
	}
	for _, job := range []string{"own", "own2"} {
		if j, _ := d.job(job); j.State != "stopped" || len(d.history(job)) != 1 {
			t.Errorf("%s, stopped on its own: %s, %d runs; want stopped after its one run", job, j.State, len(d.history(job)))
		}
	}
	d.stop()
}

// TestStartAllWhileStopping: berth start --all right after stop --all
// starts again the jobs still stopping, once their runs have ended, an
// array's indices too (trial AJ: left stopped, and not said); a second
// stop --all changes nothing of them, and says so.
func TestStartAllWhileStopping(t *testing.T) {
	t.Parallel()
	gate := filepath.Join(t.TempDir(), "go")
	// Each run, told to stop, waits for the gate.
	slow := `{ "sh", "-c", "trap 'while [ ! -e ` + gate + ` ]; do sleep 0.05; done; exit 0' TERM; touch OUT/trapped.$BERTH_JOB; while true; do sleep 0.05; done" }`
	d := newTestDaemon(t, map[string]string{"jobs.lua": `job "svc" { cmd = ` + slow + `, cpus = 0, stop_timeout = "5m" }
job "sw" { cmd = ` + slow + `, cpus = 0, stop_timeout = "5m", array = 2 }`})
	d.start(daemonOptions{})
	svc := d.waitJob("svc", "running", func(j supervisor.JobStatus) bool { return j.State == "running" && j.PID > 0 })
	d.waitJob("sw", "two indices running", func(j supervisor.JobStatus) bool { return j.Array != nil && j.Array.Counts["running"] == 2 })
	for _, name := range []string{"svc", "sw[1]", "sw[2]"} {
		d.waitFile("trapped." + name) // a stop before would end it at once
	}
	if out, _, code := d.cli("stop", "--all"); code != exitOK || !strings.HasPrefix(out, "2 jobs, one an array (2 indices in all): stop requested") {
		t.Fatalf("stop --all: exit %d\n%s", code, out)
	}
	d.waitJob("sw", "two indices stopping", func(j supervisor.JobStatus) bool { return j.Array.Counts["stopping"] == 2 })
	d.waitState("svc", "stopping")
	if out, _, code := d.cli("stop", "--all"); code != exitOK || out != msgAlreadyStoppingAll(2)+"\n" {
		t.Errorf("stop --all again: exit %d\n%s", code, out)
	}
	if j, _ := d.job("svc"); strings.Contains(j.Why, "then stopped") {
		t.Errorf("svc's why: %q, said twice", j.Why)
	}
	if out, _, code := d.cli("start", "--all"); code != exitOK || out != "2 jobs, one an array (2 indices stopped in all): start requested (berth status shows them)\n" {
		t.Errorf("start --all while they stop: exit %d\n%s", code, out)
	}
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	d.waitJob("svc", "running again", func(j supervisor.JobStatus) bool { return j.State == "running" && j.Run != svc.Run })
	d.waitJob("sw", "two indices running again", func(j supervisor.JobStatus) bool { return j.Array.Counts["running"] == 2 })
	if runs := d.history("sw[2]"); len(runs) != 2 {
		t.Errorf("sw[2]'s runs: %+v, want two", runs)
	}
	d.stop()
}

// TestStartAllLeavesWhileStopping: after stop --all, start --all leaves a
// job disabled, or removed, while it stopped, and one a person then
// stopped on their own, and goes on with the rest; a start --stopped of an
// array is of indices stopped, not stopping (the review).
func TestStartAllLeavesWhileStopping(t *testing.T) {
	t.Parallel()
	gate := filepath.Join(t.TempDir(), "go")
	slow := `{ "sh", "-c", "trap 'while [ ! -e ` + gate + ` ]; do sleep 0.05; done; exit 0' TERM; touch OUT/trapped.$BERTH_JOB; while true; do sleep 0.05; done" }`
	job := func(name, more string) string {
		return `job "` + name + `" { cmd = ` + slow + `, cpus = 0, stop_timeout = "5m"` + more + ` }`
	}
	d := newTestDaemon(t, map[string]string{"a.lua": job("svc", "") + "\n" + job("own", "") + "\n" + job("sw", ", array = 2"),
		"dis.lua": job("dis", ""), "gone.lua": job("gone", "")})
	d.start(daemonOptions{})
	for _, name := range []string{"svc", "own", "dis", "gone"} {
		d.waitState(name, "running")
	}
	d.waitJob("sw", "two indices running", func(j supervisor.JobStatus) bool { return j.Array != nil && j.Array.Counts["running"] == 2 })
	for _, name := range []string{"svc", "own", "dis", "gone", "sw[1]", "sw[2]"} {
		d.waitFile("trapped." + name) // a stop before would end it at once
	}
	if _, _, code := d.cli("stop", "--all"); code != exitOK {
		t.Fatal("stop --all")
	}
	for _, name := range []string{"svc", "own", "dis", "gone"} {
		d.waitState(name, "stopping")
	}
	d.write("dis.lua", job("dis", ", enabled = false"))
	if err := os.Remove(filepath.Join(d.jobs, "gone.lua")); err != nil {
		t.Fatal(err)
	}
	d.cli("reload")
	// A person's own stop, as stop --all stops it: it stays stopped.
	if out, _, code := d.cli("stop", "own"); code != exitOK || strings.Contains(out, "already") {
		t.Errorf("stop own while stop --all stops it: exit %d\n%s", code, out)
	}
	if out, _, code := d.cli("start", "sw", "--stopped"); code != exitOK || !strings.HasPrefix(out, "no stopped index in sw") {
		t.Errorf("start sw --stopped while its indices stop: exit %d\n%s", code, out)
	}
	if out, errOut, code := d.cli("start", "--all"); code != exitOK || out != "2 jobs, one an array (2 indices stopped in all): start requested (berth status shows them)\n" {
		t.Errorf("start --all: exit %d\n%s%s", code, out, errOut)
	}
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	d.waitJob("sw", "two indices running again", func(j supervisor.JobStatus) bool { return j.Array.Counts["running"] == 2 })
	d.waitJob("svc", "running again", func(j supervisor.JobStatus) bool { return j.State == "running" && len(d.history("svc")) == 2 })
	d.waitState("own", "stopped")
	d.waitState("dis", "disabled")
	d.stop()
}

// TestStatusQueueOrder: berth status lists the jobs waiting for the
// machine in the queue's order, each with its place in it (trial AD:
// every one said "needs 1 core; 0 free", in the order of their names).
func TestStatusQueueOrder(t *testing.T) {
	t.Parallel()
	d := newTestDaemon(t, map[string]string{"jobs.lua": `job "hog" { cmd = "sleep 600", cpus = 1, priority = 100 }
job "lo1" { cmd = "true", cpus = 1 }
job "hi" { cmd = "true", cpus = 1, priority = 10 }`})
	d.start(daemonOptions{args: []string{"--cpus", "1"}})
	d.waitState("hog", "running")
	lo1, _ := d.job("lo1")
	hi, _ := d.job("hi")
	if hi.QueuePosition != 1 || lo1.QueuePosition != 2 {
		t.Errorf("places in the queue: hi %d, lo1 %d; want 1, 2", hi.QueuePosition, lo1.QueuePosition)
	}
	out, _, _ := d.cli("status")
	iHi, iLo := strings.Index(out, "\nhi "), strings.Index(out, "\nlo1 ")
	if iHi < 0 || iLo < iHi || !strings.Contains(out[iLo:], "2nd in line") {
		t.Errorf("berth status:\n%s", out)
	}
	d.stop()
}

// TestStopOfDisabledKept: a stop of a job its file disables is kept, and
// says so: once enabled, the job rests stopped, as the answer said (trial
// AM: "stop requested", then a job that did not start once enabled).
func TestStopOfDisabledKept(t *testing.T) {
	t.Parallel()
	d := newTestDaemon(t, map[string]string{"a.lua": `job "nightly" { cmd = "sleep 600", cpus = 0, enabled = false }`})
	d.start(daemonOptions{})
	d.waitState("nightly", "disabled")
	out, errOut, code := d.cli("stop", "nightly")
	if want := "nightly: stop requested; its file disables it, and once enabled it rests stopped (berth start nightly runs it then)\n"; code != exitOK || out != want {
		t.Errorf("stop of a disabled job: exit %d\n%s%s\nwant %s", code, out, errOut, want)
	}
	if out, _, _ := d.cli("stop", "nightly", "--json"); !strings.Contains(out, `"rests_stopped_once": "enabled"`) {
		t.Errorf("stop --json of a disabled job: %s", out)
	}
	d.write("a.lua", `job "nightly" { cmd = "sleep 600", cpus = 0 }`)
	d.cli("reload")
	if js := d.waitState("nightly", "stopped"); js.Why == "" {
		t.Errorf("enabled, it rests stopped saying nothing of why: %+v", js)
	}
	d.stop()
}

// TestAnswerCut: an answer that ends before it is whole is said so, with
// what may have cut it (trial AN: a bare "unexpected EOF").
func TestAnswerCut(t *testing.T) {
	socket := fakeDaemon(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", "100000")
		_, _ = w.Write([]byte(`[{"name": "a"`))
	})
	_, errOut, code := berth(t, map[string]string{"BERTH_SOCKET": socket}, "jobs")
	if code != exitFailed || errOut != msgAnswerCut()+"\n" {
		t.Errorf("berth jobs of an answer cut short: exit %d\n%s", code, errOut)
	}
}

// TestOwnerFilterArgs: the history's hint names --mine or --owner as given
// (trial AO: it dropped them, naming everyone's runs).
func TestOwnerFilterArgs(t *testing.T) {
	for _, c := range []struct {
		mine  bool
		owner string
		want  string
	}{{false, "", ""}, {true, "", "--mine"}, {false, "alice", "--owner alice"}, {false, "o'brien", `--owner 'o'\''brien'`}} {
		f := &ownerFilter{mine: new(c.mine), owner: new(c.owner)}
		if got := f.args(); got != c.want {
			t.Errorf("mine %v, owner %q: %q, want %q", c.mine, c.owner, got, c.want)
		}
	}
}

// TestNoAnswer: a daemon that takes a one-shot request and goes away
// before answering, or does not answer in time, is no daemon answering
// (exit 3), said so with whether what was asked may have been done, and
// code no_answer with --json (trial AT: Go's bare "EOF", or its
// Client.Timeout, exit 1, code failed).
func TestNoAnswer(t *testing.T) {
	t.Parallel()
	listen := func(t *testing.T, serve func(net.Conn)) string {
		t.Helper()
		socket := filepath.Join(t.TempDir(), "b.sock")
		l, err := net.Listen("unix", socket)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
		go func() {
			for {
				conn, err := l.Accept()
				if err != nil {
					return
				}
				go serve(conn)
			}
		}()
		return socket
	}
	// goes away: it reads the request, and closes the connection.
	gone := listen(t, func(conn net.Conn) {
		_, _ = http.ReadRequest(bufio.NewReader(conn))
		conn.Close()
	})
	// stuck: it reads the request, and never answers.
	quit := make(chan struct{})
	t.Cleanup(func() { close(quit) })
	stuck := listen(t, func(conn net.Conn) {
		defer conn.Close()
		_, _ = http.ReadRequest(bufio.NewReader(conn))
		<-quit
	})
	for _, tt := range []struct {
		socket string
		args   []string
		want   string
	}{
		{gone, []string{"status", "--json"}, msgGoneBeforeAnswer(gone, "")},
		{gone, []string{"start", "train", "--json"}, msgGoneBeforeAnswer(gone, "the start of train")},
		{gone, []string{"show", "train"}, msgGoneBeforeAnswer(gone, "")},
		{stuck, []string{"status", "--json"}, msgNoAnswerInTime(stuck, "", 200*time.Millisecond)},
		{stuck, []string{"reload", "--json"}, msgNoAnswerInTime(stuck, "the reload", 200*time.Millisecond)},
	} {
		var out, errOut bytes.Buffer
		c := &cli{stdout: &out, stderr: &errOut, root: "testdata/box", timeout: 200 * time.Millisecond,
			env: env{lookup: func(k string) (string, bool) {
				return map[string]string{"BERTH_SOCKET": tt.socket}[k], k == "BERTH_SOCKET"
			}, uid: 1000, home: "/home/someone"}}
		code := c.main(tt.args)
		if code != exitNoDaemon || errOut.String() != tt.want+"\n" {
			t.Errorf("berth %s: exit %d, %q\nwant exit 3, %q", strings.Join(tt.args, " "), code, errOut.String(), tt.want)
		}
		if !asksJSON(tt.args) {
			continue
		}
		var f jsonFailure
		if err := json.Unmarshal(out.Bytes(), &f); err != nil || f.Code != codeNoAnswer || "berth: "+f.Error != tt.want {
			t.Errorf("berth %s: stdout %q, want {code: %s, error}", strings.Join(tt.args, " "), out.String(), codeNoAnswer)
		}
	}
}

// TestReloadTimeout: a reload is not given up on before the daemon can
// have answered it: the reload under way, its own and, at the daemon's
// start, the versions in force, each within its deadline.
func TestReloadTimeout(t *testing.T) {
	if reloadTimeout < 3*supervisor.DefaultEvalDeadline || requestTimeout > reloadTimeout {
		t.Errorf("a reload is given %s, other requests %s, the daemon's deadline for one evaluation being %s",
			reloadTimeout, requestTimeout, supervisor.DefaultEvalDeadline)
	}
}

// TestReloadNotFailedByAKeptRun: a run kept though no file declares its
// job is shown by a reload, and fails it for no one: it is no file's own
// error (the review: every reload exited 1 while one was kept).
func TestReloadNotFailedByAKeptRun(t *testing.T) {
	socket := fakeDaemon(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case supervisor.APIVersion + "/me":
			w.Write([]byte(`{"jobs_dir":"/etc/berth/jobs.d"}`))
		case supervisor.APIVersion + "/reload":
			w.Write([]byte(`{"files":1,"problems":[{"code":"orphan_kept","kind":"job","job":"gone","text":"job \"gone\": its run 5 goes on"}],"errors":["job \"gone\": its run 5 goes on"]}`))
		default:
			http.NotFound(w, r)
		}
	})
	out, errOut, code := berth(t, map[string]string{"BERTH_SOCKET": socket}, "reload")
	if code != exitOK || !strings.Contains(out, "its run 5 goes on") {
		t.Errorf("reload with a run kept: exit %d\n%s%s", code, out, errOut)
	}
}
