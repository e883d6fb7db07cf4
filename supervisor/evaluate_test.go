package supervisor

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/berthd/berth/luaapi"
	"github.com/berthd/berth/supervisor/testkit"
)

// TestRelayLog: the child's hclog lines reach the daemon's log as entries of
// their own, and what is not a log line is kept for the cause of its death.
func TestRelayLog(t *testing.T) {
	var logged bytes.Buffer
	e := &Evaluator{Log: hclog.New(&hclog.LoggerOptions{Output: &logged, DisableTime: true})}
	var tail stderrTail
	e.relayLog(context.Background(), strings.NewReader(`{"@level":"info","@message":"print","file":"a.lua","line":3,"text":"hello"}
fatal error: runtime: out of memory
goroutine 1 [running]:
`), &tail)
	if got := logged.String(); got != "[INFO]  print: file=a.lua line=3 text=hello\n" {
		t.Errorf("relayed %q", got)
	}
	// A file sent to be checked is not a file loaded: its prints say so.
	logged.Reset()
	e.relayLog(context.WithValue(context.Background(), checkingKey{}, true),
		strings.NewReader(`{"@level":"info","@message":"print","file":"a.lua","line":3,"text":"hello"}`+"\n"), &tail)
	if got := logged.String(); got != "[INFO]  print: checked=true file=a.lua line=3 text=hello\n" {
		t.Errorf("relayed of a check %q", got)
	}
	if got := firstLine(tail.String()); got != "fatal error: runtime: out of memory" {
		t.Errorf("kept %q first", got)
	}
}

// FuzzRelayLog: whatever a child writes on its stderr, relaying it neither
// panics nor keeps more than its bound.
func FuzzRelayLog(f *testing.F) {
	f.Add([]byte(`{"@level":"info","@message":"print","file":"a.lua"}` + "\n"))
	f.Add([]byte("fatal error: out of memory\n\x00\xff{\"@message\":[1,2]}\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		e := &Evaluator{Log: hclog.NewNullLogger()}
		var tail stderrTail
		e.relayLog(context.Background(), bytes.NewReader(b), &tail)
		if n := len(tail.String()); n > 2*stderrKeepBytes {
			t.Fatalf("kept %d bytes", n)
		}
	})
}

// TestEvaluatorRefusals: each way a child can end while it evaluates a
// file is the refusal of that file alone, naming the limit it crossed, and
// the file after it is evaluated by a new child all the same.
func TestEvaluatorRefusals(t *testing.T) {
	e := &Evaluator{Command: []string{os.Args[0]}, Env: append(os.Environ(), "BERTH_TEST_EVAL=script"), UID: -1, GID: -1,
		Budget: 50 * time.Millisecond, MemoryBytes: 64 << 20} // the good file, evaluated under -race on a busy machine, within it
	for _, tt := range []struct {
		file    string
		problem luaapi.Problem
		says    string
	}{
		{"hang", luaapi.Budget, "of wall-clock time"},
		{"oom", luaapi.Memory, "reach its memory limit of 64M"},
		{"xcpu", luaapi.Budget, "CPU time budget of 50ms"},
		{"killed", luaapi.EvalFailed, "killed by SIGKILL, by neither berth nor its limits"},
		{"outofturn", luaapi.EvalFailed, "it answered out of turn"},
		{"crash", luaapi.EvalFailed, "exit 2: panic: something broke"},
	} {
		t.Run(tt.file, func(t *testing.T) {
			t.Parallel()
			files := e.Evaluate(context.Background(), luaapi.Machine{CPUs: 2}, []luaapi.Source{
				{Path: tt.file + ".lua", Src: []byte("-- misbehaves")},
				{Path: "good.lua", Src: []byte(`job "fine" { cmd = "true" }`)},
			})
			if len(files) != 2 {
				t.Fatalf("%d files back for 2", len(files))
			}
			if errs := files[0].Errors; len(errs) != 1 || errs[0].Problem != tt.problem || !strings.Contains(errs[0].Error(), tt.says) {
				t.Errorf("%s: %v, want a %v problem saying %q", tt.file, errs, tt.problem, tt.says)
			}
			if good := files[1]; len(good.Errors) > 0 || len(good.Jobs) != 1 {
				t.Errorf("the file after it: %+v", good)
			}
		})
	}
}

// TestEvaluatorOwnersApart: a person's child that dies before its first
// file (its owner may kill it: it runs as them) fails that person's files
// alone; the administrators' and another person's are evaluated.
func TestEvaluatorOwnersApart(t *testing.T) {
	e := &Evaluator{Command: []string{os.Args[0]}, Env: append(os.Environ(), "BERTH_TEST_EVAL=script"), UID: -1, GID: -1,
		Budget: time.Second}
	good := `job "fine" { cmd = "true" }`
	files := e.Evaluate(context.Background(), luaapi.Machine{CPUs: 2}, []luaapi.Source{
		{Path: "/spool/breaks/a.lua", Src: []byte(good), Owner: "breaks"},
		{Path: "/spool/breaks/b.lua", Src: []byte(good), Owner: "breaks"},
		{Path: "/spool/carol/c.lua", Src: []byte(good), Owner: "carol"},
		{Path: "/etc/berth/jobs.d/d.lua", Src: []byte(good)},
	})
	if len(files) != 4 {
		t.Fatalf("%d files back for 4", len(files))
	}
	for _, f := range files[:2] {
		if errs := f.Errors; len(errs) != 1 || errs[0].Problem != luaapi.EvalFailed || !strings.Contains(errs[0].Error(), "killed before it began") {
			t.Errorf("%s: %v, want refused with why its child failed", f.Path, errs)
		}
	}
	for _, f := range files[2:] {
		if len(f.Errors) > 0 || len(f.Jobs) != 1 {
			t.Errorf("%s, another owner's: %v, want evaluated", f.Path, f.Errors)
		}
	}
}

// TestEvaluatorPrestart: the child Prestart started serves the next
// Evaluate's first batch, the administrators', and no later one; one
// started as another user than the batch's is killed, not handed it; and
// Discard kills one no Evaluate took.
func TestEvaluatorPrestart(t *testing.T) {
	newEvaluator := func() *Evaluator {
		return &Evaluator{Command: []string{os.Args[0]}, Env: append(os.Environ(), "BERTH_TEST_EVAL=1"), UID: -1, GID: -1,
			Budget: time.Second}
	}
	good := func(name string) luaapi.Source {
		return luaapi.Source{Path: "/etc/berth/jobs.d/" + name + ".lua", Src: []byte(`job "` + name + `" { cmd = "true" }`)}
	}
	evaluated := func(files []*luaapi.File, n int) {
		t.Helper()
		if len(files) != n {
			t.Fatalf("%d files back for %d", len(files), n)
		}
		for _, f := range files {
			if len(f.Errors) > 0 || len(f.Jobs) != 1 {
				t.Errorf("%s: %v, want evaluated", f.Path, f.Errors)
			}
		}
	}
	// How the child ended: 0 once it served its request, killed when it
	// was never handed one.
	ended := func(c *evalChild) string {
		if c.cmd.ProcessState == nil {
			return "still running"
		}
		return c.cmd.ProcessState.String()
	}

	e := newEvaluator()
	e.Prestart()
	spare := e.spare
	if spare == nil {
		t.Fatal("Prestart started no child")
	}
	evaluated(e.Evaluate(context.Background(), luaapi.Machine{CPUs: 2}, []luaapi.Source{good("a"), good("b")}), 2)
	if got := ended(spare); got != "exit status 0" {
		t.Errorf("Prestart's child: %s, want exit status 0, having served the batch", got)
	}
	if e.spare != nil {
		t.Error("the child is still kept for another Evaluate")
	}
	evaluated(e.Evaluate(context.Background(), luaapi.Machine{CPUs: 2}, []luaapi.Source{good("c")}), 1)

	e = newEvaluator()
	e.Prestart()
	spare = e.spare
	spare.uid = 4242 // as if started as someone the batch is not
	evaluated(e.Evaluate(context.Background(), luaapi.Machine{CPUs: 2}, []luaapi.Source{good("d")}), 1)
	if got := ended(spare); got != "signal: killed" {
		t.Errorf("a child of another user: %s, want killed, not handed the batch", got)
	}

	e = newEvaluator()
	e.Prestart()
	spare = e.spare
	e.Discard()
	if got := ended(spare); got != "signal: killed" {
		t.Errorf("after Discard: %s, want killed", got)
	}
	e.Discard() // and again, with none left
}

// TestEvaluatorCalledOff: an evaluation called off returns at once the
// files done so far, and kills the child.
func TestEvaluatorCalledOff(t *testing.T) {
	hanging := filepath.Join(t.TempDir(), "hanging")
	e := &Evaluator{Command: []string{os.Args[0]}, Env: append(os.Environ(), "BERTH_TEST_EVAL=script", "BERTH_TEST_HANGING="+hanging),
		UID: -1, GID: -1, Budget: time.Second}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan []*luaapi.File, 1)
	go func() {
		done <- e.Evaluate(ctx, luaapi.Machine{CPUs: 2}, []luaapi.Source{
			{Path: "good.lua", Src: []byte(`job "fine" { cmd = "true" }`)},
			{Path: "hang.lua", Src: []byte("-- hangs until killed")},
			{Path: "after.lua", Src: []byte(`job "after" { cmd = "true" }`)},
		})
	}()
	testkit.WaitFor(t, 10*time.Second, "the child to be on hang.lua", func() bool {
		_, err := os.Stat(hanging)
		return err == nil
	})
	cancel()
	files := <-done
	if len(files) != 1 || files[0].Path != "good.lua" || len(files[0].Jobs) != 1 {
		t.Errorf("called off, it returned %+v, want good.lua alone", files)
	}
}

// TestEvaluatorShare: once a person's files have taken their share, the
// rest of theirs wait for the next reload, saying so; the file in hand
// when the share ran out is done, another person's files are not held
// back, and the administrators' have no share. Evaluate, which has none,
// evaluates every file.
func TestEvaluatorShare(t *testing.T) {
	good := func(path string) luaapi.Source {
		name := strings.TrimSuffix(filepath.Base(path), ".lua")
		return luaapi.Source{Path: path, Src: []byte(`job "` + name + `" { cmd = "true" }`), Owner: strings.Split(path, "/")[2]}
	}
	srcs := []luaapi.Source{
		{Path: "/etc/berth/jobs.d/slow.lua", Src: []byte(`job "admin" { cmd = "true" }`)},
		{Path: "/etc/berth/jobs.d/after.lua", Src: []byte(`job "admin2" { cmd = "true" }`)},
		good("/spool/alice/slow.lua"), good("/spool/alice/b/slow.lua"), good("/spool/alice/c/slow.lua"),
		good("/spool/bob/slow.lua"), good("/spool/bob/d/slow.lua"),
	}
	// The share is less than one slow file takes (slowFile), so that the
	// child cannot have answered for the second before the first is done.
	e := &Evaluator{Command: []string{os.Args[0]}, Env: append(os.Environ(), "BERTH_TEST_EVAL=script"), UID: -1, GID: -1,
		Budget: 10 * time.Second}
	files := e.evaluate(context.Background(), luaapi.Machine{CPUs: 2}, srcs, slowFile/3)
	if len(files) != len(srcs) {
		t.Fatalf("%d files back for %d", len(files), len(srcs))
	}
	waiting := map[string]bool{"/spool/alice/b/slow.lua": true, "/spool/alice/c/slow.lua": true, "/spool/bob/d/slow.lua": true}
	for i, f := range files {
		if f.Path != srcs[i].Path {
			t.Fatalf("file %d is %s, want %s", i, f.Path, srcs[i].Path)
		}
		owner := srcs[i].Owner
		switch {
		case waiting[f.Path]:
			if len(f.Errors) != 1 || f.Errors[0].Problem != luaapi.NotEvaluated ||
				!strings.Contains(f.Errors[0].Error(), owner+"'s files took their share of this reload") {
				t.Errorf("%s: %v, want not evaluated yet, %s's share spent", f.Path, f.Errors, owner)
			}
		case len(f.Errors) > 0 || len(f.Jobs) != 1:
			t.Errorf("%s: %v, want evaluated", f.Path, f.Errors)
		}
	}

	// However little is left of it, a person's first file is evaluated.
	// (The second would never be answered for: the child cannot have
	// answered for it before the first answer is read, which spends the
	// share; a fast one could, and it would be taken, in turn.)
	files = e.evaluate(context.Background(), luaapi.Machine{CPUs: 2}, []luaapi.Source{good("/spool/carol/a.lua"), good("/spool/carol/b/hang.lua")}, time.Nanosecond)
	if len(files) != 2 || len(files[0].Jobs) != 1 || len(files[1].Errors) != 1 || files[1].Errors[0].Problem != luaapi.NotEvaluated {
		t.Errorf("a share spent before the first file: %+v, want the first evaluated, the second not yet", files)
	}

	for _, f := range e.Evaluate(context.Background(), luaapi.Machine{CPUs: 2}, srcs) {
		if len(f.Errors) > 0 || len(f.Jobs) != 1 {
			t.Errorf("without a share, %s: %v, want evaluated", f.Path, f.Errors)
		}
	}
}

// TestEvalOrder: the administrators' files first, then each person's
// together, the one with the fewest first, each owner's in their order.
func TestEvalOrder(t *testing.T) {
	var srcs []luaapi.Source
	for _, p := range []string{"alice/1", "/etc/a", "bob/1", "alice/2", "carol/1", "/etc/b", "alice/3", "bob/2"} {
		owner, _, _ := strings.Cut(p, "/")
		srcs = append(srcs, luaapi.Source{Path: p, Owner: owner})
	}
	evalOrder(srcs)
	var got []string
	for _, s := range srcs {
		got = append(got, s.Path)
	}
	want := []string{"/etc/a", "/etc/b", "carol/1", "bob/1", "bob/2", "alice/1", "alice/2", "alice/3"}
	if !slices.Equal(got, want) {
		t.Errorf("order %q, want %q", got, want)
	}
}

// TestInForceFirst: at a daemon's start, each owner's files that were in
// force come before those that were not (that failed, or are new), the
// owners' order as evalOrder left it, and each part in its order.
func TestInForceFirst(t *testing.T) {
	var srcs []luaapi.Source
	for _, p := range []string{"/etc/a-loop", "/etc/b", "/etc/c-loop", "/etc/d", "bob/1-loop", "bob/2", "alice/1"} {
		owner, _, _ := strings.Cut(strings.TrimPrefix(p, "/etc/"), "/")
		if strings.HasPrefix(p, "/etc/") {
			owner = ""
		}
		srcs = append(srcs, luaapi.Source{Path: p, Owner: owner})
	}
	inForceFirst(srcs, func(s luaapi.Source) bool { return !strings.HasSuffix(s.Path, "-loop") })
	var got []string
	for _, s := range srcs {
		got = append(got, s.Path)
	}
	if want := []string{"/etc/b", "/etc/d", "/etc/a-loop", "/etc/c-loop", "bob/2", "bob/1-loop", "alice/1"}; !slices.Equal(got, want) {
		t.Errorf("order %q, want %q", got, want)
	}
}

// TestStartEvaluatesInForceFirst: a file that was in force when the last
// daemon stopped is evaluated at the next one's start before a file that
// hangs, which would have held it past the reload's deadline (trial AF).
func TestStartEvaluatesInForceFirst(t *testing.T) {
	logs := &testkit.Buffer{}
	lives := &daemonLives{t: t, tune: func(cfg *Config) {
		cfg.Evaluator.Budget = 20 * time.Second
		cfg.Evaluator.Deadline = time.Second
		cfg.Logger = hclog.New(&hclog.LoggerOptions{Output: logs, Level: hclog.Info})
	}}
	d, stop := lives.start()
	testkit.PutFile(t, filepath.Join(lives.jobsDir, "z-good.lua"), `job "good" { cmd = "sleep 600", cpus = 0 }`)
	reload(t, d)
	waitJob(t, d, "good", "running", func(js JobStatus) bool { return js.State == "running" })
	lives.stopped(stop)

	// Before it by name, a file that loops until it is stopped.
	testkit.PutFile(t, filepath.Join(lives.jobsDir, "a-loop.lua"), `while true do end`)
	logs = &testkit.Buffer{} // the next daemon's alone
	d, stop = lives.start()
	defer lives.stopped(stop)
	waitJob(t, d, "good", "running", func(js JobStatus) bool { return js.State == "running" })
	loaded := ""
	for l := range strings.Lines(logs.String()) {
		if strings.Contains(l, "loaded:") {
			loaded = l
			break
		}
	}
	if !strings.Contains(loaded, " jobs=1 ") {
		t.Errorf("the start's first reload: %q, want good's job in it", loaded)
	}
}

// TestEvaluatorCheckDeadline: files sent to be checked get less time than
// a reload's: the file in hand at the check's deadline is stopped, and
// those whose turn has not come are not checked and say what to do, so
// that a check of many slow files holds one of the few places of checks
// no longer than that. A reload of the same files is not held to it.
func TestEvaluatorCheckDeadline(t *testing.T) {
	// A hanging file, not a slow one, meets the deadline: on a loaded
	// machine the child may take a while over any file.
	srcs := []luaapi.Source{{Path: "/spool/alice/0/good.lua", Src: []byte(`job "x0" { cmd = "true" }`), Owner: "alice"},
		{Path: "/spool/alice/1/hang.lua", Src: []byte("-- hangs until killed"), Owner: "alice"}}
	for i := 2; i < 8; i++ {
		srcs = append(srcs, luaapi.Source{Path: fmt.Sprintf("/spool/alice/%d/good.lua", i), Src: []byte(`job "x` + strconv.Itoa(i) + `" { cmd = "true" }`), Owner: "alice"})
	}
	const deadline = 3 * time.Second
	e := &Evaluator{Command: []string{os.Args[0]}, Env: append(os.Environ(), "BERTH_TEST_EVAL=script"), UID: -1, GID: -1,
		Budget: 10 * time.Second, CheckDeadline: deadline}
	began := time.Now()
	files := e.Evaluate(context.WithValue(context.Background(), checkingKey{}, true), luaapi.Machine{CPUs: 2}, srcs)
	// Held to a reload's deadline, the hanging file would take a minute.
	if took := time.Since(began); took > deadline+20*time.Second {
		t.Errorf("the check took %v, past its deadline of %v", took, deadline)
	}
	if len(files) != len(srcs) || len(files[0].Jobs) != 1 {
		t.Fatalf("%d files back for %d, the first %+v", len(files), len(srcs), files[0])
	}
	if hang := files[1]; len(hang.Errors) != 1 || !strings.Contains(hang.Errors[0].Error(), "still running when the check reached its deadline") {
		t.Errorf("the hanging file: %v, want stopped at the deadline", hang.Errors)
	}
	last := files[len(files)-1]
	if len(last.Errors) != 1 || last.Errors[0].Problem != luaapi.NotEvaluated || !strings.Contains(last.Errors[0].Error(), "check or submit fewer files at once") {
		t.Errorf("the last file: %v, want it not checked", last.Errors)
	}

	// A reload's files are given the reload's deadline: slow files that
	// take longer in all than the check's are all evaluated.
	var slow []luaapi.Source
	for i := range 8 {
		slow = append(slow, luaapi.Source{Path: fmt.Sprintf("/spool/alice/%d/slow.lua", i), Src: []byte(`job "x` + strconv.Itoa(i) + `" { cmd = "true" }`), Owner: "alice"})
	}
	e.CheckDeadline = slowFile
	for _, f := range e.Evaluate(context.Background(), luaapi.Machine{CPUs: 2}, slow) {
		if len(f.Errors) > 0 {
			t.Errorf("loaded, %s: %v, want evaluated", f.Path, f.Errors)
		}
	}
}
