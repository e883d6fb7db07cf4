package luaapi

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"strings"

	lua "github.com/yuin/gopher-lua"
)

// maxArrayIndex bounds gopher-lua's dense array part; see the package doc.
const maxArrayIndex = 1 << 20

func init() {
	// gopher-lua reads this global on every integer-keyed store. Nothing
	// else in berth uses gopher-lua, and init runs before any state exists.
	lua.MaxArrayIndex = maxArrayIndex
}

// Interpreter limits. Deep recursion ends in "stack overflow" and a huge
// unpack in "registry overflow", both as ordinary errors. The registry
// starts small and grows on demand, since a job file needs a few hundred
// slots and a daemon loads a thousand files. (gopher-lua's growable call
// stack, MinimizeStackMemory, would save more, but it turns a stack
// overflow into a Go panic.)
const (
	callStackSize    = 200
	registrySize     = 256
	registryMaxSize  = 64 * 1024
	registryGrowStep = 256
)

// forbiddenGlobals are removed from the globals; reading one is an error
// that says why, rather than "attempt to call a nil value". dofile, load and
// friends would read files or compile code out of the file's sight; os, io,
// debug and package are never opened but are listed so a person reaching
// for them is told; collectgarbage would run a GC of the whole daemon;
// _printregs writes to the daemon's stdout.
var forbiddenGlobals = []string{
	"dofile", "loadfile", "load", "loadstring", "require", "module",
	"collectgarbage", "_printregs", "getfenv", "setfenv", "newproxy",
	"os", "io", "debug", "package", "coroutine",
}

// Limits on print, so that a loop cannot flood the daemon's log.
const (
	maxPrints     = 100
	maxPrintBytes = 4096
)

func (ev *evaluator) newState() *lua.LState {
	L := lua.NewState(lua.Options{
		SkipOpenLibs:     true,
		CallStackSize:    callStackSize,
		RegistrySize:     registrySize,
		RegistryMaxSize:  registryMaxSize,
		RegistryGrowStep: registryGrowStep,
	})
	for _, lib := range []struct {
		name string
		open lua.LGFunction
	}{
		{lua.BaseLibName, lua.OpenBase},
		{lua.TabLibName, lua.OpenTable},
		{lua.StringLibName, lua.OpenString},
		{lua.MathLibName, lua.OpenMath},
	} {
		L.Push(L.NewFunction(lib.open))
		L.Push(lua.LString(lib.name))
		L.Call(1, 0)
	}

	G := L.G.Global
	forbidden := make(map[string]bool, len(forbiddenGlobals))
	for _, name := range forbiddenGlobals {
		G.RawSetString(name, lua.LNil)
		forbidden[name] = true
	}
	gmt := L.NewTable()
	// Reading a name the file never set is an error too: Lua would read
	// nil, and `flavor = small` (the quotes forgotten) would declare a job
	// with no flavor, one core and no card, without a word. A name set,
	// even to nil, reads as Lua reads it (strict.lua's rule), and the
	// error is raised, not recorded: a file may probe a name under pcall.
	set := map[string]bool{}
	gmt.RawSetString("__newindex", L.NewFunction(func(L *lua.LState) int {
		t, k, v := L.CheckTable(1), L.Get(2), L.Get(3)
		if s, ok := k.(lua.LString); ok {
			set[string(s)] = true
		}
		t.RawSet(k, v)
		return 0
	}))
	gmt.RawSetString("__index", L.NewFunction(func(L *lua.LState) int {
		k, ok := L.Get(2).(lua.LString)
		switch {
		case ok && forbidden[string(k)]:
			ev.fail(L, errForbidden(ev.here(L), string(k)))
		case ok && !set[string(k)]:
			ev.raise(L, errUndefined(ev.here(L), string(k), apiNames))
		}
		return 0
	}))
	gmt.RawSetString("__metatable", lua.LFalse)
	L.SetMetatable(G, gmt)

	G.RawSetString("print", L.NewFunction(ev.print))
	G.RawSetString("getmetatable", L.NewFunction(getmetatable))
	G.RawSetString("machine", ev.machineValue(L))
	G.RawSetString("job", L.NewFunction(ev.declare("job")))
	G.RawSetString("flavor", L.NewFunction(ev.declare("flavor")))
	G.RawSetString("quota", L.NewFunction(ev.declare("quota")))
	ev.capBuiltins(L)
	G.RawSetString(concatGlobal, L.NewFunction(ev.concat))
	ev.replaceRandom(L)
	if ev.hold != nil {
		G.RawSetString("hold", L.NewFunction(func(*lua.LState) int { <-ev.hold; return 0 }))
	}
	return L
}

// apiNames are the globals a reading of an undefined name is compared
// with for a suggestion: berth's own and the libraries'. (Not every
// builtin: "small" is as near to "pcall" as "jbo" is to "job".)
var apiNames = []string{"job", "flavor", "quota", "machine", "print", "string", "table", "math"}

func (ev *evaluator) here(L *lua.LState) subject { return fileSubject(ev.path, callerLine(L)) }

// getmetatable honours __metatable, as Lua 5.1 does and gopher-lua does not,
// so that a file cannot reach the metatable of machine or of the globals and
// undo their protection.
func getmetatable(L *lua.LState) int {
	mt := L.GetMetatable(L.CheckAny(1))
	if t, ok := mt.(*lua.LTable); ok {
		if p := t.RawGetString("__metatable"); p != lua.LNil {
			L.Push(p)
			return 1
		}
	}
	L.Push(mt)
	return 1
}

// print logs instead of writing to the daemon's stdout.
func (ev *evaluator) print(L *lua.LState) int {
	ev.prints++
	if ev.prints > maxPrints {
		if ev.prints == maxPrints+1 {
			ev.logger.Warn(logPrintLimit, "file", ev.path, "limit", maxPrints)
		}
		return 0
	}
	n := L.GetTop()
	parts := make([]string, n)
	for i := 1; i <= n; i++ {
		parts[i-1] = L.ToStringMeta(L.Get(i)).String()
	}
	text := strings.Join(parts, "\t")
	if len(text) > maxPrintBytes {
		text = text[:maxPrintBytes] + "…"
	}
	ev.logger.Info(logPrint, "file", ev.path, "line", callerLine(L), "text", text)
	return 0
}

// machineValue is a userdata rather than a table so that rawset cannot write
// to it; its protected metatable answers reads and refuses writes.
func (ev *evaluator) machineValue(L *lua.LState) lua.LValue {
	ud := L.NewUserData()
	mt := L.NewTable()
	mt.RawSetString("__index", L.NewFunction(ev.machineIndex))
	mt.RawSetString("__newindex", L.NewFunction(func(L *lua.LState) int {
		ev.fail(L, errMachineReadOnly(ev.here(L), L.ToStringMeta(L.Get(2)).String()))
		return 0
	}))
	mt.RawSetString("__tostring", L.NewFunction(func(L *lua.LState) int {
		L.Push(lua.LString("machine"))
		return 1
	}))
	mt.RawSetString("__metatable", lua.LFalse)
	ud.Metatable = mt
	return ud
}

func (ev *evaluator) machineIndex(L *lua.LState) int {
	key := L.Get(2)
	k, ok := key.(lua.LString)
	if !ok {
		ev.raise(L, errMachineKey(ev.here(L), key))
	}
	m := ev.machine
	switch string(k) {
	case "cpus":
		L.Push(lua.LNumber(m.CPUs))
	case "gpus":
		L.Push(lua.LNumber(m.GPUs))
	case "ram":
		if m.RAMKnown {
			L.Push(lua.LNumber(m.RAMBytes))
		} else {
			L.Push(lua.LNil)
		}
	case "hostname":
		L.Push(lua.LString(m.Hostname))
	default:
		// Raised, not recorded: a file may probe for a field of a newer
		// berth under pcall. Unprotected, it ends the file with this error.
		ev.raise(L, errMachineField(ev.here(L), string(k)))
	}
	return 1
}

// raise raises e into Lua without recording it; if it ends the file, it is
// reported as e rather than as a generic runtime error.
func (ev *evaluator) raise(L *lua.LState, e *Error) {
	msg := raisedText(e)
	ev.unrecorded[msg] = e
	L.RaiseError("%s", msg)
}

// replaceRandom gives the file its own generator seeded from its content.
// gopher-lua's math.random uses the process-wide generator (randomseed would
// reseed it for the whole daemon) and panics on an empty interval; and a file
// that picks a random port must pick the same one on every reload, or every
// reload would restart its jobs.
func (ev *evaluator) replaceRandom(L *lua.LState) {
	ev.rng = rand.New(rand.NewPCG(binary.LittleEndian.Uint64(ev.seed[:8]), binary.LittleEndian.Uint64(ev.seed[8:16])))
	m := L.GetGlobal("math").(*lua.LTable)
	m.RawSetString("random", L.NewFunction(func(L *lua.LState) int {
		var lo, hi float64
		switch L.GetTop() {
		case 0:
			L.Push(lua.LNumber(ev.rng.Float64()))
			return 1
		case 1:
			lo, hi = 1, math.Floor(float64(L.CheckNumber(1)))
		default:
			lo, hi = math.Floor(float64(L.CheckNumber(1))), math.Floor(float64(L.CheckNumber(2)))
		}
		if !(lo <= hi) || hi-lo >= 1<<53 || math.Abs(lo) >= 1<<53 {
			ev.raise(L, errRandomRange(ev.here(L), lo, hi))
		}
		L.Push(lua.LNumber(lo + float64(ev.rng.Int64N(int64(hi-lo)+1))))
		return 1
	}))
	m.RawSetString("randomseed", L.NewFunction(func(L *lua.LState) int {
		s := uint64(int64(L.CheckNumber(1)))
		ev.rng = rand.New(rand.NewPCG(s, s))
		return 0
	}))
}
