package luaapi

import (
	"bytes"

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

// load parses and compiles the file with its concatenations rewritten.
// Its errors are the parser's and the compiler's own, as syntaxError
// expects them. A leading byte order mark is passed over, as Lua 5.2 and
// later pass it over; the parser would take it for a bad token.
func (ev *evaluator) load(L *lua.LState) (*lua.LFunction, error) {
	chunk, err := parse.Parse(bytes.NewReader(bytes.TrimPrefix(ev.src, utf8BOM)), ev.path)
	if err != nil {
		return nil, err
	}
	rewriteStmts(chunk)
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

func rewriteStmts(stmts []ast.Stmt) {
	for _, s := range stmts {
		switch s := s.(type) {
		case *ast.AssignStmt:
			rewriteExprs(s.Lhs)
			rewriteExprs(s.Rhs)
		case *ast.LocalAssignStmt:
			rewriteExprs(s.Exprs)
		case *ast.FuncCallStmt:
			s.Expr = rewriteExpr(s.Expr)
		case *ast.DoBlockStmt:
			rewriteStmts(s.Stmts)
		case *ast.WhileStmt:
			s.Condition = rewriteExpr(s.Condition)
			rewriteStmts(s.Stmts)
		case *ast.RepeatStmt:
			s.Condition = rewriteExpr(s.Condition)
			rewriteStmts(s.Stmts)
		case *ast.IfStmt:
			s.Condition = rewriteExpr(s.Condition)
			rewriteStmts(s.Then)
			rewriteStmts(s.Else)
		case *ast.NumberForStmt:
			s.Init = rewriteExpr(s.Init)
			s.Limit = rewriteExpr(s.Limit)
			s.Step = rewriteExpr(s.Step)
			rewriteStmts(s.Stmts)
		case *ast.GenericForStmt:
			rewriteExprs(s.Exprs)
			rewriteStmts(s.Stmts)
		case *ast.FuncDefStmt:
			s.Name.Func = rewriteExpr(s.Name.Func)
			s.Name.Receiver = rewriteExpr(s.Name.Receiver)
			rewriteStmts(s.Func.Stmts)
		case *ast.ReturnStmt:
			rewriteExprs(s.Exprs)
		}
	}
}

func rewriteExprs(exprs []ast.Expr) {
	for i, e := range exprs {
		exprs[i] = rewriteExpr(e)
	}
}

// rewriteExpr returns e with every concatenation in it turned into a call
// of concatGlobal, on the same lines.
func rewriteExpr(e ast.Expr) ast.Expr {
	switch e := e.(type) {
	case *ast.StringConcatOpExpr:
		fn := &ast.IdentExpr{Value: concatGlobal}
		fn.SetLine(e.Line())
		fn.SetLastLine(e.LastLine())
		call := &ast.FuncCallExpr{Func: fn, Args: []ast.Expr{rewriteExpr(e.Lhs), rewriteExpr(e.Rhs)}}
		call.SetLine(e.Line())
		call.SetLastLine(e.LastLine())
		return call
	case *ast.AttrGetExpr:
		e.Object = rewriteExpr(e.Object)
		e.Key = rewriteExpr(e.Key)
	case *ast.TableExpr:
		for _, f := range e.Fields {
			f.Key = rewriteExpr(f.Key)
			f.Value = rewriteExpr(f.Value)
		}
	case *ast.FuncCallExpr:
		e.Func = rewriteExpr(e.Func)
		e.Receiver = rewriteExpr(e.Receiver)
		rewriteExprs(e.Args)
	case *ast.LogicalOpExpr:
		e.Lhs = rewriteExpr(e.Lhs)
		e.Rhs = rewriteExpr(e.Rhs)
	case *ast.RelationalOpExpr:
		e.Lhs = rewriteExpr(e.Lhs)
		e.Rhs = rewriteExpr(e.Rhs)
	case *ast.ArithmeticOpExpr:
		e.Lhs = rewriteExpr(e.Lhs)
		e.Rhs = rewriteExpr(e.Rhs)
	case *ast.UnaryMinusOpExpr:
		e.Expr = rewriteExpr(e.Expr)
	case *ast.UnaryNotOpExpr:
		e.Expr = rewriteExpr(e.Expr)
	case *ast.UnaryLenOpExpr:
		e.Expr = rewriteExpr(e.Expr)
	case *ast.FunctionExpr:
		rewriteStmts(e.Stmts)
	}
	return e
}
