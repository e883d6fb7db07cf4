package luaapi

import (
	"strings"
	"testing"
	"time"
)

// TestPatternsAsLua51 pins the pattern builtins to Lua 5.1's results; the
// expectations were produced by lua5.1 itself, each call's values joined
// with "|".
func TestPatternsAsLua51(t *testing.T) {
	tests := []struct{ expr, want string }{
		{"string.find(\"hello world\", \"o w\")", "5|7"},
		{"string.find(\"hello world\", \"l+\")", "3|4"},
		{"string.find(\"hello world\", \"o\", 6)", "8|8"},
		{"string.find(\"hello world\", \"o\", -3)", "nil"},
		{"string.find(\"hello world\", \"xyz\")", "nil"},
		{"string.find(\"a.b\", \".\", 1, true)", "2|2"},
		{"string.find(\"a+b\", \"+\", 1, true)", "2|2"},
		{"string.find(\"abc\", \"\", 10)", "4|3"},
		{"string.find(\"abc\", \"\", 4)", "4|3"},
		{"string.find(\"abc\", \"^b\")", "nil"},
		{"string.find(\"abc\", \"^a\")", "1|1"},
		{"string.find(\"key = value\", \"(%w+)%s*=%s*(%w+)\")", "1|11|key|value"},
		{"string.match(\"key = value\", \"(%w+)%s*=%s*(%w+)\")", "key|value"},
		{"string.match(\"hello\", \"()ll()\")", "3|5"},
		{"string.match(\"  trim  \", \"^%s*(.-)%s*$\")", "trim"},
		{"string.match(\"f(a(b)c)d\", \"%b()\")", "(a(b)c)"},
		{"string.match(\"THE (quick) fox\", \"%f[%a]%a+\")", "THE"},
		{"string.match(\"hello\", \"h(.)(.)\")", "e|l"},
		{"string.match(\"abcabc\", \"(abc)%1\")", "abc"},
		{"string.match(\"aaa\", \"a-b\")", "nil"},
		{"string.match(\"aaab\", \"a-b\")", "aaab"},
		{"string.match(\"aaab\", \"^a*\")", "aaa"},
		{"string.match(\"x=1, y=2\", \"y=(%d)\")", "2"},
		{"string.match(\"[test]\", \"%[(.*)%]\")", "test"},
		{"string.match(\"a]b\", \"[]]\")", "]"},
		{"string.match(\"a-b\", \"[a%-]+\")", "a-"},
		{"string.match(\"0x1F\", \"0x(%x+)\")", "1F"},
		{"string.match(\"A1b2\", \"[%u%d]+\")", "A1"},
		{"string.match(\"hello.lua\", \"^(.-)%.lua$\")", "hello"},
		{"string.match(\"hello\", \"l?lo\")", "llo"},
		{"string.match(\"abc\", \"[^a]+\")", "bc"},
		{"string.match(\"tab\\there\", \"%s\")", "	"},
		{"string.match(\"end$\", \"d%$\")", "d$"},
		{"string.match(\"a$b\", \"$b\")", "$b"},
		{"string.match(\"x\", \"x$\")", "x"},
		{"string.match(\"punct!?\", \"%p+\")", "!?"},
		{"string.match(\"CAPS low\", \"%U+\")", " low"},
		{"string.match(\"abc\", \"b\", -1)", "nil"},
		{"string.match(\"abc\", \"b\", -2)", "b"},
		{"string.gsub(\"hello world\", \"o\", \"0\")", "hell0 w0rld|2"},
		{"string.gsub(\"hello world\", \"(%w+)\", \"<%1>\")", "<hello> <world>|2"},
		{"string.gsub(\"abc\", \"%w\", \"%0%0\")", "aabbcc|3"},
		{"string.gsub(\"hello world\", \"%w+\", \"%0 %0\", 1)", "hello hello world|1"},
		{"string.gsub(\"abc\", \"\", \"-\")", "-a-b-c-|4"},
		{"string.gsub(\"abc\", \"^a\", \"X\")", "Xbc|1"},
		{"string.gsub(\"abc\", \"()b\", \"%1\")", "a2c|1"},
		{"string.gsub(\"a.b\", \"%.\", 7)", "a7b|1"},
		{"string.gsub(\"hello\", \"l\", \"%%\")", "he%%o|2"},
		{"string.gsub(\"k=v, a=b\", \"(%w+)=(%w+)\", \"%2=%1\")", "v=k, b=a|2"},
		{"string.gsub(\"abc\", \"b*\", \"-\")", "-a--c-|4"},
		{"string.gsub(\"  x  \", \"^%s+\", \"\")", "x  |1"},
		{"string.gsub(\"one two\", \"(%w+)\", string.upper)", "ONE TWO|2"},
	}
	const show = `local function show(...)
  local t = {}
  for i = 1, select("#", ...) do t[#t+1] = tostring((select(i, ...))) end
  return table.concat(t, "|")
end
`
	for _, tt := range tests {
		t.Run(tt.expr, func(t *testing.T) {
			if got := luaResult(t, show+"result = show("+tt.expr+")"); got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

func TestPatternErrors(t *testing.T) {
	for src, want := range map[string]string{
		`string.find("a", "%")`:                        "malformed pattern (ends with '%')",
		`string.find("a", "[a")`:                       "malformed pattern (missing ']')",
		`string.find("a", "%f")`:                       "missing '[' after '%f' in pattern",
		`string.find("a", "(a")`:                       "unfinished capture",
		`string.match("a", "a)")`:                      "invalid pattern capture",
		`string.find("a", "%1")`:                       "invalid capture index",
		`string.find("a", "%b")`:                       "unbalanced pattern",
		`string.find(("a"):rep(40), ("(a"):rep(33))`:   "too many captures",
		`string.find(("a"):rep(400), ("a?"):rep(300))`: "pattern too complex",
	} {
		f := evalString(t, src)
		if len(f.Errors) != 1 || f.Errors[0].Problem != Runtime || !strings.Contains(f.Errors[0].Detail, want) {
			t.Errorf("%s: %v, want %q", src, f.Errors, want)
		}
	}
}

// A pattern that backtracks for ever is stopped by the file's budget like
// a loop, and nothing of it runs on after the file was stopped.
func TestBudgetStopsPattern(t *testing.T) {
	opts := testOptions()
	opts.Budget = 50 * time.Millisecond
	for _, src := range []string{
		`local s = ("a"):rep(100000) local i = s:find(".-.-.-b")`,
		`local s = ("a"):rep(100000) local n = select(2, s:gsub(".-.-.-b", ""))`,
		`local s = ("a"):rep(100000) for w in s:gmatch(".-.-.-b") do end`,
		`local s = ("a"):rep(100000) local m = s:match("(a*)(a*)(a*)%1b")`,
	} {
		f := Eval("slow.lua", []byte(src), opts)
		if len(f.Errors) != 1 || f.Errors[0].Problem != Budget || f.Errors[0].Pos.Line != 1 {
			t.Errorf("%s: %v", src, f.Errors)
		}
		if n := running.Load(); n != 0 {
			t.Errorf("%s: %d evaluations still run after the file was stopped", src, n)
		}
	}
}

// `..` is a call of the file's bounded concatenation, everywhere it can
// appear, and behaves as the operator does.
func TestConcat(t *testing.T) {
	tests := []struct{ src, want string }{
		{`result = 1 .. 2`, "12"},
		{`result = "a" .. 1.5 .. "b"`, "a1.5b"},
		{`result = ("a" .. "b"):upper()`, "AB"},
		{`local t = { k = "x" .. "y" } result = t.k`, "xy"},
		{`local function f(a) return a .. "!" end result = f("hi")`, "hi!"},
		{`local t = {} t["a" .. "b"] = 1 for k in pairs(t) do result = k end`, "ab"},
		{`local s = "" for i = 1, 3 do s = s .. i end result = s`, "123"},
		{`local s = "" while #s < 3 do s = s .. "x" end result = s`, "xxx"},
		{`local mt = { __concat = function(a, b) return "meta" end }
		  result = setmetatable({}, mt) .. "x" .. ("y" .. setmetatable({}, mt))`, "meta"},
	}
	for _, tt := range tests {
		if got := luaResult(t, tt.src); got != tt.want {
			t.Errorf("%s: got %q, want %q", tt.src, got, tt.want)
		}
	}
	for src, want := range map[string]string{
		"local a = 1\nlocal s = \"a\" .. nil":                    "2: runtime error: cannot perform concat operation between string and nil",
		"local s = ('x'):rep(1024 * 1024)\n\nlocal t = s .. 'y'": "3: the .. operator would build a string of more than 1M",
	} {
		f := evalString(t, src)
		if len(f.Errors) != 1 || !strings.Contains(f.Errors[0].Error(), want) {
			t.Errorf("%q: %v, want %q", src, f.Errors, want)
		}
	}
}
