package luaapi

import (
	"bytes"
	"fmt"
	"slices"

	lua "github.com/yuin/gopher-lua"
	"github.com/yuin/gopher-lua/ast"
	"github.com/yuin/gopher-lua/parse"
)

// concatGlobal names the function every `..` of a file is rewritten to
// call. gopher-lua concatenates in one VM instruction that no hook reaches,
// and a string that doubles in a loop outgrows any guard that samples the
// heap: one instruction can allocate gigabytes. As a call, a concatenation
// is bounded like the string builtins. The name is not an identifier, so no
// file can collide with it; a file that replaces it only breaks its own
// concatenations, since the replacement's `..` call it too.
const concatGlobal = "(concat)"

// utf8BOM is the mark some editors write at the start of a UTF-8 file.
var utf8BOM = []byte("\xef\xbb\xbf")

// chunkSource is the Lua a file holds, as lua(1) reads a file: a leading
// byte order mark passed over (Lua 5.2 and later do; the parser would take
// it for a bad token), and a first line that begins with "#" (a "#!" line)
// passed over, its newline kept so that lines are counted as they are.
func chunkSource(src []byte) []byte {
	src = bytes.TrimPrefix(src, utf8BOM)
	if len(src) > 0 && src[0] == '#' {
		if i := bytes.IndexByte(src, '\n'); i >= 0 {
			return src[i:]
		}
		return nil
	}
	return src
}

// load parses and compiles the file with its concatenations rewritten.
// Its errors are the parser's and the compiler's own, as syntaxError
// expects them.
func (ev *evaluator) load(L *lua.LState) (*lua.LFunction, error) {
	chunk, err := parse.Parse(bytes.NewReader(chunkSource(ev.src)), ev.path)
	if err != nil {
		return nil, err
	}
	var w rewriter
	w.stmts(chunk)
	if w.repeated != nil {
		return nil, w.repeated
	}
	ev.fieldLines = w.fields
	proto, err := lua.Compile(chunk, ev.path)
	if err != nil {
		return nil, err
	}
	return L.NewFunctionFromProto(proto), nil
}

// concat is `..`: strings and numbers join within maxStringBytes; anything
// else goes to a __concat metamethod, the left operand's first, as in the
// VM.
func (ev *evaluator) concat(L *lua.LState) int {
	lhs, rhs := L.Get(1), L.Get(2)
	if joinable(lhs) && joinable(rhs) {
		a, b := lua.LVAsString(lhs), lua.LVAsString(rhs)
		if len(a)+len(b) > maxStringBytes {
			ev.fail(L, errStringOverLimit(ev.here(L), "the .. operator"))
		}
		L.Push(lua.LString(a + b))
		return 1
	}
	op := L.GetMetaField(lhs, "__concat")
	if op == lua.LNil {
		op = L.GetMetaField(rhs, "__concat")
	}
	if fn, ok := op.(*lua.LFunction); ok {
		L.Push(fn)
		L.Push(lhs)
		L.Push(rhs)
		L.Call(2, 1)
		return 1
	}
	L.RaiseError("cannot perform concat operation between %v and %v", lhs.Type().String(), rhs.Type().String())
	return 0
}

func joinable(v lua.LValue) bool {
	switch v.(type) {
	case lua.LString, lua.LNumber:
		return true
	}
	return false
}

func (w *rewriter) stmts(stmts []ast.Stmt) {
	for _, s := range stmts {
		switch s := s.(type) {
		case *ast.AssignStmt:
			w.exprs(s.Lhs)
			w.exprs(s.Rhs)
		case *ast.LocalAssignStmt:
			w.exprs(s.Exprs)
		case *ast.FuncCallStmt:
			s.Expr = w.expr(s.Expr)
		case *ast.DoBlockStmt:
			w.stmts(s.Stmts)
		case *ast.WhileStmt:
			s.Condition = w.expr(s.Condition)
			w.stmts(s.Stmts)
		case *ast.RepeatStmt:
			s.Condition = w.expr(s.Condition)
			w.stmts(s.Stmts)
		case *ast.IfStmt:
			s.Condition = w.expr(s.Condition)
			w.stmts(s.Then)
			w.stmts(s.Else)
		case *ast.NumberForStmt:
			s.Init = w.expr(s.Init)
			s.Limit = w.expr(s.Limit)
			s.Step = w.expr(s.Step)
			w.stmts(s.Stmts)
		case *ast.GenericForStmt:
			w.exprs(s.Exprs)
			w.stmts(s.Stmts)
		case *ast.FuncDefStmt:
			s.Name.Func = w.expr(s.Name.Func)
			s.Name.Receiver = w.expr(s.Name.Receiver)
			w.stmts(s.Func.Stmts)
		case *ast.ReturnStmt:
			w.exprs(s.Exprs)
		}
	}
}

func (w *rewriter) exprs(exprs []ast.Expr) {
	for i, e := range exprs {
		exprs[i] = w.expr(e)
	}
}

// rewriter walks a chunk: it turns every concatenation into a call of
// concatGlobal, on the same lines, notes the first table constructor
// that gives one field twice, and where each constructor's fields are.
type rewriter struct {
	repeated *repeatedFieldError
	// fields maps the line a table constructor opens on to the lines of
	// its named fields, for the outermost constructor of that line: where
	// `job "train" {` opens a table over ten lines, a mistake in its
	// ram is said on the line of ram. nil for a line where two tables
	// open side by side, which one line cannot tell apart.
	fields map[int]map[string]int
	// open are the lines the constructors being walked opened on.
	open []int
}

// repeatedFieldError is a table constructor that gives field twice, at
// line and at first before: Lua keeps the last, and the first is never
// read (a `timeout = "5 min"` added beside a `timeout = "1h"` was never
// even checked).
type repeatedFieldError struct {
	field       string
	first, line int
}

func (e *repeatedFieldError) Error() string {
	return fmt.Sprintf("field %q given twice in one table (lines %d and %d)", e.field, e.first, e.line)
}

// expr returns e with every concatenation in it turned into a call of
// concatGlobal, on the same lines.
func (w *rewriter) expr(e ast.Expr) ast.Expr {
	switch e := e.(type) {
	case *ast.StringConcatOpExpr:
		fn := &ast.IdentExpr{Value: concatGlobal}
		fn.SetLine(e.Line())
		fn.SetLastLine(e.LastLine())
		call := &ast.FuncCallExpr{Func: fn, Args: []ast.Expr{w.expr(e.Lhs), w.expr(e.Rhs)}}
		call.SetLine(e.Line())
		call.SetLastLine(e.LastLine())
		return call
	case *ast.AttrGetExpr:
		e.Object = w.expr(e.Object)
		e.Key = w.expr(e.Key)
	case *ast.TableExpr:
		var seen map[string]int // made at the first field named: most tables (a cmd) have none
		defer w.noteFields(e.Line(), &seen)()
		for _, f := range e.Fields {
			if k, ok := f.Key.(*ast.StringExpr); ok && w.repeated == nil {
				if seen == nil {
					seen = map[string]int{}
				}
				if first, twice := seen[k.Value]; twice {
					w.repeated = &repeatedFieldError{field: k.Value, first: first, line: k.Line()}
				}
				seen[k.Value] = k.Line()
			}
			f.Key = w.expr(f.Key)
			f.Value = w.expr(f.Value)
		}
	case *ast.FuncCallExpr:
		e.Func = w.expr(e.Func)
		e.Receiver = w.expr(e.Receiver)
		w.exprs(e.Args)
	case *ast.LogicalOpExpr:
		e.Lhs = w.expr(e.Lhs)
		e.Rhs = w.expr(e.Rhs)
	case *ast.RelationalOpExpr:
		e.Lhs = w.expr(e.Lhs)
		e.Rhs = w.expr(e.Rhs)
	case *ast.ArithmeticOpExpr:
		e.Lhs = w.expr(e.Lhs)
		e.Rhs = w.expr(e.Rhs)
	case *ast.UnaryMinusOpExpr:
		e.Expr = w.expr(e.Expr)
	case *ast.UnaryNotOpExpr:
		e.Expr = w.expr(e.Expr)
	case *ast.UnaryLenOpExpr:
		e.Expr = w.expr(e.Expr)
	case *ast.FunctionExpr:
		w.stmts(e.Stmts)
	}
	return e
}

// noteFields notes, once the table constructor that opened on line has
// been walked, where its named fields are (*seen), unless a constructor
// around it opened on the same line: that one's fields are what a
// declaration on the line holds.
func (w *rewriter) noteFields(line int, seen *map[string]int) func() {
	nested := slices.Contains(w.open, line)
	w.open = append(w.open, line)
	return func() {
		w.open = w.open[:len(w.open)-1]
		if nested || *seen == nil {
			return
		}
		if w.fields == nil {
			w.fields = map[int]map[string]int{}
		}
		if _, twice := w.fields[line]; twice {
			w.fields[line] = nil
			return
		}
		w.fields[line] = *seen
	}
}
