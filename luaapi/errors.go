package luaapi

// This file is the catalog: every sentence luaapi says to a person is written
// here, and nowhere else. The golden tests in testdata/invalid pin the text.

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	lua "github.com/yuin/gopher-lua"

	"github.com/berthd/berth/accounting"
)

// Problem says what kind of mistake an Error reports, so that callers can
// branch on it without reading the sentence. The numbers are part of the
// contract (they may be stored and shown by other tools): never renumber,
// only add.
type Problem uint8

// The kinds of mistakes a job file can make.
const (
	UnknownField  Problem = 1  // a field the declaration does not have
	WrongType     Problem = 2  // a value of the wrong Lua type
	BadValue      Problem = 3  // the right type, but not a value that is accepted
	OutOfRange    Problem = 4  // a number outside its range
	MissingField  Problem = 5  // a required field is absent
	Conflict      Problem = 6  // two fields that cannot go together
	Duplicate     Problem = 7  // a name declared twice (in one file or across files)
	BadName       Problem = 8  // a job or flavor name that breaks the naming rule
	UnknownFlavor Problem = 9  // a job names a flavor that no accepted file declares
	Syntax        Problem = 10 // the file is not valid Lua
	Runtime       Problem = 11 // the file raised an error while it ran
	Budget        Problem = 12 // the file ran past its time budget
	Sandbox       Problem = 13 // the file reached for something a job file may not use
	BadForm       Problem = 14 // job/flavor used other than as `job "name" { ... }`
	Memory        Problem = 15 // the file made the heap grow past the bound
	Unreadable    Problem = 16 // the file could not be read
	TooLarge      Problem = 17 // the file is larger than a job file may be
	Internal      Problem = 18 // a bug in berth or gopher-lua, turned into an error
	Truncated     Problem = 19 // more errors in the file than are listed
	NotEvaluated  Problem = 20 // the reload ran out of time before the file's turn
	EvalFailed    Problem = 21 // the evaluating process failed, not for a limit the file crossed
	UnknownJob    Problem = 22 // after or after_any names a job that no accepted file declares, or the job itself
	Cycle         Problem = 23 // after and after_any make a cycle
	NotOwnJob     Problem = 24 // a person's after or after_any names a job that is not theirs
	NameTaken     Problem = 25 // another file declares the name too
)

var problemNames = map[Problem]string{
	UnknownField:  "unknown field",
	WrongType:     "wrong type",
	BadValue:      "bad value",
	OutOfRange:    "out of range",
	MissingField:  "missing field",
	Conflict:      "conflict",
	Duplicate:     "duplicate",
	BadName:       "bad name",
	UnknownFlavor: "unknown flavor",
	Syntax:        "syntax",
	Runtime:       "runtime",
	Budget:        "budget",
	Sandbox:       "sandbox",
	BadForm:       "bad form",
	Memory:        "memory",
	Unreadable:    "unreadable",
	TooLarge:      "too large",
	Internal:      "internal",
	Truncated:     "truncated",
	NotEvaluated:  "not evaluated",
	EvalFailed:    "eval failed",
	UnknownJob:    "unknown job",
	Cycle:         "cycle",
	NotOwnJob:     "not own job",
	NameTaken:     "name taken",
}

func (p Problem) String() string {
	if s, ok := problemNames[p]; ok {
		return s
	}
	return "problem(" + strconv.Itoa(int(p)) + ")"
}

// Error is a mistake in a job file, with the facts a person needs to fix it.
// Every error luaapi reports about a file is an *Error.
type Error struct {
	Pos   Pos    // Line 0 when unknown
	Kind  string // "job", "flavor", or "" when the error is about the file
	Name  string // the job or flavor name when known, as its file declares it
	Owner string // the person whose file declares it, "" for the administrators'

	Field   string  // the field when the error is about one
	Problem Problem // what kind of mistake
	// Other, for a job in after or after_any that no file declares
	// (UnknownJob), is its full name: berth check of some files knows of
	// jobs declared in others.
	Other  string `json:",omitempty"`
	Detail string // the sentence after the position and the job or flavor
	// Err is the cause where there is one (*accounting.SizeError,
	// *accounting.DurationError, an I/O error). It does not cross from the
	// evaluating child to the daemon: Detail already says it.
	Err error `json:"-"`
}

// Error renders `path:line: job "train": unknown field "gpu" (did you mean "gpus"?)`.
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.Pos.File)
	if e.Pos.Line > 0 {
		b.WriteByte(':')
		b.WriteString(strconv.Itoa(e.Pos.Line))
	}
	b.WriteString(": ")
	if e.Kind != "" {
		b.WriteString(e.Kind)
		b.WriteByte(' ')
		b.WriteString(quote(e.Name))
		b.WriteString(": ")
	}
	b.WriteString(e.Detail)
	return b.String()
}

// Unwrap exposes the cause, so errors.As reaches *accounting.SizeError and
// friends.
func (e *Error) Unwrap() error { return e.Err }

// subject is what an error is about: where, and which declaration.
type subject struct {
	pos  Pos
	kind string // "job", "flavor" or ""
	name string
	// fields are the lines of its fields, where its table was written
	// where it was declared: an error in a field is said on its line.
	// lines are those a job keeps, for the checks after its file ran.
	fields map[string]int
	lines  FieldLines
}

func (s subject) err(p Problem, field, detail string) *Error {
	pos := s.pos
	if line := cmp.Or(s.fields[field], s.lines.of(field)); line > 0 {
		pos.Line = line
	}
	return &Error{Pos: pos, Kind: s.kind, Name: s.name, Field: field, Problem: p, Detail: detail}
}

func (s subject) errCause(p Problem, field, detail string, cause error) *Error {
	e := s.err(p, field, detail)
	e.Err = cause
	return e
}

// fileSubject is for errors about the file as a whole.
func fileSubject(path string, line int) subject {
	return subject{pos: Pos{File: path, Line: line}}
}

// --- the file as a whole ---------------------------------------------------

// errSyntax is the parser's error; hint, where not "", says what is
// likely missing (syntaxHint).
func errSyntax(path string, line int, message, token, hint string) *Error {
	d := "syntax error"
	if message != "" && message != "syntax error" {
		d += ": " + clean(message)
	}
	if token != "" {
		d += " near " + quote(token)
	}
	if hint != "" {
		d += " " + hint
	}
	return fileSubject(path, line).err(Syntax, "", d)
}

func errSyntaxEOF(path string, lastLine int) *Error {
	return fileSubject(path, lastLine).err(Syntax, "",
		`syntax error: the file ends too early (is a closing "}", ")" or "end" missing?)`)
}

func errCompile(path string, line int, message string) *Error {
	return fileSubject(path, line).err(Syntax, "", "syntax error: "+clean(message))
}

func errRuntime(path string, line int, message string) *Error {
	text := "runtime error: " + clean(message)
	// The interpreter's own limits, in its words, and what to do.
	switch {
	case strings.Contains(message, "registry overflow"):
		text += fmt.Sprintf(" (more than %d values at once, from unpack or a call's results: pass a table instead)", registryMaxSize)
	case strings.Contains(message, "stack overflow"):
		text += fmt.Sprintf(" (calls nested deeper than %d: a function that calls itself without end?)", callStackSize)
	}
	return fileSubject(path, line).err(Runtime, "", text)
}

func errRuntimeValue(path string, line int, typ string) *Error {
	return fileSubject(path, line).err(Runtime, "",
		fmt.Sprintf("runtime error: error() was called with %s instead of a message", article(typ)))
}

// errBudget: grown is what the file had made memory grow by when its
// budget ran out; from a quarter of the heap's bound, that is more likely
// what it was doing than an endless loop.
func errBudget(path string, line int, budget time.Duration, grown, heapLimit int64) *Error {
	if heapLimit > 0 && grown >= heapLimit/4 {
		return fileSubject(path, line).err(Budget, "",
			fmt.Sprintf("still running after its CPU time budget of %s, having made memory grow by %s, so it was stopped (a runaway table or string? a job file declares jobs: what is large belongs in a file its jobs read)",
				accounting.FormatDuration(budget), accounting.FormatSize(grown)))
	}
	return fileSubject(path, line).err(Budget, "",
		fmt.Sprintf("still running after its CPU time budget of %s, so it was stopped (an endless loop? if it only needs longer, berth check FILE --file-budget 10s tries it with more, and berth daemon --file-budget gives every file more)", accounting.FormatDuration(budget)))
}

func errWallBudget(path string, line int, wall, budget time.Duration) *Error {
	return fileSubject(path, line).err(Budget, "",
		fmt.Sprintf("still running after %s of wall-clock time (%dx its CPU time budget of %s), so it was stopped (is the machine overloaded?)",
			accounting.FormatDuration(wall), WallFactor, accounting.FormatDuration(budget)))
}

func errMemory(path string, line int, limit int64) *Error {
	return fileSubject(path, line).err(Memory, "",
		fmt.Sprintf("made memory grow by more than %s while it ran, so it was stopped (a runaway table or string? a job file declares jobs: what is large belongs in a file its jobs read)", accounting.FormatSize(limit)))
}

func errInternal(path string, v any) *Error {
	return fileSubject(path, 0).err(Internal, "",
		fmt.Sprintf("internal error while evaluating the file: %s (this is a bug in berth; please report it)", clean(fmt.Sprint(v))))
}

func errPanicInBuiltin(path string, message string) *Error {
	return fileSubject(path, 0).err(Internal, "",
		fmt.Sprintf("a builtin function failed: %s (this is a bug in berth or gopher-lua; please report it)", clean(message)))
}

func errTooManyDecls(path string, line, limit int) *Error {
	return fileSubject(path, line).err(TooLarge, "",
		fmt.Sprintf("declares more than %d jobs and flavors, an array's indices counted, more than a job file may: split it into several files", limit))
}

// ErrDeclaresTooMuch is a file whose declarations, as the evaluating
// process sends them, are larger than the daemon takes from one file.
func ErrDeclaresTooMuch(path string, limit int64) *Error {
	return fileSubject(path, 0).err(TooLarge, "",
		fmt.Sprintf("declares more than %s of jobs and flavors (their commands, environments and descriptions), more than a job file may: split it, or shorten what it repeats",
			accounting.FormatSize(limit)))
}

func errFileTooLarge(path string, size, limit int) *Error {
	return fileSubject(path, 0).err(TooLarge, "",
		fmt.Sprintf("the file is %d bytes; a job file may be at most %d bytes (%s): split it into several files",
			size, limit, accounting.FormatSize(int64(limit))))
}

// The limits that the evaluating child's parent enforces, for a file that
// the child could not report on itself: the kernel or the parent ended it.

// ErrCPULimit is a file that made the evaluating process reach the CPU
// time the kernel allowed it.
func ErrCPULimit(path string, budget time.Duration) *Error { return errBudget(path, 0, budget, 0, 0) }

// ErrWallLimit is a file that the parent stopped after wall of wall-clock
// time.
func ErrWallLimit(path string, wall, budget time.Duration) *Error {
	return errWallBudget(path, 0, wall, budget)
}

// ErrMemoryLimit is a file that made the evaluating process reach its
// memory limit.
func ErrMemoryLimit(path string, limit int64) *Error {
	return fileSubject(path, 0).err(Memory, "",
		fmt.Sprintf("made the process that evaluates job files reach its memory limit of %s, so it was stopped (a runaway table or string? a job file declares jobs: what is large belongs in a file its jobs read)",
			accounting.FormatSize(limit)))
}

// ErrReloadDeadline is a file still being evaluated when the reload reached
// its deadline, when no file before it was done.
func ErrReloadDeadline(path string, deadline time.Duration) *Error {
	return fileSubject(path, 0).err(Budget, "",
		fmt.Sprintf("still running when the reload reached its deadline of %s, so it was stopped (is the machine overloaded?)", accounting.FormatDuration(deadline)))
}

// ErrCheckDeadline is a file sent to be checked that was still being
// evaluated when the check reached its deadline.
func ErrCheckDeadline(path string, deadline time.Duration) *Error {
	return fileSubject(path, 0).err(Budget, "",
		fmt.Sprintf("not checked: still running when the check reached its deadline of %s (with the files before it), so it was stopped; check it alone (berth check %s), or check or submit fewer files at once", accounting.FormatDuration(deadline), path))
}

// ErrNotEvaluated is a file whose turn had not come when the reload
// reached its deadline; its previous version stays in force.
func ErrNotEvaluated(path string, deadline time.Duration) *Error {
	return fileSubject(path, 0).err(NotEvaluated, "",
		fmt.Sprintf("not evaluated: the reload reached its deadline of %s first, so its previous version stays in force (berth reload tries again; berth check %s tries it alone)",
			accounting.FormatDuration(deadline), path))
}

// ErrCheckTimeUp is a file sent to be checked whose turn had not come
// when the check reached its deadline.
func ErrCheckTimeUp(path string, deadline time.Duration) *Error {
	return fileSubject(path, 0).err(NotEvaluated, "",
		fmt.Sprintf("not checked: the files before it took the %s a check may take (each file has its budget of CPU time); check or submit fewer files at once", accounting.FormatDuration(deadline)))
}

// ErrShareSpent is a person's file whose turn had not come when that
// person's files had taken their share of a reload; the reload after it,
// which follows at once, goes on with it.
func ErrShareSpent(path, owner string, share time.Duration) *Error {
	return fileSubject(path, 0).err(NotEvaluated, "",
		fmt.Sprintf("not evaluated yet: %s's files took their share of this reload (%s), so it waits for the next one, which follows at once; its previous version stays in force meanwhile (berth check %s tries it alone)",
			owner, accounting.FormatDuration(share), path))
}

// ErrEvaluator is a file during which the evaluating process failed in a
// way none of the limits explains.
func ErrEvaluator(path, how string) *Error {
	return fileSubject(path, 0).err(EvalFailed, "",
		fmt.Sprintf("the process that evaluates job files failed while evaluating it: %s (this is a bug in berth; please report it)", clean(how)))
}

func errTruncated(path string, more int) *Error {
	return fileSubject(path, 0).err(Truncated, "",
		fmt.Sprintf("and %d more %s in this file, not listed", more, accounting.Plural(more, "error")))
}

// --- the sandbox -----------------------------------------------------------

func errForbidden(s subject, name string) *Error {
	return s.err(Sandbox, "", fmt.Sprintf(
		"%s is not available in a job file: each file is evaluated on its own in a sandbox without os, io, debug, package, coroutine, require, dofile or load",
		name))
}

func errUndefined(s subject, name string, defined []string) *Error {
	if near := Suggest(name, defined); near != "" {
		return s.err(Sandbox, "", fmt.Sprintf("%s is not defined (did you mean %s?)", name, near))
	}
	return s.err(Sandbox, "", fmt.Sprintf(
		"%s is not defined: a value in a job file is written in quotes (%s), or set before it is read (local %s = ...)",
		name, quote(name), name))
}

func errStringTooLong(s subject, builtin string, size int64) *Error {
	return s.err(Sandbox, "", fmt.Sprintf(
		"%s would build a string of %s; in a job file the string builtins build strings of at most %s (what is large belongs in a file its jobs read)",
		builtin, accounting.FormatSize(size), accounting.FormatSize(maxStringBytes)))
}

func errStringOverLimit(s subject, builtin string) *Error {
	return s.err(Sandbox, "", fmt.Sprintf(
		"%s would build a string of more than %s, the most the string builtins build in a job file",
		builtin, accounting.FormatSize(maxStringBytes)))
}

func errStringArgTooLong(s subject, builtin string, size int) *Error {
	return s.err(Sandbox, "", fmt.Sprintf(
		"%s was given a string of %s; in a job file the string builtins take strings of at most %s",
		builtin, accounting.FormatSize(int64(size)), accounting.FormatSize(maxStringBytes)))
}

func errMachineReadOnly(s subject, key string) *Error {
	return s.err(Sandbox, "", fmt.Sprintf(
		"machine is read-only (tried to set %s): it describes this machine; keep your own values in a local variable",
		quote(key)))
}

func errMachineField(s subject, key string) *Error {
	return s.err(UnknownField, key, fmt.Sprintf("machine has no field %s%s",
		quote(key), suggestOrList(key, machineFields, "machine has")))
}

func errMachineKey(s subject, key lua.LValue) *Error {
	return s.err(UnknownField, "", fmt.Sprintf(
		"machine has no field %s; it has %s", describe(key), list(machineFields)))
}

func errRandomRange(s subject, lo, hi float64) *Error {
	return s.err(BadValue, "", fmt.Sprintf("math.random(%s, %s): the interval is empty or too large",
		formatNumber(lo), formatNumber(hi)))
}

func msgInvalidCapture(i int) string {
	return fmt.Sprintf("invalid capture index %%%d in replacement string", i)
}

func msgInvalidReplacement(typ string) string {
	return fmt.Sprintf("invalid replacement value (%s)", article(typ))
}

// Log messages are constant; the variable parts are key/values.
const (
	logPrint      = "print"
	logPrintLimit = "print limit reached; later output of this file is dropped"
)

// --- the form of a declaration ---------------------------------------------

func errFormName(s subject, kind string, given lua.LValue) *Error {
	return s.err(BadForm, "", fmt.Sprintf(
		`%s must be given a name first, written %s "name" { ... }; got %s`, kind, kind, describe(given)))
}

func errFormTable(s subject, given lua.LValue) *Error {
	return s.err(BadForm, "", fmt.Sprintf(
		`the name must be followed by a table of fields, written %s %s { ... }; got %s`, s.kind, quote(s.name), describe(given)))
}

func errFormNoTable(s subject) *Error {
	return s.err(BadForm, "", fmt.Sprintf(
		`the name is not followed by a table of fields; write %s %s { ... }`, s.kind, quote(s.name)))
}

func errFormTwice(s subject) *Error {
	return s.err(BadForm, "", "the declaration was given a second table of fields; declare it once")
}

func errBadJobName(s subject) *Error {
	d := `bad name: a job name is 1 to 64 characters of a-z, 0-9, "_", "." and "-", starting with a letter or a digit (^[a-z0-9][a-z0-9_.-]{0,63}$)`
	if l := strings.ToLower(s.name); l != s.name && jobNameShape.MatchString(l) {
		d += fmt.Sprintf(" (did you mean %s?)", quote(l))
	}
	return s.err(BadName, "", d)
}

func errBadFlavorName(s subject) *Error {
	d := `bad name: a flavor name is 1 to 64 characters of a-z, 0-9, "_" and "-", starting with a letter (^[a-z][a-z0-9_-]{0,63}$)`
	if l := strings.ToLower(s.name); l != s.name && flavorNameShape.MatchString(l) {
		d += fmt.Sprintf(" (did you mean %s?)", quote(l))
	}
	return s.err(BadName, "", d)
}

func errBadQuotaName(s subject) *Error {
	return s.err(BadName, "", `bad name: a quota is named after the user it bounds (a user name such as "alice": a-z, 0-9, "_" and "-", starting with a letter or "_"), or "*" for everyone not named`)
}

// errNotAdmin refuses a flavor or a quota in a person's file.
func errNotAdmin(s subject, owner string) *Error {
	d := fmt.Sprintf("%ss are the machine's, declared by its administrators in the jobs directory; a file of %s's may declare only jobs", s.kind, owner)
	if s.kind == "flavor" {
		d += " (berth flavors lists the flavors in force, which a job of yours may use)"
	}
	return s.err(BadForm, "", d)
}

// errOwnerRuns refuses user or group in a person's job.
func errOwnerRuns(s subject, field, owner string) *Error {
	return s.err(Conflict, field, fmt.Sprintf(
		"field %s: a job in %s's own directory runs as %s, with %s's groups; leave user and group out", quote(field), owner, owner, owner))
}

func errDuplicateInFile(s subject, firstLine int) *Error {
	if s.kind == "quota" {
		// A quota's name is the person it bounds: there is one per person.
		return s.err(Duplicate, "", fmt.Sprintf(
			"declared twice in this file (first at line %d); a person has one quota, so merge the two", firstLine))
	}
	return s.err(Duplicate, "", fmt.Sprintf(
		"declared twice in this file (first at line %d); %s names are global, so give each %s its own name",
		firstLine, s.kind, s.kind))
}

func errDuplicateAcross(s subject, first Pos) *Error {
	if s.kind == "quota" {
		return s.err(NameTaken, "", fmt.Sprintf(
			"already declared at %s:%d; a person has one quota, so this file is not loaded until one of them is removed",
			first.File, first.Line))
	}
	return s.err(NameTaken, "", fmt.Sprintf(
		"already declared at %s:%d; %s names are global across files, so this file is not loaded until one of them is renamed",
		first.File, first.Line, s.kind))
}

// errUnknownFlavor: refused says that a file with errors is among those
// read, whose flavors are not in force either.
func errUnknownFlavor(s subject, flavor string, known []string, refused bool) *Error {
	hint := "berth flavors lists them"
	if near := Suggest(flavor, known); near != "" {
		hint = fmt.Sprintf("did you mean %s? berth flavors lists them", quote(near))
	} else if refused {
		hint = "berth flavors lists those in force; a file with errors declares none until it is fixed: berth check and berth status show them"
	}
	e := s.err(UnknownFlavor, "flavor", fmt.Sprintf("flavor %s does not exist (%s)", quote(flavor), hint))
	e.Other = flavor
	return e
}

// errRepeatedField is a table constructor that gives a field twice: the
// file is refused whole, as for a syntax error, since which value was
// meant cannot be known.
func errRepeatedField(path string, e *repeatedFieldError) *Error {
	return fileSubject(path, e.line).err(Duplicate, e.field,
		fmt.Sprintf("field %s is given twice in one table (lines %d and %d); Lua keeps the last, so the first is never read: remove one", quote(e.field), e.first, e.line))
}

func errUnknownJob(s subject, field, name, full string, known []string) *Error {
	hint := "berth jobs lists them"
	if near := Suggest(name, known); near != "" {
		hint = fmt.Sprintf("did you mean %s? berth jobs lists them", quote(near))
	}
	e := s.err(UnknownJob, field, fmt.Sprintf("field %s: job %s does not exist (%s)", quote(field), quote(name), hint))
	e.Other = full
	return e
}

func errAfterOthers(s subject, field, name, owner string) *Error {
	return s.err(NotOwnJob, field, fmt.Sprintf("field %s: job %s is %s's; a person's job may wait only for their own jobs, named bare (an administrator's file may name %s)",
		quote(field), quote(name), owner, quote(name)))
}

func errAfterAdmins(s subject, field, name, owner string) *Error {
	return s.err(NotOwnJob, field, fmt.Sprintf("field %s: %s has no job %s (berth jobs lists them); the job %s is an administrator's, and a person's job may wait only for their own jobs",
		quote(field), owner, quote(name), quote(name)))
}

func errAfterSelf(s subject, field string) *Error {
	return s.err(UnknownJob, field, fmt.Sprintf("field %s names the job itself; a job cannot wait for its own run", quote(field)))
}

// errCycle is about one job of a cycle; path is the cycle from that job
// back to it, and fields the fields its edges are made of.
func errCycle(s subject, field string, fields, path []string) *Error {
	made := "after makes"
	switch {
	case len(fields) > 1:
		made = "after and after_any make"
	case len(fields) == 1 && fields[0] == "after_any":
		made = "after_any makes"
	}
	return s.err(Cycle, field, fmt.Sprintf("%s a cycle: %s; none of them could ever run, so remove one of the dependencies",
		made, strings.Join(path, " → ")))
}

func errArrayForm(s subject, got lua.LValue) *Error {
	return errWrongType(s, "array", wantArray, got)
}

// errArrayKeys refuses a range with keys besides from and to, or without
// one of them.
func errArrayKeys(s subject, odd []string, noFrom, noTo bool) *Error {
	slices.Sort(odd)
	var what []string
	if len(odd) > 0 {
		quoted := make([]string, len(odd))
		for i, k := range odd {
			quoted[i] = quote(k)
		}
		keys := "a key"
		if len(odd) > 1 {
			keys = "keys"
		}
		what = append(what, "has "+keys+" a range does not take, "+strings.Join(quoted, ", "))
	}
	switch {
	case noFrom && noTo:
		what = append(what, "names neither from nor to")
	case noFrom:
		what = append(what, "has no from")
	case noTo:
		what = append(what, "has no to")
	}
	return s.err(WrongType, "array", fmt.Sprintf("field %s %s; a range is { from = FIRST, to = LAST }, both whole numbers, e.g. { from = 0, to = 99 } (every index between them is run: to skip some, skip them in the job)",
		quote("array"), strings.Join(what, ", and ")))
}

func errArrayRange(s subject, r Range, most int) *Error {
	if r.To < r.From {
		return s.err(OutOfRange, "array", fmt.Sprintf("field %s runs from %d down to %d; write the lower index as from, e.g. { from = %d, to = %d }",
			quote("array"), r.From, r.To, r.To, r.From))
	}
	return s.err(OutOfRange, "array", fmt.Sprintf("field %s has %d indices; an array may have at most %d (split the sweep into several arrays)",
		quote("array"), r.Size(), most))
}

func errMaxParallelAlone(s subject) *Error {
	return s.err(Conflict, "max_parallel", fmt.Sprintf(
		"field %s bounds how many indices of an array run at once, and this job is not an array; add array = N, or remove max_parallel",
		quote("max_parallel")))
}

func errAfterBoth(s subject, name string) *Error {
	return s.err(Conflict, "after_any", fmt.Sprintf("job %s is in both after and after_any; name it in one: after waits for its success, after_any for its end",
		quote(name)))
}

// --- fields ----------------------------------------------------------------

// otherSpellings are the names other supervisors and schedulers give a
// field (supervisord, systemd, Slurm, Docker), which are not near misses
// of berth's own: "cwd" is nearer to "cmd" than to "dir".
var otherSpellings = map[string]string{
	"command": "cmd", "exec": "cmd", "args": "cmd", "argv": "cmd",
	"cwd": "dir", "directory": "dir", "workdir": "dir", "working_dir": "dir", "workingdirectory": "dir", "chdir": "dir",
	"environment": "env", "environ": "env",
	"memory": "ram", "mem": "ram", "memory_limit": "ram",
	"cores": "cpus", "threads": "cpus", "ncpus": "cpus", "cpus_per_task": "cpus",
	"gres": "gpus", "cards": "gpus", "ngpus": "gpus",
	"vram": "gpu_mem", "gpu_memory": "gpu_mem", "gpumem": "gpu_mem", "gpu_ram": "gpu_mem", "gpu_mem_limit": "gpu_mem",
	"retries": "max_restarts", "startretries": "max_restarts",
	"autorestart": "restart", "stopsignal": "stop_signal", "stopwaitsecs": "stop_timeout",
	"depends_on": "after", "requires": "after",
}

func errUnknownField(s subject, key string, accepted []string) *Error {
	if other, ok := otherSpellings[strings.ToLower(key)]; ok && slices.Contains(accepted, other) {
		return s.err(UnknownField, key, fmt.Sprintf("unknown field %s (berth calls it %s)", quote(key), quote(other)))
	}
	return s.err(UnknownField, key, fmt.Sprintf("unknown field %s%s",
		quote(key), suggestOrList(key, accepted, "a "+s.kind+" takes")))
}

func errPositional(s subject, index int, v lua.LValue) *Error {
	return s.err(UnknownField, "", fmt.Sprintf(
		"%s at position %d has no field name; write fields as name = value", describe(v), index))
}

func errFieldKey(s subject, key lua.LValue) *Error {
	return s.err(UnknownField, "", fmt.Sprintf(
		"a field name must be a string, got %s; write fields as name = value", describe(key)))
}

func errWrongType(s subject, field, want string, got lua.LValue) *Error {
	return s.err(WrongType, field, fmt.Sprintf("field %s must be %s, got %s", quote(field), want, describe(got)))
}

func errNotWhole(s subject, field string, got lua.LValue) *Error {
	return errWrongType(s, field, wantWhole, got)
}

// errGPUsNotWhole: gpus is a count of whole cards; what was meant is a part
// of one (gpu_mem) or a card of a type (Slurm's "a100:1"), which berth has
// not: the cards are the daemon's.
func errGPUsNotWhole(s subject, got lua.LValue) *Error {
	return s.err(WrongType, "gpus", fmt.Sprintf(
		`field "gpus" must be a whole number of cards, got %s; for part of one card, ask for its memory instead (gpu_mem = "12G"); berth has no card types: every card the daemon was given is alike to it`,
		describe(got)))
}

// What a field must be, for errWrongType, and what to do instead of a zero
// duration, for errDurationZero.
const (
	wantWhole                 = "a whole number"
	wantString                = "a string"
	wantBool                  = "true or false"
	wantAbsDir                = `an absolute path such as "/srv/ml"`
	wantFlavorName            = `a flavor name such as "gpu-small"`
	wantSize                  = `a size such as "32G"`
	wantDuration              = `a duration such as "30s" or "12h"`
	wantEnv                   = `a table of NAME = "value"`
	wantJobNames              = `a job name such as "prep", or a list of them such as { "prep", "fetch" }`
	wantArray                 = `a count such as 100 (indices 1 to 100), or a range such as { from = 0, to = 99 }`
	insteadNoTimeout          = "leave it out for no time limit"
	insteadDefaultStopTimeout = "leave it out for the default of 10s"
)

func errRange(s subject, field string, lo, hi int64, got float64) *Error {
	return s.err(OutOfRange, field, fmt.Sprintf("field %s must be between %d and %d, got %s",
		quote(field), lo, hi, formatNumber(got)))
}

func errMaxRestartsNegative(s subject, got float64) *Error {
	return s.err(OutOfRange, "max_restarts", fmt.Sprintf(
		`field "max_restarts" must be 0 or more, got %s (leave it out for unlimited restarts)`, formatNumber(got)))
}

func errMissingCmd(s subject) *Error {
	return s.err(MissingField, "cmd",
		`field "cmd" is required: the command to run, e.g. cmd = { "python3", "train.py" } or cmd = "make all"`)
}

func errEmptyCmd(s subject) *Error {
	return s.err(BadValue, "cmd",
		`field "cmd" is empty; give the command to run, e.g. cmd = { "python3", "train.py" } or cmd = "make all"`)
}

func errCmdType(s subject, got lua.LValue) *Error {
	return errWrongType(s, "cmd", `a list of strings such as { "python3", "train.py" }, or a string run by /bin/sh -c`, got)
}

func errCmdKey(s subject, key lua.LValue) *Error {
	return s.err(WrongType, "cmd", fmt.Sprintf(
		`field "cmd" must be a list of strings such as { "python3", "train.py" }; it has the key %s`, describe(key)))
}

func errCmdElement(s subject, index int, got lua.LValue) *Error {
	d := fmt.Sprintf(`field "cmd": element %d must be a string, got %s`, index, describe(got))
	if _, ok := got.(lua.LNumber); ok {
		d += " (write it in quotes, or use tostring)"
	}
	return s.err(WrongType, "cmd", d)
}

func errCmdProgramEmpty(s subject) *Error {
	return s.err(BadValue, "cmd", `field "cmd": element 1, the program to run, is empty`)
}

func errNUL(s subject, field string) *Error {
	return s.err(BadValue, field, fmt.Sprintf("field %s contains a NUL byte, which no process can be given", quote(field)))
}

// maxArgBytes is the longest string a process may be given as one
// argument or one NAME=value of its environment: Linux's MAX_ARG_STRLEN,
// 32 pages of 4 KiB, less the string's NUL. Past it the run fails to
// start ("argument list too long"): the file is refused at load instead.
const maxArgBytes = 32*4096 - 1

// maxArgsBytes bounds cmd and env together, as a process is given them:
// the kernel takes up to a quarter of the stack limit (2 MiB under the
// usual 8 MiB), the environment berth adds included. Half of that leaves
// room for it, and bounds what one job's definition holds in the daemon.
const maxArgsBytes = 1 << 20

// argsBytes is what cmd and env come to as the kernel counts them for a
// process: each string with its NUL, each NAME=value with its "=", and
// the pointer to each.
func argsBytes(cmd []string, env map[string]string) int {
	n := 0
	for _, a := range cmd {
		n += len(a) + 1 + 8
	}
	for k, v := range env {
		n += len(k) + len(v) + 2 + 8
	}
	return n
}

func errArgsTooLong(s subject, n int) *Error {
	return s.err(BadValue, "cmd", fmt.Sprintf("fields \"cmd\" and \"env\" come to %d bytes, more than the %d (1 MiB) a job's may: the kernel takes about 2 MiB of arguments and environment for a process, the environment berth adds included; pass what is long in a file",
		n, maxArgsBytes))
}

func errArgTooLong(s subject, field, what string, n int) *Error {
	return s.err(BadValue, field, fmt.Sprintf("field %s: %s is %d bytes, and no process can be given a string of more than %d (Linux's MAX_ARG_STRLEN); pass what is long in a file",
		quote(field), what, n, maxArgBytes))
}

// The bounds of a job's strings that the kernel does not bound for it
// (cmd and env are maxArgBytes and maxArgsBytes): each is held by the
// daemon for as long as the job is declared, and a person's file of
// megabyte descriptions took a daemon to gigabytes.
const (
	maxPathBytes        = 4095 // PATH_MAX, less the NUL that ends it
	maxLoginBytes       = 256  // LOGIN_NAME_MAX
	maxDescriptionBytes = 4096
)

// MaxParents bounds the jobs one job runs after (after and after_any
// together): each is looked at whenever the job is, and said in the
// status while it waits.
const MaxParents = 100

func errTooManyParents(s subject, field string, n int) *Error {
	return s.err(BadValue, field, fmt.Sprintf("field %s names %d jobs (after and after_any together), more than the %d a job may run after; run it after an array of them, or after one job that runs after them", quote(field), n, MaxParents))
}

func errTooLong(s subject, field string, n, max int, why string) *Error {
	return s.err(BadValue, field, fmt.Sprintf("field %s is %d bytes, more than the %d it may be: %s", quote(field), n, max, why))
}

func errDirRelative(s subject, dir string) *Error {
	return s.err(BadValue, "dir", fmt.Sprintf(`field "dir" must be an absolute path such as "/srv/ml", got %s`, quote(dir)))
}

func errEmptyString(s subject, field, example string) *Error {
	return s.err(BadValue, field, fmt.Sprintf("field %s is empty; give a name, e.g. %s = %s, or leave it out", quote(field), field, quote(example)))
}

func errJobRef(s subject, field, name string) *Error {
	if arr, _, ok := strings.Cut(name, "["); ok && strings.HasSuffix(name, "]") && validJobRef(arr) {
		// One index of an array: the array is what a job runs after.
		return s.err(BadName, field, fmt.Sprintf("field %s: %s is one index of an array; %s waits for the whole array, named as it is declared: %s = %s",
			quote(field), quote(name), field, field, quote(arr)))
	}
	return s.err(BadName, field, fmt.Sprintf(
		`field %s: %s is not a job name: a job name is 1 to 64 characters of a-z, 0-9, "_", "." and "-", starting with a letter or a digit, written OWNER/NAME for a person's job`,
		quote(field), quote(name)))
}

func errFlavorRef(s subject, name string) *Error {
	hint := ""
	if lower := strings.ToLower(name); lower != name && flavorNameShape.MatchString(lower) {
		hint = fmt.Sprintf(" (did you mean %s?)", quote(lower))
	}
	return s.err(BadName, "flavor", fmt.Sprintf(
		`field "flavor": %s is not a flavor name%s: a flavor name is 1 to 64 characters of a-z, 0-9, "_" and "-", starting with a letter`,
		quote(name), hint))
}

func errEnvKeyType(s subject, key lua.LValue) *Error {
	return s.err(WrongType, "env", fmt.Sprintf(
		`field "env": a variable name must be a string, got %s; write env = { NAME = "value" }`, describe(key)))
}

func errEnvKey(s subject, key string) *Error {
	return s.err(BadValue, "env", fmt.Sprintf(
		`field "env": %s is not a variable name: use letters, digits and "_", not starting with a digit`, quote(key)))
}

func errEnvReserved(s subject, key string) *Error {
	return s.err(BadValue, "env", fmt.Sprintf(
		`field "env": %s is reserved: berth sets the %s variables of every run itself, to find and stop its processes; use another name (berth show %s lists what a run gets, once this file is fixed)`,
		quote(key), accounting.ReservedPrefix, s.name))
}

func errEnvValue(s subject, key string, got lua.LValue) *Error {
	return s.err(WrongType, "env", fmt.Sprintf(
		`field "env": the value of %s must be a string or a finite number, got %s`, quote(key), describe(got)))
}

func errEnvControl(s subject, key string, r rune) *Error {
	what := fmt.Sprintf("the control character U+%04X", r)
	if r == utf8.RuneError {
		what = "bytes that are not UTF-8"
	}
	return s.err(BadValue, "env", fmt.Sprintf(
		`field "env": the value of %s contains %s, which systemd refuses in an environment (write it as text, base64 for binary data)`, quote(key), what))
}

func errEnvNUL(s subject, key string) *Error {
	return s.err(BadValue, "env", fmt.Sprintf(`field "env": the value of %s contains a NUL byte`, quote(key)))
}

func errSizeNumber(s subject, field string, got float64) *Error {
	if n := math.Abs(got); n >= 1<<20 {
		// Bytes, most likely, as machine.ram is: the same size in MiB.
		return s.err(WrongType, field, fmt.Sprintf(
			`field %s must be a size with a unit, got the number %s; if it is bytes (as machine.ram is), write %s = %s, or from a number of bytes x, %s = math.floor(x / 2^20) .. "M"`,
			quote(field), formatNumber(got), field, quote(formatNumber(math.Floor(n/(1<<20)))+"M"), field))
	}
	if n := math.Abs(got); n >= 1024 {
		// MiB, most likely, as Slurm's --mem=4096 counts: not 4 TiB.
		same := ""
		if g := n / 1024; g == math.Floor(g) {
			same = ", the same as " + quote(formatNumber(g)+"G")
		}
		return s.err(WrongType, field, fmt.Sprintf(
			`field %s must be a size with a unit, got the number %s; write it with a unit, e.g. %s = %s if it is MiB (as Slurm's --mem counts)%s`,
			quote(field), formatNumber(got), field, quote(formatNumber(n)+"M"), same))
	}
	n := formatNumber(math.Abs(got))
	return s.err(WrongType, field, fmt.Sprintf(
		`field %s must be a size with a unit, got the number %s; write it with a unit, e.g. %s = %s or %s`,
		quote(field), formatNumber(got), field, quote(n+"G"), quote(n+"M")))
}

func errSize(s subject, field string, cause error) *Error {
	return s.errCause(BadValue, field, fmt.Sprintf("field %s: %s", quote(field), cause.Error()), cause)
}

func errDurationNumber(s subject, field string, got float64) *Error {
	n := formatNumber(math.Abs(got))
	return s.err(WrongType, field, fmt.Sprintf(
		`field %s must be a duration with a unit, got the number %s; write e.g. %s = %s or %s`,
		quote(field), formatNumber(got), field, quote(n+"s"), quote(n+"m")))
}

func errDuration(s subject, field string, cause error) *Error {
	return s.errCause(BadValue, field, fmt.Sprintf("field %s: %s", quote(field), cause.Error()), cause)
}

func errDurationZero(s subject, field, given, instead string) *Error {
	return s.err(OutOfRange, field, fmt.Sprintf("field %s must be longer than zero, got %s; %s",
		quote(field), quote(given), instead))
}

func errChoice(s subject, field string, choices []string, got lua.LValue) *Error {
	d := fmt.Sprintf("field %s must be one of %s, got %s", quote(field), quoteList(choices), describe(got))
	if str, ok := got.(lua.LString); ok {
		if near := Suggest(string(str), choices); near != "" {
			d += fmt.Sprintf(" (did you mean %s?)", quote(near))
		}
	}
	return s.err(BadValue, field, d)
}

func errFlavorAndResources(s subject, field, flavor string) *Error {
	return s.err(Conflict, field, fmt.Sprintf(
		"give either flavor or cpus/gpus/gpu_mem/ram, not both: a flavor (%s here) sets them all", quote(flavor)))
}

func errGPUsAndShare(s subject, gpus int) *Error {
	return s.err(Conflict, "gpu_mem", fmt.Sprintf(
		"gpus = %d asks for whole cards and gpu_mem for a share of one card's memory; give one of them (gpu_mem shares a card with other jobs, gpus takes it whole)", gpus))
}

func errZeroShare(s subject) *Error {
	return s.err(BadValue, "gpu_mem", `gpu_mem = 0 is a share of no memory, and the job would get no card; give the share it needs, e.g. gpu_mem = "10G", or leave gpu_mem out for no card`)
}

func errUnaccountedHolds(s subject, field string) *Error {
	return s.err(Conflict, field, fmt.Sprintf(
		"cpus = 0 makes it unaccounted, and an unaccounted job holds nothing, so it cannot ask for %s; give it cpus = 1 or more",
		field))
}

// --- words -----------------------------------------------------------------

// describe says what a Lua value is, for "got ..." in a sentence.
func describe(v lua.LValue) string {
	switch x := v.(type) {
	case lua.LNumber:
		return formatNumber(float64(x))
	case lua.LString:
		return "string " + quote(string(x))
	case lua.LBool:
		return "boolean " + strconv.FormatBool(bool(x))
	case *lua.LNilType:
		return "nil"
	case *lua.LTable:
		return "a table"
	case *lua.LFunction:
		return "a function"
	case *lua.LUserData:
		return "a userdata value"
	default:
		return article(v.Type().String())
	}
}

func article(typ string) string {
	switch typ {
	case "nil":
		return "nil"
	case "userdata":
		return "a userdata value"
	}
	if strings.IndexByte("aeiou", typ[0]) >= 0 {
		return "an " + typ
	}
	return "a " + typ
}

// formatNumber writes a Lua number the way a person wrote it: 8, 1.5, -1.
func formatNumber(f float64) string {
	if f == math.Trunc(f) && math.Abs(f) < 1<<53 {
		return strconv.FormatInt(int64(f), 10)
	}
	return strconv.FormatFloat(f, 'g', -1, 64)
}

// quote quotes s for a message, cut short so that one silly value cannot make
// a log line of a megabyte.
func quote(s string) string {
	const max = 80
	if len(s) > max {
		cut := max
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut] + "…"
	}
	return strconv.Quote(s)
}

func quoteList(xs []string) string {
	q := make([]string, len(xs))
	for i, x := range xs {
		q[i] = strconv.Quote(x)
	}
	return strings.Join(q, ", ")
}

func list(xs []string) string { return strings.Join(xs, ", ") }

// suggestOrList ends an "unknown field" sentence: a near miss if there is
// one, otherwise what would be accepted.
func suggestOrList(key string, accepted []string, lead string) string {
	if near := Suggest(key, accepted); near != "" {
		return fmt.Sprintf(" (did you mean %s?)", quote(near))
	}
	return fmt.Sprintf("; %s %s", lead, list(accepted))
}

// clean makes text from Lua fit on one line and in a log: line breaks
// and tabs become spaces, other control characters are shown escaped
// (\x1b, \r, \u009b: as berth shows them on a terminal, and such that a
// log or the journal takes the line as text), and it is cut at a
// reasonable length.
func clean(s string) string {
	const max = 300
	s = strings.TrimSpace(s)
	if len(s) > max {
		cut := max
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut] + "…"
	}
	var b strings.Builder
	for _, r := range strings.ToValidUTF8(s, "?") {
		switch {
		case r == '\n' || r == '\t':
			b.WriteByte(' ')
		case r == '\r':
			b.WriteString(`\r`)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, `\x%02x`, r)
		case r >= 0x80 && r <= 0x9f:
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}
