package supervisor

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"
)

// TestJobLoggerNamesTheOwner: the lines about a person's job name its
// owner, which the journal keeps as BERTH_OWNER (trial AW).
func TestJobLoggerNamesTheOwner(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	log := hclog.New(&hclog.LoggerOptions{Output: &b, Level: hclog.Info})
	jobLogger(log, "alice/train", "alice").Info("started")
	jobLogger(log, "train", "").Info("started")
	if got := b.String(); !strings.Contains(got, "started: job=alice/train owner=alice\n") || !strings.Contains(got, "started: job=train\n") {
		t.Errorf("log lines:\n%s", got)
	}
}

// TestWithOwner: a line about a person's job names its owner, once; one
// about an administrators' job, none.
func TestWithOwner(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		kv   []any
		want string
	}{
		{[]any{"job", "alice/train", "run", 3}, "[job alice/train run 3 owner alice]"},
		{[]any{"job", "train", "run", 3}, "[job train run 3]"},
		{[]any{"call", "stop", "job", "bob/x", "pids", []int{1}}, "[call stop job bob/x pids [1] owner bob]"},
		{[]any{"job", "alice/train", "owner", "alice"}, "[job alice/train owner alice]"},
		{[]any{"run", 3}, "[run 3]"},
	} {
		if got := fmt.Sprint(withOwner(tt.kv)); got != tt.want {
			t.Errorf("withOwner(%v) = %s, want %s", tt.kv, got, tt.want)
		}
	}
}

// TestDaemonLinesAboutAJobNameItsOwner: no line of the daemon's names a job
// as a key of its own ("job", name), where it would lack its owner; they go
// through jobLog, jobLogger or withOwner (trial AY: 13 lines did). It reads
// the calls of a logger's methods (and notRecorded) whose arguments hold
// the literal "job"; logCaller and logRefused add the owner themselves.
func TestDaemonLinesAboutAJobNameItsOwner(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	levels := map[string]bool{"Trace": true, "Debug": true, "Info": true, "Warn": true, "Error": true, "With": true, "notRecorded": true}
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok || !levels[sel.Sel.Name] {
				return true
			}
			if fn := enclosing(f, call.Pos()); fn == "jobLogger" {
				return true
			}
			for _, arg := range call.Args {
				if lit, ok := arg.(*ast.BasicLit); ok && lit.Kind == token.STRING && lit.Value == `"job"` {
					t.Errorf("%s: a log line names a job without its owner: log it through d.jobLog(name)", fset.Position(call.Pos()))
				}
			}
			return true
		})
	}
}

// enclosing is the name of the function of file f that holds pos.
func enclosing(f *ast.File, pos token.Pos) string {
	for _, decl := range f.Decls {
		if fn, ok := decl.(*ast.FuncDecl); ok && fn.Pos() <= pos && pos < fn.End() {
			return fn.Name.Name
		}
	}
	return ""
}

// TestOwnerNotRead: a person's job declared no more because their files
// are not read says why: they left the group, or the daemon reads no one's
// (it said they left the group of a daemon started with --user-jobs "").
func TestOwnerNotRead(t *testing.T) {
	t.Parallel()
	d := &Daemon{cfg: Config{UserJobs: "/var/spool/berth", Group: "lab"}, people: map[string]*person{"alice": {name: "alice"}}}
	for _, tt := range []struct{ owner, want string }{
		{"", ""},
		{"alice", ""},
		{"bob", "its owner left the group lab"},
	} {
		if got := d.ownerNotRead(tt.owner); got != tt.want {
			t.Errorf("%q: %q, want %q", tt.owner, got, tt.want)
		}
	}
	d.cfg.UserJobs, d.people = "", nil
	if got, want := d.ownerNotRead("bob"), `the daemon reads no person's job files (--user-jobs "")`; got != want {
		t.Errorf("no one's files read: %q, want %q", got, want)
	}
}

// TestConfigurationErrorNamesItsOwner: the line of a problem of a person's
// file that names no job (a syntax error) carries its owner, as does the
// line that says its errors are gone (trial BC: they had none).
func TestConfigurationErrorNamesItsOwner(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	d := &Daemon{log: hclog.New(&hclog.LoggerOptions{Output: &b, Level: hclog.Info}), logged: map[loggedProblem]bool{},
		people: map[string]*person{"alice": {name: "alice", dir: "/var/spool/berth/alice"}}}
	d.logProblems([]Problem{{Code: "syntax", File: "/var/spool/berth/alice/k.lua", Line: 1, Text: "k.lua:1: syntax error"}})
	d.logProblems(nil)
	for _, want := range []string{"configuration error: file=/var/spool/berth/alice/k.lua line=1 owner=alice code=syntax", "a file's configuration errors are gone: file=/var/spool/berth/alice/k.lua owner=alice"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("no line %q in:\n%s", want, b.String())
		}
	}
}
