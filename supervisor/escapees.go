package supervisor

import (
	"context"
	"strconv"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/berthd/berth/supervisor/runner"
)

// Escapees are the processes of a run that left its process group (setsid,
// a daemonising fork): a stop's signal to the group, and its SIGKILL, do
// not reach them. The daemon's own children carry the run's BERTH_RUN and
// the state's BERTH_INSTANCE, by which a scan of /proc finds them. As the
// run's stop begins, its escapees are sent its stop_signal too; once its
// process group is gone, those still there are SIGKILLed when its
// stop_timeout is over, as the group would have been (trial AP: they were
// killed at once, with no signal first). A run that ends on its own is not
// searched (a scan per run would be most of a short job's cost). Under
// systemd the unit's cgroup holds them, and systemd stops them with it.

// stoppedRun is a run's stop, as the sweeper is to see it through for
// its escapees: signal them (sig, the run's process group pgid excepted,
// which the stop signalled itself), or SIGKILL them once the run's stop
// is over (killAt, by the real clock: a test's fake one does not move
// while processes run).
type stoppedRun struct {
	id     uint64
	sig    syscall.Signal // 0: SIGKILL at killAt
	pgid   int
	killAt time.Time
}

// signalEscapeesLater queues the signal of a stop just begun for the run's
// escapees: those outside its process group, pgid.
func (d *Daemon) signalEscapeesLater(run uint64, pgid int, sig syscall.Signal) {
	d.queueSweep(stoppedRun{id: run, sig: sig, pgid: pgid})
}

// sweepLater queues a run berth stopped, whose process group is gone, for
// its escapees to be SIGKILLed once its stop is over, at killAt by the
// daemon's clock.
func (d *Daemon) sweepLater(run uint64, killAt time.Time) {
	d.queueSweep(stoppedRun{id: run, killAt: time.Now().Add(killAt.Sub(d.now()))})
}

func (d *Daemon) queueSweep(r stoppedRun) {
	d.stoppedMu.Lock()
	d.stoppedRuns = append(d.stoppedRuns, r)
	d.stoppedMu.Unlock()
	select {
	case d.sweepKick <- struct{}{}:
	default: // a sweep is due already and will see this run
	}
}

// sweepUntil sweeps when a run is queued, and when the stop of one swept
// before is over, until ctx ends.
func (d *Daemon) sweepUntil(ctx context.Context) {
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	for {
		select {
		case <-d.sweepKick:
		case <-timer.C:
		case <-ctx.Done():
			timer.Stop()
			return
		}
		timer.Stop()
		if next := d.sweep(time.Now()); !next.IsZero() {
			timer.Reset(time.Until(next))
		}
	}
}

// sweepLast sees through what the jobs' stops left as the daemon goes:
// their escapees are SIGKILLed when each stop is over, as before.
func (d *Daemon) sweepLast() {
	for next := d.sweep(time.Now()); !next.IsZero(); next = d.sweep(time.Now()) {
		time.Sleep(time.Until(next)) // bounded by the longest stop_timeout
	}
}

// sweep signals the escapees of the runs queued to be, SIGKILLs those of
// the runs whose stop is over at now, and keeps the others queued; it
// returns when the first of those is over (zero: none is queued).
func (d *Daemon) sweep(now time.Time) (next time.Time) {
	d.stoppedMu.Lock()
	runs := d.stoppedRuns
	d.stoppedRuns = nil
	d.stoppedMu.Unlock()
	if len(runs) == 0 {
		return time.Time{}
	}
	wanted := make(map[string]bool, len(runs))
	for _, r := range runs {
		wanted[strconv.FormatUint(r.id, 10)] = true
	}
	found, err := runner.FindByEnv(d.runMark(), "BERTH_RUN", wanted)
	if err != nil {
		d.log.Warn("cannot look for processes that left their job's group", "error", err)
		return time.Time{}
	}
	var later []stoppedRun
	for _, r := range runs {
		run := strconv.FormatUint(r.id, 10)
		pids := found[run]
		switch {
		case len(pids) == 0:
		case r.sig != 0:
			var sent []int
			for _, pid := range pids {
				if pgid, err := unix.Getpgid(pid); err == nil && pgid != r.pgid && unix.Kill(pid, r.sig) == nil {
					sent = append(sent, pid)
				}
			}
			if len(sent) > 0 {
				d.log.Info("sent the stop's signal to processes that had left their job's process group", "run", r.id, "signal", signalName(r.sig), "pids", sent)
			}
		case now.Before(r.killAt):
			later = append(later, r)
			if next.IsZero() || r.killAt.Before(next) {
				next = r.killAt
			}
		default:
			for _, pid := range pids {
				_ = unix.Kill(pid, unix.SIGKILL)
			}
			d.log.Warn("killed processes that had left their job's process group", "run", r.id, "pids", pids)
		}
	}
	if len(later) > 0 {
		d.stoppedMu.Lock()
		d.stoppedRuns = append(d.stoppedRuns, later...)
		d.stoppedMu.Unlock()
	}
	return next
}
