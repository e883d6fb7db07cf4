// Package unitstest is a stand-in for systemd's manager, for tests of
// what drives package units: units are records whose main process the test
// ends, with the PropertiesChanged signals systemd would send.
package unitstest

import (
	"context"
	"errors"
	"maps"
	"math"
	"sync"
	"syscall"
	"time"

	sd "github.com/coreos/go-systemd/v22/dbus"
	"github.com/godbus/dbus/v5"
	"golang.org/x/sys/unix"
)

// ExecMainCode values (siginfo's si_code).
const (
	CLDExited int32 = 1
	CLDKilled int32 = 2
)

// Manager stands in for systemd's manager: units are records whose
// main process the test ends, with the signals systemd would send.
type Manager struct {
	mu      sync.Mutex
	units   map[string]*unit
	killed  []string // "unit signal"
	updates chan *sd.PropertiesUpdate
	// startResult, when set, is what the start job of the next unit ends.
	startResult string
	startStatus int32
	// hold, when set, holds each start job, the unit inactive, until it
	// is closed; held is told of each start so held.
	hold, held chan struct{}
	// disconnected: the connection to it is gone (Connected).
	disconnected bool
	// ignoreKills: a SIGKILL ends nothing.
	ignoreKills bool
	// shuttingDown: shutdown.target has a start job queued (ShutDown);
	// refused counts the starts refused meanwhile.
	shuttingDown bool
	refused      int
}

type unit struct {
	props  map[string]any // as started
	active string
	sub    string
	result string
	pid    uint32
	code   int32
	status int32
	exitTS uint64
	// activeEnterTS and activeExitTS are when it entered and left active
	// (Active{Enter,Exit}TimestampMonotonic).
	activeEnterTS, activeExitTS uint64
}

func New() *Manager {
	return &Manager{units: map[string]*unit{}, updates: make(chan *sd.PropertiesUpdate, 64)}
}

func (f *Manager) StartTransientUnitContext(_ context.Context, name, mode string, props []sd.Property, ch chan<- string) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.units[name]; ok {
		return 0, dbus.Error{Name: "org.freedesktop.systemd1.UnitExists", Body: []any{"Unit " + name + " was already loaded or has a fragment file."}}
	}
	if f.shuttingDown {
		// A unit conflicts with shutdown.target (DefaultDependencies).
		f.refused++
		return 0, errors.New("Transaction for " + name + "/start is destructive (shutdown.target has 'start' job queued, but 'stop' is included in transaction).")
	}
	// As systemd does, the unit exists, inactive, while its start job
	// waits to run.
	u := &unit{props: map[string]any{}, active: "inactive", sub: "dead", pid: uint32(1000 + len(f.units))}
	for _, p := range props {
		u.props[p.Name] = p.Value.Value()
	}
	f.units[name] = u
	if f.hold != nil {
		hold, held := f.hold, f.held
		f.mu.Unlock()
		held <- struct{}{}
		<-hold
		f.mu.Lock()
	}
	u.active, u.sub, u.result = "active", "running", "success"
	u.activeEnterTS = monotonicNow()
	if f.startResult != "" {
		u.active, u.sub, u.result, u.status, u.code, u.exitTS = "failed", "failed", "exit-code", f.startStatus, CLDExited, 1
		reply(ch, f.startResult)
		return 1, nil
	}
	reply(ch, "done")
	return 1, nil
}

// reply ends a job as systemd would tell ch; a caller that does not wait
// for its job passes no channel.
func reply(ch chan<- string, result string) {
	if ch != nil {
		ch <- result
	}
}

func (f *Manager) SetUnitPropertiesContext(_ context.Context, name string, _ bool, props ...sd.Property) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	u, ok := f.units[name]
	if !ok {
		return errors.New("no such unit")
	}
	for _, p := range props {
		u.props[p.Name] = p.Value.Value()
	}
	return nil
}

func (f *Manager) StopUnitContext(_ context.Context, name, mode string, ch chan<- string) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	_, ok := f.units[name]
	if !ok {
		return 0, errors.New("no such unit")
	}
	// A transient unit that is inactive is unloaded at once.
	delete(f.units, name)
	ch <- "done"
	return 1, nil
}

func (f *Manager) KillUnitWithTarget(_ context.Context, name string, target sd.Who, signal int32) error {
	f.mu.Lock()
	f.killed = append(f.killed, name+" "+syscall.Signal(signal).String())
	u := f.units[name]
	ignore := f.ignoreKills
	f.mu.Unlock()
	if u != nil && signal == int32(syscall.SIGKILL) && !ignore {
		f.End(name, "signal", CLDKilled, int32(syscall.SIGKILL))
	}
	return nil
}

func (f *Manager) ResetFailedUnitContext(_ context.Context, name string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if u, ok := f.units[name]; ok && (u.active == "failed" || u.active == "inactive") {
		delete(f.units, name)
	}
	return nil
}

// GetUnitTypePropertyContext reads one property, as systemd answers it.
func (f *Manager) GetUnitTypePropertyContext(ctx context.Context, name, unitType, property string) (*sd.Property, error) {
	all, err := f.GetUnitTypePropertiesContext(ctx, name, unitType)
	if err != nil {
		return nil, err
	}
	v, ok := all[property]
	if !ok {
		return nil, errors.New("unknown property " + property)
	}
	return &sd.Property{Name: property, Value: dbus.MakeVariant(v)}, nil
}

func (f *Manager) GetUnitTypePropertiesContext(_ context.Context, name, unitType string) (map[string]any, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if name == "shutdown.target" && unitType == "Unit" {
		job := []any{uint32(0), dbus.ObjectPath("/")}
		if f.shuttingDown {
			job = []any{uint32(4242), dbus.ObjectPath("/org/freedesktop/systemd1/job/4242")}
		}
		return map[string]any{"LoadState": "loaded", "ActiveState": "inactive", "SubState": "dead", "Job": job}, nil
	}
	u, ok := f.units[name]
	if !ok {
		if unitType == "Unit" {
			return map[string]any{"LoadState": "not-found", "ActiveState": "inactive", "SubState": "dead", "ActiveExitTimestampMonotonic": uint64(0)}, nil
		}
		// As systemd does for a unit it does not have: the defaults.
		return map[string]any{"Result": "success", "ExecMainPID": uint32(0), "ExecMainCode": int32(0), "ExecMainStatus": int32(0),
			"ExecMainExitTimestampMonotonic": uint64(0), "ControlGroup": ""}, nil
	}
	if unitType == "Unit" {
		return map[string]any{"LoadState": "loaded", "ActiveState": u.active, "SubState": u.sub,
			"ActiveEnterTimestampMonotonic": u.activeEnterTS, "ActiveExitTimestampMonotonic": u.activeExitTS}, nil
	}
	bound, ok := u.props["RuntimeMaxUSec"].(uint64)
	if !ok {
		bound = math.MaxUint64 // systemd's infinity
	}
	return map[string]any{"Result": u.result, "ExecMainPID": u.pid, "ExecMainCode": u.code, "ExecMainStatus": u.status,
		"ExecMainExitTimestampMonotonic": u.exitTS, "ControlGroup": "", "MemoryCurrent": uint64(42 << 20), "CPUUsageNSec": uint64(3e9),
		"RuntimeMaxUSec": bound}, nil
}

func (f *Manager) ListUnitsByPatternsContext(_ context.Context, states, patterns []string) ([]sd.UnitStatus, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []sd.UnitStatus
	for name, u := range f.units {
		out = append(out, sd.UnitStatus{Name: name, LoadState: "loaded", ActiveState: u.active, SubState: u.sub})
	}
	out = append(out, sd.UnitStatus{Name: "sshd.service", LoadState: "loaded"})
	return out, nil
}

// End ends a unit's main process as systemd would record it, and signals
// the change: result is systemd's (success, exit-code, signal, oom-kill,
// timeout), code and status the main process's (CLDExited and its exit
// status, or CLDKilled and the signal).
func (f *Manager) End(name, result string, code, status int32) {
	f.EndedAgo(name, result, code, status, 0)
}

// EndedAgo is End of a main process that ended ago: its exit timestamp is
// that long before now, on CLOCK_MONOTONIC as systemd's.
func (f *Manager) EndedAgo(name, result string, code, status int32, ago time.Duration) {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	exitTS := uint64(max(1, (time.Duration(ts.Nano())-ago)/time.Microsecond))
	f.mu.Lock()
	u := f.units[name]
	u.result, u.code, u.status, u.exitTS = result, code, status, exitTS
	u.active, u.sub = "active", "exited"
	switch result {
	case "success":
	case "timeout":
		// Its runtime bound ran out: the unit stopped it, leaving active
		// first, as long after it entered active as the bound.
		u.active, u.sub, u.activeExitTS = "failed", "failed", exitTS-1
		u.activeEnterTS = min(u.activeEnterTS, u.activeExitTS-1)
		u.props["RuntimeMaxUSec"] = u.activeExitTS - u.activeEnterTS
	default:
		// A failed main process takes the unit out of active after it
		// ended.
		u.active, u.sub, u.activeExitTS = "failed", "failed", exitTS+1
	}
	active, sub := u.active, u.sub
	f.mu.Unlock()
	// As systemd does: a unit's state change carries both.
	f.updates <- &sd.PropertiesUpdate{UnitName: name, Changed: map[string]dbus.Variant{
		"ActiveState": dbus.MakeVariant(active), "SubState": dbus.MakeVariant(sub)}}
}

// monotonicNow is CLOCK_MONOTONIC now in µs, systemd's timestamps'.
func monotonicNow() uint64 {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return uint64(ts.Nano() / 1000)
}

// Props are the unit's properties as started, and as set since: a copy.
func (f *Manager) Props(name string) map[string]any {
	f.mu.Lock()
	defer f.mu.Unlock()
	return maps.Clone(f.units[name].props)
}

// Updates are the manager's signals, for units.Events.
func (f *Manager) Updates() chan *sd.PropertiesUpdate { return f.updates }

// FailNextStarts makes the start job of every later unit end with result,
// its main process with status (systemd's EXIT_* code for the step that
// failed: 203 for exec).
func (f *Manager) FailNextStarts(result string, status int32) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.startResult, f.startStatus = result, status
}

// StopOutside stops a unit as `systemctl stop` would: its main process gets
// SIGTERM, the unit ends inactive, and being transient it is unloaded at
// once: nothing of its result is left to read.
func (f *Manager) StopOutside(name string) {
	f.mu.Lock()
	delete(f.units, name)
	f.mu.Unlock()
	f.updates <- &sd.PropertiesUpdate{UnitName: name, Changed: map[string]dbus.Variant{
		"ActiveState": dbus.MakeVariant("inactive"), "SubState": dbus.MakeVariant("dead")}}
}

// ResetFailed unloads a failed unit as `systemctl reset-failed` does,
// its result gone with it; no one is told.
func (f *Manager) ResetFailed(name string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if u, ok := f.units[name]; ok && u.active == "failed" {
		delete(f.units, name)
	}
}

// StopOutsideFailing stops a unit as `systemctl stop` would where its
// main process fails the unit: it answers the SIGTERM by exiting with a
// status not 0 (result "exit-code", CLDExited), or outlives the stop's
// timeout and its SIGKILL (result "timeout", CLDKilled, SIGKILL). The unit
// leaves active first, then the process ends, and the unit is kept,
// failed, with its result.
func (f *Manager) StopOutsideFailing(name, result string, code, status int32) {
	now := monotonicNow()
	f.mu.Lock()
	u := f.units[name]
	u.activeExitTS = now
	u.result, u.code, u.status, u.exitTS = result, code, status, now+1
	u.active, u.sub = "failed", "failed"
	f.mu.Unlock()
	f.updates <- &sd.PropertiesUpdate{UnitName: name, Changed: map[string]dbus.Variant{
		"ActiveState": dbus.MakeVariant("failed"), "SubState": dbus.MakeVariant("failed")}}
}

// ShutDown makes the machine shut down (on) as systemd does it: a start
// job of shutdown.target is queued, and every unit's start is refused; or
// calls that shutdown off.
func (f *Manager) ShutDown(on bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.shuttingDown = on
}

// Refused counts the starts refused while the machine shut down.
func (f *Manager) Refused() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.refused
}

// HoldStarts holds every later start job, the unit inactive meanwhile,
// until release is called; held receives once per start so held.
func (f *Manager) HoldStarts() (held <-chan struct{}, release func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.hold, f.held = make(chan struct{}), make(chan struct{}, 16)
	hold := f.hold
	return f.held, func() {
		f.mu.Lock()
		f.hold = nil
		f.mu.Unlock()
		close(hold)
	}
}

// Disconnect makes Connected report the connection gone.
func (f *Manager) Disconnect() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.disconnected = true
}

// IgnoreKills makes SIGKILL end nothing, as over a connection that is gone.
func (f *Manager) IgnoreKills() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.ignoreKills = true
}

// Connected reports whether the connection is there, as go-systemd's Conn
// does.
func (f *Manager) Connected() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return !f.disconnected
}

// Killed are the signals sent to units so far, "UNIT SIGNAL".
func (f *Manager) Killed() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.killed...)
}

// Names are the units the manager has loaded.
func (f *Manager) Names() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var names []string
	for name := range f.units {
		names = append(names, name)
	}
	return names
}

// Active reports whether a unit's main process runs.
func (f *Manager) Active(name string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	u, ok := f.units[name]
	return ok && u.exitTS == 0
}
