package luaapi

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/hashicorp/go-hclog"
)

// A job file is untrusted input, so the daemon does not evaluate it itself:
// it hands the files of a reload to a short-lived child (berth's hidden
// eval command), whose memory, CPU time and privileges the kernel bounds,
// and reads back what they declare. This file is the conversation between
// the two: one EvalRequest on the child's stdin, then one EvalReply line per
// step on its stdout. The child's log (print, warnings) is hclog JSON on
// its stderr.

// EvalRequest is what the daemon hands the evaluating child.
type EvalRequest struct {
	Machine Machine       `json:"machine"`
	Budget  time.Duration `json:"budget"` // per file, CPU time; zero means DefaultBudget
	// CPUSeconds is the kernel's bound on the child's CPU time for the
	// whole request (RLIMIT_CPU), set by Serve's confine before the first
	// file; zero leaves the child's limit as it is.
	CPUSeconds uint64   `json:"cpu_seconds,omitempty"`
	Files      []Source `json:"files"` // evaluated in this order
}

// Source is one job file's path, as messages name it, and its bytes, read
// and checked by the daemon; Owner is the person whose directory it is in,
// "" for the administrators' (Options.Owner).
type Source struct {
	Path  string `json:"path"`
	Src   []byte `json:"src"`
	Owner string `json:"owner,omitempty"`
}

// EvalReply is one line of the child's answer: Begin before a file is
// evaluated, then File with its result. A child that dies between the two
// died of that file.
type EvalReply struct {
	Begin string `json:"begin,omitempty"`
	File  *File  `json:"file,omitempty"`
}

// ErrAbandoned is returned by Serve when a file had to be stopped: it was
// abandoned in a builtin that does not stop (its goroutine still runs, so
// the process must end for it to stop burning a core), or it was stopped
// at its budget or memory bound (what it built may still hold the heap,
// and the next file must not be charged for it). The file's result has
// been sent; the daemon evaluates the rest in a new child.
var ErrAbandoned = errors.New("an evaluation was stopped at a limit")

// Serve is the evaluating child's work: it reads one request from in,
// hands it to confine (if not nil), which sets the limits the request
// asks for, evaluates each file, and writes the replies to out as it goes,
// so that what was evaluated survives the child being killed for a later
// file.
func Serve(in io.Reader, out io.Writer, logger hclog.Logger, confine func(EvalRequest) error) error {
	return serveWith(in, out, logger, confine, nil)
}

// serveWith is Serve with the tests' hold builtin.
func serveWith(in io.Reader, out io.Writer, logger hclog.Logger, confine func(EvalRequest) error, hold <-chan struct{}) error {
	var req EvalRequest
	if err := json.NewDecoder(in).Decode(&req); err != nil {
		return fmt.Errorf("read the evaluation request: %w", err)
	}
	if confine != nil {
		if err := confine(req); err != nil {
			return err
		}
	}
	w := bufio.NewWriter(out)
	enc := json.NewEncoder(w)
	send := func(r EvalReply) error {
		if err := enc.Encode(r); err != nil {
			return fmt.Errorf("send an evaluation reply: %w", err)
		}
		return w.Flush()
	}
	opts := Options{Machine: req.Machine, Budget: req.Budget, Logger: logger, hold: hold}
	for _, src := range req.Files {
		if err := send(EvalReply{Begin: src.Path}); err != nil {
			return err
		}
		opts.Owner = src.Owner
		f := Eval(src.Path, src.Src, opts)
		if err := send(EvalReply{File: f}); err != nil {
			return err
		}
		if running.Load() > 0 || stoppedAtLimit(f) {
			return ErrAbandoned
		}
	}
	return nil
}

// stoppedAtLimit says whether f was stopped for its budget or its memory.
func stoppedAtLimit(f *File) bool {
	for _, e := range f.Errors {
		if e.Problem == Budget || e.Problem == Memory {
			return true
		}
	}
	return false
}
