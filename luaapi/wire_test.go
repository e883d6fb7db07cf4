package luaapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
)

func serveRequest(t *testing.T, req EvalRequest) []EvalReply {
	t.Helper()
	in, err := json.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := Serve(bytes.NewReader(in), &out, hclog.NewNullLogger(), nil); err != nil {
		t.Fatalf("Serve: %v", err)
	}
	var replies []EvalReply
	dec := json.NewDecoder(&out)
	for dec.More() {
		var r EvalReply
		if err := dec.Decode(&r); err != nil {
			t.Fatal(err)
		}
		replies = append(replies, r)
	}
	return replies
}

// TestServeConfines: confine is handed the request, its CPU limit
// included, before any file is evaluated, and its error ends Serve with
// nothing evaluated.
func TestServeConfines(t *testing.T) {
	in, err := json.Marshal(EvalRequest{Machine: testMachine, Budget: time.Second, CPUSeconds: 17,
		Files: []Source{{Path: "a.lua", Src: []byte(`job "a" { cmd = "true" }`)}}})
	if err != nil {
		t.Fatal(err)
	}
	refused := errors.New("cannot set the cpu limit")
	var seen EvalRequest
	var out bytes.Buffer
	err = Serve(bytes.NewReader(in), &out, hclog.NewNullLogger(), func(req EvalRequest) error {
		seen = req
		return refused
	})
	if !errors.Is(err, refused) {
		t.Errorf("Serve = %v, want confine's error", err)
	}
	if seen.CPUSeconds != 17 || len(seen.Files) != 1 {
		t.Errorf("confine was handed %+v, want the request with cpu_seconds 17", seen)
	}
	if out.Len() != 0 {
		t.Errorf("a refused confine let Serve answer: %q", out.String())
	}
}

// TestServeRoundTrip: what crosses from the child is what Eval returned,
// declarations and errors alike, each file announced before its result.
func TestServeRoundTrip(t *testing.T) {
	settle(t)
	good := []byte(`flavor "small" { cpus = 2, ram = "1G" }
job "train" { cmd = { "python3", "t.py" }, flavor = "small", env = { A = "b" }, timeout = "2h", stop_signal = "SIGINT" }`)
	bad := []byte(`job "eval" { cmd = "x", gpu = 1 }`)
	replies := serveRequest(t, EvalRequest{Machine: testMachine, Budget: time.Second,
		Files: []Source{{Path: "a.lua", Src: good}, {Path: "b.lua", Src: bad}}})
	if len(replies) != 4 || replies[0].Begin != "a.lua" || replies[2].Begin != "b.lua" {
		t.Fatalf("replies %+v, want begin and file for each of a.lua, b.lua", replies)
	}
	want := Eval("a.lua", good, Options{Machine: testMachine})
	got := replies[1].File
	if got.Hash != want.Hash || len(got.Jobs) != 1 || len(got.Flavors) != 1 {
		t.Fatalf("a.lua came back as %+v", got)
	}
	if got.Jobs[0].ProcessFingerprint() != want.Jobs[0].ProcessFingerprint() ||
		got.Jobs[0].PolicyFingerprint() != want.Jobs[0].PolicyFingerprint() {
		t.Errorf("the job changed on the way: %+v, want %+v", got.Jobs[0], want.Jobs[0])
	}
	errs := replies[3].File.Errors
	if len(errs) != 1 || errs[0].Problem != UnknownField || errs[0].Error() != Eval("b.lua", bad, Options{Machine: testMachine}).Errors[0].Error() {
		t.Errorf("b.lua's errors came back as %v", errs)
	}
}

// TestServeEndsAfterAbandoning: a file abandoned in a builtin ends the
// child after its result is sent, so the builtin stops burning a core.
func TestServeEndsAfterAbandoning(t *testing.T) {
	settle(t)
	hold := make(chan struct{})
	defer close(hold)
	var out bytes.Buffer
	in, _ := json.Marshal(EvalRequest{Budget: 10 * time.Millisecond,
		Files: []Source{{Path: "held.lua", Src: []byte(`hold()`)}, {Path: "next.lua", Src: []byte(`job "n" { cmd = "x" }`)}}})
	err := serveWith(bytes.NewReader(in), &out, hclog.NewNullLogger(), nil, hold)
	if !errors.Is(err, ErrAbandoned) {
		t.Fatalf("Serve = %v, want ErrAbandoned", err)
	}
	if n := bytes.Count(out.Bytes(), []byte("\n")); n != 2 {
		t.Errorf("%d replies, want the held file's begin and result only:\n%s", n, out.Bytes())
	}
}

// TestServeEndsAfterALimit: a file stopped at its budget ends the child
// after its result is sent, so that the next file starts in a fresh
// process and is not charged for what the stopped one left on the heap.
func TestServeEndsAfterALimit(t *testing.T) {
	var out bytes.Buffer
	in, _ := json.Marshal(EvalRequest{Budget: 10 * time.Millisecond,
		Files: []Source{{Path: "loop.lua", Src: []byte(`while true do end`)}, {Path: "next.lua", Src: []byte(`job "n" { cmd = "x" }`)}}})
	err := Serve(bytes.NewReader(in), &out, hclog.NewNullLogger(), nil)
	if !errors.Is(err, ErrAbandoned) {
		t.Fatalf("Serve = %v, want ErrAbandoned", err)
	}
	if n := bytes.Count(out.Bytes(), []byte("\n")); n != 2 {
		t.Errorf("%d replies, want the stopped file's begin and result only:\n%s", n, out.Bytes())
	}
}
