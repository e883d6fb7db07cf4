package supervisor

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime/pprof"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
)

// loopTask is what the event loop is doing, for the line an abort leaves.
// Only the loop writes it; the abort handler reads it from another
// goroutine, which is the point: the loop may be the one that is stuck.
type loopTask int32

const (
	loopStarting loopTask = iota // reconciling and loading, before the loop
	loopIdle                     // waiting in its select
	loopReload
	loopCall
	loopEvaluated
	loopStatus
	loopSettle
	loopWatchdog
)

func (t loopTask) String() string {
	switch t {
	case loopStarting:
		return "starting (taking back runs, loading the job files)"
	case loopIdle:
		return "idle"
	case loopReload:
		return "starting a reload"
	case loopCall:
		return "answering a call from the control socket"
	case loopEvaluated:
		return "applying evaluated job files"
	case loopStatus:
		return "sending the status line"
	case loopSettle:
		return "handing memory back"
	case loopWatchdog:
		return "pinging the watchdog"
	default:
		return fmt.Sprintf("loopTask(%d)", int(t))
	}
}

// loopActivity is the loop's task and since when, and its last ping of
// the watchdog; every field is read without the loop's help.
type loopActivity struct {
	task     atomic.Int32
	since    atomic.Int64 // unix nanoseconds
	lastPing atomic.Int64 // unix nanoseconds; 0 before the first
}

// begin marks the loop busy with t from now; end marks it idle again.
func (a *loopActivity) begin(t loopTask) {
	a.since.Store(time.Now().UnixNano())
	a.task.Store(int32(t))
}

func (a *loopActivity) end() { a.begin(loopIdle) }

// stacksFile is where an abort leaves every goroutine's stack, in the
// state directory: for whoever debugs the daemon, not for the log.
const stacksFile = "abort-goroutines.txt"

// ReportAbort says in one line on log why the daemon is about to die of
// sig (systemd's watchdog sends SIGABRT): what the event loop was doing and
// for how long, and when it last pinged the watchdog. Every goroutine's
// stack goes to a file in the state directory, which the line names,
// rather than hundreds of lines into the journal at err, where they would
// bury everything else. The caller exits after it, so log must not lose
// the line when the process is gone before journald has looked at it.
//
// The line comes first: a loop stuck on a disk that hangs would hang the
// file's write too, and systemd kills the daemon TimeoutAbortSec later.
// The file gets stacksWithin; past it the daemon goes without it.
func (d *Daemon) ReportAbort(log hclog.Logger, sig string) {
	now := time.Now()
	task := loopTask(d.activity.task.Load())
	path := filepath.Join(d.cfg.StateDir, stacksFile)
	kv := []any{"signal", sig, "loop", task.String()}
	if since := d.activity.since.Load(); since != 0 {
		kv = append(kv, "for_ms", now.Sub(time.Unix(0, since)).Milliseconds())
	}
	if last := d.activity.lastPing.Load(); last != 0 {
		kv = append(kv, "last_watchdog_ping_ms_ago", now.Sub(time.Unix(0, last)).Milliseconds())
	}
	msg := "aborted: the event loop was stuck"
	if task == loopIdle {
		// Idle in its select: the whole process was held (SIGSTOP, a
		// machine too loaded to schedule it), or someone sent the signal.
		msg = "aborted while the event loop was waiting"
	}
	log.Error(msg, append(kv, "stacks", path)...)

	written := make(chan error, 1)
	go func() { written <- writeStacks(path) }() // abandoned, with the process, if the disk hangs
	select {
	case err := <-written:
		if err != nil {
			log.Warn("cannot write the goroutines' stacks", "path", path, "error", err)
		}
	case <-time.After(stacksWithin):
		log.Warn("cannot write the goroutines' stacks: the disk does not answer", "path", path, "waited_ms", stacksWithin.Milliseconds())
	}
}

// stacksWithin bounds the write of the stacks at an abort.
const stacksWithin = 5 * time.Second

func writeStacks(path string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	if err := pprof.Lookup("goroutine").WriteTo(f, 2); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
