package supervisor

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/berthd/berth/luaapi"
)

var t0 = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

var allStates = []State{0, StateWaiting, StateStarting, StateRunning, StateStopping, StateBackoff,
	StateDone, StateFailed, StateStopped, StateInvalid, StateUnplaceable, StateDisabled}

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
	type key struct {
		s State
		e eventKind
	}
	type want struct {
		s    State
		acts []actionKind
	}
	// The job's policy here is restart = "no"; restarts are tested below.
	rest := []State{StateDone, StateFailed, StateStopped, StateInvalid, StateUnplaceable, 0}
	table := map[key]want{
		{StateWaiting, evRedefine}:    {StateWaiting, acts(actCancelWait, actWait)},
		{StateWaiting, evStop}:        {StateStopped, acts(actCancelWait)},
		{StateWaiting, evDisable}:     {StateDisabled, acts(actCancelWait)},
		{StateWaiting, evInvalid}:     {StateInvalid, acts(actCancelWait)},
		{StateWaiting, evPlaced}:      {StateStarting, acts(actSpawn)},
		{StateWaiting, evUnplaceable}: {StateUnplaceable, nil},

		{StateStarting, evRestart}:     {StateStopping, acts(actStop)},
		{StateStarting, evRedefine}:    {StateStopping, acts(actStop)},
		{StateStarting, evStop}:        {StateStopping, acts(actStop)},
		{StateStarting, evDisable}:     {StateStopping, acts(actStop)},
		{StateStarting, evInvalid}:     {StateStopping, acts(actStop)},
		{StateStarting, evSpawned}:     {StateRunning, nil},
		{StateStarting, evSpawnFailed}: {StateFailed, acts(actGive, actRecordEnd)},
		{StateStarting, evExited}:      {StateDone, acts(actGive, actRecordEnd)},

		{StateRunning, evRestart}:  {StateStopping, acts(actStop)},
		{StateRunning, evRedefine}: {StateStopping, acts(actStop)},
		{StateRunning, evStop}:     {StateStopping, acts(actStop)},
		{StateRunning, evDisable}:  {StateStopping, acts(actStop)},
		{StateRunning, evInvalid}:  {StateStopping, acts(actStop)},
		{StateRunning, evExited}:   {StateDone, acts(actGive, actRecordEnd)},
		{StateRunning, evTimeout}:  {StateStopping, acts(actStop)},

		// A stopping job records its destination (tested below); only the
		// reaping moves it.
		{StateStopping, evExited}: {StateStopped, acts(actGive, actRecordEnd)},

		{StateBackoff, evStart}:       {StateWaiting, acts(actCancelBackoff, actWait)},
		{StateBackoff, evRestart}:     {StateWaiting, acts(actCancelBackoff, actWait)},
		{StateBackoff, evRedefine}:    {StateWaiting, acts(actCancelBackoff, actWait)},
		{StateBackoff, evStop}:        {StateStopped, acts(actCancelBackoff)},
		{StateBackoff, evDisable}:     {StateDisabled, acts(actCancelBackoff)},
		{StateBackoff, evInvalid}:     {StateInvalid, acts(actCancelBackoff)},
		{StateBackoff, evBackoffDone}: {StateWaiting, acts(actWait)},

		{StateDisabled, evEnable}: {StateWaiting, acts(actWait)},
	}
	for _, s := range rest {
		table[key{s, evStart}] = want{StateWaiting, acts(actWait)}
		table[key{s, evRestart}] = want{StateWaiting, acts(actWait)}
		table[key{s, evRedefine}] = want{StateWaiting, acts(actWait)}
		if s != StateDisabled {
			table[key{s, evDisable}] = want{StateDisabled, nil}
		}
		if s != StateInvalid {
			table[key{s, evInvalid}] = want{StateInvalid, nil}
		}
	}

	policy := restartPolicy{mode: luaapi.RestartNo, maxRestarts: -1}
	for _, s := range allStates {
		for e := evStart; e <= lastEvent; e++ {
			t.Run(fmt.Sprintf("%v/%v", s, e), func(t *testing.T) {
				l := life{state: s, after: StateStopped, since: t0.Add(-time.Hour), started: t0.Add(-time.Hour)}
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
					if a.kind == actGive && !(e == evExited || e == evSpawnFailed || e == evPlaced && s != StateWaiting) {
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
	policy := restartPolicy{mode: luaapi.RestartOnFailure, maxRestarts: -1}
	running := life{state: StateRunning, started: t0}
	tests := []struct {
		name   string
		events []event
		state  State
		reason Reason
	}{
		{"stop", []event{{kind: evStop}, {kind: evExited, failed: true}}, StateStopped, ReasonStopped},
		{"stop, then killed", []event{{kind: evStop}, {kind: evExited, killed: true, failed: true}}, StateStopped, ReasonKilled},
		{"disable", []event{{kind: evDisable}, {kind: evExited}}, StateDisabled, ReasonStopped},
		{"invalid", []event{{kind: evInvalid}, {kind: evExited}}, StateInvalid, ReasonStopped},
		{"restart", []event{{kind: evRestart}, {kind: evExited, failed: true}}, StateWaiting, ReasonStopped},
		{"redefine", []event{{kind: evRedefine}, {kind: evExited}}, StateWaiting, ReasonStopped},
		{"stop, then start before reaped", []event{{kind: evStop}, {kind: evStart}, {kind: evExited}}, StateWaiting, ReasonStopped},
		{"restart, then stop before reaped", []event{{kind: evRestart}, {kind: evStop}, {kind: evExited}}, StateStopped, ReasonStopped},
		{"timeout restarts on failure", []event{{kind: evTimeout}, {kind: evExited, failed: true}}, StateBackoff, ReasonTimedOut},
		{"timeout, then stop", []event{{kind: evTimeout}, {kind: evStop}, {kind: evExited, failed: true}}, StateStopped, ReasonTimedOut},
		{"timeout, a start does not override it", []event{{kind: evTimeout}, {kind: evStart}, {kind: evExited, failed: true}}, StateBackoff, ReasonTimedOut},
		{"redefine with finish lets the run end", []event{{kind: evRedefine, finish: true}, {kind: evExited}}, StateWaiting, ReasonExited},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, as := play(t, running, policy, tt.events...)
			if got.state != tt.state {
				t.Errorf("ends %v, want %v", got.state, tt.state)
			}
			var reason Reason
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
		})
	}
}

func TestStepRerunDoesNotOutliveItsRun(t *testing.T) {
	// An edit with on_change = "finish", then a restart: the restart runs
	// the new definition, and that run, exiting 0, is done.
	p := restartPolicy{mode: luaapi.RestartNo, maxRestarts: -1}
	l, _ := play(t, life{state: StateRunning, started: t0}, p,
		event{kind: evRedefine, finish: true}, event{kind: evRestart}, event{kind: evExited},
		event{kind: evPlaced}, event{kind: evSpawned}, event{kind: evExited})
	if l.state != StateDone {
		t.Fatalf("→ %v, want done", l.state)
	}
	l, _ = play(t, life{state: StateRunning, started: t0}, p,
		event{kind: evRedefine, finish: true}, event{kind: evTimeout}, event{kind: evExited, failed: true})
	if l.state != StateFailed || l.rerun {
		t.Fatalf("after a timeout: %v rerun %v, want failed and no rerun", l.state, l.rerun)
	}
}

func TestStepRestartBackoff(t *testing.T) {
	// A job that keeps failing at once: delays double from 1s to 1min.
	p := restartPolicy{mode: luaapi.RestartOnFailure, maxRestarts: -1}
	l := life{state: StateWaiting}
	var delays []time.Duration
	now := t0
	for range 9 {
		var as []action
		l, _ = step(l, p, event{kind: evPlaced}, now)
		l, _ = step(l, p, event{kind: evSpawned}, now)
		now = now.Add(100 * time.Millisecond)
		l, as = step(l, p, event{kind: evExited, failed: true}, now)
		if l.state != StateBackoff {
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

func TestStepRestartPolicies(t *testing.T) {
	tests := []struct {
		name     string
		policy   restartPolicy
		failed   bool
		restarts int
		want     State
	}{
		{"no, success", restartPolicy{luaapi.RestartNo, -1}, false, 0, StateDone},
		{"no, failure", restartPolicy{luaapi.RestartNo, -1}, true, 0, StateFailed},
		{"on-failure, success", restartPolicy{luaapi.RestartOnFailure, -1}, false, 0, StateDone},
		{"on-failure, failure", restartPolicy{luaapi.RestartOnFailure, -1}, true, 0, StateBackoff},
		{"always, success", restartPolicy{luaapi.RestartAlways, -1}, false, 0, StateBackoff},
		{"always, failure", restartPolicy{luaapi.RestartAlways, -1}, true, 0, StateBackoff},
		{"max 3, third restart allowed", restartPolicy{luaapi.RestartOnFailure, 3}, true, 2, StateBackoff},
		{"max 3, out of restarts", restartPolicy{luaapi.RestartOnFailure, 3}, true, 3, StateFailed},
		{"max 0", restartPolicy{luaapi.RestartAlways, 0}, false, 0, StateDone},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := life{state: StateRunning, started: t0, restarts: tt.restarts, delay: time.Second}
			got, _ := step(l, tt.policy, event{kind: evExited, failed: tt.failed}, t0.Add(time.Second))
			if got.state != tt.want {
				t.Errorf("→ %v, want %v", got.state, tt.want)
			}
		})
	}
}

func TestStepSpawnFailureRestarts(t *testing.T) {
	p := restartPolicy{mode: luaapi.RestartAlways, maxRestarts: 1}
	l, as := play(t, life{state: StateWaiting}, p, event{kind: evPlaced}, event{kind: evSpawnFailed})
	if l.state != StateBackoff {
		t.Fatalf("→ %v, want backoff", l.state)
	}
	if as[len(as)-2].reason != ReasonSpawnError {
		t.Errorf("recorded %v", as)
	}
	l, _ = play(t, l, p, event{kind: evBackoffDone}, event{kind: evPlaced}, event{kind: evSpawnFailed})
	if l.state != StateFailed {
		t.Fatalf("after max_restarts: %v, want failed", l.state)
	}
}

func TestStateStrings(t *testing.T) {
	seen := map[string]bool{}
	for _, s := range allStates[1:] {
		name := s.String()
		if name == "" || seen[name] {
			t.Errorf("state %d has an empty or repeated name %q", s, name)
		}
		seen[name] = true
	}
	if got := State(200).String(); got != "state(200)" {
		t.Errorf("unknown state prints %q", got)
	}
}
