package supervisor

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/berthd/berth/luaapi"
	"github.com/berthd/berth/supervisor/store"
)

var t0 = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

var allStates = []store.State{0, store.StateWaiting, store.StateStarting, store.StateRunning, store.StateStopping, store.StateBackoff,
	store.StateDone, store.StateFailed, store.StateStopped, store.StateInvalid, store.StateUnplaceable, store.StateDisabled}

func acts(kinds ...actionKind) []actionKind { return kinds }

func kindsOf(as []action) []actionKind {
	var out []actionKind
	for _, a := range as {
		out = append(out, a.kind)
	}
	return out
}

// TestStepEveryPair walks every (state, event) pair. The table lists each
// pair that does something; every other pair must change nothing and do
// nothing, except a grant that arrives unasked, which is given back.
func TestStepEveryPair(t *testing.T) {
	t.Parallel()
	type key struct {
		s store.State
		e eventKind
	}
	type want struct {
		s    store.State
		acts []actionKind
	}
	// The job's policy here is restart = "no"; restarts are tested below.
	rest := []store.State{store.StateDone, store.StateFailed, store.StateStopped, store.StateInvalid, store.StateUnplaceable, 0}
	table := map[key]want{
		{store.StateWaiting, evRedefine}:    {store.StateWaiting, acts(actCancelWait, actWait)},
		{store.StateWaiting, evStop}:        {store.StateStopped, acts(actCancelWait)},
		{store.StateWaiting, evDisable}:     {store.StateDisabled, acts(actCancelWait)},
		{store.StateWaiting, evInvalid}:     {store.StateInvalid, acts(actCancelWait)},
		{store.StateWaiting, evPlaced}:      {store.StateStarting, acts(actSpawn)},
		{store.StateWaiting, evUnplaceable}: {store.StateUnplaceable, nil},
		// Stopped, an unplaceable job stays stopped once it fits.
		{store.StateUnplaceable, evStop}: {store.StateStopped, nil},

		{store.StateStarting, evRestart}:     {store.StateStopping, acts(actStop)},
		{store.StateStarting, evRedefine}:    {store.StateStopping, acts(actStop)},
		{store.StateStarting, evStop}:        {store.StateStopping, acts(actStop)},
		{store.StateStarting, evDisable}:     {store.StateStopping, acts(actStop)},
		{store.StateStarting, evInvalid}:     {store.StateStopping, acts(actStop)},
		{store.StateStarting, evSpawned}:     {store.StateRunning, nil},
		{store.StateStarting, evSpawnFailed}: {store.StateFailed, acts(actGive, actRecordEnd)},
		{store.StateStarting, evExited}:      {store.StateDone, acts(actGive, actRecordEnd)},

		{store.StateRunning, evRestart}:  {store.StateStopping, acts(actStop)},
		{store.StateRunning, evRedefine}: {store.StateStopping, acts(actStop)},
		{store.StateRunning, evStop}:     {store.StateStopping, acts(actStop)},
		{store.StateRunning, evDisable}:  {store.StateStopping, acts(actStop)},
		// {Running, evInvalid}: the run goes on, and the job rests invalid
		// once it ends (TestStepStoppingDestinations).
		{store.StateRunning, evExited}:  {store.StateDone, acts(actGive, actRecordEnd)},
		{store.StateRunning, evTimeout}: {store.StateStopping, acts(actStop)},

		// A stopping job records its destination (tested below); only the
		// reaping moves it.
		{store.StateStopping, evExited}: {store.StateStopped, acts(actGive, actRecordEnd)},

		{store.StateBackoff, evStart}:       {store.StateWaiting, acts(actCancelBackoff, actWait)},
		{store.StateBackoff, evRestart}:     {store.StateWaiting, acts(actCancelBackoff, actWait)},
		{store.StateBackoff, evRedefine}:    {store.StateWaiting, acts(actCancelBackoff, actWait)},
		{store.StateBackoff, evStop}:        {store.StateStopped, acts(actCancelBackoff)},
		{store.StateBackoff, evDisable}:     {store.StateDisabled, acts(actCancelBackoff)},
		{store.StateBackoff, evInvalid}:     {store.StateInvalid, acts(actCancelBackoff)},
		{store.StateBackoff, evBackoffDone}: {store.StateWaiting, acts(actWait)},
		// Under restart = "no", an armed restart is called off.
		{store.StateBackoff, evPolicy}: {store.StateDone, acts(actCancelBackoff, actGiveUp)},

		{store.StateDisabled, evEnable}: {store.StateWaiting, acts(actWait)},

		// The daemon going away: what waits stops waiting where it is, a
		// run is stopped (what follows is tested below).
		{store.StateWaiting, evShutdown}:  {store.StateWaiting, acts(actCancelWait)},
		{store.StateBackoff, evShutdown}:  {store.StateBackoff, acts(actCancelBackoff)},
		{store.StateStarting, evShutdown}: {store.StateStopping, acts(actStop)},
		{store.StateRunning, evShutdown}:  {store.StateStopping, acts(actStop)},
	}
	for _, s := range rest {
		table[key{s, evStart}] = want{store.StateWaiting, acts(actWait)}
		table[key{s, evRestart}] = want{store.StateWaiting, acts(actWait)}
		table[key{s, evRedefine}] = want{store.StateWaiting, acts(actWait)}
		if s != store.StateDisabled {
			table[key{s, evDisable}] = want{store.StateDisabled, nil}
		}
		if s != store.StateInvalid {
			table[key{s, evInvalid}] = want{store.StateInvalid, nil}
		}
	}

	policy := restartPolicy{mode: luaapi.RestartNo, maxRestarts: -1}
	for _, s := range allStates {
		for e := evStart; e <= lastEvent; e++ {
			t.Run(fmt.Sprintf("%v/%v", s, e), func(t *testing.T) {
				l := life{state: s, since: t0.Add(-time.Hour), started: t0.Add(-time.Hour)}
				if s == store.StateStopping {
					l.pending = pendingStop{why: store.ReasonStopped, then: thenRest, rest: store.StateStopped}
				}
				got, as := step(l, policy, event{kind: e}, t0)
				w, listed := table[key{s, e}]
				if !listed {
					w = want{s, nil}
					if e == evPlaced {
						w.acts = acts(actGive)
					}
				}
				if got.state != w.s || !slices.Equal(kindsOf(as), w.acts) {
					t.Errorf("→ %v %v, want %v %v", got.state, kindsOf(as), w.s, w.acts)
				}
				if (got.state != s) != !got.since.Equal(l.since) {
					t.Errorf("since is %v after %v → %v", got.since, s, got.state)
				}
				for _, a := range as {
					if a.kind == actGive && !(e == evExited || e == evSpawnFailed || e == evPlaced && s != store.StateWaiting) {
						t.Errorf("a grant is given back on %v: only a reaped run or a stale grant gives one back", e)
					}
				}
			})
		}
	}
}

// play runs events through step from a state and returns where it ends and
// every action taken.
func play(t *testing.T, l life, p restartPolicy, events ...event) (life, []action) {
	t.Helper()
	var all []action
	now := t0
	for _, e := range events {
		var as []action
		l, as = step(l, p, e, now)
		all = append(all, as...)
		now = now.Add(time.Second)
	}
	return l, all
}

func TestStepStoppingDestinations(t *testing.T) {
	t.Parallel()
	policy := restartPolicy{mode: luaapi.RestartOnFailure, maxRestarts: -1}
	running := life{state: store.StateRunning, started: t0}
	tests := []struct {
		name   string
		events []event
		state  store.State
		reason store.Reason
	}{
		{"stop", []event{{kind: evStop}, {kind: evExited, failed: true}}, store.StateStopped, store.ReasonStopped},
		{"stop, then killed", []event{{kind: evStop}, {kind: evExited, killed: true, failed: true}}, store.StateStopped, store.ReasonKilled},
		{"disable", []event{{kind: evDisable}, {kind: evExited}}, store.StateDisabled, store.ReasonStopped},
		{"invalid lets the run end, then rests", []event{{kind: evInvalid}, {kind: evExited}}, store.StateInvalid, store.ReasonExited},
		{"invalid, the run fails: no restart", []event{{kind: evInvalid}, {kind: evExited, failed: true}}, store.StateInvalid, store.ReasonFailed},
		{"invalid, then fine again: the policy judges the end", []event{{kind: evInvalid}, {kind: evStart}, {kind: evExited, failed: true}}, store.StateBackoff, store.ReasonFailed},
		{"invalid, then a timeout: no restart", []event{{kind: evInvalid}, {kind: evTimeout}, {kind: evExited, failed: true}}, store.StateInvalid, store.ReasonTimedOut},
		{"invalid, then stop", []event{{kind: evInvalid}, {kind: evStop}, {kind: evExited}}, store.StateStopped, store.ReasonStopped},
		{"invalid, then redefined", []event{{kind: evInvalid}, {kind: evRedefine}, {kind: evExited}}, store.StateWaiting, store.ReasonStopped},
		{"invalid, then redefined with finish", []event{{kind: evInvalid}, {kind: evRedefine, finish: true}, {kind: evExited}}, store.StateWaiting, store.ReasonExited},
		{"restart", []event{{kind: evRestart}, {kind: evExited, failed: true}}, store.StateWaiting, store.ReasonStopped},
		{"redefine", []event{{kind: evRedefine}, {kind: evExited}}, store.StateWaiting, store.ReasonStopped},
		{"stop, then start before reaped", []event{{kind: evStop}, {kind: evStart}, {kind: evExited}}, store.StateWaiting, store.ReasonStopped},
		{"restart, then stop before reaped", []event{{kind: evRestart}, {kind: evStop}, {kind: evExited}}, store.StateStopped, store.ReasonStopped},
		{"timeout restarts on failure", []event{{kind: evTimeout}, {kind: evExited, failed: true}}, store.StateBackoff, store.ReasonTimedOut},
		{"timeout, then stop", []event{{kind: evTimeout}, {kind: evStop}, {kind: evExited, failed: true}}, store.StateStopped, store.ReasonTimedOut},
		{"timeout, then a start: runs again once reaped", []event{{kind: evTimeout}, {kind: evStart}, {kind: evExited, failed: true}}, store.StateWaiting, store.ReasonTimedOut},
		{"redefine with finish lets the run end", []event{{kind: evRedefine, finish: true}, {kind: evExited}}, store.StateWaiting, store.ReasonExited},
		{"redefine with finish, the run fails", []event{{kind: evRedefine, finish: true}, {kind: evExited, failed: true}}, store.StateWaiting, store.ReasonFailed},

		// What a run's systemd unit says of its end.
		{"out of memory restarts on failure", []event{{kind: evExited, failed: true, oom: true}}, store.StateBackoff, store.ReasonOOM},
		{"out of memory of another process than the main one, which exits 0, is a failure too", []event{{kind: evExited, oom: true}}, store.StateBackoff, store.ReasonOOM},
		{"its unit's runtime bound", []event{{kind: evExited, failed: true, timedOut: true}}, store.StateBackoff, store.ReasonTimedOut},
		{"its unit stopped by a person rests stopped", []event{{kind: evExited, failed: true, stoppedOutside: true}}, store.StateStopped, store.ReasonStopped},
		{"berth's own stop wins over its unit's", []event{{kind: evRestart}, {kind: evExited, failed: true, stoppedOutside: true}}, store.StateWaiting, store.ReasonStopped},
		{"its unit stopped by the machine's shutdown is lost, and runs again", []event{{kind: evExited, stoppedOutside: true, machineStopping: true}}, store.StateWaiting, store.ReasonLost},
		{"a person's stop wins over the shutdown's", []event{{kind: evStop}, {kind: evExited, stoppedOutside: true, machineStopping: true}}, store.StateStopped, store.ReasonStopped},
		{"a run let finish while its definition cannot run rests invalid after the shutdown's stop", []event{{kind: evInvalid}, {kind: evExited, stoppedOutside: true, machineStopping: true}}, store.StateInvalid, store.ReasonLost},
		{"a restart under way goes on after the shutdown's stop", []event{{kind: evRestart}, {kind: evExited, stoppedOutside: true, machineStopping: true}}, store.StateWaiting, store.ReasonStopped},

		// The daemon going away leaves a job where it stood, so that the
		// next daemon runs it again, unless a stop under way says where
		// it rests; nothing is queued again.
		{"shutdown", []event{{kind: evShutdown}, {kind: evExited, failed: true}}, store.StateStopping, store.ReasonStopped},
		{"shutdown, killed", []event{{kind: evShutdown}, {kind: evExited, killed: true, failed: true}}, store.StateStopping, store.ReasonKilled},
		{"shutdown, then start", []event{{kind: evShutdown}, {kind: evStart}, {kind: evRestart}, {kind: evStop}, {kind: evExited}}, store.StateStopping, store.ReasonStopped},
		{"stop, then shutdown", []event{{kind: evStop}, {kind: evShutdown}, {kind: evExited}}, store.StateStopped, store.ReasonStopped},
		{"disable, then shutdown", []event{{kind: evDisable}, {kind: evShutdown}, {kind: evExited}}, store.StateDisabled, store.ReasonStopped},
		{"restart, then shutdown", []event{{kind: evRestart}, {kind: evShutdown}, {kind: evExited}}, store.StateStopping, store.ReasonStopped},
		{"redefine with finish, then shutdown", []event{{kind: evRedefine, finish: true}, {kind: evShutdown}, {kind: evExited}}, store.StateStopping, store.ReasonStopped},
		{"timeout, then shutdown", []event{{kind: evTimeout}, {kind: evShutdown}, {kind: evExited, failed: true}}, store.StateBackoff, store.ReasonTimedOut},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, as := play(t, running, policy, tt.events...)
			if got.state != tt.state {
				t.Errorf("ends %v, want %v", got.state, tt.state)
			}
			var reason store.Reason
			gives := 0
			for _, a := range as {
				if a.kind == actRecordEnd {
					reason = a.reason
				}
				if a.kind == actGive {
					gives++
				}
			}
			if reason != tt.reason {
				t.Errorf("recorded reason %q, want %q", reason, tt.reason)
			}
			if gives != 1 {
				t.Errorf("grant given back %d times, want once", gives)
			}
			if slices.ContainsFunc(tt.events, func(e event) bool { return e.kind == evShutdown }) &&
				slices.ContainsFunc(as, func(a action) bool { return a.kind == actWait }) {
				t.Error("queued again while the daemon goes away")
			}
			if got.pending != (pendingStop{}) {
				t.Errorf("a stop is still pending once the run was reaped: %+v", got.pending)
			}
		})
	}
}

func TestStepRerunDoesNotOutliveItsRun(t *testing.T) {
	t.Parallel()
	// An edit with on_change = "finish", then a restart: the restart runs
	// the new definition, and that run, exiting 0, is done.
	p := restartPolicy{mode: luaapi.RestartNo, maxRestarts: -1}
	l, _ := play(t, life{state: store.StateRunning, started: t0}, p,
		event{kind: evRedefine, finish: true}, event{kind: evRestart}, event{kind: evExited},
		event{kind: evPlaced}, event{kind: evSpawned}, event{kind: evExited})
	if l.state != store.StateDone {
		t.Fatalf("→ %v, want done", l.state)
	}
	l, _ = play(t, life{state: store.StateRunning, started: t0}, p,
		event{kind: evRedefine, finish: true}, event{kind: evTimeout}, event{kind: evExited, failed: true})
	if l.state != store.StateFailed || l.pending != (pendingStop{}) {
		t.Fatalf("after a timeout: %v pending %+v, want failed and nothing pending", l.state, l.pending)
	}
}

// TestStepBeneath: a job done, then invalid or disabled, is done again
// once its definition can run, if that definition already ran to done;
// with a new one, or after another end, it runs. One a person stopped,
// before or while it could not run, stays stopped.
func TestStepBeneath(t *testing.T) {
	t.Parallel()
	p := restartPolicy{mode: luaapi.RestartOnFailure, maxRestarts: -1}
	done := life{state: store.StateDone, since: t0}
	running := life{state: store.StateRunning, started: t0}
	again := event{kind: evStart, stillDone: true}
	tests := []struct {
		name   string
		from   life
		events []event
		state  store.State
	}{
		{"invalid, then fine again", done, []event{{kind: evInvalid}, again}, store.StateDone},
		{"invalid, then fine again, edited meanwhile", done, []event{{kind: evInvalid}, {kind: evRedefine, stillDone: true}}, store.StateDone},
		{"invalid, then fine again with a new definition", done, []event{{kind: evInvalid}, {kind: evStart}}, store.StateWaiting},
		{"disabled, then enabled", done, []event{{kind: evDisable}, {kind: evEnable, stillDone: true}}, store.StateDone},
		{"disabled, then enabled with a new definition", done, []event{{kind: evDisable}, {kind: evEnable}}, store.StateWaiting},
		{"invalid, disabled, then enabled and fine", done, []event{{kind: evInvalid}, {kind: evDisable}, {kind: evEnable, stillDone: true}}, store.StateDone},
		{"failed, then invalid and fine again", life{state: store.StateFailed}, []event{{kind: evInvalid}, again}, store.StateWaiting},
		{"stopped, then disabled and enabled", life{state: store.StateStopped}, []event{{kind: evDisable}, {kind: evEnable}}, store.StateStopped},
		{"stopped, then invalid and fine again with a new definition", life{state: store.StateStopped}, []event{{kind: evInvalid}, {kind: evRedefine}}, store.StateStopped},
		{"invalid, stopped by a person, then fine again", life{state: store.StateWaiting}, []event{{kind: evInvalid}, {kind: evStop}, {kind: evStart}}, store.StateStopped},
		{"done, invalid, then stopped by a person and fine again", done, []event{{kind: evInvalid}, {kind: evStop}, again}, store.StateStopped},
		{"disabled, stopped by a person, then invalid, and enabled and fine", done, []event{{kind: evDisable}, {kind: evStop}, {kind: evInvalid}, {kind: evEnable}}, store.StateStopped},
		{"invalid, then disabled, then enabled", done, []event{{kind: evInvalid}, {kind: evDisable}, {kind: evEnable, stillDone: true}}, store.StateDone},
		{"waiting, then invalid and fine again", life{state: store.StateWaiting}, []event{{kind: evInvalid}, again}, store.StateWaiting},
		{"its run ends done while invalid", running, []event{{kind: evInvalid}, {kind: evExited}, again}, store.StateDone},
		{"its run fails while invalid", running, []event{{kind: evInvalid}, {kind: evExited, failed: true}, again}, store.StateWaiting},
		{"disabled while it runs", running, []event{{kind: evDisable}, {kind: evExited}, {kind: evEnable, stillDone: true}}, store.StateWaiting},
		// A person's stop under way, then disabled or invalid: it holds
		// beneath once the run ends (the review: enabled again, it ran).
		{"stopping, then disabled, ended, enabled", running, []event{{kind: evStop}, {kind: evDisable}, {kind: evExited}, {kind: evEnable}}, store.StateStopped},
		{"stopping, then invalid, ended, fine again", running, []event{{kind: evStop}, {kind: evInvalid}, {kind: evExited}, {kind: evStart}}, store.StateStopped},
		{"stopping, invalid, then disabled, ended, enabled", running, []event{{kind: evStop}, {kind: evInvalid}, {kind: evDisable}, {kind: evExited}, {kind: evEnable}}, store.StateStopped},
		{"stopping, then disabled, then stopped again, ended", running, []event{{kind: evStop}, {kind: evDisable}, {kind: evStop}, {kind: evExited}}, store.StateStopped},
		// A person's stop of a job done leaves it done, but for one that
		// runs again after a parent's new definition: that run it holds.
		{"done, stopped", done, []event{{kind: evStop}}, store.StateDone},
		{"done and to run again, stopped", done, []event{{kind: evStop, outdated: true}}, store.StateStopped},
		{"done and to run again, stopped, then started", done, []event{{kind: evStop, outdated: true}, {kind: evStart}}, store.StateWaiting},
		{"failed, stopped", life{state: store.StateFailed}, []event{{kind: evStop, outdated: true}}, store.StateFailed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := tt.from
			for _, e := range tt.events {
				l, _ = step(l, p, e, t0)
				if l.beneath != 0 && l.state != store.StateInvalid && l.state != store.StateDisabled {
					t.Fatalf("%v beneath while %v", l.beneath, l.state)
				}
				if l.beneath != 0 && l.recorded() != l.beneath {
					t.Fatalf("%v beneath, recorded %v: the next daemon would run it", l.beneath, l.recorded())
				}
			}
			if l.state != tt.state {
				t.Errorf("→ %v, want %v", l.state, tt.state)
			}
		})
	}
}

func TestStepRestartBackoff(t *testing.T) {
	t.Parallel()
	// A job that keeps failing at once: delays double from 1s to 1min.
	p := restartPolicy{mode: luaapi.RestartOnFailure, maxRestarts: -1}
	l := life{state: store.StateWaiting}
	var delays []time.Duration
	now := t0
	for range 9 {
		var as []action
		l, _ = step(l, p, event{kind: evPlaced}, now)
		l, _ = step(l, p, event{kind: evSpawned}, now)
		now = now.Add(100 * time.Millisecond)
		l, as = step(l, p, event{kind: evExited, failed: true}, now)
		if l.state != store.StateBackoff {
			t.Fatalf("after a failure: %v, want backoff", l.state)
		}
		delays = append(delays, as[len(as)-1].delay)
		l, _ = step(l, p, event{kind: evBackoffDone}, now)
	}
	want := []time.Duration{1, 2, 4, 8, 16, 32, 60, 60, 60}
	for i := range want {
		want[i] *= time.Second
	}
	if !slices.Equal(delays, want) {
		t.Fatalf("delays %v, want %v", delays, want)
	}
	if l.restarts != 9 {
		t.Errorf("restarts %d, want 9", l.restarts)
	}

	// A run that stays up a minute resets the delay and the count.
	l, _ = step(l, p, event{kind: evPlaced}, now)
	l, _ = step(l, p, event{kind: evSpawned}, now)
	l, as := step(l, p, event{kind: evExited, failed: true}, now.Add(healthyRun))
	if as[len(as)-1].delay != time.Second || l.restarts != 1 {
		t.Errorf("after a healthy run: delay %v restarts %d, want 1s and 1", as[len(as)-1].delay, l.restarts)
	}
}

// TestStepRecordedDuringTimeout: while a run that timed out is stopped,
// the record says where the policy will leave the job (failed, where it
// does not restart it), so that a daemon gone meanwhile leaves it there;
// a start asked meanwhile, or a policy that restarts, leaves the record a
// run's, which the next daemon runs again.
func TestStepRecordedDuringTimeout(t *testing.T) {
	t.Parallel()
	running := life{state: store.StateRunning, started: t0, restarts: 2, delay: 4 * time.Second}
	tests := []struct {
		name     string
		policy   restartPolicy
		events   []event
		want     store.State
		restarts int
	}{
		{"no", restartPolicy{luaapi.RestartNo, -1}, []event{{kind: evTimeout}}, store.StateFailed, 2},
		// Where the restart it makes then leaves it: the next daemon waits
		// out the delay, its count goes on.
		{"on-failure", restartPolicy{luaapi.RestartOnFailure, -1}, []event{{kind: evTimeout}}, store.StateBackoff, 3},
		{"on-failure, out of restarts", restartPolicy{luaapi.RestartOnFailure, 2}, []event{{kind: evTimeout}}, store.StateFailed, 2},
		{"no, then a start", restartPolicy{luaapi.RestartNo, -1}, []event{{kind: evTimeout}, {kind: evStart}}, store.StateStopping, 2},
		{"on-failure, then a start", restartPolicy{luaapi.RestartOnFailure, -1}, []event{{kind: evTimeout}, {kind: evStart}}, store.StateStopping, 2},
		{"no, then a stop", restartPolicy{luaapi.RestartNo, -1}, []event{{kind: evTimeout}, {kind: evStop}}, store.StateStopped, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, _ := play(t, running, tt.policy, tt.events...)
			if got.recorded() != tt.want || got.recordedRestarts() != tt.restarts {
				t.Errorf("recorded %v with %d restarts, want %v with %d", got.recorded(), got.recordedRestarts(), tt.want, tt.restarts)
			}
			// What the reaped run then leads to is what was recorded.
			reaped, _ := step(got, tt.policy, event{kind: evExited, failed: true, timedOut: true}, t0.Add(time.Second))
			if tt.want != store.StateStopping && (reaped.state != tt.want || reaped.restarts != tt.restarts) {
				t.Errorf("reaped: %v with %d restarts, recorded %v with %d before", reaped.state, reaped.restarts, tt.want, tt.restarts)
			}
		})
	}
}

func TestStepRestartPolicies(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		policy   restartPolicy
		failed   bool
		restarts int
		want     store.State
	}{
		{"no, success", restartPolicy{luaapi.RestartNo, -1}, false, 0, store.StateDone},
		{"no, failure", restartPolicy{luaapi.RestartNo, -1}, true, 0, store.StateFailed},
		{"on-failure, success", restartPolicy{luaapi.RestartOnFailure, -1}, false, 0, store.StateDone},
		{"on-failure, failure", restartPolicy{luaapi.RestartOnFailure, -1}, true, 0, store.StateBackoff},
		{"always, success", restartPolicy{luaapi.RestartAlways, -1}, false, 0, store.StateBackoff},
		{"always, failure", restartPolicy{luaapi.RestartAlways, -1}, true, 0, store.StateBackoff},
		{"max 3, third restart allowed", restartPolicy{luaapi.RestartOnFailure, 3}, true, 2, store.StateBackoff},
		{"max 3, out of restarts", restartPolicy{luaapi.RestartOnFailure, 3}, true, 3, store.StateFailed},
		{"always, success, max 0: it gave up, having made none", restartPolicy{luaapi.RestartAlways, 0}, false, 0, store.StateFailed},
		{"always, success, out of restarts: it gave up", restartPolicy{luaapi.RestartAlways, 2}, false, 2, store.StateFailed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := life{state: store.StateRunning, started: t0, restarts: tt.restarts, delay: time.Second}
			got, as := step(l, tt.policy, event{kind: evExited, failed: tt.failed}, t0.Add(time.Second))
			if got.state != tt.want {
				t.Errorf("→ %v, want %v", got.state, tt.want)
			}
			// Out of restarts it would otherwise make, it says so.
			gaveUp := slices.ContainsFunc(as, func(a action) bool { return a.kind == actGiveUp && a.why == giveUpMaxRestarts })
			if want := tt.policy.maxRestarts >= 0 && tt.want != store.StateBackoff && tt.policy.wants(tt.failed, -1); gaveUp != want {
				t.Errorf("gave up: %v, want %v", gaveUp, want)
			}
		})
	}
}

// TestStepPolicyInBackoff: an edit of the restart policy applies to the
// restart armed: one the new policy would not have made is called off,
// and the job rests as its last run ended.
func TestStepPolicyInBackoff(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name     string
		policy   restartPolicy
		failed   bool
		restarts int // counting the one armed
		want     store.State
	}{
		{"restart = no, after a failure", restartPolicy{luaapi.RestartNo, -1}, true, 4, store.StateFailed},
		{"on-failure, after a success", restartPolicy{luaapi.RestartOnFailure, -1}, false, 1, store.StateDone},
		{"on-failure still, after a failure", restartPolicy{luaapi.RestartOnFailure, -1}, true, 4, store.StateBackoff},
		{"max_restarts below those made", restartPolicy{luaapi.RestartOnFailure, 1}, true, 4, store.StateFailed},
		{"max_restarts of the one armed", restartPolicy{luaapi.RestartOnFailure, 4}, true, 4, store.StateBackoff},
		{"always, after a success", restartPolicy{luaapi.RestartAlways, -1}, false, 2, store.StateBackoff},
	} {
		t.Run(tt.name, func(t *testing.T) {
			l := life{state: store.StateBackoff, restarts: tt.restarts, failed: tt.failed, delay: 8 * time.Second}
			got, as := step(l, tt.policy, event{kind: evPolicy}, t0)
			if got.state != tt.want {
				t.Fatalf("→ %v %v, want %v", got.state, kindsOf(as), tt.want)
			}
			if want := tt.want != store.StateBackoff; want != slices.Equal(kindsOf(as), acts(actCancelBackoff, actGiveUp)) || !want && len(as) > 0 {
				t.Errorf("actions %v", kindsOf(as))
			}
			// The restart called off is not counted as made.
			if want := tt.restarts - btoi(tt.want != store.StateBackoff); got.restarts != want {
				t.Errorf("restarts %d, want %d", got.restarts, want)
			}
		})
	}
	// A run's end records whether it failed, which the edit judges.
	p := restartPolicy{luaapi.RestartAlways, -1}
	l, _ := step(life{state: store.StateRunning, started: t0}, p, event{kind: evExited}, t0.Add(time.Second))
	if l.state != store.StateBackoff || l.failed {
		t.Fatalf("always, after a success: %v, failed %v", l.state, l.failed)
	}
	if l, _ = step(l, restartPolicy{luaapi.RestartOnFailure, -1}, event{kind: evPolicy}, t0.Add(time.Second)); l.state != store.StateDone {
		t.Errorf("edited to on-failure after a success: %v, want done", l.state)
	}
}

func TestStepSpawnFailureRestarts(t *testing.T) {
	t.Parallel()
	p := restartPolicy{mode: luaapi.RestartAlways, maxRestarts: 1}
	l, as := play(t, life{state: store.StateWaiting}, p, event{kind: evPlaced}, event{kind: evSpawnFailed})
	if l.state != store.StateBackoff {
		t.Fatalf("→ %v, want backoff", l.state)
	}
	if as[len(as)-2].reason != store.ReasonSpawnError {
		t.Errorf("recorded %v", as)
	}
	l, _ = play(t, l, p, event{kind: evBackoffDone}, event{kind: evPlaced}, event{kind: evSpawnFailed})
	if l.state != store.StateFailed {
		t.Fatalf("after max_restarts: %v, want failed", l.state)
	}
}

// TestStepSpawnRefusedByShutdown: a start the machine's shutdown refused
// is recorded, and queued again, counting no restart: restart = "no" does
// not rest failed, nor max_restarts run out.
func TestStepSpawnRefusedByShutdown(t *testing.T) {
	t.Parallel()
	p := restartPolicy{mode: luaapi.RestartNo}
	l, as := play(t, life{state: store.StateWaiting}, p, event{kind: evPlaced}, event{kind: evSpawnFailed, machineStopping: true})
	if l.state != store.StateWaiting || l.restarts != 0 {
		t.Fatalf("→ %v, %d restarts; want waiting, none", l.state, l.restarts)
	}
	if as[len(as)-1].kind != actWait || as[len(as)-2].reason != store.ReasonSpawnError {
		t.Errorf("actions %v, want the spawn error recorded, then a wait", as)
	}
}

// TestRedefinedEveryState walks every state with each kind of edit: which
// event a new definition means is decided here, not in the job's goroutine.
func TestRedefinedEveryState(t *testing.T) {
	t.Parallel()
	none := event{}
	edits := []struct {
		name string
		r    redefinition
		// want maps a state to its event; states not listed get other.
		want  map[store.State]event
		other event
	}{
		{"invalid", redefinition{invalid: true, disabled: true, process: true}, nil, event{kind: evInvalid}},
		{"disabled", redefinition{disabled: true, process: true}, nil, event{kind: evDisable}},
		{"process", redefinition{process: true, finish: true}, map[store.State]event{
			store.StateDisabled: {kind: evEnable},
			store.StateStopped:  none, // a person's stop holds; berth start runs the new definition
		}, event{kind: evRedefine, finish: true}},
		{"requeue", redefinition{requeue: true}, map[store.State]event{
			store.StateDisabled: {kind: evEnable}, store.StateWaiting: {kind: evRedefine},
			0: {kind: evStart}, store.StateInvalid: {kind: evStart}, store.StateUnplaceable: {kind: evStart},
			store.StateBackoff: {kind: evPolicy},
		}, none},
		{"policy only", redefinition{}, map[store.State]event{
			store.StateDisabled: {kind: evEnable},
			0:                   {kind: evStart}, store.StateInvalid: {kind: evStart}, store.StateUnplaceable: {kind: evStart},
			// The restart armed is judged again by the edited policy.
			store.StateBackoff: {kind: evPolicy},
		}, none},
	}
	for _, ed := range edits {
		for _, s := range allStates {
			t.Run(fmt.Sprintf("%s/%v", ed.name, s), func(t *testing.T) {
				want, listed := ed.want[s]
				if !listed {
					want = ed.other
				}
				got, ok := redefined(life{state: s}, ed.r)
				if ok != (want != none) || got != want {
					t.Errorf("→ %v %v, want %v", got.kind, ok, want.kind)
				}
			})
		}
	}
	// A run left to end while its definition could not run goes on as
	// before once it can; edited, it is redefined.
	finishing := life{state: store.StateRunning, pending: pendingStop{then: thenRest, rest: store.StateInvalid}}
	if got, _ := redefined(finishing, redefinition{}); got.kind != evStart {
		t.Errorf("running to rest invalid, fine again: %v, want start", got.kind)
	}
	if got, _ := redefined(finishing, redefinition{process: true, finish: true}); got != (event{kind: evRedefine, finish: true}) {
		t.Errorf("running to rest invalid, fine again and edited: %v, want redefine", got.kind)
	}
	// A run being stopped because it was disabled or invalid runs again
	// once reaped when the definition is fine again; a person's stop holds.
	for rest, want := range map[store.State]eventKind{store.StateDisabled: evStart, store.StateInvalid: evStart, store.StateStopped: 0} {
		l := life{state: store.StateStopping, pending: pendingStop{why: store.ReasonStopped, then: thenRest, rest: rest}}
		if got, _ := redefined(l, redefinition{}); got.kind != want {
			t.Errorf("stopping to rest %v, fine again: %v, want %v", rest, got.kind, want)
		}
		if got, _ := redefined(l, redefinition{process: true}); rest == store.StateStopped && got.kind != 0 {
			t.Errorf("stopping to rest stopped, edited: %v, want nothing", got.kind)
		}
	}
}

// TestAdmitEveryState: a person may stop any job, and start or restart any
// job whose definition can run and is enabled, whatever state it is in
// (a job being stopped because it was just disabled included), but one
// found to fit no machine.
func TestAdmitEveryState(t *testing.T) {
	t.Parallel()
	type def struct{ invalid, disabled bool }
	refusals := map[def]refusal{
		{}:                              refuseNone,
		{disabled: true}:                refuseDisabled,
		{invalid: true}:                 refuseInvalid,
		{invalid: true, disabled: true}: refuseInvalid,
	}
	for _, s := range allStates {
		for d, want := range refusals {
			// The state says so too, for a definition that came before it.
			switch {
			case s == store.StateInvalid:
				want = refuseInvalid
			case s == store.StateDisabled && want == refuseNone:
				want = refuseDisabled
			case s == store.StateUnplaceable && want == refuseNone:
				want = refuseUnplaceable
			}
			for _, k := range []eventKind{evStart, evRestart} {
				if got := admit(k, s, d.invalid, d.disabled, false); got != want {
					t.Errorf("admit(%v, %v, %+v) = %d, want %d", k, s, d, got, want)
				}
			}
			if got := admit(evStop, s, d.invalid, d.disabled, true); got != refuseNone {
				t.Errorf("a stop of a job %v %+v is refused: %d", s, d, got)
			}
		}
	}
	// A run going on though its definition, edited since, fits no
	// machine: a restart would stop it and start nothing.
	if got := admit(evRestart, store.StateRunning, false, false, true); got != refuseUnplaceable {
		t.Errorf("a restart of a run whose definition fits no machine now: %d, want %d", got, refuseUnplaceable)
	}
	// At rest, a start would find it so at once; running, it is running.
	if got := admit(evStart, store.StateStopped, false, false, true); got != refuseUnplaceable {
		t.Errorf("a start of a job stopped whose definition fits no machine now: %d, want %d", got, refuseUnplaceable)
	}
	// Being stopped, it would come to rest unplaceable (the review).
	if got := admit(evStart, store.StateStopping, false, false, true); got != refuseUnplaceable {
		t.Errorf("a start of a job being stopped whose definition fits no machine now: %d, want %d", got, refuseUnplaceable)
	}
	if got := admit(evStart, store.StateRunning, false, false, true); got != refuseNone {
		t.Errorf("a start of a run going on whose definition fits no machine now: %d, want none (it runs)", got)
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// TestStopAnswer: a stop says already only of a rest no stop made, and
// held_from_rerun of a job done it held stopped.
func TestStopAnswer(t *testing.T) {
	t.Parallel()
	yes, no := func() bool { return true }, func() bool { return false }
	view := func(s store.State) *jobView { return &jobView{State: s} }
	for _, c := range []struct {
		name     string
		was      store.State
		after    *jobView
		outdated func() bool
		already  string
		held     bool
	}{
		{"stopped, stays", store.StateStopped, view(store.StateStopped), no, "stopped", false},
		{"done, up to date", store.StateDone, view(store.StateDone), no, "done", false},
		{"done, held from its rerun", store.StateDone, view(store.StateStopped), no, "", true},
		{"running, stopping", store.StateRunning, view(store.StateStopping), no, "", false},
		{"running, ended done first", store.StateRunning, view(store.StateDone), no, "done", false},
		{"unplaceable, stopped by it", store.StateUnplaceable, view(store.StateStopped), no, "", false},
		{"done, not said in time, to run again", store.StateDone, nil, yes, "", true},
		{"failed, not said in time", store.StateFailed, nil, no, "failed", false},
		{"waiting, not said in time", store.StateWaiting, nil, no, "", false},
	} {
		already, held := stopAnswer(c.was, c.after, c.outdated)
		if already != c.already || held != c.held {
			t.Errorf("%s: already %q, held %v; want %q, %v", c.name, already, held, c.already, c.held)
		}
	}
}

// TestStepStopInBackoffCountsNoRestart: a job stopped, disabled or made
// invalid while it waits out a restart's delay has not had that restart:
// its count is of those made (trial AX: "3 restarts" of two).
func TestStepStopInBackoffCountsNoRestart(t *testing.T) {
	t.Parallel()
	p := restartPolicy{mode: luaapi.RestartOnFailure, maxRestarts: -1}
	for _, e := range []eventKind{evStop, evDisable, evInvalid} {
		l := life{state: store.StateRunning, started: t0, restarts: 2, delay: 2 * time.Second}
		l, _ = play(t, l, p, event{kind: evExited, failed: true})
		if l.state != store.StateBackoff || l.restarts != 3 {
			t.Fatalf("after a failure: %v with %d restarts, want backoff with the third armed", l.state, l.restarts)
		}
		if l, _ = play(t, l, p, event{kind: e}); l.restarts != 2 {
			t.Errorf("%v in backoff: %v with %d restarts, want the 2 made", e, l.state, l.restarts)
		}
	}
}
