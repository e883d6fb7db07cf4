package units

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/godbus/dbus/v5"

	"github.com/berthd/berth/supervisor/runner"
	"github.com/berthd/berth/supervisor/testkit"
	"github.com/berthd/berth/supervisor/units/unitstest"
)

func startRunner(t *testing.T) (*unitstest.Manager, *Runner) {
	f := unitstest.New()
	r := New(f, Events{Updates: f.Updates()})
	t.Cleanup(r.Close)
	return f, r
}

func TestStartSetsTheGrantOnTheUnit(t *testing.T) {
	f, r := startRunner(t)
	run, err := r.Start(context.Background(), Spec{
		Job: "alice/a b", Run: 42, Owner: "alice", Path: "/usr/bin/python3", Argv: []string{"python3", "train.py", "--tag=$USER ${HOME} $$"},
		Dir: "/srv", Env: []string{"A=1"}, User: "alice", Group: "ml",
		MemoryMax: 256 << 20, CPUs: []int{1, 3, 9}, Devices: []string{"/dev/nvidia5"},
		RuntimeMax: time.Hour, StopSignal: syscall.SIGINT, StopTimeout: 30 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	name := `berth-alice\x2fa\x20b-42.service`
	if run.Unit() != name || run.PID() == 0 {
		t.Fatalf("unit %q pid %d", run.Unit(), run.PID())
	}
	p := f.Props(name)
	want := map[string]any{
		"Type": "exec", "RemainAfterExit": true, "Slice": "berth.slice", "WorkingDirectory": "/srv",
		"User": "alice", "Group": "ml", "MemoryMax": uint64(256 << 20), "MemorySwapMax": uint64(0),
		"KillSignal": int32(syscall.SIGINT), "TimeoutStopUSec": uint64(30e6), "RuntimeMaxUSec": uint64(3600e6),
		"OOMScoreAdjust": int32(0), "SyslogIdentifier": "alice/a b", "KillMode": "control-group", "DevicePolicy": "closed",
	}
	for k, v := range want {
		if p[k] != v {
			t.Errorf("%s = %#v, want %#v", k, p[k], v)
		}
	}
	for _, k := range []string{"AllowedCPUs", "CPUAffinity"} {
		if mask := p[k].([]byte); !slices.Equal(mask, []byte{0b1010, 0b10}) {
			t.Errorf("%s = %08b", k, mask)
		}
	}
	if env := p["Environment"].([]string); !slices.Equal(env, []string{"A=1"}) {
		t.Errorf("Environment = %q", env)
	}
	fields := p["LogExtraFields"].([][]byte)
	if len(fields) != 3 || string(fields[0]) != "BERTH_JOB=alice/a b" || string(fields[1]) != "BERTH_RUN=42" || string(fields[2]) != "BERTH_OWNER=alice" {
		t.Errorf("LogExtraFields = %q", fields)
	}
	exec := p["ExecStart"].([]execStart)
	if len(exec) != 1 || exec[0].Path != "/usr/bin/python3" || exec[0].IgnoreFailure || !slices.Equal(exec[0].Args, []string{"python3", "train.py", "--tag=$$USER $${HOME} $$$$"}) {
		// systemd expands $ in ExecStart: the job must get its argv as is.
		t.Errorf("ExecStart = %+v", exec)
	}
	allow := p["DeviceAllow"].([]deviceAllow)
	if len(allow) != 1 || allow[0] != (deviceAllow{Path: "/dev/nvidia5", Rights: "rw"}) {
		t.Errorf("DeviceAllow = %+v", allow)
	}
}

// Without a grant of memory, cores or cards, the unit has no such limit.
func TestStartWithoutLimits(t *testing.T) {
	f, r := startRunner(t)
	run, err := r.Start(context.Background(), Spec{Job: "x", Run: 1, Path: "/bin/true", Argv: []string{"true"}})
	if err != nil {
		t.Fatal(err)
	}
	p := f.Props(run.Unit())
	for _, k := range []string{"MemoryMax", "MemorySwapMax", "AllowedCPUs", "CPUAffinity", "DevicePolicy", "DeviceAllow", "RuntimeMaxUSec", "User", "WorkingDirectory"} {
		if _, ok := p[k]; ok {
			t.Errorf("%s is set: %#v", k, p[k])
		}
	}
}

// Swap is none beside a memory grant unless the job says how much.
func TestStartSwap(t *testing.T) {
	f, r := startRunner(t)
	gig := int64(1 << 30)
	for i, tt := range []struct {
		memory int64
		swap   *int64
		want   any
	}{
		{256 << 20, nil, uint64(0)},
		{256 << 20, &gig, uint64(1 << 30)},
		{0, &gig, uint64(1 << 30)},
		{0, nil, nil},
	} {
		run, err := r.Start(context.Background(), Spec{Job: "s", Run: uint64(i + 1), Path: "/bin/true", Argv: []string{"true"}, MemoryMax: tt.memory, SwapMax: tt.swap})
		if err != nil {
			t.Fatal(err)
		}
		if got := f.Props(run.Unit())["MemorySwapMax"]; got != tt.want {
			t.Errorf("memory %d, swap %v: MemorySwapMax %v, want %v", tt.memory, tt.swap, got, tt.want)
		}
	}
}

func TestRunEndsAsItsUnitSays(t *testing.T) {
	for _, tt := range []struct {
		name         string
		result       string
		code, status int32
		want         runner.Exit
	}{
		{"exit 0", "success", unitstest.CLDExited, 0, runner.Exit{Code: 0}},
		{"exit 3", "exit-code", unitstest.CLDExited, 3, runner.Exit{Code: 3}},
		{"signal", "signal", unitstest.CLDKilled, int32(syscall.SIGSEGV), runner.Exit{Code: -1, Signal: syscall.SIGSEGV}},
		{"oom", "oom-kill", unitstest.CLDKilled, int32(syscall.SIGKILL), runner.Exit{Code: -1, Signal: syscall.SIGKILL, OutOfMemory: true}},
		{"runtime", "timeout", unitstest.CLDKilled, int32(syscall.SIGTERM), runner.Exit{Code: -1, Signal: syscall.SIGTERM, TimedOut: true}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f, r := startRunner(t)
			run, err := r.Start(context.Background(), Spec{Job: "j", Run: 7, Path: "/bin/sh", Argv: []string{"sh"}})
			if err != nil {
				t.Fatal(err)
			}
			select {
			case <-run.Done():
				t.Fatal("done before its unit ended")
			default:
			}
			before := time.Now()
			f.EndedAgo(run.Unit(), tt.result, tt.code, tt.status, time.Second)
			got := run.Wait()
			// When it ended, from the unit's exit timestamp: a second
			// ago, to the clocks' reading apart.
			if off := got.At.Sub(before.Add(-time.Second)).Abs(); off > 100*time.Millisecond {
				t.Errorf("ended at %v, want a second before %v", got.At, before)
			}
			if got.At = (time.Time{}); got != tt.want {
				t.Errorf("exit %+v, want %+v", got, tt.want)
			}
			r.Release(run)
			if slices.Contains(f.Names(), run.Unit()) {
				t.Errorf("the unit is still there after Release")
			}
		})
	}
}

// A unit someone else stopped (systemctl stop of it or of berth.slice)
// ends its run as stopped from outside.
func TestStoppedOutside(t *testing.T) {
	f, r := startRunner(t)
	run, err := r.Start(context.Background(), Spec{Job: "j", Run: 1, Path: "/bin/sh", Argv: []string{"sh"}})
	if err != nil {
		t.Fatal(err)
	}
	// Transient, the unit is unloaded at once: its run ends stopped from
	// outside, with no exit to tell.
	f.StopOutside(run.Unit())
	if got := run.Wait(); !got.StoppedOutside || got.Err != nil {
		t.Errorf("exit %+v", got)
	}

	// A process that answers the stop's SIGTERM with a failing status
	// fails the unit, which is kept, after it left active: stopped from
	// outside too, its status known (trial AG: recorded failed, and
	// restarted). The exit 3 of the table above, the unit leaving active
	// after its process ended, is no stop.
	run, err = r.Start(context.Background(), Spec{Job: "j", Run: 2, Path: "/bin/sh", Argv: []string{"sh"}})
	if err != nil {
		t.Fatal(err)
	}
	f.StopOutsideFailing(run.Unit(), "exit-code", unitstest.CLDExited, 143)
	if got := run.Wait(); !got.StoppedOutside || got.Code != 143 || got.Err != nil {
		t.Errorf("exit %+v, want 143, stopped from outside", got)
	}

	// One that outlives the stop's timeout, killed: its result is
	// "timeout", as a unit's past its runtime bound is (the table above),
	// but it was stopped well before that bound (the review).
	run, err = r.Start(context.Background(), Spec{Job: "j", Run: 3, Path: "/bin/sh", Argv: []string{"sh"}, RuntimeMax: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	f.StopOutsideFailing(run.Unit(), "timeout", unitstest.CLDKilled, int32(syscall.SIGKILL))
	if got := run.Wait(); !got.StoppedOutside || got.TimedOut || got.Signal != syscall.SIGKILL || got.Err != nil {
		t.Errorf("exit %+v, want SIGKILL, stopped from outside, not timed out", got)
	}
}

// While its start job waits, systemd shows a new unit inactive: a look at
// the runs in progress then (a sweep, a signal) does not take it for a
// run that ended.
func TestStartingIsNotEnded(t *testing.T) {
	f, r := startRunner(t)
	held, release := f.HoldStarts()
	started := make(chan *Run, 1)
	go func() {
		run, err := r.Start(context.Background(), Spec{Job: "j", Run: 1, Path: "/bin/sh", Argv: []string{"sh"}})
		if err != nil {
			t.Error(err)
		}
		started <- run
	}()
	<-held
	r.checkAll()
	release()
	run := <-started
	if run == nil {
		return
	}
	r.checkAll()
	select {
	case <-run.Done():
		t.Fatalf("a run whose start job was waiting ended: %+v", run.Wait())
	default:
	}
	f.End(run.Unit(), "success", unitstest.CLDExited, 0)
	if got := run.Wait(); !got.Success() {
		t.Errorf("exit %+v", got)
	}
}

// A connection to systemd that is gone is said (Lost), and a stop that
// waits for its run's end gives up waiting.
func TestLostConnection(t *testing.T) {
	f, r := startRunner(t)
	run, err := r.Start(context.Background(), Spec{Job: "j", Run: 1, Path: "/bin/sh", Argv: []string{"sh"}})
	if err != nil {
		t.Fatal(err)
	}
	f.Disconnect()
	select {
	case <-r.Lost():
	case <-time.After(10 * time.Second):
		t.Fatal("the lost connection was not said")
	}
	// The fake's processes ignore SIGTERM, and its SIGKILL now reaches
	// nothing that answers: Stop returns all the same.
	f.IgnoreKills()
	run.Stop(syscall.SIGTERM, time.Millisecond)
}

// A run whose signal was dropped is found ended by the sweep.
func TestResyncFindsAnEndWithoutASignal(t *testing.T) {
	f := unitstest.New()
	r := New(f, Events{})
	defer r.Close()
	run, err := r.Start(context.Background(), Spec{Job: "j", Run: 1, Path: "/bin/sh", Argv: []string{"sh"}})
	if err != nil {
		t.Fatal(err)
	}
	f.End(run.Unit(), "exit-code", unitstest.CLDExited, 1)
	r.Resync()
	if got := run.Wait(); got.Code != 1 {
		t.Errorf("exit %+v", got)
	}
}

func TestStopSignalsTheWholeUnitThenKills(t *testing.T) {
	f, r := startRunner(t)
	run, err := r.Start(context.Background(), Spec{Job: "j", Run: 1, Path: "/bin/sh", Argv: []string{"sh"}})
	if err != nil {
		t.Fatal(err)
	}
	// The fake's processes ignore SIGTERM: only SIGKILL ends them.
	if killed := run.Stop(syscall.SIGTERM, time.Millisecond); !killed {
		t.Errorf("Stop did not report the SIGKILL")
	}
	want := []string{run.Unit() + " terminated", run.Unit() + " continued", run.Unit() + " killed"}
	if got := f.Killed(); !slices.Equal(got, want) {
		t.Errorf("signals %q, want %q", got, want)
	}
	if got := run.Wait(); got.Signal != syscall.SIGKILL {
		t.Errorf("exit %+v", got)
	}
}

func TestStartFailureSaysWhy(t *testing.T) {
	f, r := startRunner(t)
	f.FailNextStarts("failed", 203)
	_, err := r.Start(context.Background(), Spec{Job: "j", Run: 1, Path: "/nope", Argv: []string{"/nope"}})
	if err == nil || err.Error() != "cannot execute /nope (journalctl -u berth-j-1.service says more, to root and the journal's readers)" {
		t.Errorf("error %v", err)
	}
	if names := f.Names(); len(names) != 0 {
		t.Errorf("the failed unit was left: %v", names)
	}
}

// TestStartOfAFastFailure: a program that ran and exited non-zero before
// its unit's start job was done (which systemd then reports failed) is a
// run that ended so, not a start that failed.
func TestStartOfAFastFailure(t *testing.T) {
	f, r := startRunner(t)
	f.FailNextStarts("failed", 3)
	run, err := r.Start(context.Background(), Spec{Job: "j", Run: 1, Path: "/bin/sh", Argv: []string{"sh", "-c", "exit 3"}})
	if err != nil {
		t.Fatalf("a run that exited 3 at once: %v", err)
	}
	if e := run.Wait(); e.Code != 3 || e.Success() {
		t.Errorf("its end: %+v, want exit 3", e)
	}
}

func TestListAndAdopt(t *testing.T) {
	f, r := startRunner(t)
	for run := uint64(1); run <= 2; run++ {
		if _, err := r.Start(context.Background(), Spec{Job: "web-1", Run: run, Path: "/bin/sh", Argv: []string{"sh"}}); err != nil {
			t.Fatal(err)
		}
	}
	f.End(Name("web-1", 2), "exit-code", unitstest.CLDExited, 4)

	// A new daemon: a new runner over the same manager, the old one gone.
	r.Close()
	r2 := New(f, Events{Updates: f.Updates()})
	defer r2.Close()
	found, err := r2.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	slices.SortFunc(found, func(a, b Found) int { return int(a.Run) - int(b.Run) })
	if len(found) != 2 || found[0].Job != "web-1" || found[0].Run != 1 || found[1].Run != 2 {
		t.Fatalf("found %+v", found)
	}
	running, err := r2.Adopt(found[0].Unit)
	if err != nil {
		t.Fatal(err)
	}
	ended, err := r2.Adopt(found[1].Unit)
	if err != nil {
		t.Fatal(err)
	}
	if got := ended.Wait(); got.Code != 4 {
		t.Errorf("the run that ended meanwhile: %+v", got)
	}
	select {
	case <-running.Done():
		t.Fatal("the running one is done")
	default:
	}
	f.End(running.Unit(), "success", unitstest.CLDExited, 0)
	if got := running.Wait(); !got.Success() {
		t.Errorf("exit %+v", got)
	}
}

func TestNames(t *testing.T) {
	longest := "a" + strings.Repeat("-", 63) // a job name's longest, every dash kept
	unitName := regexp.MustCompile(`^[a-zA-Z0-9:_.\\-]+\.service$`)
	for _, job := range []string{"train", "web-1", "a b/c", "alice/train.v2", "-x-", `a\x41`, ".hidden", longest} {
		name := Name(job, 18446744073709551615)
		job2, run, ok := parseName(name)
		if !ok || job2 != job || run != 18446744073709551615 {
			t.Errorf("%q: %q %d %v", job, job2, run, ok)
		}
		if !unitName.MatchString(name) || len(name) > 255 {
			t.Errorf("%q: %q is not a unit name systemd takes", job, name)
		}
	}
	if got := Name("web-1", 12); got != "berth-web-1-12.service" {
		t.Errorf("Name(web-1, 12) = %q", got)
	}
	for _, name := range []string{"sshd.service", "berth.service", "berth-x.service", "berth-x-y.service", "berth-x-1.scope"} {
		if _, _, ok := parseName(name); ok {
			t.Errorf("%s parsed as a run's unit", name)
		}
	}
}

func TestUsageFromTheCgroup(t *testing.T) {
	root := t.TempDir()
	defer func(old string) { cgroupRoot = old }(cgroupRoot)
	cgroupRoot = root
	dir := root + "/berth.slice/berth-j-1.service"
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(dir+"/memory.current", []byte("123456\n"), 0o644)
	os.WriteFile(dir+"/cpu.stat", []byte("usage_usec 2500000\nuser_usec 2000000\nsystem_usec 500000\n"), 0o644)
	run := &Run{cgroup: "/berth.slice/berth-j-1.service"}
	u, ok := run.Usage()
	if !ok || u.MemoryBytes != 123456 || u.CPUTime != 2500*time.Millisecond {
		t.Errorf("usage %+v %v", u, ok)
	}
	// The legacy hierarchies of systemd's hybrid mode.
	v1 := "/berth.slice/berth-j-2.service"
	for f, v := range map[string]string{"memory/" + v1 + "/memory.usage_in_bytes": "654321\n", "cpuacct/" + v1 + "/cpuacct.usage": "1500000000\n"} {
		os.MkdirAll(filepath.Dir(filepath.Join(root, f)), 0o755)
		os.WriteFile(filepath.Join(root, f), []byte(v), 0o644)
	}
	u, ok = (&Run{cgroup: v1}).Usage()
	if !ok || u.MemoryBytes != 654321 || u.CPUTime != 1500*time.Millisecond {
		t.Errorf("usage on the legacy hierarchies %+v %v", u, ok)
	}
	if _, ok := (&Run{cgroup: "/berth.slice/gone.service"}).Usage(); ok {
		t.Errorf("a gone cgroup has a usage")
	}
}

// TestMayHaveEnded: a unit is looked at only for the steps that can end
// its run, not for each of its way up and down.
func TestMayHaveEnded(t *testing.T) {
	v := func(active, sub string) map[string]dbus.Variant {
		m := map[string]dbus.Variant{}
		if active != "" {
			m["ActiveState"] = dbus.MakeVariant(active)
		}
		if sub != "" {
			m["SubState"] = dbus.MakeVariant(sub)
		}
		return m
	}
	for _, tt := range []struct {
		active, sub string
		want        bool
	}{
		{"activating", "start", false}, {"active", "running", false}, {"deactivating", "stop-sigterm", false},
		{"active", "exited", true}, {"failed", "failed", true}, {"inactive", "dead", true}, {"", "exited", true}, {"", "", false},
	} {
		if got := mayHaveEnded(v(tt.active, tt.sub)); got != tt.want {
			t.Errorf("%s/%s: %v, want %v", tt.active, tt.sub, got, tt.want)
		}
	}
}

// TestStartEnvironmentFile: with an EnvDir, a unit's environment is a file
// only root may read, written for systemd's EnvironmentFile= and removed
// once the unit has started, not its Environment=, which every local user
// may read over D-Bus.
func TestStartEnvironmentFile(t *testing.T) {
	f, r := startRunner(t)
	dir := t.TempDir()
	run, err := r.Start(context.Background(), Spec{Job: "alice/a[1]", Run: 7, Path: "/bin/true", Argv: []string{"true"},
		Env: []string{"TOKEN=secret"}, EnvDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	p := f.Props(run.Unit())
	if _, ok := p["Environment"]; ok {
		t.Errorf("the unit has an Environment= too: %v", p["Environment"])
	}
	files, _ := p["EnvironmentFiles"].([]envFileProp)
	// No escapes in its name, which systemd would read (the unit's has \x2f).
	if len(files) != 1 || files[0].Path != filepath.Join(dir, "run-7.env") || files[0].Optional {
		t.Errorf("EnvironmentFiles = %+v", p["EnvironmentFiles"])
	}
	if left, _ := os.ReadDir(dir); len(left) != 0 {
		t.Errorf("left in the directory once started: %v", left)
	}

	// What systemd reads back as the values they are.
	path, err := writeEnvFile(dir, "x", []string{`A=plain`, `B=a "quoted" \ back $HOME ` + "`tick` 'single'", "C=two\nlines", "D="})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(path)
	want := "A=\"plain\"\nB=\"a \\\"quoted\\\" \\\\ back \\$HOME \\`tick\\` 'single'\"\nC=\"two\nlines\"\nD=\"\"\n"
	if string(b) != want {
		t.Errorf("the file:\n%s\nwant:\n%s", b, want)
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %v", fi.Mode())
	}
}

// TestToolPath: a program for a transient unit is found on PATH, by its
// absolute path, and is in /usr/bin otherwise.
func TestToolPath(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "sleep"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "systemctl"), []byte("not run"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", "relative:"+dir)
	if got := toolPath("sleep"); got != filepath.Join(dir, "sleep") {
		t.Errorf("toolPath(sleep) = %s, want the one on PATH", got)
	}
	if got := toolPath("systemctl"); got != "/usr/bin/systemctl" {
		t.Errorf("toolPath(systemctl), not executable on PATH = %s, want /usr/bin/systemctl", got)
	}
}

// TestCoresByAffinityOnly: a run's cores are enforced where the unified
// hierarchy has a cpuset controller (cgroup v2), and an affinity alone
// where it has none (hybrid) or there is none (v1).
func TestCoresByAffinityOnly(t *testing.T) {
	defer func(old string) { cgroupRoot = old }(cgroupRoot)
	for _, tt := range []struct {
		name  string
		files map[string]string
		want  bool
	}{
		{"v2", map[string]string{"cgroup.controllers": "cpuset cpu io memory pids\n"}, false},
		{"v2 without cpuset", map[string]string{"cgroup.controllers": "cpu io memory pids\n"}, true},
		{"hybrid", map[string]string{"unified/cgroup.controllers": "\n", "memory/tasks": ""}, true},
		{"v1", map[string]string{"memory/tasks": "", "cpuset/tasks": ""}, true},
	} {
		root := t.TempDir()
		for name, data := range tt.files {
			if err := os.MkdirAll(filepath.Dir(filepath.Join(root, name)), 0o755); err != nil {
				t.Fatal(err)
			}
			testkit.PutFile(t, filepath.Join(root, name), data)
		}
		cgroupRoot = root
		if got := CoresByAffinityOnly(); got != tt.want {
			t.Errorf("%s: %v, want %v", tt.name, got, tt.want)
		}
	}
}
