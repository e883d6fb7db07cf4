package luaapi

import (
	"errors"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/berthd/berth/accounting"
)

// luaResult runs src, which must set the global `result` to a string, and
// returns it through a job's description.
func luaResult(t *testing.T, src string) string {
	t.Helper()
	f := mustEval(t, src+"\njob \"r\" { cmd = \"x\", description = tostring(rawget(_G, \"result\")) }\n")
	if len(f.Jobs) != 1 {
		t.Fatalf("no result")
	}
	return f.Jobs[0].Description
}

func TestGsub(t *testing.T) {
	tests := []struct{ expr, want string }{
		{`("hello world"):gsub("o", "0")`, "hell0 w0rld 2"},
		{`("hello world"):gsub("(%w+)", "<%1>")`, "<hello> <world> 2"},
		{`("abc"):gsub("%w", "%0%0")`, "aabbcc 3"},
		{`("hello world"):gsub("%w+", "%0 %0", 1)`, "hello hello world 1"},
		{`("hello world"):gsub("%w+", "x", 0)`, "hello world 0"},
		{`("abc"):gsub("", "-")`, "-a-b-c- 4"},
		{`("$name is $age"):gsub("%$(%w+)", { name = "bob", age = 3 })`, "bob is 3 2"},
		{`("$name is $who"):gsub("%$(%w+)", { name = "bob" })`, "bob is $who 2"},
		{`("x = 1"):gsub("%d", function(d) return d + 1 end)`, "x = 2 1"},
		{`("abc"):gsub("%w", function(c) if c == "b" then return false end return "X" end)`, "XbX 3"},
		{`("hello"):gsub("l", "%%")`, "he%%o 2"},
		{`("abc"):gsub("^a", "X")`, "Xbc 1"},
		{`("abc"):gsub("()b", "%1")`, "a2c 1"},
		{`("a.b"):gsub("%.", 7)`, "a7b 1"},
		{`string.gsub("k=v, a=b", "(%w+)=(%w+)", "%2=%1")`, "v=k, b=a 2"},
	}
	for _, tt := range tests {
		t.Run(tt.expr, func(t *testing.T) {
			got := luaResult(t, "local s, n = "+tt.expr+"\nresult = s .. ' ' .. n")
			if got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

func TestGsubErrors(t *testing.T) {
	for _, src := range []string{
		`local s = ("abc"):gsub("(a)", "%2")`,
		`local s = ("abc"):gsub("a", { a = {} })`,
		`local s = ("abc"):gsub("[a", "x")`,
		`local s = ("abc"):gsub("a", true)`,
	} {
		f := evalString(t, src)
		if len(f.Errors) != 1 || f.Errors[0].Problem != Runtime || f.Errors[0].Pos.Line != 1 {
			t.Errorf("%s: %v", src, f.Errors)
		}
	}
}

func TestStringBuiltinsStillWork(t *testing.T) {
	tests := []struct{ expr, want string }{
		{`("ab"):rep(3)`, "ababab"},
		{`string.rep("x", 0)`, ""},
		{`string.format("%s-%03d-%.2f", "a", 7, 1.5)`, "a-007-1.50"},
		{`table.concat({ "a", "b", 3 }, ",")`, "a,b,3"},
		{`table.concat({ "a", "b", "c" }, "", 2, 3)`, "bc"},
		{`select(2, ("hello"):find("l"))`, "3"},
		{`("key=value"):match("(%w+)=")`, "key"},
		{`("Hi"):upper() .. ("Hi"):lower() .. ("ab"):reverse()`, "HIhiba"},
		{`(function() local n = 0 for w in ("a b c"):gmatch("%a") do n = n + 1 end return n end)()`, "3"},
	}
	for _, tt := range tests {
		t.Run(tt.expr, func(t *testing.T) {
			if got := luaResult(t, "result = "+tt.expr); got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

func TestMachine(t *testing.T) {
	if got := luaResult(t, `result = machine.cpus .. " " .. machine.gpus .. " " .. machine.ram .. " " .. machine.hostname`); got != "32 4 274877906944 gpu01" {
		t.Errorf("machine: %q", got)
	}
	opts := testOptions()
	opts.Machine = Machine{CPUs: 2, Hostname: "laptop"}
	f := Eval("m.lua", []byte(`job "x" { cmd = "x", description = tostring(machine.ram) .. " " .. machine.gpus }`), opts)
	if len(f.Errors) > 0 || f.Jobs[0].Description != "nil 0" {
		t.Errorf("unknown ram: %v %v", f.Errors, f.Jobs)
	}
	// Its metatable is out of reach, so its protection cannot be undone.
	if got := luaResult(t, `result = tostring(getmetatable(machine)) .. " " .. tostring(pcall(setmetatable, machine, {}))`); got != "false false" {
		t.Errorf("metatable: %q", got)
	}
	// A probe for a field of a newer berth can be caught.
	if got := luaResult(t, `result = tostring(pcall(function() return machine.numa end))`); got != "false" {
		t.Errorf("probe: %q", got)
	}
}

func TestForbiddenGlobals(t *testing.T) {
	for _, name := range forbiddenGlobals {
		t.Run(name, func(t *testing.T) {
			f := evalString(t, "local x = "+name)
			if len(f.Errors) != 1 || f.Errors[0].Problem != Sandbox {
				t.Fatalf("%v", f.Errors)
			}
			if got := luaResult(t, "result = rawget(_G, '"+name+"')"); got != "nil" {
				t.Errorf("rawget: %q", got)
			}
		})
	}
	// The globals' metatable cannot be removed to get around the message.
	if got := luaResult(t, `result = tostring(pcall(setmetatable, _G, nil))`); got != "false" {
		t.Errorf("setmetatable(_G): %q", got)
	}
}

// The cap sits in the string table itself, so every route to rep meets it.
func TestRepCappedOnEveryRoute(t *testing.T) {
	for _, src := range []string{
		`local s = ("x"):rep(2 * 1024 * 1024)`,
		`local s = string.rep("x", 2 * 1024 * 1024)`,
		`local s = getmetatable("").__index.rep("x", 2 * 1024 * 1024)`,
		`string = nil; local s = ("x"):rep(2 * 1024 * 1024)`,
		`local ok = pcall(string.rep, "xx", 1e300)`,
	} {
		f := evalString(t, src)
		if len(f.Errors) != 1 || f.Errors[0].Problem != Sandbox {
			t.Errorf("%s: %v", src, f.Errors)
		}
	}
	mustEval(t, `local s = ("x"):rep(1024 * 1024)`)
}

func TestBigInputsRefused(t *testing.T) {
	for _, src := range []string{
		`local s = ("x"):rep(1024 * 1024) .. "y"; s:upper()`,
		`local s = ("x"):rep(1024 * 1024) .. "y"; s:find("y")`,
		`local s = ("x"):rep(1024 * 1024) .. "y"; s:gsub("y", "")`,
		`local s = string.format("%s", ("x"):rep(1024 * 1024))`,
		`local t = {} for i = 1, 3 do t[i] = ("x"):rep(500000) end local s = table.concat(t)`,
		`local s = table.concat({ "a", "b" }, ("x"):rep(1024 * 1024))`,
	} {
		f := evalString(t, src)
		if len(f.Errors) != 1 || f.Errors[0].Problem != Sandbox {
			t.Errorf("%s: %v", src, f.Errors)
		}
	}
}

// A sparse key beyond the dense bound lives in the hash part instead of
// allocating the array up to it in one instruction. An array of 60 million
// slots would pass the tests' 32 MiB heap limit and fail the file.
func TestSparseKeys(t *testing.T) {
	got := luaResult(t, `local t = {} t[60000000] = 1 t[2^40] = 2 result = t[60000000] + t[2^40]`)
	if got != "3" {
		t.Errorf("got %q", got)
	}
}

func TestRandomIsPerFileAndSeeded(t *testing.T) {
	src := `result = math.random(1, 1000000) .. " " .. math.random()`
	a, b := luaResult(t, src), luaResult(t, src)
	if a != b {
		t.Errorf("two loads differ: %q %q", a, b)
	}
	if c := luaResult(t, src+" -- another file"); c == a {
		t.Errorf("different files gave the same numbers: %q", c)
	}
	if got := luaResult(t, `math.randomseed(7) local x = math.random(100) math.randomseed(7) result = tostring(x == math.random(100))`); got != "true" {
		t.Errorf("randomseed: %q", got)
	}
	f := evalString(t, `local x = math.random(0)`)
	if len(f.Errors) != 1 || f.Errors[0].Problem != BadValue {
		t.Errorf("empty interval: %v", f.Errors)
	}
}

func TestDeepRecursionAndUnpack(t *testing.T) {
	for _, src := range []string{
		`local function f() return 1 + f() end f()`,
		`local t = setmetatable({}, { __index = function(t, k) return t[k .. "x"] end }) local x = t.a`,
		`local t = {} for i = 1, 200000 do t[i] = i end print(unpack(t))`,
		`local s = ("x"):rep(1000000) local t = { s:byte(1, -1) }`,
	} {
		f := evalString(t, src)
		if len(f.Errors) == 0 {
			t.Errorf("%s: no error", src)
		}
	}
}

// A builtin cannot be interrupted; Eval stops waiting for it at the budget
// plus the grace, and reports the budget. The builtin here blocks until the
// test releases it, so Eval can only return by abandoning it.
func TestBudgetAbandonsLongBuiltin(t *testing.T) {
	hold := make(chan struct{})
	opts := testOptions()
	opts.Budget = 20 * time.Millisecond
	opts.grace = 20 * time.Millisecond
	opts.hold = hold
	// The budget is the process's CPU time: an evaluation an earlier test
	// abandoned, still in its builtin, or a collection of what earlier
	// tests left, running meanwhile, must not be what spends it.
	settle(t)
	runtime.GC()
	cpu := processCPUTime()
	f := Eval("slow.lua", []byte(`hold() job "never" { cmd = "x" }`), opts)
	cpu = processCPUTime() - cpu
	if len(f.Errors) != 1 || f.Errors[0].Problem != Budget {
		t.Fatalf("errors: %v", f.Errors)
	}
	if f.Errors[0].Pos.Line != 0 {
		t.Errorf("an abandoned evaluation has no line: %v", f.Errors[0])
	}
	// hold uses no CPU: the wall-clock bound, not the CPU budget, stopped
	// it; unless the process itself (the race detector's collector, on a
	// loaded machine) spent the budget first, which the guard, measuring
	// the process, rightly calls spent.
	switch {
	case cpu >= opts.Budget:
		t.Logf("the process spent %v of CPU meanwhile: %v", cpu, f.Errors[0])
	case !strings.Contains(f.Errors[0].Detail, "wall-clock"):
		t.Errorf("a file that waits is stopped by the wall-clock bound (%v of CPU spent): %v", cpu, f.Errors[0])
	}
	// The next evaluation is not held up by the abandoned one, which is
	// still blocked.
	if f := Eval("next.lua", []byte(`job "next" { cmd = "x" }`), testOptions()); len(f.Errors) > 0 || len(f.Jobs) != 1 {
		t.Errorf("the next evaluation: %v", f.Errors)
	}
	close(hold)
}

// A quadratic pattern is one such builtin a file can reach.
func TestBudgetStopsPathologicalPattern(t *testing.T) {
	opts := testOptions()
	opts.Budget = 20 * time.Millisecond
	opts.grace = 20 * time.Millisecond
	f := Eval("slow.lua", []byte(`local s = ("a"):rep(6000) local i = s:find(".-b")`), opts)
	if len(f.Errors) != 1 || f.Errors[0].Problem != Budget {
		t.Fatalf("errors: %v", f.Errors)
	}
}

func TestPcallCannotHideMistakes(t *testing.T) {
	for _, src := range []string{
		`pcall(function() job "x" { cmd = "x", gpu = 1 } end)`,
		`pcall(job, 42)`,
		`pcall(function() machine.cpus = 1 end)`,
		`pcall(function() return os end)`,
		`pcall(function() return ("x"):rep(1e8) end)`,
	} {
		f := evalString(t, src)
		if len(f.Errors) != 1 {
			t.Errorf("%s: %v", src, f.Errors)
		}
		if f.Jobs != nil || f.Flavors != nil {
			t.Errorf("%s: a rejected file has declarations", src)
		}
	}
}

func TestErrorsUnwrapToCause(t *testing.T) {
	f := evalString(t, `job "x" { cmd = "x", ram = "32X", timeout = "soon" }`)
	if len(f.Errors) != 2 {
		t.Fatalf("%v", f.Errors)
	}
	var sizeErr *accounting.SizeError
	if !errors.As(f.Errors[0], &sizeErr) || sizeErr.Problem != accounting.SizeBadUnit {
		t.Errorf("%v: no *SizeError", f.Errors[0])
	}
	var durErr *accounting.DurationError
	if !errors.As(f.Errors[1], &durErr) || durErr.Problem != accounting.DurationMalformed {
		t.Errorf("%v: no *DurationError", f.Errors[1])
	}
}

// A name the file never set is an error to read, which a file may catch
// under pcall; one set, even to nil, reads as Lua reads it.
func TestUndefinedNames(t *testing.T) {
	for src, want := range map[string]string{
		`last = nil; result = tostring(last)`:                                                  "nil",
		`x = 1; x = nil; result = tostring(x)`:                                                 "nil",
		`result = tostring((pcall(function() return DEBUG end)))`:                              "false",
		`local ok, err = pcall(function() return jbo end); result = err`:                       `jbo is not defined (did you mean job?)`,
		`function f() return later end; later = 3; result = tostring(f())`:                     "3",
		`result = tostring(rawget(_G, "never"))`:                                               "nil",
		`for i = 1, 3 do count = (rawget(_G, "count") or 0) + i end; result = tostring(count)`: "6",
	} {
		got := luaResult(t, src)
		if !strings.Contains(got, want) {
			t.Errorf("%s: %q, want %q", src, got, want)
		}
	}
	f := evalString(t, `job "x" { cmd = "true", flavor = small }`)
	if len(f.Errors) != 1 || f.Errors[0].Problem != Sandbox || !strings.Contains(f.Errors[0].Error(), `small is not defined`) {
		t.Errorf("an unquoted value: %v", f.Errors)
	}
}
