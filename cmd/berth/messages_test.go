package main

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/berthd/berth/accounting"
	"github.com/berthd/berth/luaapi"
	"github.com/berthd/berth/probes"
	"github.com/berthd/berth/supervisor"
	"github.com/berthd/berth/supervisor/store"
	"github.com/berthd/berth/supervisor/testkit"
)

var exit3 = 3

// afterFacts are a job's parents, one running since a day before
// afterNow (so that the sentence has its date) and one failed.
var afterFacts = []supervisor.Dependency{
	{Job: "prep", Kind: "after", State: "running", Since: time.Date(2026, 11, 29, 14, 2, 0, 0, time.UTC)},
	{Job: "fetch", Kind: "after", State: "failed", ExitCode: &exit3, Reason: "failed"},
}

// afterNow is the client's clock for the sentences about parents.
var afterNow = time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)

// TestMessages pins every sentence of the catalog in messages.go.
func TestMessages(t *testing.T) {
	pinRenderZone(t)
	pos := luaapi.Pos{File: "jobs.d/train.lua", Line: 14}
	msgs := []string{
		msgUnknownCommand("stauts", []string{"status", "machine"}),
		msgUnknownCommand("frobnicate", []string{"status", "machine"}),
		msgUsage("berth check", errors.New("flag provided but not defined: -x")),
		msgUnexpectedArgs("machine", []string{"extra"}),
		msgWarning("--cpus 64 is more than 4 times the 8 cores this machine has; jobs will be oversubscribed"),
		msgInventory(flagError{flag: "--ram", err: &accounting.SizeError{Input: "32", Problem: accounting.SizeNoUnit}}),
		msgInventory(fmt.Errorf("%w: read sys/devices/system/cpu/online: permission denied", probes.ErrCoresUnknown)),
		msgInventory(&probes.OverrideError{Flag: "--cpus", Value: 0, Min: 1, Max: 65536}),
		msgInventory(errors.Join(&probes.GPUListError{Asked: 3, Listed: []string{"2", "3"}})),
		msgWarning(probes.Warning{Kind: probes.CoresOversubscribed, Flag: "--cpus", Asked: 8, Online: 1}.String()),
		msgCheckTarget("jobs.d", os.ErrNotExist),
		msgCheckTarget("jobs.d", os.ErrPermission),
		supervisor.MsgUnplaceable(pos, "train", "", &accounting.UnplaceableError{Asked: accounting.Resources{CPUs: 1, GPUs: 4},
			Largest: accounting.Capacity{CPUIDs: []int{2, 3}, GPUs: 2}}),
		supervisor.MsgUnplaceable(pos, "infer", "", &accounting.UnplaceableError{Asked: accounting.Resources{CPUs: 1, GPUMemBytes: 90 << 30},
			Largest: accounting.Capacity{CPUIDs: []int{2, 3}, GPUs: 2, GPUMem: []int64{80 << 30, 40 << 30}}}),
		supervisor.MsgUnplaceable(pos, "infer", "", &accounting.UnplaceableError{Asked: accounting.Resources{CPUs: 1, GPUMemBytes: 20 << 30},
			Largest: accounting.Capacity{CPUIDs: []int{2, 3}, GPUs: 2}}),
		supervisor.MsgUnplaceable(pos, "infer", "", &accounting.UnplaceableError{Asked: accounting.Resources{CPUs: 4, GPUMemBytes: 20 << 30},
			Largest: accounting.Capacity{CPUIDs: []int{2, 3}}}),
		supervisor.MsgUnplaceable(pos, "infer", "", &accounting.UnplaceableError{Asked: accounting.Resources{CPUs: 1, GPUMemBytes: 50 << 30},
			Largest: accounting.Capacity{CPUIDs: []int{2, 3}}, Owner: "alice", Quota: &accounting.Quota{CPUs: -1, GPUs: -1, RAMBytes: -1, GPUMemBytes: 40 << 30}}),
		supervisor.MsgUnplaceable(pos, "infer", "", &accounting.UnplaceableError{Asked: accounting.Resources{CPUs: 1, GPUMemBytes: 30 << 30},
			Largest: accounting.Capacity{CPUIDs: []int{2, 3}, GPUs: 2, GPUMem: []int64{24 << 30, 24 << 30}}, Owner: "guest",
			Quota: &accounting.Quota{CPUs: -1, GPUs: 1, RAMBytes: -1, GPUMemBytes: -1}}),
		msgYourQuota("guest", supervisor.QuotaView{Held: supervisor.Size{GPUMemBytes: 20 * accounting.GiB}, Quota: supervisor.Size{CPUs: -1, GPUs: 1, RAMBytes: -1, GPUMemBytes: -1}, CardBytes: 24 * accounting.GiB}),
		msgYourQuota("bob", supervisor.QuotaView{Held: supervisor.Size{GPUs: 3}, Quota: supervisor.Size{CPUs: -1, GPUs: -1, RAMBytes: -1, GPUMemBytes: 20 * accounting.GiB}}),
		supervisor.MsgUnplaceable(pos, "free", "", &accounting.UnplaceableError{Asked: accounting.Resources{},
			Largest: accounting.Capacity{CPUIDs: []int{2, 3}}, Owner: "bob", Quota: &accounting.Quota{CPUs: 1, GPUs: -1, RAMBytes: -1, GPUMemBytes: -1}}),
		supervisor.MsgUnplaceable(pos, "free", "", &accounting.UnplaceableError{Asked: accounting.Resources{CPUs: 1},
			Largest: accounting.Capacity{CPUIDs: []int{2, 3}}, Owner: "bob", Quota: &accounting.Quota{CPUs: -1, GPUs: -1, RAMBytes: 1 << 30, GPUMemBytes: -1}}),
		msgInventory(&probes.OverrideError{Flag: "--gpu-mem", Value: 0, Min: 1}),
		msgUsage("berth daemon", flagError{flag: "--foreign-limit", err: &accounting.SizeError{Input: "1", Problem: accounting.SizeNoUnit}}),
		msgCardShares(supervisor.CardStatus{Name: "0", Shares: []supervisor.CardShare{{Holder: "infer", Bytes: 10 << 30}, {Holder: "alice/notebook", Owner: "alice", Bytes: 10 << 30}},
			RoomBytes: ptr(int64(4 << 30))}),
		msgCardShares(supervisor.CardStatus{Name: "3", Shares: []supervisor.CardShare{{Holder: "s4", Bytes: 50 << 30}}, RoomBytes: ptr(int64(0)), KeptFor: "w1"}),
		msgCardShares(supervisor.CardStatus{Name: "1", ShareOfBytes: ptr(int64(16 << 30)), RoomBytes: ptr(int64(12 << 30)), KeptFor: "s"}),
		msgCardShares(supervisor.CardStatus{Name: "0", Shares: []supervisor.CardShare{{Holder: "big", Bytes: 30 << 30}}, RoomBytes: ptr(int64(10 << 30)), KeptFor: "head"}),
		msgOverShare(supervisor.JobStatus{GPUs: []string{"1"}, GPUMemBytes: 10 << 30, GPUMemUsedBytes: ptr(int64(12 << 30))}),
		msgRanOverShare(12<<30, 10<<30),
		msgWarning(msgGPUMemOver(100<<30, "0", 80<<30)),
		supervisor.MsgCredentials(pos, "train", &supervisor.UnknownUserError{Kind: "user", Name: "ml"}),
		msgCheckSummary(3, 12, 2, 1), msgCheckAgainstDaemon(false), msgCheckAgainstDaemon(true),
		msgCheckSummary(1, 1, 1, 0),
		msgSocket("/run/berth/berth.sock", errSocketLive),
		msgSocket("/run/berth/berth.sock", os.ErrPermission),
		msgOpenState("/var/lib/berth", &store.LockedError{Path: "/var/lib/berth/state.db", HolderPID: 1234}),
		msgOpenState("/var/lib/berth", errors.New("open state /var/lib/berth/state.db: read-only file system")),
		msgOpenState("/var/lib/berth", &fs.PathError{Op: "write", Path: "/var/lib/berth/state.db.new", Err: syscall.ENOSPC}),
		msgOpenState("/var/lib/berth", &fs.PathError{Op: "open", Path: "/var/lib/berth/state.db", Err: syscall.EROFS}),
		msgOpenState("/var/lib/berth", &store.NotStateError{Path: "/var/lib/berth/state.db", Problem: store.NotStateEmpty}),
		msgOpenState("/var/lib/berth", fmt.Errorf("open daemon: %w", &store.NotStateError{Path: "/var/lib/berth/state.db", Problem: store.NotStateNotBolt, Size: 22})),
		msgOpenState("/var/lib/berth", &store.NotStateError{Path: "/var/lib/berth/state.db", Problem: store.NotStateForeign, Size: 32768}),
		msgOpenState("/var/lib/berth", fmt.Errorf("open state /var/lib/berth/state.db: %w: panic: assertion failed: Page expected to be: 0, but self identifies as 216", store.ErrCorrupt)),
		msgOpenState("/var/lib/berth", fmt.Errorf("make the state directory /var/lib/berth and its logs: mkdir /var/lib/berth/logs: %w", fs.ErrPermission)),
		msgOpenState("/var/lib/berth", fmt.Errorf("make the state directory /var/lib/berth and its logs: mkdir /var/lib/berth: %w", syscall.ENOTDIR)),
		msgNoDaemon("/run/berth/berth.sock"), msgNothingListens("/run/berth/berth.sock"), msgNotASocket("/tmp/berth.sock", "regular file"), msgCheckingDir("/etc/berth/jobs.d"), msgLookedFor("the files checked and /etc/berth/jobs.d"),
		msgSocketDenied("/run/berth/berth.sock", ""),
		msgSocketDenied("/run/berth/berth.sock", "ml-team"),
		msgSocketBlocked("/home/ana/berth.sock", "/home/ana"),
		msgSocketDirNotYours("/tmp/berth-1001", "it is owned by uid 1002", "remove it"),
		msgSocket("/tmp/berth-1001/berth.sock", &socketDirError{dir: "/tmp/berth-1001", why: "it is owned by uid 1002", fix: "remove it"}),
		msgSocket("/srv/berth/berth.sock", &socketDirError{dir: "/srv/berth", why: "others may write in it (mode 0777)", fix: "chmod go-w /srv/berth"}),
		msgDaemonGone(),
		msgAlready("train", "running"),
		msgAlready("train", "done"),
		msgBooksDiffer(supervisor.MachineStatus{CPUs: 4, Cards: make([]supervisor.CardStatus, 4), RAMBytes: new(int64(8 << 30))}),
		msgBooksDiffer(supervisor.MachineStatus{CPUs: 4, Cards: []supervisor.CardStatus{{ShareOfBytes: ptr(int64(16 << 30))}, {ShareOfBytes: ptr(int64(16 << 30))}}}),
		msgBooksDiffer(supervisor.MachineStatus{CPUs: 4, Cards: []supervisor.CardStatus{{ShareOfBytes: ptr(int64(16 << 30))}, {ShareOfBytes: ptr(int64(24 << 30))}}}),
		msgCardBooks(supervisor.CardStatus{Name: "0", ShareOfBytes: ptr(int64(16 << 30))}),
		msgCardBooks(supervisor.CardStatus{Name: "0", Holder: "train", ShareOfBytes: ptr(int64(16 << 30))}),
		msgCardBooks(supervisor.CardStatus{Name: "0", Shares: []supervisor.CardShare{{Holder: "a", Bytes: 5 << 30}, {Holder: "b", Bytes: 2 << 30}}, ShareOfBytes: ptr(int64(16 << 30)), RoomBytes: ptr(int64(9 << 30))}),
		msgCardBooks(supervisor.CardStatus{Name: "1", Shares: []supervisor.CardShare{{Holder: "s2", Bytes: 8 << 30}}, ShareOfBytes: ptr(int64(16 << 30)), RoomBytes: ptr(int64(0)), KeptFor: "head"}),
		msgCardBooks(supervisor.CardStatus{Name: "1", ShareOfBytes: ptr(int64(16 << 30)), RoomBytes: ptr(int64(4 << 30)), KeptFor: "head"}),
		msgRunOutdated(),
		msgGaveUp(2),
		msgGaveUp(0),
		msgGaveUpShow("train", 3),
		msgGaveUpShow("train", 0),
		msgNoneKept(3, "yours"),
		msgNoneKept(1, "alice's"),
		msgOthersLeft("stop", 3, `svc is an administrators' job; only root or a member of berth-admin can stop it (berth status shows each job's owner)`),
		msgOthersLeft("stop", 1, `svc is an administrators' job; only root or a member of berth-admin can stop it (berth status shows each job's owner)`),
		msgSocket("/run/berth/berth.sock", errNotSocket),
		msgDaemonTooOld("/run/berth/berth.sock", "GET /v1/flavors"),
		msgWantArgs("show", "JOB"),
		msgCannotReadSubmitted("train.lua", &os.PathError{Op: "open", Path: "train.lua", Err: syscall.ENOENT}),
		msgCannotReadSubmitted("train.lua", &os.PathError{Op: "open", Path: "train.lua", Err: syscall.EACCES}),
		msgCannotReadSubmitted("jobs.lua", &os.PathError{Op: "read", Path: "jobs.lua", Err: syscall.EISDIR}),
		msgCannotReadSubmitted("fifo.lua", errNotRegular),
		msgSubmitWouldReplace("v2/train.lua", "/var/spool/berth/alice/train.lua"),
		msgSubmitSameName("a/train.lua", "b/train.lua", "train.lua"),
		msgAddedDone("alice/prep"),
		msgEditElsewhere("../bob/x.lua", "/var/spool/berth/alice", true), msgEditElsewhere("../bob/x.lua", "/var/spool/berth/alice", false),
		msgStopKept("nightly", "enabled"), msgStopKept("train", "fixed"),
		msgAnswerCut(),
		msgGoneBeforeAnswer("/run/berth/berth.sock", ""),
		msgGoneBeforeAnswer("/run/berth/berth.sock", "the start of alice/train"),
		msgNoAnswerInTime("/run/berth/berth.sock", "", requestTimeout),
		msgNoAnswerInTime("/run/berth/berth.sock", "the reload", reloadTimeout),
		msgNotInYourDir("alice/train", "alice", "bob", "/var/spool/berth/alice/train.lua", "/var/spool/berth/bob", false),
		msgNotInYourDir("alice/train", "alice", "carol", "/var/spool/berth/alice/train.lua", "", true),
		msgNotInYourDir("shared", "", "bob", "/etc/berth/jobs.d/shared.lua", "/var/spool/berth/bob", false),
		msgNotInYourDir("bob/train", "bob", "bob", "/srv/linked/train.lua", "/var/spool/berth/bob", false),
		msgEditKept("/tmp/berth-edit-1/train.lua", "/var/spool/berth/alice/train.lua", true),
		msgEditKept("/tmp/berth-edit-2/new.lua", "/var/spool/berth/alice/new.lua", false),
		supervisor.MsgQuotaNoAccount(pos, "alcie", "alice"),
		supervisor.MsgQuotaNoAccount(pos, "nobody-here", ""),
		msgNoOutput("train", 0, false),
		msgNoOutput("train", 0, true),
		msgNoOutput("train", 7, false),
		msgNoOutput("sweep[4]", 0, false),
		msgNeverRan("eval"),
		msgRunOutputGone("train", 7),
		msgRunOutputStartGone("train", 7),
		msgFollowNotDeclared("train"),
		msgFollowAtRest("train", "done"), msgFollowAtRest("off", "disabled"), msgFollowAtRest("big", "unplaceable"),
		msgTailLeftOut("train", 12, 0),
		msgTailLeftOut("train", 0, 4096),
		msgTailLeftOut("train", 1, 100),
		msgReloaded(supervisor.ReloadResult{Files: 3, Added: []string{"a"}, Errors: []string{"x"}}, renderNow),
		msgReloaded(supervisor.ReloadResult{Files: 2}, renderNow),
		msgReloaded(supervisor.ReloadResult{Files: 2, Quotas: []string{"*", "alice"}}, renderNow),
		msgReloaded(supervisor.ReloadResult{Files: 2, Earlier: &supervisor.ReloadChange{At: renderNow.Add(-12 * time.Second), Quotas: []string{"alice"}}}, renderNow),
		msgReloaded(supervisor.ReloadResult{Files: 2, Earlier: &supervisor.ReloadChange{At: renderNow.Add(-12 * time.Second), Changed: []string{"prep"}}}, renderNow),
		msgReloaded(supervisor.ReloadResult{Files: 2, Errors: []string{"x"}, Earlier: &supervisor.ReloadChange{At: renderNow.Add(-12 * time.Second), Added: []string{"eval"}}}, renderNow),
		msgMoreRuns("", 20), msgMoreRuns(quoteArg("sweep[3]"), 1), msgMoreRuns("--owner alice", 5),
		msgReloaded(supervisor.ReloadResult{Files: 2, Writing: []string{"/etc/berth/jobs.d/train.lua"}}, renderNow),
		msgReloaded(supervisor.ReloadResult{Files: 40, Changed: []string{"train", "eval"}, Removed: strings.Split("a b c d e f g h i j k l m n o p q r s t u v", " ")}, renderNow),
		msgMetricsListen("127.0.0.1:9465", &net.OpError{Op: "listen", Net: "tcp", Err: &os.SyscallError{Syscall: "bind", Err: syscall.EADDRINUSE}}),
		msgMetricsListen("0.0.0.0:80", &net.OpError{Op: "listen", Net: "tcp", Err: &os.SyscallError{Syscall: "bind", Err: syscall.EACCES}}),
		msgMetricsListen("10.9.9.9:9465", &net.OpError{Op: "listen", Net: "tcp", Err: &os.SyscallError{Syscall: "bind", Err: syscall.EADDRNOTAVAIL}}),
		msgMetricsListen("localhost", &net.OpError{Op: "listen", Net: "tcp", Err: &net.AddrError{Err: "missing port in address", Addr: "localhost"}}),
		msgNoSystemd(errors.New("connect to systemd: dial unix /run/systemd/private: connect: no such file or directory")),
		msgRunner("units", false),
		msgRunner("units", true),
		msgRunner("direct", false),
		msgBinaryReplaced(supervisor.DaemonStatus{Version: "1.2.0", Binary: "/usr/bin/berth", BinaryReplaced: true}, "units", "1.3.0"),
		msgBinaryReplaced(supervisor.DaemonStatus{Version: "dev", Binary: "/usr/local/bin/berth", BinaryReplaced: true}, "direct", "dev"),
		msgInternal(errors.New("encode the answer: broken pipe")),
		msgMoreJobs(12),
		msgMoreJobs(1),
		msgWatchNotTerminal(),
		msgWatchStopping("14:03:05"),
		msgWatchNoAnswer("/run/berth/berth.sock", "14:03:05"),
		msgWatchEnded("/run/berth/berth.sock"),
		msgKillIn(13 * time.Second), msgKillIn(300 * time.Millisecond), msgKillIn(0), msgMoreErrors(9973), msgListLoading("jobs"),
		msgDaemonLoading(), msgDaemonStopping(false), msgDaemonStopping(true), msgArrayRestarts(4, true), msgArrayRestarts(1, false), msgOutputCutShort("loud", "not a time"),
		msgEditRaced("/etc/berth/jobs.d/train.lua", "/tmp/berth-edit-1/train.lua", true), msgEditRaced("/etc/berth/jobs.d/train.lua", "/tmp/berth-edit-1/train.lua", false),
		msgAfter("train", "/etc/berth/jobs.d/train.lua", afterFacts, afterNow), msgAfterLeftOut("train", 92),
		msgAfter("train", "/etc/berth/jobs.d/train.lua", []supervisor.Dependency{{Job: "serve", Kind: "after", State: "backoff", Service: true},
			{Job: "fetch", Kind: "after_any", State: "failed", ExitCode: &exit3, Reason: "failed", Satisfied: true},
			{Job: "alice/prep", Kind: "after_any", State: "waiting"}}, afterNow),
		msgAfter("train", "/etc/berth/jobs.d/train.lua", []supervisor.Dependency{{Job: "prep", Kind: "after", State: "failed", Signal: "SIGKILL", Reason: "failed"}}, afterNow),
		msgAfter("train", "/etc/berth/jobs.d/train.lua", []supervisor.Dependency{{Job: "prep", Kind: "after", State: "starting", Since: afterNow.Add(-time.Second)}}, afterNow),
		msgAfter("train", "/etc/berth/jobs.d/train.lua", []supervisor.Dependency{{Job: "cache", Kind: "after", State: "stopped", Service: true}}, afterNow),
		msgAfter("train", "/etc/berth/jobs.d/train.lua", []supervisor.Dependency{{Job: "cache", Kind: "after", State: "failed", Service: true}}, afterNow),
		msgAfter("train", "/etc/berth/jobs.d/train.lua", []supervisor.Dependency{{Job: "prep", Kind: "after", State: "failed", Signal: "SIGTERM", Reason: "timed out"}}, afterNow),
		msgAfter("train", "/etc/berth/jobs.d/train.lua", []supervisor.Dependency{{Job: "prep", Kind: "after", State: "failed", ExitCode: &exit3, Reason: "timed out"}}, afterNow),
		msgAfter("train", "/etc/berth/jobs.d/train.lua", []supervisor.Dependency{{Job: "prep", Kind: "after", State: "stopped"}}, afterNow),
		msgAfter("fgc", "/etc/berth/jobs.d/chain.lua", []supervisor.Dependency{{Job: "fc", Kind: "after", State: "waiting",
			Upstream: &supervisor.Dependency{Job: "fp", Kind: "after", State: "failed", ExitCode: &exit3, Reason: "failed"}}}, afterNow),
		msgAfter("report", "/etc/berth/jobs.d/report.lua", []supervisor.Dependency{{Job: "sweep", Kind: "after", State: "stopped", Array: true}}, afterNow),
		msgAfter("merge", "/etc/berth/jobs.d/merge.lua", []supervisor.Dependency{{Job: "sweep", Kind: "after", State: "failed", Array: true}}, afterNow),
		msgAfter("train", "/etc/berth/jobs.d/train.lua", []supervisor.Dependency{{Job: "prep", Kind: "after_any", State: "invalid"}}, afterNow),
		msgAfter("train", "/etc/berth/jobs.d/train.lua", []supervisor.Dependency{{Job: "prep", Kind: "after_any", State: "running", Since: afterNow.Add(-time.Minute)}}, afterNow),
		msgAfter("train", "/etc/berth/jobs.d/train.lua", []supervisor.Dependency{{Job: "prep", Kind: "after", State: "unknown"}}, afterNow),
		msgAfter("eval", "/etc/berth/jobs.d/eval.lua", []supervisor.Dependency{{Job: "prep", Kind: "after", State: "done", Satisfied: true},
			{Job: "train", Kind: "after", State: "done", Behind: "train"}}, afterNow),
		msgAfter("eval", "/etc/berth/jobs.d/eval.lua", []supervisor.Dependency{{Job: "train", Kind: "after", State: "done", Behind: "prep"}}, afterNow),
		msgHeld("start", "train", "/etc/berth/jobs.d/train.lua", afterFacts, afterNow),
		msgHeld("restart", "train", "/etc/berth/jobs.d/train.lua", afterFacts[:1], afterNow),
		msgGated("restart", "train", "/etc/berth/jobs.d/train.lua", []supervisor.Dependency{{Job: "prep", Kind: "after", State: "failed", ExitCode: &exit3, Reason: "failed"}}, afterNow),
		msgDependency(afterFacts[0], afterNow),
		msgDependency(afterFacts[0], afterFacts[0].Since.Add(time.Hour)),
		msgDependency(afterFacts[1], afterNow),
		msgDependency(supervisor.Dependency{Job: "prep", Kind: "after", State: "done", Satisfied: true}, afterNow),
		msgControlled("train", "restart", false, 0),
		msgControlled("sweep", "stop", true, 100),
		msgControlled("sweep", "start", true, 1),
		msgControlled("sweep", "stop", true, 0),
		msgForeignUse("1", supervisor.ForeignUse{PID: 4242, User: "carol", Command: "python3", MemoryBytes: 21 << 30}, true),
		msgForeignUse("GPU-5f1c", supervisor.ForeignUse{PID: 1830, Command: "Xorg", MemoryBytes: -1}, false),
		msgVersionNoDaemon("/run/user/1000/berth/berth.sock", "/run/berth/berth.sock"),
		msgStoppedAll(3, 0, 0), msgStoppedAll(3, 1, 7), msgStoppedAll(1, 1, 7), msgStoppedAll(5, 2, 9), msgStoppedAll(0, 0, 0), msgAlreadyStoppingAll(2),
		msgStoppedKept(1), msgStoppedKept(2),
		msgStartedAll(3, 0, 0), msgStartedAll(3, 1, 2), msgStartedAll(0, 0, 0), msgStartStopped("sweep", 2), msgHeldFromRerun("train"), msgNotStopped("sweep[1]", "done"), msgInLine(2), msgInLine(3), msgInLine(11), msgInLine(21), msgInLine(112), msgStartStopped("sweep", 0),
		msgRestartFailed("sweep", 3),
		msgRestartFailed("sweep", 1),
		msgRestartFailed("alice/sweep", 0),
		msgIndexWithoutJob("logs", 7),
		msgIndexTwice("history", "sweep[7]", 7),
		msgNotJobFileName("notes.txt"), msgSubmitDir("sweeps"),
		msgCannotWriteJobFile("/var/spool/berth/alice", os.ErrPermission),
		msgNoJobsDirClient("alice", "berth"),
		msgNameRefused("ana.Lopez"),
		msgNotWritten(1, false),
		msgNotWritten(2, false),
		msgNotWritten(50, true),
		msgEditNewFile("nonexist"),
	}
	testkit.Golden(t, "testdata/messages.golden", []byte(strings.Join(msgs, "\n")+"\n"))
}

func ptr[T any](v T) *T { return &v }

// TestSecondAt: a moment on another day than now's says its date.
func TestSecondAt(t *testing.T) {
	pinRenderZone(t)
	now := renderNow
	for _, c := range []struct {
		at   time.Time
		want string
	}{
		{now.Add(time.Minute), now.Add(time.Minute).In(renderZone).Format("15:04:05")},
		{now.Add(30 * time.Hour), now.Add(30 * time.Hour).In(renderZone).Format("2006-01-02 15:04:05")},
	} {
		if got := secondAt(c.at, now); got != c.want {
			t.Errorf("secondAt(%v) = %q, want %q", c.at, got, c.want)
		}
	}
}
