package luaapi

import (
	"math"
	"strings"

	lua "github.com/yuin/gopher-lua"
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
	// The pattern builtins are this package's own (pattern.go), so that a
	// file's budget can stop them.
	str.RawSetString("find", L.NewFunction(func(L *lua.LState) int { return ev.find(L, true) }))
	str.RawSetString("match", L.NewFunction(func(L *lua.LState) int { return ev.find(L, false) }))
	str.RawSetString("gmatch", L.NewFunction(ev.gmatch))
	str.RawSetString("gfind", L.NewFunction(ev.gmatch))
	// These only take: a bounded input bounds their time and their result.
	for _, name := range []string{"upper", "lower", "reverse"} {
		fn, builtin := orig(name).GFunction, "string."+name
		str.RawSetString(name, L.NewFunction(func(L *lua.LState) int {
			if s, ok := L.Get(1).(lua.LString); ok && len(s) > maxStringBytes {
				ev.fail(L, errStringArgTooLong(ev.here(L), builtin, len(s)))
			}
			return fn(L)
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

// newMatcher checks a pattern builtin's subject and pattern, and returns a
// matcher that stops when the file's context ends.
func (ev *evaluator) newMatcher(L *lua.LState, builtin, src, pat string) *matcher {
	for _, s := range []string{src, pat} {
		if len(s) > maxStringBytes {
			ev.fail(L, errStringArgTooLong(ev.here(L), builtin, len(s)))
		}
	}
	ctx := L.Context()
	stop := func() bool { return false }
	if ctx != nil {
		stop = func() bool { return ctx.Err() != nil }
	}
	return &matcher{src: src, pat: pat, stop: stop}
}

// matching runs f, which uses a matcher, and raises the matcher's errors
// into Lua: a malformed pattern in Lua's words, and a stop as the
// interpreter itself says it, so that the file ends as a budget spent.
func matching(L *lua.LState, f func()) {
	defer func() {
		switch r := recover().(type) {
		case nil:
		case patternError:
			L.RaiseError("%s", string(r))
		case patternStopped:
			L.RaiseError("%s", L.Context().Err().Error())
		default:
			panic(r)
		}
	}()
	f()
}

// find is string.find (find) and string.match.
func (ev *evaluator) find(L *lua.LState, find bool) int {
	builtin := "string.match"
	if find {
		builtin = "string.find"
	}
	s, pat := L.CheckString(1), L.CheckString(2)
	init := startIndex(L.OptInt(3, 1), len(s))
	if find && (lua.LVAsBool(L.Get(4)) || !strings.ContainsAny(pat, "^$*+?.([%-")) {
		if len(s) > maxStringBytes || len(pat) > maxStringBytes {
			ev.fail(L, errStringArgTooLong(ev.here(L), builtin, max(len(s), len(pat))))
		}
		if i := strings.Index(s[init:], pat); i >= 0 {
			L.Push(lua.LNumber(init + i + 1))
			L.Push(lua.LNumber(init + i + len(pat)))
			return 2
		}
		L.Push(lua.LNil)
		return 1
	}
	m := ev.newMatcher(L, builtin, s, pat)
	n := 0
	matching(L, func() {
		p, anchored := anchor(pat)
		start, end := m.find(init, anchored, p)
		switch {
		case start == -1:
			L.Push(lua.LNil)
			n = 1
		case find:
			L.Push(lua.LNumber(start + 1))
			L.Push(lua.LNumber(end))
			n = 2 + pushCaptures(L, m, start, end, false)
		default:
			n = pushCaptures(L, m, start, end, true)
		}
	})
	return n
}

// startIndex turns Lua's 1-based, possibly negative init into an offset
// within a subject of length n.
func startIndex(init, n int) int {
	if init < 0 {
		init += n + 1
	}
	return min(max(init-1, 0), n)
}

func anchor(pat string) (int, bool) {
	if pat != "" && pat[0] == '^' {
		return 1, true
	}
	return 0, false
}

// gmatch is string.gmatch: an iterator over the matches; '^' is not special
// to it, as in Lua 5.1.
func (ev *evaluator) gmatch(L *lua.LState) int {
	s, pat := L.CheckString(1), L.CheckString(2)
	m := ev.newMatcher(L, "string.gmatch", s, pat)
	pos := 0
	L.Push(L.NewFunction(func(L *lua.LState) int {
		n := 0
		matching(L, func() {
			for src := pos; src <= len(s); src++ {
				m.level = 0
				if e := m.match(src, 0); e != -1 {
					pos = e
					if e == src {
						pos++
					}
					n = pushCaptures(L, m, src, e, true)
					return
				}
			}
			pos = len(s) + 1
		})
		return n
	}))
	return 1
}

// gsub is string.gsub with a bounded result, built in one pass.
func (ev *evaluator) gsub(L *lua.LState) int {
	str := L.CheckString(1)
	pat := L.CheckString(2)
	repl := L.Get(3)
	switch repl.(type) {
	case lua.LString, lua.LNumber, *lua.LTable, *lua.LFunction:
	default:
		L.TypeError(3, lua.LTString)
	}
	m := ev.newMatcher(L, "string.gsub", str, pat)
	limit := len(str) + 1
	if L.GetTop() >= 4 && L.Get(4) != lua.LNil {
		n := math.Floor(float64(L.CheckNumber(4)))
		if n < 1 {
			L.Push(lua.LString(str))
			L.Push(lua.LNumber(0))
			return 2
		}
		if n < float64(limit) {
			limit = int(n)
		}
	}
	var b strings.Builder
	n, src := 0, 0
	matching(L, func() {
		p, anchored := anchor(pat)
		for n < limit {
			m.level = 0
			e := m.match(src, p)
			if e != -1 {
				n++
				ev.replace(L, &b, m, src, e, repl)
			}
			switch {
			case e != -1 && e > src:
				src = e
			case src < len(str):
				b.WriteByte(str[src])
				src++
			default:
				return
			}
			if b.Len() > maxStringBytes {
				ev.fail(L, errStringOverLimit(ev.here(L), "string.gsub"))
			}
			if anchored {
				return
			}
		}
	})
	b.WriteString(str[src:])
	if b.Len() > maxStringBytes {
		ev.fail(L, errStringOverLimit(ev.here(L), "string.gsub"))
	}
	L.Push(lua.LString(b.String()))
	L.Push(lua.LNumber(n))
	return 2
}

// replace writes the replacement of the match s..e.
func (ev *evaluator) replace(L *lua.LState, b *strings.Builder, m *matcher, s, e int, repl lua.LValue) {
	whole := m.src[s:e]
	switch r := repl.(type) {
	case lua.LString:
		expandRepl(L, b, string(r), m, s, e)
	case lua.LNumber:
		expandRepl(L, b, r.String(), m, s, e)
	case *lua.LTable:
		writeReplValue(L, b, L.GetTable(r, captureValue(m, 0, s, e)), whole)
	case *lua.LFunction:
		L.Push(r)
		L.Call(pushCaptures(L, m, s, e, true), 1)
		v := L.Get(-1)
		L.Pop(1)
		writeReplValue(L, b, v, whole)
	}
}

// captureValue is capture i of the match s..e as Lua sees it.
func captureValue(m *matcher, i, s, e int) lua.LValue {
	str, pos, isPos := m.captureAt(i, s, e)
	if isPos {
		return lua.LNumber(pos)
	}
	return lua.LString(str)
}

// pushCaptures pushes the match's captures (with whole, the whole match
// when there are none) and returns how many.
func pushCaptures(L *lua.LState, m *matcher, s, e int, whole bool) int {
	n := m.captures(whole)
	for i := 0; i < n; i++ {
		L.Push(captureValue(m, i, s, e))
	}
	return n
}

// expandRepl writes a replacement string: %0 is the whole match, %1..%9 the
// captures (%1 is the whole match when there are none), % before any other
// character that character.
func expandRepl(L *lua.LState, b *strings.Builder, repl string, m *matcher, s, e int) {
	for i := 0; i < len(repl); i++ {
		c := repl[i]
		if c != '%' || i+1 == len(repl) {
			b.WriteByte(c)
			continue
		}
		i++
		c = repl[i]
		switch {
		case c < '0' || c > '9':
			b.WriteByte(c)
		case c == '0':
			b.WriteString(m.src[s:e])
		case int(c-'1') < m.captures(true):
			b.WriteString(lua.LVAsString(captureValue(m, int(c-'1'), s, e)))
		default:
			L.RaiseError("%s", msgInvalidCapture(int(c-'0')))
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
