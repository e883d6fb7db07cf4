// Package luaapi turns berth's Lua job files into plain Go values.
//
// A job file declares flavors (named sizes) and jobs:
//
//	flavor "gpu-small" { cpus = 8, gpus = 1, ram = "32G" }
//	job "train" { cmd = { "python3", "train.py" }, flavor = "gpu-small" }
//
// Eval runs one file in a fresh sandboxed interpreter and returns a *File:
// its flavors and jobs, decoded and validated, or the errors that reject it.
// A file is atomic: any error rejects it whole. Combine applies the rules
// that span files (names are global; flavors must exist), and Load does both
// for a directory. Every mistake is an *Error that names the file, the line,
// the job or flavor and the field, and says what would be accepted; the
// sentences live in errors.go.
//
// What luaapi must never do:
//   - start a process, or do any I/O other than reading the files it is asked
//     to read (Load reads one directory and the job files in it);
//   - read the environment, the clock as data, or anything else of the
//     machine: what a file may know about the machine is passed in
//     (Options.Machine), so the same file gives the same result in a test;
//   - let a Lua value outlive a load: the interpreter is closed after each
//     file and no exported type holds a gopher-lua value, so the daemon can
//     keep results for as long as it likes and share them between goroutines.
//
// The sandbox. A file gets base (without dofile, loadfile, load, loadstring,
// require, module, collectgarbage, getfenv, setfenv, newproxy), string, table
// and math; print goes to the logger, tagged with the file; math.random is
// seeded from the file's content so that two loads of one file agree. A file
// has a time budget (Options.Budget, 1 s by default) enforced by the
// interpreter's context; a builtin that runs long cannot be interrupted, so
// the caller stops waiting at budget plus a short grace and abandons the
// evaluation, which finishes in the background and is thrown away. Inputs of
// builtins are bounded, but a backtracking pattern (s:find(".-b") on a long
// s) is polynomial in them: an abandoned evaluation can keep a core busy for
// a long time. Only a matcher with a step budget, or a child process, would
// end that.
//
// Memory. gopher-lua has no per-interpreter memory limit, so two defences
// are layered. The builtins that build strings in one step (string.rep,
// string.format, string.gsub, table.concat) refuse results above 1 MiB, and
// the pattern and case builtins refuse inputs above it. The `..` operator and
// table growth are plain VM instructions and cannot be capped; for those a
// heap guard samples the Go heap every few milliseconds while a file runs and
// stops the file when the heap has grown by more than 256 MiB. The guard
// measures the whole process, so evaluations are serialised (one file at a
// time) to keep the blame accurate; growth from the rest of the daemon during
// an evaluation can still be blamed on the file, and one VM instruction (one
// doubling of a string) can overshoot before the guard notices. Evaluating in
// a child process under an address-space limit would be stronger; this is the
// in-process trade-off.
//
// gopher-lua keeps integer keys up to its MaxArrayIndex in a dense array, so
// t[60000000] = 1 allocates 60 million slots in one instruction. This package
// lowers that bound to 2^20 at init (gopher-lua is used by nothing else in
// berth); larger keys live in the hash part. The one visible difference is
// that # of a list longer than a million elements stops counting, far beyond
// anything a job file needs.
package luaapi
