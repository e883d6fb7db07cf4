package luaapi

import (
	"math"
	"strings"

	lua "github.com/yuin/gopher-lua"
	"github.com/yuin/gopher-lua/pm"
)

// maxStringBytes is the largest string a string builtin builds or takes in a
// job file. A builtin runs to completion however long it takes and allocates
// its result in one go, so its size has to be known before it starts; the
// largest honest string in a job file is a command line or a description.
const maxStringBytes = 1 << 20

// capBuiltins replaces the allocation-heavy builtins with checked ones. They
// are replaced inside the string table itself, because the string metatable
// indexes that table: ("x"):rep(1e9) finds rep there even if the global
// `string` is gone.
func (ev *evaluator) capBuiltins(L *lua.LState) {
	str := L.GetGlobal("string").(*lua.LTable)
	orig := func(name string) *lua.LFunction { return str.RawGetString(name).(*lua.LFunction) }

	str.RawSetString("rep", L.NewFunction(ev.rep))
	str.RawSetString("gsub", L.NewFunction(ev.gsub))
	format := orig("format").GFunction
	str.RawSetString("format", L.NewFunction(func(L *lua.LState) int {
		if n := formatSize(L); n > maxStringBytes {
			ev.fail(L, errStringOverLimit(ev.here(L), "string.format"))
		}
		return format(L)
	}))
	// These only take: a bounded input bounds their time and their result.
	for _, name := range []string{"find", "match", "gmatch", "gfind", "upper", "lower", "reverse"} {
		fn, builtin := orig(name), "string."+name
		str.RawSetString(name, L.NewFunction(func(L *lua.LState) int {
			for i := 1; i <= 2; i++ {
				if s, ok := L.Get(i).(lua.LString); ok && len(s) > maxStringBytes {
					ev.fail(L, errStringArgTooLong(ev.here(L), builtin, len(s)))
				}
			}
			// Called through the VM rather than by its Go function, because
			// gmatch reads its own upvalue.
			top := L.GetTop()
			L.Insert(fn, 1)
			L.Call(top, lua.MultRet)
			return L.GetTop()
		}))
	}

	tbl := L.GetGlobal("table").(*lua.LTable)
	concat := tbl.RawGetString("concat").(*lua.LFunction).GFunction
	tbl.RawSetString("concat", L.NewFunction(func(L *lua.LState) int {
		if n := concatSize(L); n > maxStringBytes {
			ev.fail(L, errStringOverLimit(ev.here(L), "table.concat"))
		}
		return concat(L)
	}))
}

func (ev *evaluator) rep(L *lua.LState) int {
	s := L.CheckString(1)
	n := math.Floor(float64(L.CheckNumber(2)))
	if n < 1 || s == "" {
		L.Push(lua.LString(""))
		return 1
	}
	if size := float64(len(s)) * n; size > maxStringBytes {
		ev.fail(L, errStringTooLong(ev.here(L), "string.rep", clampSize(size)))
	}
	L.Push(lua.LString(strings.Repeat(s, int(n))))
	return 1
}

func clampSize(f float64) int64 {
	if f >= math.MaxInt64 {
		return math.MaxInt64
	}
	return int64(f)
}

// formatSize bounds the length of string.format's result from above: the
// format, every width and precision (Go's fmt accepts up to a million), and
// every argument at its longest rendering.
func formatSize(L *lua.LState) int64 {
	f := L.CheckString(1)
	size := int64(len(f))
	arg := 2
	for i := 0; i < len(f); i++ {
		if f[i] != '%' {
			continue
		}
		i++
		if i < len(f) && f[i] == '%' {
			continue
		}
		for i < len(f) && strings.IndexByte("-+ #0", f[i]) >= 0 {
			i++
		}
		var width, prec int64
		i, width = digits(f, i)
		if i < len(f) && f[i] == '.' {
			i, prec = digits(f, i+1)
		}
		size += width + prec + 32
		if arg <= L.GetTop() {
			if s, ok := L.Get(arg).(lua.LString); ok {
				size += 4*int64(len(s)) + 2 // %q may escape every byte
			}
		}
		arg++
	}
	return size
}

func digits(f string, i int) (int, int64) {
	var n int64
	for i < len(f) && f[i] >= '0' && f[i] <= '9' {
		if n < 1e9 {
			n = n*10 + int64(f[i]-'0')
		}
		i++
	}
	return i, n
}

// concatSize is the length table.concat would produce, counted up to the
// first element that is not a string or number (concat reports that one).
func concatSize(L *lua.LState) int64 {
	t := L.CheckTable(1)
	sep := int64(len(L.OptString(2, "")))
	i, j := L.OptInt(3, 1), L.OptInt(4, t.Len())
	var size int64
	for k := i; k <= j && size <= maxStringBytes; k++ {
		switch v := t.RawGetInt(k).(type) {
		case lua.LString:
			size += int64(len(v))
		case lua.LNumber:
			size += 24
		default:
			return size
		}
		if k < j {
			size += sep
		}
	}
	return size
}

// gsub is string.gsub written again with a bounded, linear result: the
// library version copies the whole result once per match (a 20 kB subject
// took seconds) and has no bound on what it builds.
func (ev *evaluator) gsub(L *lua.LState) int {
	str := L.CheckString(1)
	pat := L.CheckString(2)
	repl := L.Get(3)
	switch repl.(type) {
	case lua.LString, lua.LNumber, *lua.LTable, *lua.LFunction:
	default:
		L.TypeError(3, lua.LTString)
	}
	for _, s := range []string{str, pat} {
		if len(s) > maxStringBytes {
			ev.fail(L, errStringArgTooLong(ev.here(L), "string.gsub", len(s)))
		}
	}
	limit := -1
	if L.GetTop() >= 4 && L.Get(4) != lua.LNil {
		n := math.Floor(float64(L.CheckNumber(4)))
		if n < math.MaxInt32 {
			limit = int(n)
		}
		if n < 1 {
			L.Push(lua.LString(str))
			L.Push(lua.LNumber(0))
			return 2
		}
	}
	matches, err := pm.Find(pat, []byte(str), 0, limit)
	if err != nil {
		L.RaiseError("%s", err.Error())
	}
	var b strings.Builder
	prev := 0
	for _, m := range matches {
		start, end := m.Capture(0), m.Capture(1)
		if start < prev {
			continue
		}
		b.WriteString(str[prev:start])
		whole := str[start:end]
		switch r := repl.(type) {
		case lua.LString:
			expandRepl(L, &b, string(r), str, m)
		case lua.LNumber:
			b.WriteString(r.String())
		case *lua.LTable:
			writeReplValue(L, &b, L.GetTable(r, firstCapture(str, m)), whole)
		case *lua.LFunction:
			L.Push(r)
			n := pushCaptures(L, str, m)
			L.Call(n, 1)
			v := L.Get(-1)
			L.Pop(1)
			writeReplValue(L, &b, v, whole)
		}
		prev = end
		if b.Len() > maxStringBytes {
			ev.fail(L, errStringOverLimit(ev.here(L), "string.gsub"))
		}
	}
	b.WriteString(str[prev:])
	if b.Len() > maxStringBytes {
		ev.fail(L, errStringOverLimit(ev.here(L), "string.gsub"))
	}
	L.Push(lua.LString(b.String()))
	L.Push(lua.LNumber(len(matches)))
	return 2
}

// capture returns capture i (1-based) of m: a string, or a position.
func capture(str string, m *pm.MatchData, i int) lua.LValue {
	idx := 2 * i
	if m.IsPosCapture(idx) {
		return lua.LNumber(m.Capture(idx))
	}
	return lua.LString(str[m.Capture(idx):m.Capture(idx+1)])
}

func ncaptures(m *pm.MatchData) int { return m.CaptureLength()/2 - 1 }

// firstCapture is what a table or function replacement is keyed by: the
// first capture, or the whole match when the pattern has none.
func firstCapture(str string, m *pm.MatchData) lua.LValue {
	if ncaptures(m) == 0 {
		return lua.LString(str[m.Capture(0):m.Capture(1)])
	}
	return capture(str, m, 1)
}

func pushCaptures(L *lua.LState, str string, m *pm.MatchData) int {
	n := ncaptures(m)
	if n == 0 {
		L.Push(lua.LString(str[m.Capture(0):m.Capture(1)]))
		return 1
	}
	for i := 1; i <= n; i++ {
		L.Push(capture(str, m, i))
	}
	return n
}

// expandRepl writes a replacement string: %0 is the whole match, %1..%9 the
// captures (%1 is the whole match when there are none), %% a percent sign.
func expandRepl(L *lua.LState, b *strings.Builder, repl, str string, m *pm.MatchData) {
	for i := 0; i < len(repl); i++ {
		c := repl[i]
		if c != '%' || i+1 == len(repl) {
			b.WriteByte(c)
			continue
		}
		i++
		c = repl[i]
		if c < '0' || c > '9' {
			b.WriteByte(c)
			continue
		}
		n := int(c - '0')
		switch {
		case n == 0 || (n == 1 && ncaptures(m) == 0):
			b.WriteString(str[m.Capture(0):m.Capture(1)])
		case n <= ncaptures(m):
			b.WriteString(lua.LVAsString(capture(str, m, n)))
		default:
			L.RaiseError("%s", msgInvalidCapture(n))
		}
	}
}

// writeReplValue writes what a table or function replacement gave: false or
// nil keeps the match.
func writeReplValue(L *lua.LState, b *strings.Builder, v lua.LValue, whole string) {
	switch x := v.(type) {
	case lua.LString:
		b.WriteString(string(x))
	case lua.LNumber:
		b.WriteString(x.String())
	default:
		if lua.LVIsFalse(v) {
			b.WriteString(whole)
			return
		}
		L.RaiseError("%s", msgInvalidReplacement(v.Type().String()))
	}
}
