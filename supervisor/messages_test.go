package supervisor

import (
	"errors"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/berthd/berth/accounting"
	"github.com/berthd/berth/luaapi"
	"github.com/berthd/berth/supervisor/ctlsock"
	"github.com/berthd/berth/supervisor/store"
	"github.com/berthd/berth/supervisor/testkit"
)

// TestMessagesGolden pins every sentence of the daemon's catalog.
func TestMessagesGolden(t *testing.T) {
	t.Parallel()
	pos := luaapi.Pos{File: "/etc/berth/jobs.d/train.lua", Line: 14}
	unplaceable := &accounting.UnplaceableError{Asked: accounting.Resources{CPUs: 2, GPUs: 4},
		Largest: accounting.Capacity{Name: "local", CPUIDs: []int{0, 1, 2, 3}, GPUs: 2}}
	lines := []string{
		msgNotLoadedYet("train"), msgRunsEarlierDefinition("serve", true), msgIndicesRunOn("jobs.d/sweep.lua:1: job \"sweep\" asks for 64 cores; this machine has 2 (berth machine shows what it has)"), msgRunsEarlierDefinition("train", false), msgOutputCut("train", "/var/lib/berth/logs", time.Date(2026, 12, 6, 14, 3, 5, 0, time.UTC), errors.New("write /var/lib/berth/logs/train.log: no space left on device"), nil),
		msgOutputCut("train", "/var/lib/berth/logs", time.Date(2026, 12, 6, 14, 3, 5, 0, time.UTC), errors.New("write /var/lib/berth/logs/train.log: no space left on device"), []string{"eval", "prep"}), msgNoSuchJob("train", "", 0), msgNoSuchJob("train", "", 1), msgNoSuchJob("train", "", 3), msgNoSuchJob("trian", "train", 0), msgNoSuchJob("trian", "train", 2), msgJobGone("ticker", true), msgJobGone("ticker", false),
		msgStopping("it ran past its timeout of 12h", "SIGINT"),
		msgStoppingSent("stopped on request (berth stop)", "SIGTERM"),
		msgStoppedOutside,
		msgGoneWhileAway(`berth-alice\x2frf-26.service`),
		msgOOMWhy("out of memory: went over its 256M"),
		msgNoSuchCall("GET", "/v2/status"), msgWrongMethod("GET", "/v1/jobs/train/stop", []string{"POST"}),
		msgRemovedStopping("restart", "train", pos.File),
		msgOrphanKept("train", 549), msgNoJobRunKept("train"), MsgRunsKept(1), MsgRunsKept(2),
		msgNotArray("hp[2]"), msgIndexGated(2), msgIndexBehind("sweep[3]"),
		msgLogsUnwritable("/var/lib/berth/logs", syscall.EPERM),
		msgRunsAgainAfter("prep", store.StateRunning, true), msgRunsAgainAfter("prep", store.StateFailed, true), msgRunsAgainAfter("prep", 0, false),
		msgLostWithDaemon, msgLostLeftovers, msgLostWithMachine, msgLostShuttingDown, msgLostUnit, msgLostUnrecorded, msgHeldForShutdown,
		msgSocketTaken("/run/berth/berth.sock"),
		msgSocketNotBound("/run/berth/berth.sock", errors.New("mkdir /run/berth: read-only file system")),
		msgBadRunCount("-1"),
		msgBadLineCount("-1"),
		msgJobsDirMissing("/srv/berth/jobs.d", false), msgJobsDirMissing("/srv/berth/jobs.d", true),
		msgFirstInLine("train"),
		msgCannotReadHistory(errors.New("read state: input/output error")),
		msgNoAnswer(errors.New("context deadline exceeded")),
		MsgStopping("berth stop train"),
		MsgStopping(""),
		msgTooManyTails(4),
		msgOfVersionInForce(`/etc/berth/jobs.d/pipe.lua:2: job "train": field "after": job "prepair" does not exist (did you mean "prepare"?)`),
		msgTooManyJobs("/var/spool/berth/alice/sweep.lua", "alice", 100000, 12, 10000),
		msgNotPermitted(1001, "berth", "berth-admin"),
		msgRefused("start", "train", refuseDisabled, msgDisabledAt(luaapi.Pos{File: "/etc/berth/jobs.d/train.lua", Line: 3}, "train", false)),
		msgRefused("start", "alice/train", refuseDisabled, msgDisabledAt(luaapi.Pos{File: "/var/spool/berth/alice/train.lua", Line: 1}, "alice/train", true)),
		msgRefused("start", "train", refuseUnplaceable, `/etc/berth/jobs.d/train.lua:3: job "train" asks for 64 cores; this machine has 4 (berth machine shows what it has)`),
		msgRefused("restart", "train", refuseInvalid, `/etc/berth/jobs.d/train.lua:3: job "train": flavor "gpu-huge" does not exist (berth flavors lists them)`),
		MsgUnplaceable(pos, "train", "", unplaceable),
		MsgUnplaceable(pos, "train", "gpu-huge", unplaceable), msgUnplaceableAt(pos, "train", "gpu-huge", luaapi.Pos{File: "/etc/berth/jobs.d/flavors.lua", Line: 2}, unplaceable),
		MsgCredentials(pos, "train", errors.New(`user "nobody2" does not exist (getent passwd lists them)`)),
		MsgCredentials(pos, "train", &UnknownUserError{Kind: "group", Name: "ml"}),
		MsgCredentials(pos, "train", &UnknownUserError{Kind: "user", Name: "0"}),
		MsgCredentials(pos, "train", &UnknownUserError{Kind: "group", Name: "4000000000"}),
		MsgCredentials(pos, "train", &NeedsRootError{Kind: "user", Name: "ml", UID: 1000, GID: 1000}),
		MsgCredentials(pos, "train", &NeedsRootError{Kind: "group", Name: "video", UID: 1000, GID: 1000}),
		msgCannotStart("train", "dir /srv/x does not exist"),
		msgSpawnErrorGone("train"),
		msgStartHidden("/etc/berth/jobs.d/secret.lua"),
		msgNameTaken(pos, "job", "train", luaapi.Pos{File: "/etc/berth/jobs.d/a.lua", Line: 2}),
		MsgNotRecording("/var/lib/berth", errors.New("commit state: no space left on device")),
		MsgNotRecording("/var/lib/berth", fmt.Errorf("commit state: %w", syscall.EPERM)),
		MsgNotRecording("/var/lib/berth", fmt.Errorf("commit state: %w", syscall.EROFS)),
		msgUnrecordedAtStop("/var/lib/berth", &store.UnrecordedError{Jobs: []string{"prep", "train"}, Runs: 3, Err: syscall.ENOSPC}),
		msgUnrecordedAtStop("/var/lib/berth", &store.UnrecordedError{Jobs: []string{"prep"}, Runs: 1, Err: fmt.Errorf("commit: %w", syscall.EPERM)}),
		msgHidden(Problem{Code: "bad_value", File: "/etc/berth/jobs.d/secret.lua", Line: 3, Kind: "job", Job: "train"}),
		msgHidden(Problem{Code: "unknown_field", File: "/etc/berth/jobs.d/secret.lua", Line: 5, Kind: "flavor", Job: "big"}),
		msgHidden(Problem{Code: "syntax", File: "/etc/berth/jobs.d/secret.lua", Line: 1}),
		msgNoCredentials(),
		msgDefinitionHidden("/var/spool/berth/alice/train.lua"),
		MsgStateGone(&store.GoneError{Path: "/var/lib/berth/state.db"}, 1234),
		MsgStateGone(&store.GoneError{Path: "/var/lib/berth/state.db", Replaced: true}, 1234),
		msgStateGoneShort(&store.GoneError{Path: "/var/lib/berth/state.db"}),
		msgStateGoneShort(&store.GoneError{Path: "/var/lib/berth/state.db", Replaced: true}),
		msgBinaryReplacedShort("units"),
		msgBinaryReplacedShort("direct"),
		MsgShort(Size{CPUs: 8, GPUs: 2, RAMBytes: 32 * accounting.GiB}, Size{CPUs: 3, GPUs: 1, RAMBytes: 16 * accounting.GiB}),
		MsgShort(Size{CPUs: 1, GPUs: 1}, Size{GPUs: 1}),
		MsgShort(Size{CPUs: 1}, Size{}),
		MsgShort(Size{CPUs: 1, GPUMemBytes: 20 * accounting.GiB}, Size{GPUMemBytes: 8 * accounting.GiB}),
		MsgEnded(store.ReasonExited, 0, "", 0, 0),
		MsgEnded(store.ReasonFailed, 3, "", 0, 0),
		MsgEnded(store.ReasonFailed, 127, "", 0, 0), MsgEnded(store.ReasonFailed, 126, "", 0, 0),
		MsgEnded(store.ReasonFailed, 0, "SIGSEGV", 0, 0),
		MsgEnded(store.ReasonFailed, 0, "SIGKILL", 0, 0),
		MsgEnded(store.ReasonTimedOut, 0, "", 12*time.Hour, 0),
		MsgEnded(store.ReasonKilled, 0, "", 0, 0),
		MsgEnded(store.ReasonOOM, 0, "SIGKILL", 0, 256<<20),
		accounting.Count(1, "gpu") + ", " + accounting.Count(0, "gpu") + ", " + accounting.Count(2, "cpu"),
		msgTooManyConnections(ctlsock.Refusal{UID: 1001, Open: 64, Limit: 64}),
		msgTooManyConnections(ctlsock.Refusal{UID: 1002, Open: 3, Limit: 1024, Total: true}),
		MsgQuotaWait("alice", QuotaView{Held: Size{GPUs: 2}, Quota: Size{GPUs: 2, CPUs: -1, RAMBytes: -1}}, Size{GPUs: 1, CPUs: 4}),
		MsgQuotaWait("alice", QuotaView{Held: Size{CPUs: 30, RAMBytes: 100 * accounting.GiB}, Quota: Size{GPUs: -1, CPUs: 32, RAMBytes: 128 * accounting.GiB}}, Size{CPUs: 4, RAMBytes: 64 * accounting.GiB}),
		MsgQuotaWait("alice", QuotaView{Held: Size{GPUs: 3}, Quota: Size{GPUs: 2, CPUs: -1, RAMBytes: -1}}, Size{CPUs: 1}),
		MsgQuotaWait("alice", QuotaView{Held: Size{GPUMemBytes: 30 * accounting.GiB}, Quota: Size{GPUs: -1, CPUs: -1, RAMBytes: -1, GPUMemBytes: 40 * accounting.GiB}},
			Size{CPUs: 1, GPUMemBytes: 20 * accounting.GiB}),
		MsgQuotaWait("guest", QuotaView{Held: Size{GPUMemBytes: 16 * accounting.GiB}, Quota: Size{GPUs: 1, CPUs: -1, RAMBytes: -1, GPUMemBytes: -1}},
			Size{CPUs: 1, GPUMemBytes: 16 * accounting.GiB}),
		MsgQuotaWait("guest", QuotaView{Held: Size{GPUMemBytes: 10 * accounting.GiB}, Quota: Size{GPUs: 1, CPUs: -1, RAMBytes: -1, GPUMemBytes: -1}},
			Size{CPUs: 1, GPUs: 1}),
		MsgQuotaWait("guest", QuotaView{Held: Size{GPUMemBytes: 20 * accounting.GiB}, Quota: Size{GPUs: 1, CPUs: -1, RAMBytes: -1, GPUMemBytes: -1}, CardBytes: 24 * accounting.GiB},
			Size{CPUs: 1, GPUMemBytes: 10 * accounting.GiB}),
		msgNotYours("alice/train", "alice", "stop it", "berth-admin"),
		msgNotYours("shared", "", "read its output", "berth-admin"), msgNotYours("alice/train", "alice", "stop it", ""),
		msgEnvHidden("alice/train", "alice", "berth-admin"),
		msgEnvHidden("shared", "", "berth-admin"),
		msgBadRun("x"),
		msgCheckTooLarge("train.lua", 2<<20, 1<<20),
		msgBadFileName("../x.lua", maxFileName),
		msgCheckRequestTooLarge(checkBytes, 1<<20),
		msgNoJobsDir("carol", "berth"),
		msgBadCheck(errors.New("unexpected EOF")),
		msgNoSuchRun("alice/train", 42),
		msgNoJournalctl(errors.New(`exec: "journalctl": executable file not found in $PATH`)),
		msgJournalctlFailed(errors.New("exit status 1"), "Failed to open journal: Permission denied\nmore"),
	}
	testkit.Golden(t, "testdata/messages.golden", []byte(strings.Join(lines, "\n")+"\n"))
}

// TestThenAfterStop: what a person asked while a run stops is said once,
// the last word winning; a stop of a person's stop under way adds nothing
// (trial AJ: "stopped on request (berth stop); …; then stopped on request
// (berth stop)").
func TestThenAfterStop(t *testing.T) {
	t.Parallel()
	stop := msgStopRequested + "; SIGTERM sent"
	restart := "restarted on request (berth restart); SIGTERM sent"
	for _, tt := range []struct {
		why, runs string
		stopAsked bool
		want      string
	}{
		{stop, "", true, stop},
		{stop, msgStartRequested, true, stop + "; then started on request (berth start): it runs again once this run has ended"},
		{stop, msgRestartRequested, true, stop + "; then restarted on request (berth restart): it runs again once this run has ended"},
		{msgThenAfterStop(stop, msgStartRequested, true), "", true, stop},
		{restart, "", false, restart + "; then stopped on request (berth stop): it rests stopped once this run has ended"},
		{msgThenAfterStop(restart, "", false), msgStartRequested, false, restart + "; then started on request (berth start): it runs again once this run has ended"},
	} {
		if got := msgThenAfterStop(tt.why, tt.runs, tt.stopAsked); got != tt.want {
			t.Errorf("msgThenAfterStop(%q, %q, %v) = %q, want %q", tt.why, tt.runs, tt.stopAsked, got, tt.want)
		}
	}
}
