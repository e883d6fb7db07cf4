package supervisor

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/berthd/berth/supervisor/ctlsock"
	"github.com/berthd/berth/supervisor/testkit"
)

// The people tests make real accounts (root only): the group whose
// members may declare jobs, an admin group, and people in and out of them.
// Their names are this package's own, so that another package's tests
// making theirs at the same time never meet them; TestMain removes what
// was made.
const (
	testGroup      = "btsberth"
	testAdminGroup = "btsadmin"
	testAlice      = "btsalice" // in testGroup
	testBob        = "btsbob"   // in testGroup
	testCarol      = "btscarol" // in no group
	testDave       = "btsdave"  // in testGroup and testAdminGroup
)

var accounts struct {
	sync.Mutex
	done   bool
	err    error
	remove func()
}

// needAccounts makes the test accounts once, or skips the test where they
// cannot be made.
func needAccounts(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to make accounts")
	}
	accounts.Lock()
	defer accounts.Unlock()
	if !accounts.done {
		accounts.done = true
		accounts.remove, accounts.err = testkit.MakeAccounts([]string{testGroup, testAdminGroup}, []testkit.Account{
			{Name: testAlice, Groups: []string{testGroup}}, {Name: testBob, Groups: []string{testGroup}},
			{Name: testCarol}, {Name: testDave, Groups: []string{testGroup, testAdminGroup}},
		})
	}
	if accounts.err != nil {
		t.Skipf("cannot make test accounts: %v", accounts.err)
	}
}

// removeAccounts removes what needAccounts made; TestMain calls it.
func removeAccounts() {
	if accounts.remove != nil {
		accounts.remove()
	}
}

func uidOf(t *testing.T, name string) int {
	t.Helper()
	u, err := user.Lookup(name)
	if err != nil {
		t.Fatal(err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	return uid
}

// peopleDaemon runs a daemon whose people are testGroup's members, their
// job directories under a spool of its own; out is a directory every
// job may write to.
func peopleDaemon(t *testing.T, admin string, tune func(cfg *Config)) (d *Daemon, spool, out string) {
	t.Helper()
	needAccounts(t)
	// Below /tmp, searchable by all: the jobs run as the people.
	base, err := os.MkdirTemp("", "berth-people-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	out = filepath.Join(base, "out")
	if err := os.Mkdir(out, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(base, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(out, 0o777); err != nil {
		t.Fatal(err)
	}
	spool = filepath.Join(base, "spool")
	d, _ = runDaemon(t, admin, func(cfg *Config) {
		cfg.UserJobs, cfg.Group, cfg.AdminGroup = spool, testGroup, testAdminGroup
		if tune != nil {
			tune(cfg)
		}
	})
	// Made, then given away: the directory is there a moment before it is
	// theirs.
	theirs := func(person string) bool {
		st, err := os.Stat(filepath.Join(spool, person))
		return err == nil && int(st.Sys().(*syscall.Stat_t).Uid) == uidOf(t, person) && st.Mode().Perm() == 0o700
	}
	testkit.WaitFor(t, 20*time.Second, "the people's job directories made and theirs", func() bool {
		return theirs(testAlice) && theirs(testBob)
	})
	return d, spool, out
}

// writeAs writes a job file into a person's directory, theirs.
func writeAs(t *testing.T, spool, person, name, src string) string {
	t.Helper()
	path := filepath.Join(spool, person, name)
	if err := writeFile(path, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	uid := uidOf(t, person)
	if err := os.Chown(path, uid, -1); err != nil {
		t.Fatal(err)
	}
	return path
}

func reload(t *testing.T, d *Daemon) ReloadResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := d.Reload(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// as calls the daemon's API as the user name would over the socket.
func as(t *testing.T, d *Daemon, name, method, path string) (int, string) {
	t.Helper()
	return asWith(t, d, name, method, path, "")
}

// asWith is as, with a request body.
func asWith(t *testing.T, d *Daemon, name, method, path, body string) (int, string) {
	t.Helper()
	u, err := user.Lookup(name)
	if err != nil {
		t.Fatal(err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	// The caller's process had none of the test groups as it connected.
	cred := ctlsock.Peer{Ucred: unix.Ucred{Uid: uint32(uid), Gid: uint32(gid), Pid: int32(os.Getpid())}, GroupsKnown: true}
	return asPeer(d, cred, method, path, body)
}

// asPeer makes a request as the peer of a connection p.
func asPeer(d *Daemon, p ctlsock.Peer, method, path, body string) (int, string) {
	req := httptest.NewRequest(method, "http://berth"+APIVersion+path, strings.NewReader(body))
	req = req.WithContext(context.WithValue(req.Context(), peerKey{}, p))
	rec := httptest.NewRecorder()
	d.api().ServeHTTP(rec, req)
	return rec.Code, rec.Body.String()
}

// TestPeopleRightsAreTheConnections: a caller's rights are those of its
// connection as the kernel recorded it, never of the process that has
// its pid now (trial AL: bob's connection, its process gone, stopped
// alice's job and read its output once a process of an administrator's
// took the pid, whose groups the daemon read from /proc).
func TestPeopleRightsAreTheConnections(t *testing.T) {
	t.Parallel()
	d, spool, _ := peopleDaemon(t, "", nil)
	writeAs(t, spool, testAlice, "jobs.lua", `job "train" { cmd = {"sh", "-c", "echo hello from alice; exec sleep 600"}, env = { HF_TOKEN = "alice-secret" } }`)
	reload(t, d)
	alices := testAlice + "/train"
	waitJob(t, d, alices, "running", func(js JobStatus) bool { return js.State == "running" })

	// A process of dave's, of the admin group, that has the pid bob's
	// connection was made from.
	admins, err := user.LookupGroup(testAdminGroup)
	if err != nil {
		t.Fatal(err)
	}
	adminGID, _ := strconv.Atoi(admins.Gid)
	daves := exec.Command("/bin/sleep", "600")
	daves.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uidOf(t, testDave)), Gid: uint32(adminGID), Groups: []uint32{uint32(adminGID)}}}
	if err := daves.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		daves.Process.Kill()
		daves.Wait()
	})
	bob, _ := user.Lookup(testBob)
	bobGID, _ := strconv.Atoi(bob.Gid)
	peer := ctlsock.Peer{Ucred: unix.Ucred{Uid: uint32(uidOf(t, testBob)), Gid: uint32(bobGID), Pid: int32(daves.Process.Pid)}, GroupsKnown: true}
	for _, call := range []struct{ method, path string }{
		{"POST", jobPath(alices) + "/stop"},
		{"GET", jobPath(alices) + "/logs"},
	} {
		if code, body := asPeer(d, peer, call.method, call.path, ""); code != http.StatusForbidden {
			t.Errorf("bob %s %s from a pid an administrator's process has now: %d %s, want 403", call.method, call.path, code, body)
		}
	}
	if code, body := asPeer(d, peer, "GET", jobPath(alices), ""); code != 200 || strings.Contains(body, "alice-secret") {
		t.Errorf("bob's show of alice's job from that pid: %d, its environment shown: %v", code, strings.Contains(body, "alice-secret"))
	}
	// One whose process had the daemon's group as it connected (newgrp,
	// sg) is let in, though the account of carol lists it not.
	people, err := user.LookupGroup(testGroup)
	if err != nil {
		t.Fatal(err)
	}
	peopleGID, _ := strconv.Atoi(people.Gid)
	carol := ctlsock.Peer{Ucred: unix.Ucred{Uid: uint32(uidOf(t, testCarol)), Gid: 65534, Pid: int32(os.Getpid())}, GroupsKnown: true}
	if code, _ := asPeer(d, carol, "GET", "/status", ""); code != http.StatusForbidden {
		t.Errorf("carol's status, of no group: %d, want 403", code)
	}
	carol.Groups = []uint32{uint32(peopleGID)}
	if code, body := asPeer(d, carol, "GET", "/status", ""); code != http.StatusOK {
		t.Errorf("carol's status from a process of the group: %d %s", code, body)
	}
	// A connection made by a process in the admin group has its rights,
	// its account's groups as listed aside.
	peer.Groups = []uint32{uint32(adminGID)}
	if code, body := asPeer(d, peer, "GET", jobPath(alices), ""); code != 200 || !strings.Contains(body, "alice-secret") {
		t.Errorf("the show of alice's job by a connection of the admin group: %d, its environment shown: %v", code, strings.Contains(body, "alice-secret"))
	}
}

func jobPath(name string) string { return "/jobs/" + url.PathEscape(name) }

// TestPeopleJobs: the members of the group get a job directory each,
// theirs and 0700; a file there declares that person's jobs, named
// OWNER/NAME and run as them, and may not say who else to run as; someone
// who leaves the group has their jobs removed.
func TestPeopleJobs(t *testing.T) {
	d, spool, out := peopleDaemon(t, "", nil)
	for _, p := range []string{testAlice, testBob} {
		st, err := os.Stat(filepath.Join(spool, p))
		if err != nil {
			t.Fatal(err)
		}
		if sys := st.Sys().(*syscall.Stat_t); int(sys.Uid) != uidOf(t, p) || st.Mode().Perm() != 0o700 {
			t.Errorf("%s's directory is uid %d mode %v, want theirs and 0700", p, sys.Uid, st.Mode().Perm())
		}
	}
	if _, err := os.Stat(filepath.Join(spool, testCarol)); err == nil {
		t.Errorf("%s, in no group, got a job directory", testCarol)
	}

	job := func(person string) string {
		return fmt.Sprintf(`job "train" { cmd = {"sh", "-c", "id -u > %[1]s/%[2]s; echo $HOME >> %[1]s/%[2]s; id -Gn >> %[1]s/%[2]s; echo hello from %[2]s; exec sleep 600"} }`, out, person)
	}
	writeAs(t, spool, testAlice, "jobs.lua", job(testAlice))
	writeAs(t, spool, testBob, "jobs.lua", job(testBob))
	evil := writeAs(t, spool, testAlice, "evil.lua", `job "evil" { cmd = "true", user = "root" }`)
	// (The watcher may have seen them first: what this reload says is
	// the state, not what changed.)
	res := reload(t, d)
	var refused, about string
	for _, p := range res.Problems {
		if p.File == evil {
			refused, about = p.Text, p.Job
		}
	}
	if !strings.Contains(refused, "user") || !strings.Contains(refused, testAlice) {
		t.Errorf("a person's file that sets user: problem %q, want it refused saying why", refused)
	}
	// Its job is named as her jobs are, for a script to match.
	if about != testAlice+"/evil" {
		t.Errorf("the problem is about job %q, want %s/evil", about, testAlice)
	}
	if _, ok := d.jobStatus(testAlice + "/evil"); ok {
		t.Error("the job that sets user was declared")
	}

	for _, p := range []string{testAlice, testBob} {
		js := waitJob(t, d, p+"/train", "running", func(js JobStatus) bool { return js.State == "running" })
		if js.Owner != p {
			t.Errorf("%s/train has owner %q", p, js.Owner)
		}
		var said []string
		testkit.WaitFor(t, 20*time.Second, p+"'s job wrote who it is", func() bool {
			b, _ := os.ReadFile(filepath.Join(out, p))
			said = strings.Split(strings.TrimSpace(string(b)), "\n")
			return len(said) == 3
		})
		u, _ := user.Lookup(p)
		if said[0] != u.Uid || said[1] != u.HomeDir || !slices.Contains(strings.Fields(said[2]), testGroup) {
			t.Errorf("%s's job ran as uid %s, HOME %s, groups %s; want uid %s, HOME %s, in %s", p, said[0], said[1], said[2], u.Uid, u.HomeDir, testGroup)
		}
	}

	// A person's directory opened to everyone is refused, saying so; what
	// was in force from it stays, and the fix takes the refusal away.
	aliceDir := filepath.Join(spool, testAlice)
	if err := os.Chmod(aliceDir, 0o777); err != nil {
		t.Fatal(err)
	}
	res = reload(t, d)
	refused = ""
	for _, p := range res.Problems {
		if p.File == aliceDir && p.Code == ProblemDirRefused {
			refused = p.Text
		}
	}
	if refused == "" {
		t.Errorf("alice's directory open to all: problems %+v, want it refused", res.Problems)
	}
	if js, _ := d.jobStatus(testAlice + "/train"); js.State != "running" {
		t.Errorf("alice/train is %s while her directory is refused, want still running", js.State)
	}
	if err := os.Chmod(aliceDir, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, p := range reload(t, d).Problems {
		if p.File == aliceDir {
			t.Errorf("after the fix: %s", p.Text)
		}
	}

	// Someone who leaves the group has their jobs removed at the next
	// reload.
	if out, err := exec.Command("gpasswd", "-d", testBob, testGroup).CombinedOutput(); err != nil {
		t.Fatalf("gpasswd: %v: %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("gpasswd", "-a", testBob, testGroup).Run() })
	reload(t, d)
	testkit.WaitFor(t, 20*time.Second, testBob+"/train gone", func() bool {
		_, ok := d.jobStatus(testBob + "/train")
		return !ok
	})
	if r := waitRuns(t, d, testBob+"/train", 1); r.Cause != "its owner left the group "+testGroup {
		t.Errorf("the run of bob's job stopped as he left: cause %q", r.Cause)
	}

	// Someone who joins has a job directory by the time they first ask
	// where it is (berth submit does), with no reload in between.
	if out, err := exec.Command("gpasswd", "-a", testCarol, testGroup).CombinedOutput(); err != nil {
		t.Fatalf("gpasswd: %v: %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("gpasswd", "-d", testCarol, testGroup).Run() })
	code, body := as(t, d, testCarol, "GET", "/me")
	var me Me
	if err := json.Unmarshal([]byte(body), &me); code != http.StatusOK || err != nil || me.JobsDir != filepath.Join(spool, testCarol) {
		t.Fatalf("GET /me by someone who just joined: %d %s", code, body)
	}
	if st, err := os.Stat(me.JobsDir); err != nil || st.Sys().(*syscall.Stat_t).Uid != uint32(uidOf(t, testCarol)) {
		t.Errorf("the newcomer's directory: %v %v", st, err)
	}
}

// TestPeopleRights: everyone sees every job; only its owner, root and the
// admin group may stop it, see its environment or read its output; an
// owner calls their job by its short name.
func TestPeopleRights(t *testing.T) {
	t.Parallel()
	d, spool, _ := peopleDaemon(t, `job "shared" { cmd = "sleep 600", env = { TOKEN = "admin-secret" } }`, nil)
	writeAs(t, spool, testAlice, "jobs.lua", `job "train" { cmd = {"sh", "-c", "echo hello from alice; exec sleep 600"}, env = { HF_TOKEN = "alice-secret" } }`)
	reload(t, d)
	alices := testAlice + "/train"
	waitJob(t, d, alices, "running", func(js JobStatus) bool { return js.State == "running" })
	waitJob(t, d, "shared", "running", func(js JobStatus) bool { return js.State == "running" })

	// Bob sees it, but not its environment.
	code, body := as(t, d, testBob, "GET", jobPath(alices))
	var jd JobDetail
	if code != 200 || json.Unmarshal([]byte(body), &jd) != nil {
		t.Fatalf("bob's show: %d %s", code, body)
	}
	if strings.Contains(body, "alice-secret") || !strings.Contains(body, `"env":{}`) || len(jd.NextEnv) != 0 || !strings.Contains(jd.EnvHidden, testAlice) {
		t.Errorf("bob's show of alice's job: env %q, next env %q, env_hidden %q; want the environment hidden, saying whose it is", jd.Definition.Env, jd.NextEnv, jd.EnvHidden)
	}
	// Nor may he stop it, or read its output.
	want := alices + " belongs to " + testAlice + "; only " + testAlice + " or a member of " + testAdminGroup + " can stop it"
	for _, call := range []struct{ method, path, want string }{
		{"POST", jobPath(alices) + "/stop", want},
		{"POST", jobPath(alices) + "/restart", strings.Replace(want, "stop it", "restart it", 1)},
		{"GET", jobPath(alices) + "/logs", strings.Replace(want, "stop it", "read its output", 1)},
		{"POST", jobPath("shared") + "/stop", "shared is an administrators' job; only root or a member of " + testAdminGroup + " can stop it"},
	} {
		code, body := as(t, d, testBob, call.method, call.path)
		var e APIError
		_ = json.Unmarshal([]byte(body), &e)
		if code != http.StatusForbidden || e.Code != CodeNotPermitted || !strings.HasPrefix(e.Error, call.want) {
			t.Errorf("bob %s %s: %d %q, want 403 %q", call.method, call.path, code, e.Error, call.want)
		}
	}
	if code, body := as(t, d, testBob, "GET", jobPath("shared")); code != 200 || strings.Contains(body, "admin-secret") {
		t.Errorf("bob's show of an administrators' job: %d, its environment shown: %v", code, strings.Contains(body, "admin-secret"))
	}

	// Alice calls it train, sees its environment and reads its output.
	code, body = as(t, d, testAlice, "GET", jobPath("train"))
	if code != 200 || !strings.Contains(body, "alice-secret") {
		t.Errorf("alice's show of train: %d, env shown %v", code, strings.Contains(body, "alice-secret"))
	}
	testkit.WaitFor(t, 20*time.Second, "alice reads her job's output", func() bool {
		code, body := as(t, d, testAlice, "GET", jobPath("train")+"/logs")
		return code == 200 && strings.Contains(body, "hello from alice")
	})

	// Dave, of the admin group, sees its definition and environment, as
	// the one who may act on it, though alice's directory is hers alone.
	if code, body := as(t, d, testDave, "GET", jobPath(alices)); code != 200 || !strings.Contains(body, "alice-secret") {
		t.Errorf("dave's show of alice's job: %d, env shown %v\n%s", code, strings.Contains(body, "alice-secret"), body)
	}
	// Dave, of the admin group, may stop it; alice starts it again.
	if code, body := as(t, d, testDave, "POST", jobPath(alices)+"/stop"); code != 200 {
		t.Fatalf("dave's stop: %d %s", code, body)
	}
	waitJob(t, d, alices, "stopped", func(js JobStatus) bool { return js.State == "stopped" })
	if code, body := as(t, d, testAlice, "POST", jobPath("train")+"/start"); code != 200 {
		t.Fatalf("alice's start: %d %s", code, body)
	}
	waitJob(t, d, alices, "running again", func(js JobStatus) bool { return js.State == "running" })
	// Carol, in no group, is not let in at all.
	if code, _ := as(t, d, testCarol, "GET", "/status"); code != http.StatusForbidden {
		t.Errorf("carol's status: %d, want 403", code)
	}
}

// TestPeopleQuota: a job that would take its owner past their quota waits,
// saying so, though the machine has room; one larger than the quota is
// unplaceable, saying why; raising the quota lets the waiting one start,
// and the larger one wait its turn.
func TestPeopleQuota(t *testing.T) {
	t.Parallel()
	const admin = `quota "` + testAlice + `" { gpus = 1 }`
	d, spool, _ := peopleDaemon(t, admin, func(cfg *Config) {
		cfg.Machine.GPUs, cfg.Machine.GPUMem = []string{"0", "1"}, []int64{16 << 30, 24 << 30}
	})
	writeAs(t, spool, testAlice, "jobs.lua", `
job "a" { cmd = "sleep 600", gpus = 1 }
job "b" { cmd = "sleep 600", gpus = 1 }
job "big" { cmd = "sleep 600", gpus = 2 }
job "free" { cmd = "sleep 600", cpus = 0 }`)
	reload(t, d)
	name := func(n string) string { return testAlice + "/" + n }
	// Unaccounted, it holds no card and is shown none: it escapes
	// nothing of a quota of cards.
	waitJob(t, d, name("free"), "running", func(js JobStatus) bool { return js.State == "running" })
	waitJob(t, d, name("big"), "unplaceable", func(js JobStatus) bool { return js.State == "unplaceable" })
	big, _ := d.jobStatus(name("big"))
	if !strings.Contains(big.Why, testAlice+"'s quota allows 1") {
		t.Errorf("big's why: %q, want it to name the quota", big.Why)
	}
	var waiting JobStatus
	testkit.WaitFor(t, 20*time.Second, "one of a and b running, the other waiting", func() bool {
		a, _ := d.jobStatus(name("a"))
		b, _ := d.jobStatus(name("b"))
		if a.State == "waiting" {
			a, b = b, a
		}
		waiting = b
		return a.State == "running" && b.State == "waiting"
	})
	if q := waiting.Quota; q == nil || q.Held.GPUs != 1 || q.Quota.GPUs != 1 || q.CardBytes != 24<<30 {
		t.Errorf("%s waits with quota facts %+v, want 1 card held of 1, shares of 24G counting as one", waiting.Name, q)
	}
	if want := testAlice + " holds 1 of their 1 card (quota"; !strings.HasPrefix(waiting.Why, want) {
		t.Errorf("%s waits: %q, want %q…", waiting.Name, waiting.Why, want)
	}
	if free := d.Status().Machine; free.CPUsFree == 0 {
		t.Fatalf("the machine is full (%+v): the wait proves nothing", free)
	}

	adminFile := filepath.Join(d.cfg.JobsDir, "jobs.lua")
	if err := writeFile(adminFile, []byte(`quota "`+testAlice+`" { gpus = 2 }`), 0o600); err != nil {
		t.Fatal(err)
	}
	reload(t, d)
	waitJob(t, d, waiting.Name, "running once the quota allows it", func(js JobStatus) bool { return js.State == "running" })
	waitJob(t, d, name("big"), "waiting its turn", func(js JobStatus) bool { return js.State == "waiting" })

	// Lowered again: big is now larger than the quota, and says so; the
	// running ones go on.
	if err := writeFile(adminFile, []byte(`quota "`+testAlice+`" { gpus = 1, cpus = 2 }`), 0o600); err != nil {
		t.Fatal(err)
	}
	reload(t, d)
	waitJob(t, d, name("big"), "unplaceable under the lowered quota", func(js JobStatus) bool { return js.State == "unplaceable" })
	for _, n := range []string{"a", "b"} {
		if js, _ := d.jobStatus(name(n)); js.State != "running" {
			t.Errorf("%s is %s after the quota was lowered, want still running", n, js.State)
		}
	}

	// Lowered below what the running ones ask: they go on, each saying
	// that it will not run again, and a restart, which would stop it and
	// start nothing, is refused (trial AR: their why said nothing).
	if err := writeFile(adminFile, []byte(`quota "`+testAlice+`" { gpus = 0, cpus = 2 }`), 0o600); err != nil {
		t.Fatal(err)
	}
	reload(t, d)
	for _, n := range []string{"a", "b"} {
		js := waitJob(t, d, name(n), "running on, saying why", func(js JobStatus) bool { return js.Why != "" })
		if js.State != "running" || !strings.HasPrefix(js.Why, runsOn) || !strings.Contains(js.Why, testAlice+"'s quota allows 0") {
			t.Errorf("%s under a quota of no card: %s, why %q", n, js.State, js.Why)
		}
	}
	if code, body := as(t, d, testAlice, "POST", jobPath(name("a"))+"/restart"); code != http.StatusConflict || !strings.Contains(body, "quota") {
		t.Errorf("alice's restart of a run her quota would not place again: %d %s, want it refused", code, body)
	}
	// Her reload after it says her quota changed; bob's says nothing of
	// hers.
	if code, body := as(t, d, testAlice, "POST", "/reload"); code != http.StatusOK || !strings.Contains(body, `"quotas":["`+testAlice+`"]`) {
		t.Errorf("alice's reload after her quota changed: %d %s", code, body)
	}
	if code, body := as(t, d, testBob, "POST", "/reload"); code != http.StatusOK || !strings.Contains(body, `"quotas":[]`) {
		t.Errorf("bob's reload after alice's quota changed: %d %s, want nothing of hers", code, body)
	}
}

// TestPeopleNoAdminGroup: where the admin group does not exist, a refusal
// sends no one to it (trial AS).
func TestPeopleNoAdminGroup(t *testing.T) {
	t.Parallel()
	d, spool, _ := peopleDaemon(t, "", func(cfg *Config) { cfg.AdminGroup = "btsnosuchgroup" })
	writeAs(t, spool, testAlice, "jobs.lua", `job "train" { cmd = "sleep 600" }`)
	reload(t, d)
	alices := testAlice + "/train"
	waitJob(t, d, alices, "running", func(js JobStatus) bool { return js.State == "running" })
	code, body := as(t, d, testBob, "POST", jobPath(alices)+"/stop")
	if want := "only " + testAlice + " or root can stop it"; code != http.StatusForbidden || !strings.Contains(body, want) {
		t.Errorf("bob's stop of alice's job: %d %s, want %q", code, body, want)
	}
}

// TestPeopleFairShare: alice queues 20 one-card jobs on a 2-card box, then
// bob queues one: bob's starts at the next free card, before the 18 of
// alice's that queued before it.
func TestPeopleFairShare(t *testing.T) {
	t.Parallel()
	d, spool, _ := peopleDaemon(t, "", func(cfg *Config) { cfg.Machine.GPUs = []string{"0", "1"} })
	writeAs(t, spool, testAlice, "jobs.lua", `for i = 1, 20 do job("j" .. i) { cmd = "sleep 600", gpus = 1 } end`)
	reload(t, d)
	var held []string
	testkit.WaitFor(t, 20*time.Second, "two of alice's jobs running, 18 waiting", func() bool {
		s := d.Status()
		held = held[:0]
		if s.Counts["running"] != 2 || s.Counts["waiting"] != 18 {
			return false
		}
		for _, j := range s.Jobs {
			if j.State == "running" {
				held = append(held, j.Name)
			}
		}
		return true
	})
	writeAs(t, spool, testBob, "jobs.lua", `job "one" { cmd = "sleep 600", gpus = 1 }`)
	reload(t, d)
	bobs := testBob + "/one"
	waitJob(t, d, bobs, "waiting", func(js JobStatus) bool { return js.State == "waiting" })
	if code, body := as(t, d, testAlice, "POST", jobPath(held[0])+"/stop"); code != 200 {
		t.Fatalf("alice's stop: %d %s", code, body)
	}
	waitJob(t, d, bobs, "running at the next free card", func(js JobStatus) bool { return js.State == "running" })
	s := d.Status()
	if s.Counts["running"] != 2 || s.Counts["waiting"] != 18 {
		t.Errorf("running %d, waiting %d; want bob's and one of alice's running, 18 of hers waiting", s.Counts["running"], s.Counts["waiting"])
	}
	for _, c := range s.Machine.Cards {
		if c.Holder == bobs && c.Owner != testBob {
			t.Errorf("card %s is held by %s, owner %q", c.Name, c.Holder, c.Owner)
		}
	}
}

// TestPeopleEvalShare: one person's slow files hold back no one else's
// reload: the files of the person with fewer go first, and the slow
// person's beyond their share wait for the reloads that follow at once.
func TestPeopleEvalShare(t *testing.T) {
	d, spool, _ := peopleDaemon(t, "", func(cfg *Config) {
		cfg.Evaluator.Budget = 200 * time.Millisecond
		cfg.EvalShare = 100 * time.Millisecond // less than one looping file's budget
	})
	reload(t, d)
	for _, name := range []string{"a.lua", "b.lua", "c.lua"} {
		writeAs(t, spool, testAlice, name, "while true do end\n")
	}
	writeAs(t, spool, testBob, "z.lua", `job "one" { cmd = "sleep 600" }`)
	res := reload(t, d)
	if _, ok := d.jobStatus(testBob + "/one"); !ok {
		t.Errorf("bob's job is not declared after the reload: %q", res.Errors)
	}
	all := strings.Join(res.Errors, "\n")
	if !strings.Contains(all, "/a.lua:1: still running after its CPU time budget") ||
		!strings.Contains(all, "/c.lua: not evaluated yet: "+testAlice+"'s files took their share of this reload") {
		t.Errorf("the reload's errors: %q, want a.lua over its budget and c.lua not evaluated yet", res.Errors)
	}
	waitOverBudget(t, d, 3, "every file of alice's evaluated by the reloads that follow")
}

// waitOverBudget waits until n files are said to be past their CPU time
// budget.
func waitOverBudget(t *testing.T, d *Daemon, n int, what string) {
	t.Helper()
	testkit.WaitFor(t, 30*time.Second, what, func() bool {
		over := 0
		for _, p := range d.Status().Problems {
			if strings.Contains(p.Text, "still running after its CPU time budget") {
				over++
			}
		}
		return over == n
	})
}

// TestPeopleReloadNotHeldBySlowFiles: a person's reload (berth submit)
// waits for nobody else's slow files: the watcher's reload evaluating
// them is called off, and theirs evaluates only the administrators'
// files and the person's own. The reload after it is the slow files'.
func TestPeopleReloadNotHeldBySlowFiles(t *testing.T) {
	d, spool, _ := peopleDaemon(t, "", func(cfg *Config) {
		cfg.Evaluator.Budget = 3 * time.Second
		cfg.EvalShare = time.Minute
	})
	reload(t, d)
	var slow []string
	for _, name := range []string{"a.lua", "b.lua"} {
		slow = append(slow, writeAs(t, spool, testAlice, name, "while true do end\n"))
	}
	ctx := context.Background()
	evaluating := func() bool {
		on, err := d.call(ctx, func() any { return d.reloading != nil && slices.Contains(d.reloading.evaluating, slow[0]) })
		return err == nil && on.(bool)
	}
	// The watcher's reload, which nobody waits for.
	if _, err := d.call(ctx, func() any { d.reload(false, false); return nil }); err != nil {
		t.Fatal(err)
	}
	if !evaluating() {
		t.Fatal("alice's files are not being evaluated")
	}
	writeAs(t, spool, testBob, "z.lua", `job "one" { cmd = "true", enabled = false }`)
	if code, body := as(t, d, testBob, "POST", "/reload"); code != http.StatusOK || !strings.Contains(body, testBob+"/one") {
		t.Fatalf("bob's reload: %d %s", code, body)
	}
	if !evaluating() {
		t.Error("bob's reload came back after alice's files were evaluated: it waited for them")
	}
	if _, ok := d.jobStatus(testBob + "/one"); !ok {
		t.Error("bob's job is not declared after his reload")
	}
	waitOverBudget(t, d, 2, "both of alice's files evaluated by the reload after bob's")
}

// TestPeopleReloadSaysTheirOwnChange: a person's reload that finds
// nothing new says their own last change, not someone else's made after
// it (trial AI: alice was told of root's edit of hog); an administrator's
// says the last of all.
func TestPeopleReloadSaysTheirOwnChange(t *testing.T) {
	t.Parallel()
	d, spool, _ := peopleDaemon(t, `job "hog" { cmd = "true", enabled = false }`, nil)
	reload(t, d) // the first load (its jobs, all added, are no change to tell) is over
	writeAs(t, spool, testAlice, "a.lua", `job "prep" { cmd = "true", enabled = false }`)
	reload(t, d)
	waitJob(t, d, testAlice+"/prep", "declared", func(js JobStatus) bool { return js.State == "disabled" })
	testkit.PutFile(t, filepath.Join(d.cfg.JobsDir, "jobs.lua"), `job "hog" { cmd = "false", enabled = false }`)
	reload(t, d)
	var got ReloadResult
	code, body := as(t, d, testAlice, "POST", "/reload")
	if err := json.Unmarshal([]byte(body), &got); code != http.StatusOK || err != nil {
		t.Fatalf("alice's reload: %d %s", code, body)
	}
	if got.Earlier == nil || !slices.Equal(got.Earlier.Added, []string{testAlice + "/prep"}) || len(got.Earlier.Changed) != 0 {
		t.Errorf("alice's reload, nothing new: earlier %+v, want her prep added: %s", got.Earlier, body)
	}
	if res := reload(t, d); res.Earlier == nil || !slices.Equal(res.Earlier.Changed, []string{"hog"}) {
		t.Errorf("an administrator's reload, nothing new: earlier %+v, want hog changed", res.Earlier)
	}
}

// TestPeopleNoSuchJob: a name no job has is told another person's job of
// that very name, and a person is not told that a file of another's with
// errors may declare it (trial AI).
func TestPeopleNoSuchJob(t *testing.T) {
	t.Parallel()
	d, spool, _ := peopleDaemon(t, "", nil)
	writeAs(t, spool, testAlice, "a.lua", `job "prep" { cmd = "true", enabled = false }`)
	writeAs(t, spool, testAlice, "broken.lua", `job "x" {`)
	reload(t, d)
	waitJob(t, d, testAlice+"/prep", "declared", func(js JobStatus) bool { return js.State == "disabled" })
	code, body := as(t, d, testBob, "GET", "/jobs/prep")
	var e APIError
	if err := json.Unmarshal([]byte(body), &e); code != http.StatusNotFound || err != nil || e.Error != msgNoSuchJob("prep", testAlice+"/prep", 0) {
		t.Errorf("bob asks for prep: %d %s", code, body)
	}
	if got := d.msgNoSuch(caller{}, "nosuch"); got != msgNoSuchJob("nosuch", "", 1) {
		t.Errorf("an administrator asks for nosuch: %q, want alice's broken file counted", got)
	}
	// A name of alice's: her broken file may declare it, whoever asks.
	if got := d.msgNoSuch(caller{name: testBob}, testAlice+"/newjob"); got != msgNoSuchJob(testAlice+"/newjob", "", 1) {
		t.Errorf("bob asks for alice's newjob: %q, want her broken file counted", got)
	}
}

// TestPeopleCheckUnknownFlavorUnderQuota: a person's job whose flavor
// does not exist is told so, once: its size is not known, so it is not
// also said to ask for no cores and escape a quota of cores.
func TestPeopleCheckUnknownFlavorUnderQuota(t *testing.T) {
	t.Parallel()
	d, _, _ := peopleDaemon(t, `flavor "small" { cpus = 1 }
quota "`+testAlice+`" { cpus = 2 }`, nil)
	body, _ := json.Marshal(CheckRequest{Files: []CheckFile{{Name: "fl.lua", Src: []byte(`job "fl" { cmd = "true", flavor = "smal" }`)}}})
	code, answer := asWith(t, d, testAlice, "POST", "/check", string(body))
	var res CheckResult
	if code != 200 || json.Unmarshal([]byte(answer), &res) != nil {
		t.Fatalf("alice's check: %d %s", code, answer)
	}
	if len(res.Problems) != 1 || res.Problems[0].Code != "unknown_flavor" {
		t.Errorf("problems %+v, want the unknown flavor alone", res.Problems)
	}
}

// TestPeopleCheckHasNoShare: the check before a submit evaluates every
// file it is given, however long they take together: a reload's share is
// for a reload.
func TestPeopleCheckHasNoShare(t *testing.T) {
	d, _, _ := peopleDaemon(t, "", func(cfg *Config) {
		cfg.EvalShare = time.Nanosecond
		cfg.Evaluator.Budget = 10 * time.Second // a busy machine, a race-detecting child
	})
	var req CheckRequest
	for _, name := range []string{"a", "b", "c"} {
		// Each takes a while: no child answers for the next file before
		// the daemon has read its answer for this one.
		req.Files = append(req.Files, CheckFile{Name: name + ".lua", Src: []byte(`for i = 1, 2e5 do end
job "` + name + `" { cmd = "true" }`)})
	}
	body, _ := json.Marshal(req)
	code, answer := asWith(t, d, testAlice, "POST", "/check", string(body))
	var res CheckResult
	if code != 200 || json.Unmarshal([]byte(answer), &res) != nil || len(res.Jobs) != 3 || len(res.Problems) != 0 {
		t.Errorf("alice's check of 3 files: %d %s, want their 3 jobs and no problem", code, answer)
	}
	// More than a check may send: 413, saying so.
	huge, _ := json.Marshal(CheckRequest{Files: []CheckFile{{Name: "huge.lua", Src: make([]byte, checkBytes)}}})
	if code, answer := asWith(t, d, testAlice, "POST", "/check", string(huge)); code != http.StatusRequestEntityTooLarge || !strings.Contains(answer, "too large") {
		t.Errorf("a check of %d bytes: %d %s", len(huge), code, answer)
	}
	// A name the client could not write beside the file it replaces (its
	// temporary file's name would be too long), or with a NUL: refused,
	// saying which rule it breaks (trial AL).
	for _, name := range []string{strings.Repeat("n", maxFileName-3) + ".lua", "a\x00.lua"} {
		bad, _ := json.Marshal(CheckRequest{Files: []CheckFile{{Name: name, Src: []byte(`job "x" { cmd = "true" }`)}}})
		if code, answer := asWith(t, d, testAlice, "POST", "/check", string(bad)); code != http.StatusBadRequest ||
			!strings.Contains(answer, "hold no NUL byte, and be at most 239 bytes long") {
			t.Errorf("a check of a file named %.20q… (%d bytes): %d %s", name, len(name), code, answer)
		}
	}
	ok, _ := json.Marshal(CheckRequest{Files: []CheckFile{{Name: strings.Repeat("n", maxFileName-4) + ".lua", Src: []byte(`job "x" { cmd = "true" }`)}}})
	if code, answer := asWith(t, d, testAlice, "POST", "/check", string(ok)); code != http.StatusOK {
		t.Errorf("a check of a file named at the bound: %d %s", code, answer)
	}
}

// TestPeopleLogsFollow: berth logs -f streams what the job writes as it
// writes it, to its owner, until the caller hangs up.
func TestPeopleLogsFollow(t *testing.T) {
	t.Parallel()
	d, spool, out := peopleDaemon(t, "", nil)
	mark := filepath.Join(out, "go-on")
	writeAs(t, spool, testAlice, "jobs.lua", fmt.Sprintf(`job "talk" { cmd = {"sh", "-c", "echo first; while [ ! -e %s ]; do sleep 0.05; done; echo second; exec sleep 600"} }`, mark))
	reload(t, d)
	waitJob(t, d, testAlice+"/talk", "running", func(js JobStatus) bool { return js.State == "running" })

	u, _ := user.Lookup(testAlice)
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	cred := ctlsock.Peer{Ucred: unix.Ucred{Uid: uint32(uid), Gid: uint32(gid), Pid: int32(os.Getpid())}, GroupsKnown: true}
	api := d.api()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		api.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), peerKey{}, cred)))
	}))
	defer srv.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL+APIVersion+jobPath("talk")+"/logs?follow=1", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("follow: %s", resp.Status)
	}
	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	next := func() string {
		t.Helper()
		select {
		case l := <-lines:
			return l
		case <-time.After(20 * time.Second):
			t.Fatal("no line from the followed output within 20s")
		}
		return ""
	}
	if l := next(); !strings.HasPrefix(l, "--- berth: run ") {
		t.Fatalf("the run's header: %q", l)
	}
	if l := next(); l != "first" {
		t.Fatalf("first line %q", l)
	}
	if err := writeFile(mark, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if l := next(); l != "second" {
		t.Fatalf("second line %q, want what the job wrote after the stream began", l)
	}
	cancel() // the caller hangs up: the stream ends
	for range lines {
	}
}

// TestPeopleOwnArrayFirst: a person's bare name is their own first, be
// it a job or an array: alice's array sweep before the administrators'
// job sweep, for show and for control.
func TestPeopleOwnArrayFirst(t *testing.T) {
	t.Parallel()
	d, spool, _ := peopleDaemon(t, `job "sweep" { cmd = "sleep 600", cpus = 0 }`, nil)
	writeAs(t, spool, testAlice, "jobs.lua", `job "sweep" { cmd = "sleep 600", cpus = 0, array = 2 }`)
	reload(t, d)
	waitJob(t, d, testAlice+"/sweep[2]", "running", func(js JobStatus) bool { return js.State == "running" })
	code, body := as(t, d, testAlice, "GET", jobPath("sweep"))
	var detail JobDetail
	if err := json.Unmarshal([]byte(body), &detail); code != 200 || err != nil || detail.Status.Name != testAlice+"/sweep" || detail.Status.Array == nil {
		t.Fatalf("alice's show sweep: %d %s %v; want her array", code, detail.Status.Name, err)
	}
	if code, body := as(t, d, testAlice, "POST", jobPath("sweep")+"/stop"); code != 200 {
		t.Fatalf("alice's stop sweep: %d %s; want her array stopped", code, body)
	}
	waitJob(t, d, testAlice+"/sweep[1]", "stopped", func(js JobStatus) bool { return js.State == "stopped" })
	if js, _ := d.jobStatus("sweep"); js.State != "running" {
		t.Errorf("the administrators' sweep is %s; alice's stop reached it", js.State)
	}
	// An index her array lacks, by her bare name, is said as one.
	for _, call := range []struct{ method, path string }{{"GET", jobPath("sweep[9]")}, {"POST", jobPath("sweep[9]") + "/stop"}, {"GET", "/history?job=" + url.QueryEscape("sweep[9]")}} {
		if code, body := as(t, d, testAlice, call.method, call.path); code != 404 || !strings.Contains(body, "array "+testAlice+"/sweep has no index 9") {
			t.Errorf("alice's %s %s: %d %s; want her array's indices said", call.method, call.path, code, body)
		}
	}
}

// A person's directory appears theirs or not at all: a daemon killed while
// making it leaves only a temporary directory beside it, which the next
// try replaces; one that is there is left as it is.
func TestMakePersonDir(t *testing.T) {
	t.Parallel()
	if os.Getuid() != 0 {
		t.Skip("needs root to give a directory away")
	}
	const uid, gid = 54321, 54322 // no account is needed to own a directory
	spool := t.TempDir()
	dir := filepath.Join(spool, "alice")
	owned := func(path string) (int, int, os.FileMode) {
		t.Helper()
		var st unix.Stat_t
		if err := unix.Lstat(path, &st); err != nil {
			t.Fatal(err)
		}
		return int(st.Uid), int(st.Gid), os.FileMode(st.Mode & 0o7777)
	}

	// What a killed daemon left: its temporary directory, still root's,
	// with something in it.
	temp := filepath.Join(spool, ".new-alice")
	if err := os.Mkdir(temp, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := writeFile(filepath.Join(temp, "left.lua"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := makePersonDir(dir, uid, gid); err != nil {
		t.Fatal(err)
	}
	if u, g, mode := owned(dir); u != uid || g != gid || mode != 0o700 {
		t.Fatalf("made %d:%d mode %o, want %d:%d 0700", u, g, mode, uid, gid)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Fatalf("made with %d entries, want none (the temporary one's were kept)", len(entries))
	}
	if entries, _ := os.ReadDir(spool); len(entries) != 1 {
		t.Fatalf("the spool holds %d entries, want the person's alone", len(entries))
	}

	// One that is there is theirs to keep as it is, fit or not.
	bob := filepath.Join(spool, "bob")
	if err := os.Mkdir(bob, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := makePersonDir(bob, uid, gid); !errors.Is(err, fs.ErrExist) {
		t.Fatalf("over an existing directory: %v, want ErrExist", err)
	}
	if u, _, mode := owned(bob); u != 0 || mode != 0o755 {
		t.Fatalf("an existing directory was changed: uid %d mode %o", u, mode)
	}
	if _, err := os.Lstat(filepath.Join(spool, ".new-bob")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a temporary directory stayed: %v", err)
	}

	// Something that appears in its place meanwhile is not replaced.
	carol := filepath.Join(spool, "carol")
	if err := os.Mkdir(carol+".mine", 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(carol+".mine", carol); err != nil {
		t.Fatal(err)
	}
	if err := renameNoReplace(filepath.Join(spool, "alice"), carol); !errors.Is(err, fs.ErrExist) {
		t.Fatalf("rename over a link: %v, want ErrExist", err)
	}
}

// TestPeopleJobsBound: a person's files may declare so many jobs in all,
// an array's indices counted; the file that would take them past it is
// not loaded and says why, and the files in force stay.
func TestPeopleJobsBound(t *testing.T) {
	t.Parallel()
	d, spool, _ := peopleDaemon(t, "", func(cfg *Config) { cfg.PersonJobs = 10 })
	writeAs(t, spool, testAlice, "a.lua", `job "one" { cmd = "sleep 600", cpus = 0 }
job "sweep" { cmd = "true", array = 5, enabled = false, cpus = 0 }`)
	reload(t, d)
	waitJob(t, d, testAlice+"/one", "running", func(js JobStatus) bool { return js.State == "running" })
	// 6 in force; 5 more make 11.
	writeAs(t, spool, testAlice, "b.lua", `job "more" { cmd = "true", array = 5, enabled = false, cpus = 0 }`)
	reload(t, d)
	path := filepath.Join(spool, testAlice, "b.lua")
	want := path + ": declares 5 jobs (an array counts each index), and " + testAlice + "'s other files in force 6; one person's files may declare 10 in all"
	wantPastBound(t, d, path, want)
	if _, ok := d.jobStatus(testAlice + "/more[0]"); ok {
		t.Error("the file past the bound was loaded")
	}
	if js, _ := d.jobStatus(testAlice + "/one"); js.State != "running" {
		t.Errorf("one, in force: %s, want running still", js.State)
	}
	// 4 fit.
	writeAs(t, spool, testAlice, "b.lua", `job "more" { cmd = "true", array = 4, enabled = false, cpus = 0 }`)
	reload(t, d)
	waitJob(t, d, testAlice+"/more[3]", "loaded", func(js JobStatus) bool { return js.State == "disabled" })
	if st := d.Status(); slices.ContainsFunc(st.Problems, func(p Problem) bool { return p.Code == ProblemTooManyJobs }) {
		t.Errorf("10 jobs of 10: problems %+v", st.Problems)
	}
}

// TestPeopleDirMadeAgain: a person's directory removed is made again at
// the next reload, theirs and 0700, and what they put there is read. It
// settles first (a restore of the spool puts the files back): a job of a
// file put back meanwhile runs on; one whose file is not back goes.
func TestPeopleDirMadeAgain(t *testing.T) {
	t.Parallel()
	d, spool, _ := peopleDaemon(t, "", nil)
	dir := filepath.Join(spool, testAlice)
	writeAs(t, spool, testAlice, "kept.lua", `job "kept" { cmd = "sleep 600", cpus = 0 }`)
	writeAs(t, spool, testAlice, "gone.lua", `job "gone" { cmd = "sleep 600", cpus = 0 }`)
	reload(t, d)
	kept := waitJob(t, d, testAlice+"/kept", "running", func(js JobStatus) bool { return js.State == "running" })
	waitJob(t, d, testAlice+"/gone", "running", func(js JobStatus) bool { return js.State == "running" })
	saved, err := os.ReadFile(filepath.Join(dir, "kept.lua"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	reload(t, d)
	for _, name := range []string{"kept", "gone"} {
		if js, _ := d.jobStatus(testAlice + "/" + name); js.State != "running" {
			t.Errorf("%s with her directory made again, empty: %s, want running on", name, js.State)
		}
	}
	writeAs(t, spool, testAlice, "kept.lua", string(saved))
	testkit.WaitFor(t, 20*time.Second, "the job of the file not back to go", func() bool {
		_, there := d.jobStatus(testAlice + "/gone")
		return !there
	})
	if js, _ := d.jobStatus(testAlice + "/kept"); js.Run != kept.Run {
		t.Errorf("the job of the file put back: run %d, want run %d going on", js.Run, kept.Run)
	}
	u, err := user.Lookup(testAlice)
	if err != nil {
		t.Fatal(err)
	}
	var st unix.Stat_t
	if err := unix.Lstat(dir, &st); err != nil {
		t.Fatalf("alice's directory after its removal and a reload: %v", err)
	}
	if strconv.Itoa(int(st.Uid)) != u.Uid || st.Mode&0o7777 != 0o700 {
		t.Fatalf("alice's directory after its removal and a reload: uid %d, mode %o; want %s and 0700", st.Uid, st.Mode&0o7777, u.Uid)
	}
	writeAs(t, spool, testAlice, "back.lua", `job "back" { cmd = "sleep 600", cpus = 0 }`)
	reload(t, d)
	waitJob(t, d, testAlice+"/back", "running", func(js JobStatus) bool { return js.State == "running" })
}

// TestPersonDirFixedWhileEmpty: a person's directory refused, then fixed
// while it holds no file, is seen fixed by the watch's own reload, which
// found nothing new to read and kept the refusal in force.
func TestPersonDirFixedWhileEmpty(t *testing.T) {
	t.Parallel()
	d, spool, _ := peopleDaemon(t, "", nil)
	dir := filepath.Join(spool, testAlice)
	refused := func() bool {
		return slices.ContainsFunc(d.Status().Problems, func(p Problem) bool { return p.Code == ProblemDirRefused && p.File == dir })
	}
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, 20*time.Second, "her directory refused", refused)
	if err := os.Chmod(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, 20*time.Second, "her directory taken again", func() bool { return !refused() })
}

// TestPeopleHistoryOwnFirst: a person's bare name in the history is their
// own job first, still declared or not, and an array no longer declared
// is its indices' runs; the administrators' job of that name comes after.
func TestPeopleHistoryOwnFirst(t *testing.T) {
	t.Parallel()
	d, spool, _ := peopleDaemon(t, `job "train" { cmd = "true", cpus = 0 }`, nil)
	writeAs(t, spool, testAlice, "jobs.lua", `job "train" { cmd = "true", cpus = 0 }
job "sweep" { cmd = "true", cpus = 0, array = 2 }`)
	reload(t, d)
	for _, name := range []string{"train", testAlice + "/train", testAlice + "/sweep[1]", testAlice + "/sweep[2]"} {
		waitJob(t, d, name, "done", func(js JobStatus) bool { return js.State == "done" })
	}
	if err := os.Remove(filepath.Join(spool, testAlice, "jobs.lua")); err != nil {
		t.Fatal(err)
	}
	reload(t, d)
	if _, ok := d.jobStatus(testAlice + "/train"); ok {
		t.Fatal("alice's train is still declared")
	}

	for _, q := range []struct {
		who, job string
		want     []string
	}{
		{testAlice, "train", []string{testAlice + "/train"}},
		{testAlice, "sweep", []string{testAlice + "/sweep[2]", testAlice + "/sweep[1]"}},
		{testAlice, testAlice + "/sweep", []string{testAlice + "/sweep[2]", testAlice + "/sweep[1]"}},
		{testBob, "train", []string{"train"}},
	} {
		code, body := as(t, d, q.who, "GET", "/history?job="+url.QueryEscape(q.job))
		var runs []RunView
		if code != 200 || json.Unmarshal([]byte(body), &runs) != nil {
			t.Errorf("%s's history of %s: %d %s", q.who, q.job, code, body)
			continue
		}
		var got []string
		for _, r := range runs {
			got = append(got, r.Job)
		}
		// Whose runs, not their order: an array's indices start
		// together, and which is given its run id first is the
		// scheduler's to say.
		slices.Sort(got)
		if want := slices.Sorted(slices.Values(q.want)); !slices.Equal(got, want) {
			t.Errorf("%s's history of %s: runs of %q, want %q", q.who, q.job, got, want)
		}
	}
}

// wantPastBound: the file at path is refused for taking its owner past a
// bound, with a sentence that begins with want.
func wantPastBound(t *testing.T, d *Daemon, path, want string) {
	t.Helper()
	if st := d.Status(); !slices.ContainsFunc(st.Problems, func(p Problem) bool {
		return p.Code == ProblemTooManyJobs && p.File == path && strings.HasPrefix(p.Text, want)
	}) {
		t.Errorf("the file past the bound: problems %+v, want %q…", st.Problems, want)
	}
}

// TestPeopleDefinitionBytesBound: what a person's jobs' cmd and env come
// to in all is bounded too: the file that would take them past it is not
// loaded, and says why.
func TestPeopleDefinitionBytesBound(t *testing.T) {
	defer func(was int) { personDefinitionBytes = was }(personDefinitionBytes)
	personDefinitionBytes = 300 << 10
	d, spool, _ := peopleDaemon(t, "", nil)
	big := `job "NAME" { cmd = { "echo", string.rep("x", 100000) }, enabled = false, cpus = 0 }`
	writeAs(t, spool, testAlice, "a.lua", strings.Replace(big, "NAME", "a", 1)+"\n"+strings.Replace(big, "NAME", "b", 1))
	reload(t, d)
	waitJob(t, d, testAlice+"/b", "loaded", func(js JobStatus) bool { return js.State == "disabled" })
	writeAs(t, spool, testAlice, "c.lua", strings.Replace(big, "NAME", "c", 1)+"\n"+strings.Replace(big, "NAME", "d", 1))
	reload(t, d)
	path := filepath.Join(spool, testAlice, "c.lua")
	want := path + ": its jobs' definitions take 195.5K of the daemon's memory, and those of " + testAlice + "'s other files in force 195.5K; one person's may take 300K in all"
	wantPastBound(t, d, path, want)
	if _, ok := d.jobStatus(testAlice + "/c"); ok {
		t.Error("the file past the bound was loaded")
	}
}

// TestPeopleDependenciesBound: the names in a person's jobs' after and
// after_any are bounded in all, an array's once for each index: the file
// that would take them past it is not loaded, and says why.
func TestPeopleDependenciesBound(t *testing.T) {
	defer func(was int) { personDependencies = was }(personDependencies)
	personDependencies = 10
	d, spool, _ := peopleDaemon(t, "", nil)
	writeAs(t, spool, testAlice, "a.lua", `job "p1" { cmd = "true", enabled = false }
job "p2" { cmd = "true", enabled = false }
job "kids" { cmd = "true", enabled = false, array = 4, after = { "p1", "p2" } }`)
	reload(t, d)
	waitJob(t, d, testAlice+"/kids", "loaded", func(js JobStatus) bool { return js.State == "disabled" })
	writeAs(t, spool, testAlice, "b.lua", `job "more" { cmd = "true", enabled = false, after = { "p1", "p2", "kids" } }`)
	reload(t, d)
	path := filepath.Join(spool, testAlice, "b.lua")
	wantPastBound(t, d, path, path+": its jobs name 3 jobs in after and after_any (an array's once for each index), and "+testAlice+"'s other files in force 8; one person's may name 10 in all")
	if _, ok := d.jobStatus(testAlice + "/more"); ok {
		t.Error("the file past the bound was loaded")
	}
}

// TestPeopleMayClaimRuns: a process found carrying a run's tags after a
// crash is taken for that run only where it is the job's user's: a
// person's job's processes are that person's, and a person's process may
// not claim another's run, nor an administrators'.
func TestPeopleMayClaimRuns(t *testing.T) {
	t.Parallel()
	d, spool, _ := peopleDaemon(t, "", nil)
	writeAs(t, spool, testAlice, "a.lua", `job "one" { cmd = "true", enabled = false }`)
	reload(t, d)
	waitJob(t, d, testAlice+"/one", "loaded", func(js JobStatus) bool { return js.State == "disabled" })
	alice, bob := uidOf(t, testAlice), uidOf(t, testBob)
	for _, c := range []struct {
		uid  int
		job  string
		want bool
	}{
		{alice, testAlice + "/one", true},
		{alice, testBob + "/one", false},
		{bob, testAlice + "/one", false},
		{0, testAlice + "/one", false},
		{alice, "shared", false},
		{0, "shared", true},
		{-1, "shared", false},
	} {
		if got := d.mayClaim(c.uid, c.job); got != c.want {
			t.Errorf("uid %d claiming a run of %s: %v, want %v", c.uid, c.job, got, c.want)
		}
	}
}

// TestPeopleDirBounded: what the daemon reads of a person's directory is
// bounded in all: a file past the bound is refused, saying so, and its
// jobs are not declared.
func TestPeopleDirBounded(t *testing.T) {
	t.Parallel()
	defer func(files int) { personMaxFiles = files }(personMaxFiles)
	personMaxFiles = 2
	d, spool, _ := peopleDaemon(t, "", nil)
	for _, name := range []string{"a", "b", "c"} {
		writeAs(t, spool, testAlice, name+".lua", `job "`+name+`" { cmd = "true", enabled = false }`)
	}
	res := reload(t, d)
	if _, ok := d.jobStatus(testAlice + "/c"); ok {
		t.Error("the file past the bound was loaded")
	}
	path := filepath.Join(spool, testAlice, "c.lua")
	if !slices.ContainsFunc(res.Problems, func(p Problem) bool {
		return p.File == path && strings.Contains(p.Text, "past what one job directory may hold, 2 files")
	}) {
		t.Errorf("the reload's problems: %+v, want c.lua past the bound", res.Problems)
	}
}
