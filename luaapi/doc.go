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
// that span files (names are global; flavors must exist). Serve is the
// evaluating child's side of the conversation with the daemon (wire.go): job
// files are untrusted input, so the daemon evaluates them in a child process
// the kernel bounds, never in itself. Every mistake is an *Error that names the file, the line,
// the job or flavor and the field, and says what would be accepted; the
// sentences live in errors.go.
//
// What luaapi must never do:
//   - start a process, or do any I/O: it is handed the files' bytes, and
//     Serve reads and writes the streams it is given;
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
// has a budget of CPU time (Options.Budget, 1 s by default), and a wall-clock
// bound of WallFactor times it, enforced by the interpreter's context. The
// pattern builtins (find, match, gmatch, gsub) are this package's own
// matcher, which looks at that context as it backtracks, so a pattern such
// as ".-.-.-b" on a long string is stopped like a loop. A builtin that still
// runs long cannot be interrupted: the caller stops waiting after a short
// grace and abandons the evaluation, and Serve ends its process after one,
// or after any file stopped at its budget or memory bound, whose heap the
// next file must not inherit (ErrAbandoned).
//
// Memory. gopher-lua has no per-interpreter memory limit, so two defences
// are layered. What builds strings is bounded before it builds: the `..`
// operator (each one is rewritten at load into a call of a bounded
// function, since the VM's own concatenation reaches no hook), string.rep,
// string.format, string.gsub and table.concat refuse results above 1 MiB,
// and the pattern and case builtins refuse inputs above it. Table growth is
// a plain VM instruction and cannot be capped; for it a heap guard samples
// the Go heap every few milliseconds while a file runs and stops the file
// when the heap has grown by more than 256 MiB and a collection says the
// growth is live (the collection runs beside the guard, so the guard keeps
// sampling meanwhile). The guard measures the whole process, so evaluations
// are serialised (one file at a time) to keep the blame accurate; growth
// from the rest of the process during an evaluation can still be blamed on
// the file. The kernel's limit on the evaluating child (RLIMIT_DATA) is what
// bounds memory for certain.
//
// gopher-lua keeps integer keys up to its MaxArrayIndex in a dense array, so
// t[60000000] = 1 allocates 60 million slots in one instruction. This package
// lowers that bound to 2^20 at init (gopher-lua is used by nothing else in
// berth); larger keys live in the hash part. The one visible difference is
// that # of a list longer than a million elements stops counting, far beyond
// anything a job file needs.
package luaapi
