package main

import (
	"encoding/json"
	"errors"
	"io/fs"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/berthd/berth/supervisor"
	"github.com/berthd/berth/supervisor/testkit"
)

// Real accounts for the people tests, named for this package (the
// supervisor's tests make their own at the same time).
const (
	peopleGroup = "btcberth"
	peopleAdmin = "btcadmin"
	alice       = "btcalice"
	bob         = "btcbob"
	dave        = "btcdave"   // of the admin group
	erin        = "btcerin"   // of the admin group alone
	upper       = "btc.Upper" // of the group, with a login berth cannot name jobs by
)

var peopleAccounts struct {
	once   sync.Once
	err    error
	remove func()
}

func needPeople(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to make accounts and run the client as them")
	}
	peopleAccounts.once.Do(func() {
		peopleAccounts.remove, peopleAccounts.err = testkit.MakeAccounts([]string{peopleGroup, peopleAdmin}, []testkit.Account{
			{Name: alice, Groups: []string{peopleGroup}}, {Name: bob, Groups: []string{peopleGroup}},
			{Name: dave, Groups: []string{peopleGroup, peopleAdmin}}, {Name: erin, Groups: []string{peopleAdmin}},
			{Name: upper, Groups: []string{peopleGroup}},
		})
	})
	if peopleAccounts.err != nil {
		t.Skipf("cannot make test accounts: %v", peopleAccounts.err)
	}
}

// reachable opens the way to the daemon's directory to everyone, so that
// the test's people reach its socket, and returns a copy of this binary
// they may run as berth.
func (d *testDaemon) reachable(t *testing.T) string {
	t.Helper()
	for p := d.dir; p != "/" && p != filepath.Clean(os.TempDir()); p = filepath.Dir(p) {
		if err := os.Chmod(p, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	bin := filepath.Join(d.dir, "berth")
	testkit.CopyExecutable(t, os.Args[0], bin, 0o755)
	return bin
}

// person runs berth as one of the test's people.
type person struct {
	t    *testing.T
	name string
	bin  string // a copy of the test binary they may execute
	cred *syscall.Credential
	env  []string
}

func newPerson(t *testing.T, d *testDaemon, bin, name string) *person {
	t.Helper()
	u, err := user.Lookup(name)
	if err != nil {
		t.Fatal(err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	cred := &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
	gids, _ := u.GroupIds()
	for _, g := range gids {
		n, _ := strconv.Atoi(g)
		cred.Groups = append(cred.Groups, uint32(n))
	}
	return &person{t: t, name: name, bin: bin, cred: cred,
		env: []string{"BERTH_TEST_BE_BERTH=1", "BERTH_SOCKET=" + d.socket, "HOME=/", "PATH=/usr/bin:/bin"}}
}

// run runs berth as the person, with stdin and more environment.
func (p *person) run(stdin string, env []string, args ...string) (stdout, stderr string, code int) {
	p.t.Helper()
	cmd := exec.Command(p.bin, args...)
	cmd.Env = append(append([]string{}, p.env...), env...)
	cmd.Dir = "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: p.cred}
	cmd.Stdin = strings.NewReader(stdin)
	var out, errOut strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &exit):
		code = exit.ExitCode()
	default:
		p.t.Fatalf("berth %s as %s: %v", strings.Join(args, " "), p.name, err)
	}
	return out.String(), errOut.String(), code
}

// evalChildUIDs are the uids of the daemon's evaluating children now.
func evalChildUIDs(daemon int) []uint32 {
	var uids []uint32
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmdline, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if !strings.Contains(string(cmdline), evalCommand) {
			continue
		}
		status, _ := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "status"))
		var ppid, uid int
		for _, line := range strings.Split(string(status), "\n") {
			if v, ok := strings.CutPrefix(line, "PPid:"); ok {
				ppid, _ = strconv.Atoi(strings.TrimSpace(v))
			}
			if v, ok := strings.CutPrefix(line, "Uid:"); ok {
				if f := strings.Fields(v); len(f) > 0 {
					uid, _ = strconv.Atoi(f[0])
				}
			}
		}
		if ppid == daemon {
			uids = append(uids, uint32(uid))
		}
	}
	return uids
}

// writeFile writes a file anyone may read, for a person to submit.
func writeReadable(t *testing.T, path, src string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestPeopleClient: what the people who share the box do, each as
// themselves, through the client: alice submits a file and it runs as her;
// a file that does not load is not written; she reads her job's output
// with no journal group; bob may neither stop it nor read its output or
// environment, an admin may; berth edit saves only what loads.
func TestPeopleClient(t *testing.T) {
	t.Parallel()
	needPeople(t)
	d := newTestDaemon(t, map[string]string{"admin.lua": `job "shared" { cmd = "sleep 600", env = { TOKEN = "admin-secret" } }
quota "` + alice + `" { cpus = 1 }`})
	spool := filepath.Join(d.dir, "spool")
	d.start(daemonOptions{args: []string{"--cpus", "2", "--user-jobs", spool, "--group", peopleGroup, "--admin-group", peopleAdmin}})
	bin := d.reachable(t)
	a, b, admin := newPerson(t, d, bin, alice), newPerson(t, d, bin, bob), newPerson(t, d, bin, dave)
	d.waitState("shared", "running")
	// The admin group may use the daemon, its members in the socket's
	// group or not (an ACL lets them open it).
	if out, errOut, code := newPerson(t, d, bin, erin).run("", nil, "stop", "shared"); code != exitOK {
		t.Errorf("erin, of the admin group alone, stops shared: exit %d\n%s%s", code, out, errOut)
	}

	src := filepath.Join(d.dir, "src")
	if err := os.Mkdir(src, 0o755); err != nil {
		t.Fatal(err)
	}
	writeReadable(t, filepath.Join(src, "train.lua"), `job "train" { cmd = {"sh", "-c", "echo hello from $USER; exec sleep 600"}, env = { HF_TOKEN = "alice-secret" } }`)
	out, errOut, code := a.run("", nil, "submit", filepath.Join(src, "train.lua"))
	if code != 0 || !strings.Contains(out, "submitted "+filepath.Join(spool, alice, "train.lua")) {
		t.Fatalf("alice's submit: exit %d\n%s%s", code, out, errOut)
	}
	mine := alice + "/train"
	d.waitState(mine, "running")
	// An administrator outside the group, who has no job directory, is
	// told where the job's file is (trial AE: told of their own directory).
	if _, errOut, code := newPerson(t, d, bin, erin).run("", []string{"EDITOR=/bin/false"}, "edit", mine); code != exitFailed ||
		!strings.Contains(errOut, mine+" is declared in "+filepath.Join(spool, alice, "train.lua")) || !strings.Contains(errOut, "sudoedit") {
		t.Errorf("erin's edit of %s: exit %d\n%s", mine, code, errOut)
	}
	// Her quota, and what her jobs hold of it, is in berth machine; bob is
	// under none.
	if out, errOut, code := a.run("", nil, "machine"); code != exitOK || !strings.Contains(out, "your quota ("+alice+"): your jobs hold 1 of 1 core;") {
		t.Errorf("alice's machine: exit %d\n%s%s", code, out, errOut)
	}
	var m machineJSON
	if out, errOut, code := a.run("", nil, "machine", "--json"); code != exitOK || json.Unmarshal([]byte(out), &m) != nil ||
		m.Quota == nil || m.Quota.Held.CPUs != 1 || m.Quota.Quota.CPUs != 1 || m.Quota.Quota.GPUs != -1 {
		t.Errorf("alice's machine --json: exit %d, quota %+v\n%s%s", code, m.Quota, out, errOut)
	}
	if out, _, _ := b.run("", nil, "machine"); strings.Contains(out, "your quota") {
		t.Errorf("bob's machine names a quota:\n%s", out)
	}
	if st, err := os.Stat(filepath.Join(spool, alice, "train.lua")); err != nil || st.Sys().(*syscall.Stat_t).Uid != a.cred.Uid || st.Mode().Perm() != 0o600 {
		t.Errorf("the submitted file: %v %v, want alice's, 0600", st.Mode(), err)
	}

	// Another file of that name replaces hers only when she says so; two
	// of one name at once, never.
	other := filepath.Join(src, "v2")
	if err := os.Mkdir(other, 0o755); err != nil {
		t.Fatal(err)
	}
	writeReadable(t, filepath.Join(other, "train.lua"), `job "other" { cmd = "sleep 600" }`)
	if _, errOut, code := a.run("", nil, "submit", filepath.Join(other, "train.lua")); code != exitFailed ||
		!strings.Contains(errOut, msgSubmitWouldReplace(filepath.Join(other, "train.lua"), filepath.Join(spool, alice, "train.lua"))) {
		t.Errorf("alice's submit of another train.lua: exit %d\n%s", code, errOut)
	}
	// One with errors says them first: --replace would lead only to them
	// (trial AQ).
	withErrors := filepath.Join(src, "v3")
	if err := os.Mkdir(withErrors, 0o755); err != nil {
		t.Fatal(err)
	}
	writeReadable(t, filepath.Join(withErrors, "train.lua"), `job "other" { cmd = "sleep 600", cpus = "x" }`)
	if out, errOut, code := a.run("", nil, "submit", filepath.Join(withErrors, "train.lua")); code != exitFailed ||
		!strings.Contains(out+errOut, `field "cpus"`) || strings.Contains(errOut, "--replace") {
		t.Errorf("alice's submit of another train.lua with errors: exit %d\n%s%s", code, out, errOut)
	}
	if _, errOut, code := a.run("", nil, "submit", filepath.Join(src, "train.lua"), filepath.Join(other, "train.lua")); code != exitUsage ||
		!strings.Contains(errOut, "would both be train.lua in your job directory") {
		t.Errorf("alice's submit of two train.lua: exit %d\n%s", code, errOut)
	}
	if out, errOut, code := a.run("", nil, "submit", filepath.Join(src, "train.lua"), filepath.Join(src, "train.lua")); code != exitOK {
		t.Errorf("alice's submit of the same train.lua again, twice: exit %d\n%s%s", code, out, errOut)
	}
	if j, _ := d.job(mine); j.State != "running" {
		t.Errorf("her job after the refused submits: %+v", j)
	}

	// A member whose login cannot name jobs is told why they have no
	// directory (they were told to join the group they are in).
	if _, errOut, code := newPerson(t, d, bin, upper).run("", nil, "submit", filepath.Join(src, "train.lua")); code != exitFailed || errOut != msgNameRefused(upper)+"\n" {
		t.Errorf("%s's submit: exit %d\n%s", upper, code, errOut)
	}

	// A file that sets user is refused, saying why, and not written.
	writeReadable(t, filepath.Join(src, "evil.lua"), `job "evil" { cmd = "true", user = "root" }`)
	_, errOut, code = a.run("", nil, "submit", filepath.Join(src, "evil.lua"))
	if code != exitFailed || !strings.Contains(errOut, `"user"`) || !strings.Contains(errOut, "not written") {
		t.Errorf("alice's submit of a file that sets user: exit %d\n%s", code, errOut)
	}
	// The error names the file she gave, with its line.
	if !strings.HasPrefix(errOut, filepath.Join(src, "evil.lua")+":1: ") {
		t.Errorf("alice's submit of a file that sets user does not name her file first:\n%s", errOut)
	}
	if _, err := os.Stat(filepath.Join(spool, alice, "evil.lua")); err == nil {
		t.Error("the refused file was written")
	}

	// The check before writing knows her quota.
	writeReadable(t, filepath.Join(src, "big.lua"), `job "big" { cmd = "true", cpus = 2 }`)
	if _, errOut, code := a.run("", nil, "submit", filepath.Join(src, "nosuch.lua")); code != exitFailed || !strings.Contains(errOut, msgCannotReadSubmitted(filepath.Join(src, "nosuch.lua"), os.ErrNotExist)) {
		t.Errorf("alice's submit of a file that does not exist: exit %d\n%s", code, errOut)
	}
	if _, errOut, code := a.run("", nil, "submit", filepath.Join(src, "big.lua")); code != exitFailed || !strings.Contains(errOut, alice+"'s quota allows 1") {
		t.Errorf("alice's submit of a job larger than her quota: exit %d\n%s", code, errOut)
	}
	// One that asks for no cores would escape it, as the daemon would say.
	writeReadable(t, filepath.Join(src, "zero.lua"), `job "zero" { cmd = "true", cpus = 0 }`)
	if _, errOut, code := a.run("", nil, "submit", filepath.Join(src, "zero.lua")); code != exitFailed || !strings.Contains(errOut, "escape "+alice+"'s quota") {
		t.Errorf("alice's submit of a job that asks for no cores under her quota: exit %d\n%s", code, errOut)
	}

	// A file larger than the daemon reads is refused by the check too.
	writeReadable(t, filepath.Join(src, "huge.lua"), "-- "+strings.Repeat("x", 2<<20)+"\n")
	if _, errOut, code := a.run("", nil, "submit", filepath.Join(src, "huge.lua")); code != exitFailed || !strings.Contains(errOut, "huge.lua is 2097156 bytes, more than the 1 MiB a job file may be") {
		t.Errorf("alice's submit of a 2 MiB file: exit %d\n%q", code, errOut)
	}

	// Her files are evaluated as her: a file that loops for ever is seen
	// in a child of the daemon with her uid until its budget stops it.
	writeReadable(t, filepath.Join(src, "loop.lua"), `while true do end`)
	done := make(chan string, 1)
	go func() {
		_, errOut, _ := a.run("", nil, "submit", filepath.Join(src, "loop.lua"))
		done <- errOut
	}()
	testkit.WaitFor(t, waitLong, "an evaluating child of the daemon running as alice", func() bool {
		return slices.Contains(evalChildUIDs(d.cmd.Process.Pid), a.cred.Uid)
	})
	if errOut := <-done; !strings.Contains(errOut, "not written") {
		t.Errorf("a file that loops for ever: %s", errOut)
	}

	// Alice reads her job's output (she is in no journal group, and the
	// log file is the daemon's); --mine shows hers alone.
	testkit.WaitFor(t, waitLong, "alice reads her job's output", func() bool {
		out, _, code := a.run("", nil, "logs", "train")
		return code == 0 && strings.Contains(out, "hello from "+alice)
	})
	if out, _, _ := a.run("", nil, "status", "--mine"); !strings.Contains(out, mine) || strings.Contains(out, "shared") {
		t.Errorf("alice's status --mine:\n%s", out)
	}
	// The jobs without an owner are those of the account the daemon runs
	// as (root's, here); bob has none.
	if out, _, _ := newPerson(t, d, a.bin, "root").run("", nil, "status", "--mine"); !strings.Contains(out, "shared") || strings.Contains(out, mine) {
		t.Errorf("root's status --mine:\n%s", out)
	}
	if out, _, _ := a.run("", nil, "jobs", "--owner", "root"); !strings.Contains(out, "shared") || strings.Contains(out, mine) {
		t.Errorf("alice's jobs --owner root:\n%s", out)
	}
	if out, _, _ := b.run("", nil, "status", "--mine"); !regexp.MustCompile(`none of the daemon's \d+ jobs is yours \(berth status without --mine or --owner shows them\)`).MatchString(out) {
		t.Errorf("bob's status --mine, with no job of his:\n%s", out)
	}
	// So does history: the runs of those jobs alone.
	if out, _, code := a.run("", nil, "history", "--mine"); code != exitOK || !strings.Contains(out, mine) || strings.Contains(out, "shared") {
		t.Errorf("alice's history --mine: exit %d\n%s", code, out)
	}
	if out, _, code := a.run("", nil, "history", "--owner", "root"); code != exitOK || !strings.Contains(out, "shared") || strings.Contains(out, mine) {
		t.Errorf("alice's history --owner root: exit %d\n%s", code, out)
	}
	if out, _, code := b.run("", nil, "history", "--mine"); code != exitOK || out != "no runs\n" {
		t.Errorf("bob's history --mine, with no job of his: exit %d\n%s", code, out)
	}
	if _, errOut, code := a.run("", nil, "history", "train", "--mine"); code != exitUsage || !strings.Contains(errOut, errJobAndOwner.Error()) {
		t.Errorf("alice's history train --mine: exit %d\n%s", code, errOut)
	}

	// Her bare name is her job, and the answer names it whole: the same
	// bare name is the administrators' job once she has none of hers.
	if out, errOut, code := a.run("", nil, "restart", "train"); code != 0 || out != mine+": restart requested (berth status shows it)\n" {
		t.Errorf("alice's restart train: exit %d\n%s%s", code, out, errOut)
	}

	// Bob may not stop it, nor read its output or environment.
	want := mine + " belongs to " + alice + "; only " + alice + " or a member of " + peopleAdmin + " can "
	if _, errOut, code := b.run("", nil, "stop", mine); code != exitFailed || !strings.Contains(errOut, want+"stop it") {
		t.Errorf("bob's stop: exit %d %s", code, errOut)
	}
	if _, errOut, code := b.run("", nil, "logs", mine); code != exitFailed || !strings.Contains(errOut, want+"read its output") {
		t.Errorf("bob's logs: exit %d %s", code, errOut)
	}
	if out, _, code := b.run("", nil, "show", mine); code != 0 || strings.Contains(out, "alice-secret") || !strings.Contains(out, "shown only to "+alice) {
		t.Errorf("bob's show: exit %d\n%s", code, out)
	}
	if _, errOut, code := b.run("", nil, "stop", "shared"); code != exitFailed || !strings.Contains(errOut, "administrators' job") {
		t.Errorf("bob's stop of an administrators' job: exit %d %s", code, errOut)
	}
	// Bob's stop --all stops his own jobs, none, and leaves the others'.
	if out, errOut, code := b.run("", nil, "stop", "--all"); code != 0 || !strings.HasPrefix(out, "no job to stop: none you may stop") ||
		!strings.Contains(out, "not yours to stop") {
		t.Errorf("bob's stop --all: exit %d\n%s%s", code, out, errOut)
	}
	// An admin may.
	if _, errOut, code := admin.run("", nil, "stop", mine); code != 0 {
		t.Errorf("the admin's stop: exit %d %s", code, errOut)
	}
	d.waitState(mine, "stopped")

	// berth edit saves only what loads: a broken edit, declined to edit
	// again, leaves the file as it was; a good one is saved and applied.
	editor := filepath.Join(d.dir, "editor")
	writeReadable(t, editor, "#!/bin/sh\ncp \"$NEW\" \"$1\"\n")
	if err := os.Chmod(editor, 0o755); err != nil {
		t.Fatal(err)
	}
	before, _ := os.ReadFile(filepath.Join(spool, alice, "train.lua"))
	writeReadable(t, filepath.Join(src, "broken.lua"), `job "train" { cmd = `)
	_, errOut, code = a.run("n\n", []string{"EDITOR=" + editor, "NEW=" + filepath.Join(src, "broken.lua")}, "edit", "train")
	if code != exitFailed || !strings.Contains(errOut, "not written") || !strings.Contains(errOut, "your edit is kept in") {
		t.Errorf("a broken edit: exit %d\n%s", code, errOut)
	}
	if m := regexp.MustCompile(`your edit is kept in (/\S+)/train\.lua`).FindStringSubmatch(errOut); m != nil {
		os.RemoveAll(m[1]) // the draft kept for her, in /tmp
	}
	if after, _ := os.ReadFile(filepath.Join(spool, alice, "train.lua")); string(after) != string(before) {
		t.Errorf("a broken edit changed the file: %q", after)
	}
	writeReadable(t, filepath.Join(src, "better.lua"), `job "train" { cmd = {"sh", "-c", "echo edited; exec sleep 600"} }`)
	out, errOut, code = a.run("", []string{"EDITOR=" + editor, "NEW=" + filepath.Join(src, "better.lua")}, "edit", "train")
	if code != 0 || !strings.Contains(out, "saved "+filepath.Join(spool, alice, "train.lua")) {
		t.Errorf("a good edit: exit %d\n%s%s", code, out, errOut)
	}
	var jd supervisor.JobDetail
	d.getJSON(supervisor.APIVersion+"/jobs/"+url.PathEscape(mine), &jd)
	if !strings.Contains(strings.Join(jd.Definition.Cmd, " "), "echo edited") {
		t.Errorf("after the edit the definition is %q", jd.Definition.Cmd)
	}
	// Her file by the path berth show gives it is hers to edit; one
	// elsewhere is not, and says what to do.
	writeReadable(t, filepath.Join(src, "same.lua"), `job "train" { cmd = {"sh", "-c", "echo edited; exec sleep 600"} }`)
	if out, errOut, code := a.run("", []string{"EDITOR=" + editor, "NEW=" + filepath.Join(src, "same.lua")}, "edit", filepath.Join(spool, alice, "train.lua")); code != exitOK || !strings.Contains(out, "no change to") {
		t.Errorf("berth edit of her file by its path: exit %d\n%s%s", code, out, errOut)
	}
	if _, errOut, code := a.run("", []string{"EDITOR=" + editor}, "edit", "../"+bob+"/x.lua"); code != exitUsage || !strings.Contains(errOut, "is not in your job directory") {
		t.Errorf("berth edit of a file outside her directory: exit %d\n%s", code, errOut)
	}
	// A new file the editor leaves empty is not written.
	writeReadable(t, filepath.Join(src, "empty.lua"), "")
	if out, errOut, code := a.run("", []string{"EDITOR=" + editor, "NEW=" + filepath.Join(src, "empty.lua")}, "edit", "fresh.lua"); code != exitOK || !strings.Contains(out, "nothing written") {
		t.Errorf("berth edit of a new file left empty: exit %d\n%s%s", code, out, errOut)
	}
	if _, err := os.Stat(filepath.Join(spool, alice, "fresh.lua")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a new file left empty was written: %v", err)
	}
	// A job that is not there: a new file is named as one.
	if _, errOut, code := a.run("", []string{"EDITOR=" + editor}, "edit", "nonexist"); code != exitFailed ||
		!strings.Contains(errOut, `no job named "nonexist"`) || !strings.Contains(errOut, "berth edit nonexist.lua") {
		t.Errorf("berth edit of no job: exit %d\n%s", code, errOut)
	}

	// Her reload fails for her own files' errors, not for an
	// administrator's she cannot fix (it lists them all the same).
	if err := os.WriteFile(filepath.Join(d.jobs, "broken.lua"), []byte(`job "x" { cmd = "true", cpu = 1 }`), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, errOut, code := a.run("", nil, "reload"); code != exitOK || !strings.Contains(out, "broken.lua") {
		t.Errorf("alice's reload with an administrator's file broken: exit %d\n%s%s", code, out, errOut)
	}
	if _, _, code := d.cli("reload"); code != exitFailed {
		t.Errorf("root's reload with a file broken: exit %d, want %d", code, exitFailed)
	}
	broken := filepath.Join(spool, alice, "mine.lua")
	if err := os.WriteFile(broken, []byte(`job "y" { cmd = "true", cpu = 1 }`), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(broken, int(a.cred.Uid), -1); err != nil {
		t.Fatal(err)
	}
	if out, errOut, code := a.run("", nil, "reload"); code != exitFailed || !strings.Contains(out, "mine.lua") {
		t.Errorf("alice's reload with her own file broken: exit %d\n%s%s", code, out, errOut)
	}
	// Root's, of a person's file alone broken, does not fail (systemctl
	// reload berth runs it: a person's draft must not fail it), and says
	// it all the same.
	if err := os.Remove(filepath.Join(d.jobs, "broken.lua")); err != nil {
		t.Fatal(err)
	}
	if out, errOut, code := d.cli("reload"); code != exitOK || !strings.Contains(out, "mine.lua") {
		t.Errorf("root's reload with a person's file broken: exit %d, want %d\n%s%s", code, exitOK, out, errOut)
	}
}

// TestPeopleWithoutJobsDir: a member of the daemon's group, on a daemon
// that gives people no job directories, is told so by berth submit and
// berth edit before anything is read, checked or written.
func TestPeopleWithoutJobsDir(t *testing.T) {
	t.Parallel()
	needPeople(t)
	d := newTestDaemon(t, nil)
	d.start(daemonOptions{args: []string{"--cpus", "2", "--user-jobs", "", "--group", peopleGroup}})
	bin := d.reachable(t)
	a := newPerson(t, d, bin, alice)
	file := filepath.Join(d.dir, "train.lua")
	writeReadable(t, file, `job "train" { cmd = "true" }`)
	want := alice + " has no job directory on this daemon"
	for _, args := range [][]string{{"submit", file}, {"edit", "train.lua"}} {
		if _, errOut, code := a.run("", []string{"EDITOR=/bin/false"}, args...); code != exitFailed || !strings.Contains(errOut, want) {
			t.Errorf("berth %s: exit %d\n%s", args[0], code, errOut)
		}
	}
}

// checkDirs makes an administrators' jobs directory and a spool with
// alice's job directory in it, for berth check.
func checkDirs(t *testing.T) (admin, spool, mine string) {
	t.Helper()
	dir := t.TempDir()
	admin, spool = filepath.Join(dir, "jobs.d"), filepath.Join(dir, "spool")
	mine = filepath.Join(spool, alice)
	for _, p := range []string{admin, mine} {
		if err := os.MkdirAll(p, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return admin, spool, mine
}

// TestCheckPersonsFiles: berth check reads a file in a person's job
// directory as the daemon does: their job (OWNER/NAME), their rules (no
// user), their quota as the administrators' files checked with it
// declare it.
func TestCheckPersonsFiles(t *testing.T) {
	needPeople(t)
	admin, spool, mine := checkDirs(t)
	u, err := user.Lookup(alice)
	if err != nil {
		t.Fatal(err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	if err := os.WriteFile(filepath.Join(admin, "quotas.lua"), []byte(`quota "`+alice+`" { gpus = 1 }`), 0o644); err != nil {
		t.Fatal(err)
	}
	for name, src := range map[string]string{
		"train.lua": `job "train" { cmd = "true", gpus = 2 }`,
		"evil.lua":  `job "evil" { cmd = "true", user = "root" }`,
		"fine.lua":  `job "fine" { cmd = "true", gpus = 1 }`,
	} {
		path := filepath.Join(mine, name)
		if err := os.WriteFile(path, []byte(src), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(path, uid, -1); err != nil { // hers, as the daemon allows there
			t.Fatal(err)
		}
	}
	if err := os.Chown(mine, uid, -1); err != nil {
		t.Fatal(err)
	}
	out, _, code := berth(t, map[string]string{"BERTH_USER_JOBS": spool}, "check", "--gpus", "2", "--json", admin, mine)
	if code != exitFailed {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	var report checkJSON
	if err := json.Unmarshal([]byte(out), &report); err != nil {
		t.Fatalf("%v:\n%s", err, out)
	}
	var names, says []string
	for _, j := range report.Jobs {
		names = append(names, j.Name)
	}
	for _, e := range report.Errors {
		says = append(says, e.Message)
	}
	all := strings.Join(says, "\n")
	if !slices.Contains(names, alice+"/fine") || !strings.Contains(all, alice+"'s quota allows 1") || !strings.Contains(all, `"user"`) || len(says) != 2 {
		t.Errorf("jobs %q, problems:\n%s\nwant %s/fine loaded, train over her quota, evil refused for user", names, all, alice)
	}

	// Where the people's directories are not looked for, hers is not
	// taken for an administrators' to chown from her: the check says how
	// to check it as hers.
	out, _, code = berth(t, map[string]string{"BERTH_USER_JOBS": filepath.Join(t.TempDir(), "elsewhere")}, "check", "--gpus", "2", admin, mine)
	if code != exitFailed || !strings.Contains(out, msgPersonDirElsewhere(mine, alice)) || strings.Contains(out, "chown") {
		t.Errorf("her directory checked where the people's are not looked for: exit %d\n%s", code, out)
	}
}

// TestCheckPersonJobsOfTheDaemon: berth check beside a daemon holds a
// person's files to the daemon's --person-jobs, not to the default.
func TestCheckPersonJobsOfTheDaemon(t *testing.T) {
	t.Parallel()
	needPeople(t)
	d := newTestDaemon(t, nil)
	spool := filepath.Join(d.dir, "spool")
	d.start(daemonOptions{args: []string{"--cpus", "2", "--user-jobs", spool, "--group", peopleGroup, "--person-jobs", "3"}})
	u, err := user.Lookup(alice)
	if err != nil {
		t.Fatal(err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	path := filepath.Join(spool, alice, "many.lua")
	if err := os.WriteFile(path, []byte(`job "many" { cmd = "true", array = 5 }`), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(path, uid, -1); err != nil {
		t.Fatal(err)
	}
	out, errOut, code := berth(t, map[string]string{"BERTH_SOCKET": d.socket, "BERTH_USER_JOBS": spool}, "check", path)
	if code != exitFailed || !strings.Contains(out, "3") || !strings.HasSuffix(out, "1 error\n") {
		t.Errorf("check beside a daemon of --person-jobs 3: exit %d\n%s%s", code, out, errOut)
	}
	d.stop()
	if out, errOut, code := berth(t, map[string]string{"BERTH_SOCKET": d.socket, "BERTH_USER_JOBS": spool}, "check", path); code != exitOK {
		t.Errorf("check without a daemon, of the default bound: exit %d\n%s%s", code, out, errOut)
	}
}

// TestCheckBesideThePeoplesDaemon: berth check beside a daemon reads its
// people's directories where it has them (BERTH_USER_JOBS unset), and a
// person's file named outright as that person's, as berth submit would
// take it: a file the daemon refuses is not passed.
func TestCheckBesideThePeoplesDaemon(t *testing.T) {
	t.Parallel()
	needPeople(t)
	d := newTestDaemon(t, map[string]string{"quotas.lua": `quota "` + alice + `" { cpus = 1 }`})
	spool := filepath.Join(d.dir, "spool")
	d.start(daemonOptions{args: []string{"--cpus", "2", "--user-jobs", spool, "--group", peopleGroup, "--admin-group", peopleAdmin}})
	bin := d.reachable(t)
	a := newPerson(t, d, bin, alice)
	src := filepath.Join(d.dir, "src")
	if err := os.Mkdir(src, 0o755); err != nil {
		t.Fatal(err)
	}
	evil := filepath.Join(src, "evil.lua")
	writeReadable(t, evil, `job "evil" { cmd = "true", user = "root" }`)
	if err := os.Chown(evil, int(a.cred.Uid), -1); err != nil {
		t.Fatal(err)
	}
	if out, errOut, code := a.run("", nil, "check", evil); code != exitFailed || !strings.Contains(out, `"user"`) {
		t.Errorf("alice's check of a file that sets user: exit %d\n%s%s", code, out, errOut)
	}
	// One she does not own (a colleague's, an example copied as root)
	// would be hers once submitted: checked so (trial AQ: it passed as an
	// administrators' file, and submit refused it).
	copied := filepath.Join(src, "copied.lua")
	writeReadable(t, copied, `job "copied" { cmd = "true", user = "root" }`)
	if out, errOut, code := a.run("", nil, "check", copied); code != exitFailed || !strings.Contains(out, `"user"`) {
		t.Errorf("alice's check of root's file that sets user: exit %d\n%s%s", code, out, errOut)
	}
	// The administrators' files are theirs, whoever checks them.
	for _, p := range []string{d.jobs, filepath.Join(d.jobs, "quotas.lua")} {
		if err := os.Chmod(p, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if out, errOut, code := a.run("", nil, "check", d.jobs); code != exitOK {
		t.Errorf("alice's check of the administrators' directory: exit %d\n%s%s", code, out, errOut)
	}
	// A file of hers names the flavors of the daemon's own jobs
	// directory, wherever its --jobs put it.
	d.write("flavors.lua", `flavor "small" { cpus = 1 }`)
	if err := os.Chmod(filepath.Join(d.jobs, "flavors.lua"), 0o644); err != nil {
		t.Fatal(err)
	}
	d.cli("reload")
	small := filepath.Join(src, "small.lua")
	writeReadable(t, small, `job "small" { cmd = "true", flavor = "small" }`)
	if err := os.Chown(small, int(a.cred.Uid), -1); err != nil {
		t.Fatal(err)
	}
	if out, errOut, code := a.run("", nil, "check", small); code != exitOK {
		t.Errorf("alice's check of a file naming the daemon's flavor: exit %d\n%s%s", code, out, errOut)
	}
	// Her quota in force holds, as berth submit would find (the check
	// passed a file the submit refused).
	wide := filepath.Join(src, "wide.lua")
	writeReadable(t, wide, `job "wide" { cmd = "true", cpus = 2 }`)
	if err := os.Chown(wide, int(a.cred.Uid), -1); err != nil {
		t.Fatal(err)
	}
	if out, errOut, code := a.run("", nil, "check", wide); code != exitFailed || !strings.HasPrefix(out, wide+":1: ") || !strings.Contains(out, alice+"'s quota allows 1") {
		t.Errorf("alice's check of a file past her quota: exit %d\n%s%s", code, out, errOut)
	}
	// With --json too (trial AR: no quota error), its jobs hers (a file
	// with errors declares none).
	for path, jobs := range map[string]int{wide: 1, copied: 0} {
		out, errOut, code := a.run("", nil, "check", "--json", path)
		var report checkJSON
		if err := json.Unmarshal([]byte(out), &report); err != nil || code != exitFailed || len(report.Errors) != 1 || report.Errors[0].File != path ||
			len(report.Jobs) != jobs || jobs > 0 && !strings.HasPrefix(report.Jobs[0].Name, alice+"/") {
			t.Errorf("alice's check --json of %s: exit %d, %v\n%s%s", path, code, err, out, errOut)
		}
	}
	// Every mistake of a file in one check, the daemon's as berth check's:
	// a job past her quota beside one with a mistake of its own, and one
	// after that one (declared, if with a mistake) said once.
	mixed := filepath.Join(src, "mixed.lua")
	writeReadable(t, mixed, "job \"typo\" { cmd = \"true\", cpus = 1, gpu = 1 }\njob \"wider\" { cmd = \"true\", cpus = 2 }\njob \"next\" { cmd = \"true\", cpus = 1, after = \"typo\" }\n")
	if err := os.Chown(mixed, int(a.cred.Uid), -1); err != nil {
		t.Fatal(err)
	}
	if out, errOut, code := a.run("", nil, "check", mixed); code != exitFailed || !strings.Contains(out, mixed+":1: ") ||
		!strings.Contains(out, mixed+":2: ") || !strings.Contains(out, alice+"'s quota allows 1") || strings.Contains(out, mixed+":3: ") {
		t.Errorf("alice's check of a file with two mistakes: exit %d\n%s%s", code, out, errOut)
	}
	// Root, with no BERTH_USER_JOBS: her directory is hers, as the
	// daemon says, and her quota holds.
	mine := filepath.Join(spool, alice)
	big := filepath.Join(mine, "big.lua")
	if err := os.WriteFile(big, []byte(`job "big" { cmd = "true", cpus = 2 }`), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(big, int(a.cred.Uid), -1); err != nil {
		t.Fatal(err)
	}
	out, errOut, code := berth(t, map[string]string{"BERTH_SOCKET": d.socket, "BERTH_JOBS": d.jobs}, "check", d.jobs, mine)
	if code != exitFailed || !strings.Contains(out, alice+"'s quota allows 1") || strings.Contains(out, "chown") {
		t.Errorf("root's check of her directory beside the daemon: exit %d\n%s%s", code, out, errOut)
	}
	// Hers, as she checks it, named or as her default: her quota holds
	// there too (trial AW: only its files named one by one were held to
	// it).
	for _, args := range [][]string{{"check", mine}, {"check"}} {
		out, errOut, code := a.run("", nil, args...)
		if code != exitFailed || !strings.Contains(out, alice+"'s quota allows 1") {
			t.Errorf("alice's %v of her directory: exit %d\n%s%s", args, code, out, errOut)
		}
	}
	// A misspelt quota is suggested one of the daemon's people.
	typo := filepath.Join(t.TempDir(), "typo.lua")
	if err := os.WriteFile(typo, []byte(`quota "btcalcie" { cpus = 1 }`), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, errOut, code := berth(t, map[string]string{"BERTH_SOCKET": d.socket}, "check", typo); code != exitFailed || !strings.Contains(out, `(did you mean "`+alice+`"?)`) {
		t.Errorf("root's check of a misspelt quota: exit %d\n%s%s", code, out, errOut)
	}
}

// TestCheckPersonsDirBorrowsFlavors: a person's directory checked as a
// whole names the administrators' flavors, as its files do one by one:
// people declare none.
func TestCheckPersonsDirBorrowsFlavors(t *testing.T) {
	needPeople(t)
	admin, spool, mine := checkDirs(t)
	uid := 0
	if u, err := user.Lookup(alice); err == nil {
		uid, _ = strconv.Atoi(u.Uid)
	}
	if err := os.WriteFile(filepath.Join(admin, "flavors.lua"), []byte(`flavor "card" { cpus = 1, gpus = 1 }`), 0o644); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(mine, "train.lua")
	if err := os.WriteFile(path, []byte(`job "train" { cmd = "true", flavor = "card" }`), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{path, mine} {
		if err := os.Chown(p, uid, -1); err != nil {
			t.Fatal(err)
		}
	}
	for _, target := range []string{mine, path} {
		out, errOut, code := berth(t, map[string]string{"BERTH_USER_JOBS": spool, "BERTH_JOBS": admin}, "check", "--gpus", "2", target)
		if code != exitOK || !strings.Contains(out, "1 file, 1 job") {
			t.Errorf("check %s: exit %d\n%s%s", target, code, out, errOut)
		}
	}
}

// TestSocketGroupMadeLater: a daemon whose --group does not exist says so
// as it starts, and gives its socket to the group once it is made, at the
// next reload; until then, a client refused says how to make it.
func TestSocketGroupMadeLater(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("needs root to make a group")
	}
	const later = "btclater"
	d := newTestDaemon(t, nil)
	d.start(daemonOptions{args: []string{"--cpus", "2", "--group", later, "--admin-group", later + "adm"}})
	d.waitLog("the daemon's group does not exist")
	d.waitLog("the admin group does not exist") // its refusals name it (trial AQ)
	if !strings.Contains(d.logs.String(), "[WARN]") {
		t.Error("a --group that does not exist is not a warning")
	}
	gidOf := func() uint32 {
		var st unix.Stat_t
		if err := unix.Stat(d.socket, &st); err != nil {
			t.Fatal(err)
		}
		return st.Gid
	}
	if g := gidOf(); g != 0 {
		t.Fatalf("the socket's group is %d before the group exists", g)
	}
	remove, err := testkit.MakeAccounts([]string{later}, nil)
	if err != nil {
		t.Skipf("cannot make the group: %v", err)
	}
	defer remove()
	g, err := user.LookupGroup(later)
	if err != nil {
		t.Fatal(err)
	}
	if _, errOut, code := d.cli("reload"); code != exitOK {
		t.Fatalf("reload: exit %d %s", code, errOut)
	}
	if got := strconv.FormatUint(uint64(gidOf()), 10); got != g.Gid {
		t.Errorf("after the group was made and a reload, the socket's group is %s, want %s", got, g.Gid)
	}
	d.stop()
}

// TestSubmitOthersErrors: the errors a reload after a submit finds in
// the administrators' files are said to be theirs, not a bare count a
// person reads as their own file's.
func TestSubmitOthersErrors(t *testing.T) {
	t.Parallel()
	needPeople(t)
	d := newTestDaemon(t, nil)
	d.write("broken.lua", `job "broken" { cmd = "true", cpus = "one" }`)
	spool := filepath.Join(d.dir, "spool")
	d.start(daemonOptions{args: []string{"--cpus", "2", "--user-jobs", spool, "--group", peopleGroup}})
	bin := d.reachable(t)
	a := newPerson(t, d, bin, alice)
	src := filepath.Join(d.dir, "mine.lua")
	writeReadable(t, src, `job "mine" { cmd = "true", enabled = false }`)
	out, errOut, code := a.run("", nil, "submit", src)
	if code != exitOK || !strings.Contains(out, ", 1 error\n") || !strings.Contains(out, msgOthersErrors(1)) {
		t.Errorf("alice's submit: exit %d\n%s%s", code, out, errOut)
	}
}

// TestSubmitDoneAgain: a batch job whose file comes back, submitted again,
// stays done, and berth submit says so with what runs it again ("added"
// alone read as if it would run).
func TestSubmitDoneAgain(t *testing.T) {
	t.Parallel()
	needPeople(t)
	d := newTestDaemon(t, nil)
	spool := filepath.Join(d.dir, "spool")
	d.start(daemonOptions{args: []string{"--cpus", "2", "--user-jobs", spool, "--group", peopleGroup}})
	bin := d.reachable(t)
	a := newPerson(t, d, bin, alice)
	src := filepath.Join(d.dir, "once.lua")
	writeReadable(t, src, `job "once" { cmd = "true" }`)
	if out, errOut, code := a.run("", nil, "submit", src); code != exitOK || strings.Contains(out, "done already") {
		t.Fatalf("the first submit: exit %d\n%s%s", code, out, errOut)
	}
	d.waitState(alice+"/once", "done")
	if err := os.Remove(filepath.Join(spool, alice, "once.lua")); err != nil {
		t.Fatal(err)
	}
	d.cli("reload")
	d.waitGone(alice + "/once")
	out, errOut, code := a.run("", nil, "submit", src)
	if code != exitOK || !strings.Contains(out, msgAddedDone(alice+"/once")) {
		t.Errorf("the second submit: exit %d\n%s%s", code, out, errOut)
	}
}

// TestPersonJobsLoweredAcrossARestart: a daemon started again with a
// lower --person-jobs loads the files that were in force, whole, and
// refuses what is new or changed past the bound (trial AS N2: it left a
// person's file out, and under units would have stopped its jobs' runs).
func TestPersonJobsLoweredAcrossARestart(t *testing.T) {
	t.Parallel()
	sized := func(n int) func(supervisor.JobStatus) bool {
		return func(j supervisor.JobStatus) bool {
			return j.Array != nil && j.Array.Size == n && j.Array.Counts["disabled"] == n
		}
	}
	needPeople(t)
	d := newTestDaemon(t, nil)
	spool := filepath.Join(d.dir, "spool")
	args := func(bound string) []string {
		return []string{"--cpus", "2", "--user-jobs", spool, "--group", peopleGroup, "--person-jobs", bound}
	}
	d.start(daemonOptions{args: args("10")})
	bin := d.reachable(t)
	a := newPerson(t, d, bin, alice)
	for name, src := range map[string]string{
		"a.lua": `job "long" { cmd = "sleep 600", cpus = 0 }
job "sweep" { cmd = "true", array = 5, enabled = false, cpus = 0 }`,
		"b.lua": `job "more" { cmd = "true", array = 3, enabled = false, cpus = 0 }`,
	} {
		path := filepath.Join(d.dir, name)
		writeReadable(t, path, src)
		if out, errOut, code := a.run("", nil, "submit", path); code != exitOK {
			t.Fatalf("submit %s: exit %d\n%s%s", name, code, out, errOut)
		}
	}
	d.waitState(alice+"/long", "running")
	d.waitJob(alice+"/more", "3 indices disabled", sized(3))
	d.stop()

	// Edited while no daemon ran: b.lua's new version is refused, and its
	// version in force stays.
	b := filepath.Join(spool, alice, "b.lua")
	if err := os.WriteFile(b, []byte(`job "more" { cmd = "true", array = 4, enabled = false, cpus = 0 }`), 0o600); err != nil {
		t.Fatal(err)
	}
	d.start(daemonOptions{args: args("4")})
	d.waitState(alice+"/long", "running")
	d.waitJob(alice+"/sweep", "5 indices disabled", sized(5))
	d.waitJob(alice+"/more", "3 indices disabled (its version in force)", sized(3))
	d.waitLog("declares more than one person's files may now (berth daemon --person-jobs): it stays loaded as it was")
	st := d.status()
	if !slices.ContainsFunc(st.Problems, func(p supervisor.Problem) bool {
		return p.Code == supervisor.ProblemTooManyJobs && p.File == b
	}) {
		t.Errorf("b.lua's edit: problems %+v, want it refused past the bound", st.Problems)
	}
	// A new file is refused, and says why.
	c := filepath.Join(d.dir, "c.lua")
	writeReadable(t, c, `job "new" { cmd = "true", cpus = 0 }`)
	if out, errOut, code := a.run("", nil, "submit", c); code != exitFailed || !strings.Contains(out+errOut, "may declare 4 in all") {
		t.Errorf("a new file past the bound: exit %d\n%s%s", code, out, errOut)
	}
	d.stop() // and with it long's run, which is alice's: her account goes at the end
}
