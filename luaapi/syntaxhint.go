package luaapi

import (
	"bytes"
	"slices"
	"strconv"
	"strings"
)

// The two slips that make most syntax errors in a job file are a missing
// "," between fields and a missing "}" at the end of a declaration. The
// parser names only the token where it gave up, which is past the slip:
//
//	job "a" {
//	  cmd = { "./train" }
//	  cpus = 4,             <- syntax error near "cpus"
//
// A third comes from other formats: a field written name: value.
//
// syntaxHint looks at the source around that token and, where the shape is
// unmistakable, says what is likely wrong. It says nothing where it is
// unsure: a wrong hint costs more than none.

// declarationWords start a declaration; one found where a field should be
// means the declaration above it was not closed.
var declarationWords = []string{"job", "flavor", "quota"}

// syntaxHint returns "(is a "," missing at the end of line 2?)" or the like
// for the parser's error at line (1-based) and col (the token's last
// column, 1-based), or "" where it has nothing sure to say.
func syntaxHint(src []byte, line, col int, token string) string {
	lines := bytes.Split(src, []byte("\n"))
	if token == "" || line < 1 || line > len(lines) {
		return ""
	}
	text := string(lines[line-1])
	if afterColon(text, col, token) {
		// JSON's or YAML's way (trial AQ: cmd: "echo").
		return `(fields are written name = value, not name: value)`
	}
	if !isName(token) || isKeyword(token) {
		return ""
	}
	start := col - len(token) // 0-based offset of the token
	if start < 0 || start > len(text) || !strings.HasPrefix(text[start:], token) {
		return ""
	}
	before := strings.TrimRight(text[:start], " \t")
	if before != "" {
		// On the same line as what comes before it: `{ "x" } cpus = 1`.
		if endsValue(before, false) && !longBracket(before) {
			return `(is a "," missing before it?)`
		}
		return ""
	}
	if isDeclaration(token, text[start+len(token):]) {
		return `(is the "}" that closes the declaration above it missing?)`
	}
	for n := line - 1; n >= 1; n-- {
		prev, ok := code(string(lines[n-1]))
		if !ok {
			return "" // a long string or comment: unsure
		}
		if prev == "" {
			continue
		}
		if endsValue(prev, true) {
			return `(is a "," missing at the end of line ` + strconv.Itoa(n) + `?)`
		}
		return ""
	}
	return ""
}

// afterColon reports whether token, ending at col of text (a string's
// value in its quotes), follows "name:", as a field written name: value.
func afterColon(text string, col int, token string) bool {
	if col < 0 || col > len(text) {
		return false
	}
	head := text[:col]
	for _, q := range []string{"", `"`, "'"} {
		if !strings.HasSuffix(head, token+q) {
			continue
		}
		before := strings.TrimRight(strings.TrimSuffix(strings.TrimSuffix(head, token+q), q), " \t")
		name, ok := strings.CutSuffix(before, ":")
		if !ok {
			return false
		}
		name = strings.TrimRight(name, " \t")
		i := len(name)
		for i > 0 && isNameByte(name[i-1]) {
			i--
		}
		return isName(name[i:])
	}
	return false
}

// isDeclaration reports whether token and what follows it on its line
// begin a declaration: job "name" {, flavor 'x' {, quota("y").
func isDeclaration(token, rest string) bool {
	if !slices.Contains(declarationWords, token) {
		return false
	}
	rest = strings.TrimLeft(rest, " \t")
	return rest != "" && strings.ContainsRune(`"'(`, rune(rest[0]))
}

// code is line without its trailing "--" comment and spaces; ok is false
// where the line has what this simple reading cannot follow (a long
// bracket, a string cut by the line's end).
func code(line string) (string, bool) {
	if longBracket(line) {
		return "", false
	}
	var quote byte
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case quote != 0 && c == '\\':
			i++
		case quote != 0:
			if c == quote {
				quote = 0
			}
		case c == '"' || c == '\'':
			quote = c
		case c == '-' && i+1 < len(line) && line[i+1] == '-':
			return strings.TrimRight(line[:i], " \t\r"), true
		}
	}
	if quote != 0 {
		return "", false
	}
	return strings.TrimRight(line, " \t\r"), true
}

func longBracket(s string) bool {
	return strings.Contains(s, "[[") || strings.Contains(s, "]]") ||
		strings.Contains(s, "[=") || strings.Contains(s, "=]")
}

// endsValue reports whether s ends with what ends a value: a string, a
// closing bracket, a number, true, false or nil; with names, also a
// variable's name, but never a keyword that wants more ("then", "and",
// "return"). A name is left out on the token's own line, where `foo bar`
// is more likely a call gone wrong than a missing ",".
func endsValue(s string, names bool) bool {
	c := s[len(s)-1]
	if c == '"' || c == '\'' || c == '}' || c == ')' || c == ']' {
		return true
	}
	if !isNameByte(c) {
		return false
	}
	i := len(s)
	for i > 0 && isNameByte(s[i-1]) {
		i--
	}
	switch word := s[i:]; {
	case word[0] >= '0' && word[0] <= '9', word == "true", word == "false", word == "nil":
		return true
	case i > 0 && s[i-1] == '.':
		// The end of a number (1.5) or of a field (t.x).
		return names || isNumberTail(s[:i-1])
	default:
		return names && !isKeyword(word)
	}
}

// isNumberTail reports whether s ends with digits: the whole part of a
// number whose fraction follows.
func isNumberTail(s string) bool {
	return s != "" && s[len(s)-1] >= '0' && s[len(s)-1] <= '9'
}

func isName(s string) bool {
	if s == "" || (s[0] >= '0' && s[0] <= '9') {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !isNameByte(s[i]) {
			return false
		}
	}
	return true
}

func isNameByte(c byte) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

var luaKeywords = []string{"and", "break", "do", "else", "elseif", "end", "false", "for", "function",
	"goto", "if", "in", "local", "nil", "not", "or", "repeat", "return", "then", "true", "until", "while"}

func isKeyword(s string) bool { return slices.Contains(luaKeywords, s) }
