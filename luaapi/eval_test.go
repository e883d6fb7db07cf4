package luaapi

import (
	"bytes"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/hashicorp/go-hclog"
)

func TestPrintGoesToLogger(t *testing.T) {
	var buf bytes.Buffer
	opts := testOptions()
	opts.Logger = hclog.New(&hclog.LoggerOptions{Output: &buf, Level: hclog.Info, DisableTime: true, Color: hclog.ColorOff})
	f := Eval("jobs.d/hello.lua", []byte("print('hello', 42, nil)\nfor i = 1, 200 do print(i) end\n"), opts)
	if len(f.Errors) > 0 {
		t.Fatal(f.Errors)
	}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	want := `[INFO]  print: file=jobs.d/hello.lua line=1 text="hello\t42\tnil"`
	if lines[0] != want {
		t.Errorf("got  %q\nwant %q", lines[0], want)
	}
	// A loop cannot flood the log: maxPrints lines, then one warning.
	if len(lines) != maxPrints+1 || !strings.Contains(lines[maxPrints], "[WARN]") || !strings.Contains(lines[maxPrints], "file=jobs.d/hello.lua") {
		t.Errorf("%d lines, last %q", len(lines), lines[len(lines)-1])
	}
}

func TestPrintWithoutLogger(t *testing.T) {
	mustEval(t, `print("nobody listens")`)
}

// TestProblems checks what kind of mistake each error is, and which field it
// names, without reading sentences.
func TestProblems(t *testing.T) {
	tests := []struct {
		src     string
		problem Problem
		kind    string
		name    string
		field   string
		line    int
	}{
		{`job "a" { cmd = "x", gpu = 1 }`, UnknownField, "job", "a", "gpu", 1},
		{"\n\njob \"a\" {\n cmd = \"x\",\n cpus = \"8\" }", WrongType, "job", "a", "cpus", 5}, // the line of the field
		{`flavor "f" { gpus = 1.5 }`, WrongType, "flavor", "f", "gpus", 1},
		{`job "a" { cmd = "x", ram = "32X" }`, BadValue, "job", "a", "ram", 1},
		{`job "a" { cmd = "x", ram = 32 }`, WrongType, "job", "a", "ram", 1},
		{`job "a" { cmd = "x", cpus = -1 }`, OutOfRange, "job", "a", "cpus", 1},
		{`job "a" { cmd = "x", max_restarts = -1 }`, OutOfRange, "job", "a", "max_restarts", 1},
		{`job "a" { cmd = "x", stop_timeout = "0s" }`, OutOfRange, "job", "a", "stop_timeout", 1},
		{`job "a" { }`, MissingField, "job", "a", "cmd", 1},
		{`job "a" { cmd = {} }`, BadValue, "job", "a", "cmd", 1},
		{`job "a" { cmd = "x", flavor = "f", gpus = 1 }`, Conflict, "job", "a", "gpus", 1},
		{`job "a" { cmd = "x", cpus = 0, gpus = 1 }`, Conflict, "job", "a", "gpus", 1},
		{"job \"a\" { cmd = \"x\" }\njob \"a\" { cmd = \"y\" }", Duplicate, "job", "a", "", 2},
		{`job "A" { cmd = "x" }`, BadName, "job", "A", "", 1},
		{`flavor "1x" { }`, BadName, "flavor", "1x", "", 1},
		{`job "a" { cmd = "x", flavor = "F" }`, BadName, "job", "a", "flavor", 1},
		{`job "a" "b"`, BadForm, "job", "a", "", 1},
		{`job(1)`, BadForm, "", "", "", 1},
		{`job "a"`, BadForm, "job", "a", "", 1},
		{"x = 1\ny = = 2", Syntax, "", "", "", 2},
		{"local t\nfor i = 1, 2 do\n  local x = t.y\nend", Runtime, "", "", "", 3},
		{`error("no")`, Runtime, "", "", "", 1},
		{`local x = os.time()`, Sandbox, "", "", "", 1},
		{`machine.cpus = 1`, Sandbox, "", "", "", 1},
		{`local y = machine.cpu`, UnknownField, "", "", "cpu", 1},
		{`local s = ("x"):rep(1e8)`, Sandbox, "", "", "", 1},
		{`job "a" { cmd = "x", stop_signal = "STOP" }`, BadValue, "job", "a", "stop_signal", 1},
		{`job "a" { cmd = "x", env = { A = {} } }`, WrongType, "job", "a", "env", 1},
		{`job "a" { cmd = "x", dir = "rel" }`, BadValue, "job", "a", "dir", 1},
		{`job "a" { cmd = "x", user = "" }`, BadValue, "job", "a", "user", 1},
		{`job "a" { cmd = "a\0b" }`, BadValue, "job", "a", "cmd", 1},
		{`job "a" { cmd = "x", env = { A = "a\0b" } }`, BadValue, "job", "a", "env", 1},
	}
	for _, tt := range tests {
		t.Run(tt.src, func(t *testing.T) {
			f := evalString(t, tt.src)
			if len(f.Errors) != 1 {
				t.Fatalf("errors: %v", f.Errors)
			}
			var e *Error
			if !errors.As(f.Errors[0], &e) {
				t.Fatalf("not an *Error")
			}
			got := [5]any{e.Problem, e.Kind, e.Name, e.Field, e.Pos.Line}
			want := [5]any{tt.problem, tt.kind, tt.name, tt.field, tt.line}
			if got != want {
				t.Errorf("got %v, want %v (%v)", got, want, e)
			}
			if f.Jobs != nil || f.Flavors != nil {
				t.Errorf("a rejected file has declarations")
			}
		})
	}
}

func TestFileTooLarge(t *testing.T) {
	src := bytes.Repeat([]byte("-- padding\n"), maxSourceBytes/10)
	f := Eval("big.lua", src, testOptions())
	if len(f.Errors) != 1 || f.Errors[0].Problem != TooLarge {
		t.Errorf("%v", f.Errors)
	}
}

// Evaluations may be asked for from several goroutines; they are serialised
// inside, and each result stands alone.
func TestEvalConcurrently(t *testing.T) {
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			src := `for i = 1, 20 do job ("j-" .. i) { cmd = "x", priority = i } end`
			if i%2 == 1 {
				src = `job "bad" { cmd = "x", gpu = 1 }`
			}
			f := Eval("c.lua", []byte(src), testOptions())
			if (i%2 == 1) != (len(f.Errors) > 0) {
				t.Errorf("%d: %v", i, f.Errors)
			}
		}()
	}
	wg.Wait()
}

// A first line that begins with "#" (#!/usr/bin/env lua) is passed over
// as lua(1) passes it over, and the lines after it are counted as they
// are (trial AF: it was a syntax error); a "#" further on is Lua's length
// operator, and a syntax error at the start of a line.
func TestShebangLine(t *testing.T) {
	f := mustEval(t, "#!/usr/bin/env lua\njob \"shebang\" { cmd = \"true\" }\n")
	if len(f.Jobs) != 1 || f.Jobs[0].Name != "shebang" || f.Jobs[0].Pos.Line != 2 {
		t.Errorf("jobs: %+v", f.Jobs)
	}
	f = mustEval(t, "\xef\xbb\xbf#!/usr/bin/env lua\njob \"both\" { cmd = \"true\" }\n")
	if len(f.Jobs) != 1 || f.Jobs[0].Pos.Line != 2 {
		t.Errorf("after a byte order mark, jobs: %+v", f.Jobs)
	}
	f = evalString(t, "#!/usr/bin/env lua\nx = = 1\n")
	if len(f.Errors) != 1 || f.Errors[0].Problem != Syntax || f.Errors[0].Pos.Line != 2 {
		t.Errorf("errors: %v", f.Errors)
	}
	// Passed over whole: not a long comment that hides what follows.
	f = mustEval(t, "#[[ a first line\njob \"after\" { cmd = \"true\" }\n-- ]]\n")
	if len(f.Jobs) != 1 || f.Jobs[0].Name != "after" || f.Jobs[0].Pos.Line != 2 {
		t.Errorf("after a #[[ line, jobs: %+v", f.Jobs)
	}
	f = evalString(t, "x = 1\n#!/usr/bin/env lua\n")
	if len(f.Errors) != 1 || f.Errors[0].Problem != Syntax || f.Errors[0].Pos.Line != 2 {
		t.Errorf("a # line past the first: %v", f.Errors)
	}
}

// A byte order mark, which some editors write at the start of a UTF-8
// file, is not part of the program: the file reads as without it, and
// lines are counted as before.
func TestByteOrderMark(t *testing.T) {
	f := mustEval(t, "\xef\xbb\xbfjob \"bom\" { cmd = \"echo hi\" }\n")
	if len(f.Jobs) != 1 || f.Jobs[0].Name != "bom" || f.Jobs[0].Pos.Line != 1 {
		t.Errorf("jobs: %+v", f.Jobs)
	}
	f = evalString(t, "\xef\xbb\xbfx = 1\ny = = 2\n")
	if len(f.Errors) != 1 || f.Errors[0].Problem != Syntax || f.Errors[0].Pos.Line != 2 {
		t.Errorf("errors: %v", f.Errors)
	}
	// Only a leading mark is passed over.
	f = evalString(t, "x = 1\n\xef\xbb\xbfy = 2\n")
	if len(f.Errors) != 1 || f.Errors[0].Problem != Syntax {
		t.Errorf("errors: %v", f.Errors)
	}
}
