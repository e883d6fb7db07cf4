package supervisor

import (
	"cmp"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/berthd/berth/luaapi"
	"github.com/berthd/berth/supervisor/clock"
	"github.com/berthd/berth/supervisor/store"
	"github.com/berthd/berth/supervisor/testkit"
)

func TestMemberName(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name  string
		array string
		index int
		ok    bool
	}{
		{"sweep[7]", "sweep", 7, true},
		{"alice/sweep[0]", "alice/sweep", 0, true},
		{"sweep", "", 0, false},
		{"sweep[x]", "", 0, false},
		{"sweep[7", "", 0, false},
	} {
		a, i, ok := splitMember(c.name)
		if a != c.array || i != c.index || ok != c.ok {
			t.Errorf("splitMember(%q) = %q, %d, %v", c.name, a, i, ok)
		}
		if ok && memberName(a, i) != c.name {
			t.Errorf("memberName(%q, %d) = %q", a, i, memberName(a, i))
		}
	}
}

// TestArrayRuns: every index runs once, told its index and the array's
// size, never more of them at once than max_parallel, and the array is
// one line of status.
func TestArrayRuns(t *testing.T) {
	t.Parallel()
	out := t.TempDir()
	jobs := `job "sweep" { cmd = { "/bin/sh", "-c", [[
n=$(ls ` + out + `/running | wc -l); echo $n > ` + out + `/seen.$BERTH_ARRAY_INDEX
touch ` + out + `/running/$BERTH_ARRAY_INDEX
echo $BERTH_ARRAY_SIZE $BERTH_JOB > ` + out + `/ran.$BERTH_ARRAY_INDEX
rm ` + out + `/running/$BERTH_ARRAY_INDEX
]] }, cpus = 0, array = { from = 0, to = 19 }, max_parallel = 3 }`
	if err := os.Mkdir(filepath.Join(out, "running"), 0o700); err != nil {
		t.Fatal(err)
	}
	d, _ := runDaemon(t, jobs, nil)
	js := waitJob(t, d, "sweep", "done", func(js JobStatus) bool { return js.State == "done" })
	if js.Array == nil || js.Array.Size != 20 || js.Array.Counts["done"] != 20 || js.Array.MaxParallel != 3 {
		t.Fatalf("array status %+v", js.Array)
	}
	for _, j := range d.Status().Jobs {
		if strings.Contains(j.Name, "[") {
			t.Errorf("an index has a line of its own: %s", j.Name)
		}
	}
	for i := 0; i <= 19; i++ {
		b, err := os.ReadFile(filepath.Join(out, "ran."+strconv.Itoa(i)))
		if err != nil {
			t.Fatal(err)
		}
		if got, want := strings.TrimSpace(string(b)), "20 sweep["+strconv.Itoa(i)+"]"; got != want {
			t.Errorf("index %d saw %q, want %q", i, got, want)
		}
		seen, _ := os.ReadFile(filepath.Join(out, "seen."+strconv.Itoa(i)))
		if n, _ := strconv.Atoi(strings.TrimSpace(string(seen))); n >= 3 {
			t.Errorf("index %d started with %d others running; max_parallel is 3", i, n)
		}
	}
}

// gateModel drives an array's gate as its index jobs would, without
// goroutines: each member's mailbox is read when the test says so.
type gateModel struct {
	t   *testing.T
	a   *array
	max int
	// Per index: its state, whether it waits in line for the gate, and
	// whether it waits in the placer's queue.
	state   map[int]store.State
	inLine  map[int]bool
	inQueue map[int]bool
}

func newGateModel(t *testing.T, n, maxParallel int) *gateModel {
	def := &luaapi.Job{Name: "sweep", Array: &luaapi.Range{From: 1, To: n}, MaxParallel: maxParallel}
	m := &gateModel{t: t, a: newArray(def), max: maxParallel,
		state: map[int]store.State{}, inLine: map[int]bool{}, inQueue: map[int]bool{}}
	for i := 1; i <= n; i++ {
		m.a.join(i, &job{name: memberName("sweep", i), in: newMailbox[jobMessage]()})
		m.a.expect(i)
	}
	m.a.mu.Lock()
	m.a.admitNext()
	m.a.mu.Unlock()
	for i := 1; i <= n; i++ {
		m.wait(i)
	}
	return m
}

func (m *gateModel) publish(i int) {
	m.a.sync(m.a.members[i], m.state[i], time.Time{}, lastEnd{}, "", m.inLine[i], m.inQueue[i], 0)
}

// wait is index i's wait past the dependency gate (pastGates).
func (m *gateModel) wait(i int) {
	m.state[i] = store.StateWaiting
	if m.a.request(i) {
		m.inLine[i], m.inQueue[i] = false, true
	} else {
		m.inLine[i] = true
	}
	m.publish(i)
}

// read delivers what index i's mailbox holds.
func (m *gateModel) read(i int) {
	for _, msg := range m.a.members[i].in.drain() {
		if msg.admit && m.inLine[i] && m.state[i] == store.StateWaiting {
			m.inLine[i] = false
			m.wait(i)
		}
	}
	m.publish(i)
}

func (m *gateModel) place(i int) {
	if !m.inQueue[i] {
		return
	}
	m.inQueue[i] = false
	m.a.placed(i)
	m.state[i] = store.StateRunning
	m.publish(i)
}

func (m *gateModel) rest(i int, s store.State) {
	m.state[i], m.inLine[i], m.inQueue[i] = s, false, false
	m.publish(i)
}

func (m *gateModel) check(what string) {
	m.t.Helper()
	holding, queued := 0, 0
	for i := range m.state {
		if m.inQueue[i] {
			queued++
		}
		if m.inQueue[i] || holdsPlace(m.state[i]) {
			holding++
		}
	}
	if queued > 1 {
		m.t.Fatalf("after %s: %d indices in the placer's queue", what, queued)
	}
	if m.max > 0 && holding > m.max {
		m.t.Fatalf("after %s: %d indices hold a place; max_parallel is %d", what, holding, m.max)
	}
}

// TestArrayGateModel: whatever order the indices' messages are read and
// their runs end, stop and start again in, at most max_parallel indices
// hold a place and one waits in the queue, and every index is let in at
// last.
// TestArrayRunsOnPastTheMachine: an array edited past the machine while
// its indices run says, as a job does, that they go on but will not run
// again (trial AS).
func TestArrayRunsOnPastTheMachine(t *testing.T) {
	t.Parallel()
	d, dir := runDaemon(t, `job "sweep" { cmd = "sleep 600", cpus = 1, array = 2 }`, nil)
	waitJob(t, d, "sweep", "running", func(js JobStatus) bool { return js.State == "running" && js.Array.Counts["running"] == 2 })
	testkit.PutFile(t, filepath.Join(dir, "jobs.lua"), `job "sweep" { cmd = "sleep 600", cpus = 64, array = 2 }`)
	reload(t, d)
	js := waitJob(t, d, "sweep", "running on, saying why", func(js JobStatus) bool { return js.Why != "" })
	if js.State != "running" || !strings.HasPrefix(js.Why, "its running indices go on, but will not run again: ") || !strings.Contains(js.Why, "asks for 64 cores") {
		t.Errorf("the array edited past the machine: %s, why %q", js.State, js.Why)
	}
	// Stopped, it is not started again: it would be found unplaceable.
	if code, body := as(t, d, "root", "POST", jobPath("sweep")+"/stop"); code != http.StatusOK {
		t.Fatalf("stop: %d %s", code, body)
	}
	waitJob(t, d, "sweep", "stopped", func(js JobStatus) bool { return js.State == "stopped" })
	if code, body := as(t, d, "root", "POST", jobPath("sweep")+"/start"); code != http.StatusConflict || !strings.Contains(body, "asks for 64 cores") {
		t.Errorf("a start of the array stopped: %d %s, want it refused", code, body)
	}
}

func TestArrayGateModel(t *testing.T) {
	t.Parallel()
	for seed := uint64(1); seed <= 200; seed++ {
		rng := rand.New(rand.NewPCG(seed, 9))
		n, maxParallel := 1+rng.IntN(12), rng.IntN(4)
		m := newGateModel(t, n, maxParallel)
		for step := 0; step < 200; step++ {
			i := 1 + rng.IntN(n)
			var what string
			switch rng.IntN(7) {
			case 6:
				what = "a publish of something else (an edit)"
				m.publish(i)
			case 0, 1:
				what = "a read"
				m.read(i)
			case 2:
				what = "a placement"
				m.place(i)
			case 3:
				what = "an end"
				if m.state[i] == store.StateRunning {
					m.rest(i, store.StateDone)
				}
			case 4:
				what = "a stop"
				m.rest(i, store.StateStopped)
			case 5:
				what = "a start"
				if resting(m.state[i]) {
					m.wait(i)
				}
			}
			m.check(fmt.Sprintf("seed %d step %d (%s of %d)", seed, step, what, i))
		}
		// Liveness: read, place and end until nothing moves; every index
		// that waits is let in on the way, and all end done or stopped.
		for round := 0; round < 10*n+10; round++ {
			for i := 1; i <= n; i++ {
				m.read(i)
				m.place(i)
				if m.state[i] == store.StateRunning {
					m.rest(i, store.StateDone)
				}
				m.check(fmt.Sprintf("seed %d draining", seed))
			}
		}
		for i := 1; i <= n; i++ {
			if s := m.state[i]; s != store.StateDone && s != store.StateStopped {
				t.Fatalf("seed %d: index %d is left %s (in line %v, queued %v); slots %v, queued %d/%v, asking %v",
					seed, i, s, m.inLine[i], m.inQueue[i], m.a.slots, m.a.queued, m.a.hasQueued, m.a.asking)
			}
		}
	}
}

// TestArrayGateOrder: indices are let in lowest first.
func TestArrayGateOrder(t *testing.T) {
	t.Parallel()
	m := newGateModel(t, 5, 2)
	var order []int
	for len(order) < 5 {
		progressed := false
		for i := 1; i <= 5; i++ {
			m.read(i)
			if m.inQueue[i] {
				order = append(order, i)
				m.place(i)
				m.rest(i, store.StateDone)
				progressed = true
			}
		}
		if !progressed {
			t.Fatalf("stuck after %v", order)
		}
	}
	if !slices.IsSorted(order) {
		t.Errorf("let in in the order %v", order)
	}
}

// TestArrayDoneRecord: the array's done record, kept as its indices
// publish theirs, is "" until every index has one, theirs where they
// agree, else a digest that changes with any; an index the range lost
// counts no more.
func TestArrayDoneRecord(t *testing.T) {
	t.Parallel()
	def := &luaapi.Job{Name: "sweep", Array: &luaapi.Range{From: 1, To: 3}}
	a := newArray(def)
	for i := 1; i <= 3; i++ {
		a.join(i, &job{name: memberName("sweep", i), in: newMailbox[jobMessage]()})
	}
	publish := func(i int, record string) {
		a.sync(a.members[i], store.StateDone, time.Time{}, lastEnd{}, record, false, false, 0)
	}
	publish(1, "r1")
	publish(2, "r1")
	if got := a.doneRecord(); got != "" {
		t.Errorf("two of three done: %q, want none", got)
	}
	publish(3, "r1")
	if got := a.doneRecord(); got != "r1" {
		t.Errorf("all done alike: %q, want r1", got)
	}
	publish(2, "r2")
	mixed := a.doneRecord()
	if want := arrayRecord([]string{"r1", "r2", "r1"}); mixed != want {
		t.Errorf("index 2 ran another definition: %q, want %q", mixed, want)
	}
	publish(3, "r2")
	if got := a.doneRecord(); got == mixed || got != arrayRecord([]string{"r1", "r2", "r2"}) {
		t.Errorf("index 3 too: %q, want a new digest", got)
	}
	publish(1, "")
	if got := a.doneRecord(); got != "" {
		t.Errorf("index 1 with no record: %q, want none", got)
	}
	a.forget(1)
	if got := a.doneRecord(); got != "r2" {
		t.Errorf("index 1 gone: %q, want r2", got)
	}
}

func BenchmarkArrayGate(b *testing.B) {
	const n = 10000
	def := &luaapi.Job{Name: "sweep", Array: &luaapi.Range{From: 1, To: n}, MaxParallel: 4}
	a := newArray(def)
	for i := 1; i <= n; i++ {
		a.join(i, &job{name: memberName("sweep", i), in: newMailbox[jobMessage]()})
		a.expect(i)
	}
	for i := 1; i <= n; i++ {
		a.request(i)
	}
	// One index's way through the gate: let in, placed, run, ended; its
	// end lets the next in. Ended indices wait again, so the line stays
	// 10 000 long.
	next := 0
	for b.Loop() {
		i := a.queued
		a.members[i].in.drain()
		a.request(i)
		a.placed(i)
		a.sync(a.members[i], store.StateRunning, time.Time{}, lastEnd{}, "", false, false, 0)
		a.tell() // as with a job after the array: at each publish
		a.sync(a.members[i], store.StateDone, time.Time{}, lastEnd{}, "", false, false, 0)
		a.tell()
		a.request(i) // back in line
		next++
	}
}

// TestArrayQueuesAsOneJob: an array's indices do not jump the queue ahead
// of a job of the same priority that came after the array: the array
// queues one index at a time, and its next index queues behind that job.
func TestArrayQueuesAsOneJob(t *testing.T) {
	t.Parallel()
	out := t.TempDir()
	order := filepath.Join(out, "order")
	run := `"/bin/sh", "-c", "echo $BERTH_JOB >> ` + order + `"`
	d, dir := runDaemon(t, `job "blocker" { cmd = { "/bin/sh", "-c", "while [ ! -e `+out+`/go ]; do sleep 0.01; done" }, cpus = 2 }`, nil)
	waitJob(t, d, "blocker", "running", func(js JobStatus) bool { return js.State == "running" })
	declare := func(file, src string) {
		t.Helper()
		testkit.PutFile(t, filepath.Join(dir, file), src)
		if _, err := d.Reload(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	declare("sweep.lua", `job "sweep" { cmd = { `+run+` }, cpus = 2, array = 3 }`)
	waitJob(t, d, "sweep", "with index 1 in the queue", func(js JobStatus) bool {
		return js.Array != nil && js.Array.Queued != nil && *js.Array.Queued == 1
	})
	declare("other.lua", `job "other" { cmd = { `+run+` }, cpus = 2 }`)
	waitJob(t, d, "other", "waiting", func(js JobStatus) bool { return js.State == "waiting" })
	if err := writeFile(filepath.Join(out, "go"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	waitJob(t, d, "sweep", "done", func(js JobStatus) bool { return js.State == "done" })
	waitJob(t, d, "other", "done", func(js JobStatus) bool { return js.State == "done" })
	b, err := os.ReadFile(order)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := strings.Fields(string(b)), []string{"sweep[1]", "other", "sweep[2]", "sweep[3]"}; !slices.Equal(got, want) {
		t.Errorf("ran in the order %v, want %v", got, want)
	}
}

// TestArrayInvalid: an array whose definition cannot run says why on its
// line, as a job would.
func TestArrayInvalid(t *testing.T) {
	t.Parallel()
	d, _ := runDaemon(t, `job "sweep" { cmd = "true", flavor = "nope", array = 3 }
job "huge" { cmd = "true", cpus = 64, array = 2 }`, nil)
	js := waitJob(t, d, "sweep", "invalid", func(js JobStatus) bool { return js.State == "invalid" })
	if !strings.Contains(js.Why, `flavor "nope" does not exist`) || js.Array.Counts["invalid"] != 3 {
		t.Errorf("sweep: why %q, counts %v", js.Why, js.Array.Counts)
	}
	js = waitJob(t, d, "huge", "unplaceable", func(js JobStatus) bool { return js.State == "unplaceable" })
	// Named as the array, as the problem names it (trial AF: huge[2]).
	if !strings.Contains(js.Why, `job "huge" asks for 64 cores`) || js.Array.Counts["unplaceable"] != 2 {
		t.Errorf("huge: why %q, counts %v", js.Why, js.Array.Counts)
	}
}

// TestArrayGrownPastTheMachine: an array whose flavor grows past the
// machine while an index runs has its other indices unplaceable at once,
// not in line for max_parallel's place, which they could never use; the
// index running runs on.
func TestArrayGrownPastTheMachine(t *testing.T) {
	t.Parallel()
	d, dir := runDaemon(t, `flavor "med" { cpus = 1 }
job "fa" { cmd = "sleep 600", flavor = "med", array = 3, max_parallel = 1 }`, nil)
	waitJob(t, d, "fa", "one index running, two in line", func(js JobStatus) bool {
		return js.Array != nil && js.Array.Counts["running"] == 1 && js.Array.Counts["waiting"] == 2
	})
	testkit.PutFile(t, filepath.Join(dir, "jobs.lua"), `flavor "med" { cpus = 16 }
job "fa" { cmd = "sleep 600", flavor = "med", array = 3, max_parallel = 1 }`)
	reload(t, d)
	js := waitJob(t, d, "fa", "two indices unplaceable", func(js JobStatus) bool { return js.Array != nil && js.Array.Counts["unplaceable"] == 2 })
	if js.Array.Counts["running"] != 1 {
		t.Errorf("fa: counts %v, want its running index running on", js.Array.Counts)
	}
}

// TestUnplaceableShowsNoEnv: berth show of a job that can never run, a
// job or an array, gives no environment of a next run: its grant would
// name cores and cards the machine does not have.
func TestUnplaceableShowsNoEnv(t *testing.T) {
	t.Parallel()
	d, _ := runDaemon(t, `job "big" { cmd = "true", cpus = 64, gpus = 3 }
job "huge" { cmd = "true", cpus = 64, array = 2 }
job "fits" { cmd = "sleep 600", cpus = 1 }`, nil)
	for _, name := range []string{"big", "huge"} {
		waitJob(t, d, name, "unplaceable", func(js JobStatus) bool { return js.State == "unplaceable" })
	}
	for _, name := range []string{"big", "huge", "fits"} {
		code, body := as(t, d, "root", "GET", jobPath(name))
		var jd JobDetail
		if err := json.Unmarshal([]byte(body), &jd); code != 200 || err != nil {
			t.Fatalf("show %s: %d %v %s", name, code, err, body)
		}
		if never := name != "fits"; never != (len(jd.NextEnv) == 0) || jd.NextEnv == nil {
			t.Errorf("show %s (%s): next env %q", name, jd.Status.State, jd.NextEnv)
		}
	}
}

// TestArrayForgottenRequest: an index the range lost that still reads its
// word to go takes no place, and the gate stays free for the others.
func TestArrayForgottenRequest(t *testing.T) {
	t.Parallel()
	m := newGateModel(t, 3, 1)
	gone := m.a.members[3]
	m.a.forget(3)
	if m.a.request(3) {
		t.Fatal("a forgotten index was let in")
	}
	m.a.placed(3)
	m.a.sync(gone, store.StateStopped, time.Time{}, lastEnd{}, "", false, false, 0)
	for range 3 {
		for i := 1; i <= 2; i++ {
			m.read(i)
			m.place(i)
			if m.state[i] == store.StateRunning {
				m.rest(i, store.StateDone)
			}
		}
	}
	for i := 1; i <= 2; i++ {
		m.read(i)
		m.place(i)
		if m.state[i] == store.StateRunning {
			m.rest(i, store.StateDone)
		}
	}
	if m.state[1] != store.StateDone || m.state[2] != store.StateDone {
		t.Errorf("indices left %v %v; slots %v, queued %d/%v", m.state[1], m.state[2], m.a.slots, m.a.queued, m.a.hasQueued)
	}
}

// TestJobBecomesArray: a job turned into an array of the same name is
// removed (its run stopped), and the array stands alone on the line; an
// array turned back into a job likewise. A removed array is said removed.
func TestJobBecomesArray(t *testing.T) {
	t.Parallel()
	d, dir := runDaemon(t, `job "sweep" { cmd = "sleep 1000", cpus = 0 }`, nil)
	waitJob(t, d, "sweep", "running", func(js JobStatus) bool { return js.State == "running" && js.Array == nil })
	write := func(src string) ReloadResult {
		t.Helper()
		if err := writeFile(filepath.Join(dir, "jobs.lua"), []byte(src), 0o600); err != nil {
			t.Fatal(err)
		}
		res, err := d.Reload(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	lines := func() int {
		n := 0
		for _, j := range d.Status().Jobs {
			if j.Name == "sweep" {
				n++
			}
		}
		return n
	}
	res := write(`job "sweep" { cmd = "true", cpus = 0, array = 2 }`)
	if !slices.Contains(res.Removed, "sweep") || !slices.Contains(res.Added, "sweep") {
		t.Errorf("job to array: %+v", res)
	}
	waitJob(t, d, "sweep", "an array, done", func(js JobStatus) bool { return js.Array != nil && js.State == "done" })
	if n := lines(); n != 1 {
		t.Errorf("%d lines named sweep", n)
	}
	res = write(`job "sweep" { cmd = "sleep 1000", cpus = 0 }`)
	if !slices.Contains(res.Removed, "sweep") || slices.ContainsFunc(res.Removed, func(n string) bool { return strings.Contains(n, "[") }) {
		t.Errorf("array to job: %+v", res)
	}
	waitJob(t, d, "sweep", "a job again, running", func(js JobStatus) bool { return js.Array == nil && js.State == "running" })
	if n := lines(); n != 1 {
		t.Errorf("%d lines named sweep", n)
	}
}

// TestArrayForgottenKeepsItsPlace: an index the range lost while it ran
// keeps its place until its job has stopped: the next in line is not let
// in beside it past max_parallel.
func TestArrayForgottenKeepsItsPlace(t *testing.T) {
	t.Parallel()
	m := newGateModel(t, 3, 1)
	m.place(1)
	if m.state[1] != store.StateRunning {
		t.Fatalf("index 1 is %v", m.state[1])
	}
	m.forgetKeepsPlace(1, 2, "runs", store.StateStopping)
}

// forgetKeepsPlace has the range forget index gone and checks that index
// next is not let in beside it while it is as it was (as) and then passes
// through states, and is once it has stopped.
func (m *gateModel) forgetKeepsPlace(gone, next int, as string, states ...store.State) {
	m.t.Helper()
	j := m.a.members[gone]
	m.a.forget(gone)
	m.read(next)
	if m.inQueue[next] {
		m.t.Fatalf("index %d was let in while the forgotten index %d %s", next, gone, as)
	}
	for _, st := range states {
		m.a.sync(j, st, time.Time{}, lastEnd{}, "", false, false, 0)
		m.read(next)
		if m.inQueue[next] {
			m.t.Fatalf("index %d was let in while the forgotten index %d is %v", next, gone, st)
		}
	}
	m.a.sync(j, store.StateStopped, time.Time{}, lastEnd{}, "", false, false, 0)
	m.read(next)
	if !m.inQueue[next] {
		m.t.Fatalf("index %d is not let in once the forgotten index %d has stopped", next, gone)
	}
}

// TestArrayForgottenPlacedKeepsItsPlace: an index the range lost just as
// it was placed, before it says it starts, keeps its place too.
func TestArrayForgottenPlacedKeepsItsPlace(t *testing.T) {
	t.Parallel()
	m := newGateModel(t, 3, 1)
	if !m.inQueue[1] {
		t.Fatal("index 1 is not in the queue")
	}
	m.a.placed(1) // granted; its goroutine has yet to say starting
	m.forgetKeepsPlace(1, 2, "is placed and starts")
}

// TestArrayIndicesBroughtBack: a range that shrinks and grows again brings
// back indices that had finished; they are not new, and stay done, as a
// job whose file comes back does.
func TestArrayIndicesBroughtBack(t *testing.T) {
	t.Parallel()
	d, dir := runDaemon(t, `job "ga" { cmd = "true", cpus = 0, array = 3 }`, nil)
	done := func(n int) func(JobStatus) bool {
		return func(js JobStatus) bool { return js.Array != nil && js.Array.Counts["done"] == n && js.State == "done" }
	}
	waitJob(t, d, "ga", "3 indices done", done(3))
	for _, size := range []int{1, 3} {
		src := fmt.Sprintf(`job "ga" { cmd = "true", cpus = 0, array = %d }`, size)
		if err := writeFile(filepath.Join(dir, "jobs.lua"), []byte(src), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := d.Reload(t.Context()); err != nil {
			t.Fatal(err)
		}
		waitJob(t, d, "ga", fmt.Sprintf("%d indices done", size), done(size))
	}
	for i := 1; i <= 3; i++ {
		if runs := runsOf(t, d, fmt.Sprintf("ga[%d]", i)); len(runs) != 1 {
			t.Errorf("index %d has %d runs, want its first alone", i, len(runs))
		}
	}
}

// TestArraySinceOutlivesTheDaemon: an array at rest, as the next daemon
// finds it, is as old as it was: since its last index came to rest, not
// unknown.
func TestArraySinceOutlivesTheDaemon(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC))
	lives := daemonLives{t: t, jobs: `job "sweep" { cmd = "true", array = 3, max_parallel = 1 }`,
		tune: func(cfg *Config) { cfg.Clock = clk }}
	arrayStatus := func(d *Daemon) JobStatus {
		for _, js := range d.Status().Jobs {
			if js.Name == "sweep" {
				return js
			}
		}
		return JobStatus{}
	}
	d, stop := lives.start()
	testkit.WaitFor(t, 20*time.Second, "the array to be done", func() bool { return arrayStatus(d).State == "done" })
	was := arrayStatus(d).Since
	if was.IsZero() {
		t.Fatal("the done array has no since")
	}
	lives.stopped(stop)
	clk.Advance(time.Hour)
	d, stop = lives.start()
	defer lives.stopped(stop)
	testkit.WaitFor(t, 20*time.Second, "the array to be done again", func() bool { return arrayStatus(d).State == "done" })
	if got := arrayStatus(d).Since; !got.Equal(was) {
		t.Errorf("after a restart the array is done since %v, want %v as before", got, was)
	}
}

// TestShowNamesFreeCards: the environment of a waiting job's next run
// names the cards free now, not the lowest ones another job holds.
func TestShowNamesFreeCards(t *testing.T) {
	t.Parallel()
	d, _ := runDaemon(t, `job "hold" { cmd = "sleep 600", cpus = 1, gpus = 2 }
job "next" { cmd = "true", cpus = 1, gpus = 1, enabled = false }`, func(cfg *Config) {
		cfg.Machine.GPUs = []string{"4", "5", "6", "7"}
	})
	waitJob(t, d, "hold", "running", func(js JobStatus) bool { return js.State == "running" })
	code, body := as(t, d, "root", "GET", jobPath("next"))
	var jd JobDetail
	if err := json.Unmarshal([]byte(body), &jd); code != 200 || err != nil {
		t.Fatalf("show next: %d %v %s", code, err, body)
	}
	if !slices.Contains(jd.NextEnv, "CUDA_VISIBLE_DEVICES=6") {
		t.Errorf("next's next run, with cards 4 and 5 held: %q, want card 6", jd.NextEnv)
	}
}

// TestArrayAfterWhileRunning: an array whose parent runs a new definition
// while some of its indices run says, beside them, that its waiting ones
// wait for that parent (After), not nothing.
func TestArrayAfterWhileRunning(t *testing.T) {
	t.Parallel()
	d, dir := runDaemon(t, "", nil)
	free, next := filepath.Join(t.TempDir(), "free"), filepath.Join(t.TempDir(), "next")
	wait := func(file string) string {
		return `{ "sh", "-c", "while [ ! -e ` + file + ` ]; do sleep 0.05; done" }`
	}
	path := filepath.Join(dir, "jobs.lua")
	testkit.PutFile(t, path, `job "prep" { cmd = "true", cpus = 0 }
job "train" { cmd = `+wait(free)+`, cpus = 0, after = "prep", array = 3, max_parallel = 1 }`)
	reload(t, d)
	waitJob(t, d, "train", "an index running, two in line", func(js JobStatus) bool {
		return js.Array != nil && js.Array.Counts["running"] == 1 && js.Array.Counts["waiting"] == 2
	})
	testkit.PutFile(t, path, `job "prep" { cmd = `+wait(next)+`, cpus = 0 }
job "train" { cmd = `+wait(free)+`, cpus = 0, after = "prep", array = 3, max_parallel = 1 }`)
	reload(t, d)
	js := waitJob(t, d, "train", "its waiting indices held by prep's new run", func(js JobStatus) bool {
		return len(js.After) == 1 && js.After[0].Job == "prep" && js.After[0].State == "running"
	})
	if js.State != "running" || js.Array.Counts["running"] != 1 {
		t.Errorf("train: %s, %v; want its index still running beside the held ones", js.State, js.Array.Counts)
	}
	for _, f := range []string{free, next} {
		if err := writeFile(f, nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	waitJob(t, d, "train", "done", func(js JobStatus) bool { return js.State == "done" })
}

// TestArrayRunsAgainLowestFirst: an array whose parent ran a new
// definition runs its indices again lowest first, as it ran them first,
// not in the order their goroutines heard of it.
func TestArrayRunsAgainLowestFirst(t *testing.T) {
	t.Parallel()
	d, dir := runDaemon(t, "", nil)
	path := filepath.Join(dir, "jobs.lua")
	kid := `job "kid" { cmd = "true", cpus = 0, after = "par", array = 6, max_parallel = 1 }`
	testkit.PutFile(t, path, `job "par" { cmd = "true", cpus = 0 }`+"\n"+kid)
	reload(t, d)
	waitJob(t, d, "kid", "done", func(js JobStatus) bool { return js.State == "done" && js.Array.Counts["done"] == 6 })
	for round := 2; round <= 3; round++ {
		testkit.PutFile(t, path, fmt.Sprintf(`job "par" { cmd = "true # %d", cpus = 0 }`, round)+"\n"+kid)
		reload(t, d)
		var runs []store.RunRecord
		testkit.WaitFor(t, 20*time.Second, "every index to run again", func() bool {
			var err error
			runs, err = d.store.RunsOfPrefix("kid[", 100)
			return err == nil && len(runs) == 6*round && !slices.ContainsFunc(runs, func(r store.RunRecord) bool { return r.End.IsZero() })
		})
		slices.SortFunc(runs, func(a, b store.RunRecord) int { return cmp.Compare(a.ID, b.ID) })
		var order []string
		for _, r := range runs[6*(round-1):] {
			order = append(order, r.Job)
		}
		if want := []string{"kid[1]", "kid[2]", "kid[3]", "kid[4]", "kid[5]", "kid[6]"}; !slices.Equal(order, want) {
			t.Errorf("round %d ran %v, want lowest first", round, order)
		}
	}
}

// TestArrayShrunkIndexCause: an index the array's range no longer
// includes is stopped for that, and its run says so; one of an array no
// file declares any more, for that.
func TestArrayShrunkIndexCause(t *testing.T) {
	t.Parallel()
	d, dir := runDaemon(t, "", nil)
	path := filepath.Join(dir, "jobs.lua")
	testkit.PutFile(t, path, `job "ep" { cmd = "sleep 600", cpus = 0, array = 2 }`)
	reload(t, d)
	waitJob(t, d, "ep", "both running", func(js JobStatus) bool { return js.Array != nil && js.Array.Counts["running"] == 2 })
	testkit.PutFile(t, path, `job "ep" { cmd = "sleep 600", cpus = 0, array = 1 }`)
	reload(t, d)
	testkit.PutFile(t, path, `-- nothing`)
	reload(t, d)
	for _, tt := range []struct{ index, cause string }{
		{"ep[2]", "its array's range no longer includes it"},
		{"ep[1]", "no job file declares it any more"},
	} {
		if r := waitRuns(t, d, tt.index, 1); r.Reason != store.ReasonStopped || r.Cause != tt.cause {
			t.Errorf("%s's run: %v, %q; want stopped, %q", tt.index, r.Reason, r.Cause, tt.cause)
		}
	}
}

// TestRunsAgainAfterArray: a job after an array is out of date while the
// array's parent runs a new definition, and then while the array runs
// again after it.
func TestRunsAgainAfterArray(t *testing.T) {
	t.Parallel()
	d, dir := runDaemon(t, "", nil)
	path, next, kidGo := filepath.Join(dir, "jobs.lua"), filepath.Join(t.TempDir(), "next"), filepath.Join(t.TempDir(), "kid")
	rest := `job "kid" { cmd = { "sh", "-c", "test -e ` + kidGo + ` || test ! -e ` + next + `" }, cpus = 0, after = "prep", array = 2 }
job "agg" { cmd = "true", cpus = 0, after = "kid" }`
	testkit.PutFile(t, path, `job "prep" { cmd = "true", cpus = 0 }`+"\n"+rest)
	reload(t, d)
	waitJob(t, d, "agg", "done", func(js JobStatus) bool { return js.State == "done" })
	// prep's new definition waits for next: agg is out of date after prep.
	testkit.PutFile(t, path, `job "prep" { cmd = { "sh", "-c", "while [ ! -e `+next+` ]; do sleep 0.05; done" }, cpus = 0 }`+"\n"+rest)
	reload(t, d)
	if js := waitJob(t, d, "agg", "out of date after prep", func(js JobStatus) bool { return js.RunsAgainAfter != "" }); js.State != "done" || js.RunsAgainAfter != "prep" {
		t.Errorf("agg while prep runs a new definition: %s, after %q", js.State, js.RunsAgainAfter)
	}
	// prep done: kid's indices run again, and fail (kid is not let go):
	// agg is out of date after kid, which rests failed short of done.
	if err := writeFile(next, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	waitJob(t, d, "kid", "failed", func(js JobStatus) bool { return js.State == "failed" })
	if js, _ := d.jobStatus("agg"); js.State != "done" || js.RunsAgainAfter != "kid" {
		t.Errorf("agg while kid's new run failed: %s, after %q", js.State, js.RunsAgainAfter)
	}
	if err := writeFile(kidGo, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	start(t, d, "kid")
	waitRuns(t, d, "agg", 2)
	if js := waitJob(t, d, "agg", "done again", func(js JobStatus) bool { return js.State == "done" }); js.RunsAgainAfter != "" {
		t.Errorf("agg run again after kid: still out of date after %q", js.RunsAgainAfter)
	}
}

// arrayDoneOf says an array is done with n indices in its range.
func arrayDoneOf(n int) func(JobStatus) bool {
	return func(js JobStatus) bool { return js.State == "done" && js.Array != nil && js.Array.Size == n }
}

// TestArrayGrownKeepsItsDependantDone: a job after an array that grows
// stays done, out of date after it, until its new indices have run to
// done, and then runs again, once; grown and shrunk back before they
// have, it does not run again (trial BA: it went back to waiting at the
// grow, and ran again after the shrink). Nor does it after a shrink.
func TestArrayGrownKeepsItsDependantDone(t *testing.T) {
	t.Parallel()
	d, dir := runDaemon(t, "", nil)
	path, go3 := filepath.Join(dir, "jobs.lua"), filepath.Join(t.TempDir(), "go3")
	files := func(n int) {
		t.Helper()
		testkit.PutFile(t, path, fmt.Sprintf(`job "sw" { cmd = { "sh", "-c", "test $BERTH_ARRAY_INDEX != 3 || while [ ! -e %s ]; do sleep 0.05; done" }, cpus = 0, array = %d }
job "sum" { cmd = "true", cpus = 0, after = "sw" }`, go3, n))
		reload(t, d)
	}
	files(2)
	waitJob(t, d, "sum", "done", func(js JobStatus) bool { return js.State == "done" })
	files(3)
	waitJob(t, d, "sw[3]", "running", func(js JobStatus) bool { return js.State == "running" })
	if js := waitJob(t, d, "sum", "out of date after sw", func(js JobStatus) bool { return js.RunsAgainAfter != "" }); js.State != "done" || js.RunsAgainAfter != "sw" {
		t.Errorf("sum while sw's new index runs: %s, after %q; want done, out of date after sw", js.State, js.RunsAgainAfter)
	}
	files(2)
	waitJob(t, d, "sw", "done, shrunk back", arrayDoneOf(2))
	if js := waitJob(t, d, "sum", "up to date", func(js JobStatus) bool { return js.RunsAgainAfter == "" }); js.State != "done" {
		t.Errorf("sum once sw is back to the indices its run followed: %s", js.State)
	}
	files(1)
	waitJob(t, d, "sw", "done, shrunk", arrayDoneOf(1))
	if js, _ := d.jobStatus("sum"); js.State != "done" || js.RunsAgainAfter != "" {
		t.Errorf("sum after sw shrank: %s, after %q; want done, up to date", js.State, js.RunsAgainAfter)
	}
	files(3)
	if err := writeFile(go3, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	waitJob(t, d, "sw", "done, grown", arrayDoneOf(3))
	waitRuns(t, d, "sum", 2)
	waitJob(t, d, "sum", "done again", func(js JobStatus) bool { return js.State == "done" && js.RunsAgainAfter == "" })
	if runs := runsOf(t, d, "sum"); len(runs) != 2 {
		t.Errorf("sum ran %d times, want twice: once at first, once after sw[3] ran to done", len(runs))
	}
}

// TestArrayGrownBackOverAnOlderDefinition: an index brought back by a
// range grown, done under an older definition, runs the current one; the
// array's dependant, done after the current one, stays done meanwhile,
// and runs not again when the range shrinks back before that index ends
// (trial BB: it went back to waiting, and ran again at each shrink).
func TestArrayGrownBackOverAnOlderDefinition(t *testing.T) {
	t.Parallel()
	d, dir := runDaemon(t, "", nil)
	path, go3 := filepath.Join(dir, "jobs.lua"), filepath.Join(t.TempDir(), "go3")
	files := func(cmd string, n int) {
		t.Helper()
		testkit.PutFile(t, path, fmt.Sprintf(`job "sw" { cmd = { "sh", "-c", %q }, cpus = 0, array = %d }
job "sum" { cmd = "true", cpus = 0, after = "sw" }`, cmd, n))
		reload(t, d)
	}
	files("true", 3)
	waitJob(t, d, "sum", "done", func(js JobStatus) bool { return js.State == "done" })
	files("true", 2)
	waitJob(t, d, "sw", "done, shrunk", arrayDoneOf(2))
	blocking := "test $BERTH_ARRAY_INDEX != 3 || while [ ! -e " + go3 + " ]; do sleep 0.05; done"
	files(blocking, 2)
	waitRuns(t, d, "sum", 2)
	waitJob(t, d, "sum", "done after sw's new definition", func(js JobStatus) bool { return js.State == "done" && js.RunsAgainAfter == "" })
	files(blocking, 3)
	waitJob(t, d, "sw[3]", "running the new definition", func(js JobStatus) bool { return js.State == "running" })
	if js := waitJob(t, d, "sum", "out of date after sw", func(js JobStatus) bool { return js.RunsAgainAfter != "" }); js.State != "done" || js.RunsAgainAfter != "sw" {
		t.Errorf("sum while sw[3] runs the new definition: %s, after %q; want done, out of date after sw", js.State, js.RunsAgainAfter)
	}
	files(blocking, 2)
	waitJob(t, d, "sw", "done, shrunk back", arrayDoneOf(2))
	waitJob(t, d, "sum", "up to date", func(js JobStatus) bool { return js.RunsAgainAfter == "" })
	if js, _ := d.jobStatus("sum"); js.State != "done" {
		t.Errorf("sum once sw is back to the indices its run followed: %s", js.State)
	}
	if runs := runsOf(t, d, "sum"); len(runs) != 2 {
		t.Errorf("sum ran %d times, want twice: at first, and after sw's new definition", len(runs))
	}
}

// TestArrayAfterANewParentKeepsItsDependantDone: an array that runs
// again after its parent's new definition leaves the job after it done,
// out of date after it, while its indices run, and one of them failing
// holds it done (the review: the indices done again beside those yet to
// made a record of their own, and the job waited, for ever once one
// failed).
func TestArrayAfterANewParentKeepsItsDependantDone(t *testing.T) {
	t.Parallel()
	d, dir := runDaemon(t, "", nil)
	path, fail := filepath.Join(dir, "jobs.lua"), filepath.Join(t.TempDir(), "fail")
	files := func(prep string) {
		t.Helper()
		testkit.PutFile(t, path, `job "prep" { cmd = "`+prep+`", cpus = 0 }
job "sw" { cmd = { "sh", "-c", "test $BERTH_ARRAY_INDEX != 2 || test ! -e `+fail+`" }, cpus = 0, array = 2, after = "prep" }
job "sum" { cmd = "true", cpus = 0, after = "sw" }`)
		reload(t, d)
	}
	files("true")
	waitJob(t, d, "sum", "done", func(js JobStatus) bool { return js.State == "done" })
	if err := writeFile(fail, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	files("/bin/true")
	waitJob(t, d, "sw", "failed", func(js JobStatus) bool { return js.State == "failed" })
	if js, _ := d.jobStatus("sum"); js.State != "done" || js.RunsAgainAfter != "sw" {
		t.Errorf("sum while sw, after prep's new definition, failed: %s, out of date after %q; want done, after sw", js.State, js.RunsAgainAfter)
	}
	if runs := runsOf(t, d, "sum"); len(runs) != 1 {
		t.Errorf("sum ran %d times, want once", len(runs))
	}
}

// TestChainThroughArray: a job after an array and a job runs again after
// the job's new definition, and so does the job after it, once each; an
// array after an array leaves the jobs after it up to date (the review:
// a record naming an array parent was read as an array's, its range
// wrong, and the one after it never ran again, or waited for ever).
func TestChainThroughArray(t *testing.T) {
	t.Parallel()
	d, dir := runDaemon(t, "", nil)
	path := filepath.Join(dir, "jobs.lua")
	files := func(e string) {
		t.Helper()
		testkit.PutFile(t, path, `job "b" { cmd = "true", cpus = 0, array = 2 }
job "e" { cmd = "`+e+`", cpus = 0 }
job "c" { cmd = "true", cpus = 0, after = { "b", "e" } }
job "d" { cmd = "true", cpus = 0, after = "c" }
job "a2" { cmd = "true", cpus = 0, array = 2 }
job "b3" { cmd = "true", cpus = 0, array = 3, after = "a2" }
job "c3" { cmd = "true", cpus = 0, after = "b3" }
job "d3" { cmd = "true", cpus = 0, after = "c3" }`)
		reload(t, d)
	}
	files("true")
	waitJob(t, d, "d", "done", func(js JobStatus) bool { return js.State == "done" })
	if js := waitJob(t, d, "d3", "done", func(js JobStatus) bool { return js.State == "done" }); js.RunsAgainAfter != "" {
		t.Errorf("d3 after c3 after arrays: out of date after %q", js.RunsAgainAfter)
	}
	if js, _ := d.jobStatus("c3"); js.State != "done" || js.RunsAgainAfter != "" {
		t.Errorf("c3 after b3, its range the one it followed: %s, out of date after %q", js.State, js.RunsAgainAfter)
	}
	files("/bin/true")
	waitRuns(t, d, "c", 2)
	waitRuns(t, d, "d", 2)
	waitJob(t, d, "d", "done again", func(js JobStatus) bool { return js.State == "done" && js.RunsAgainAfter == "" })
	for _, name := range []string{"c", "d", "c3", "d3"} {
		want := map[string]int{"c": 2, "d": 2, "c3": 1, "d3": 1}[name]
		if runs := runsOf(t, d, name); len(runs) != want {
			t.Errorf("%s ran %d times, want %d", name, len(runs), want)
		}
	}
}

// TestArrayRetryAt: an array with indices in backoff says when the first
// of them runs again, as a job in backoff does.
func TestArrayRetryAt(t *testing.T) {
	t.Parallel()
	d, clk := fakeTimeDaemon(t, `job "fl" { cmd = "exit 1", cpus = 0, array = 2, restart = "on-failure" }`)
	js := waitJob(t, d, "fl", "in backoff", func(js JobStatus) bool { return js.Array != nil && js.Array.Counts["backoff"] == 2 })
	if js.RetryAt == nil || !js.RetryAt.After(clk.Now()) {
		t.Errorf("fl with 2 indices in backoff: retry_at %v, want when the first runs again, after %v", js.RetryAt, clk.Now())
	}
}

// TestArrayParentEnd: what a dependant is told of how an array parent
// ended is how it rests: an index's failure while it is failed, not once
// the range has lost that index and the array is done.
func TestArrayParentEnd(t *testing.T) {
	t.Parallel()
	d, dir := runDaemon(t, "", nil)
	path := filepath.Join(dir, "jobs.lua")
	const kid = `job "agg" { cmd = "sleep 600", cpus = 0, after = "sweep" }` + "\n"
	testkit.PutFile(t, path, kid+`job "sweep" { cmd = { "sh", "-c", "test $BERTH_ARRAY_INDEX != 3" }, cpus = 0, array = 3 }`)
	reload(t, d)
	waitJob(t, d, "sweep", "failed", func(js JobStatus) bool { return js.State == "failed" })
	parent := func() Dependency {
		t.Helper()
		j, _ := d.lookup(caller{}, "agg")
		if j == nil {
			t.Fatal("no agg")
		}
		detail, _ := d.detail(j)
		if len(detail.Parents) != 1 {
			t.Fatalf("agg's parents: %+v", detail.Parents)
		}
		return detail.Parents[0]
	}
	if p := parent(); p.State != "failed" || p.ExitCode == nil || *p.ExitCode != 1 || p.Reason != "failed" {
		t.Errorf("sweep failed, as agg sees it: %+v", p)
	}
	testkit.PutFile(t, path, kid+`job "sweep" { cmd = { "sh", "-c", "test $BERTH_ARRAY_INDEX != 3" }, cpus = 0, array = 2 }`)
	reload(t, d)
	waitJob(t, d, "agg", "running", func(js JobStatus) bool { return js.State == "running" })
	if p := parent(); p.State != "done" || p.ExitCode == nil || *p.ExitCode != 0 || p.Reason != "exited" {
		t.Errorf("sweep done without its failed index, as agg sees it: %+v", p)
	}
}

// TestArrayIndexGateWhy: an index held at its array's gate says why on
// its own (berth show 'kid[3]'): max_parallel's places all taken, or
// another index of its array is the one in the machine's queue; not that
// it queues behind a job ahead of it.
func TestArrayIndexGateWhy(t *testing.T) {
	t.Parallel()
	d, _ := runDaemon(t, `job "gated" { cmd = "sleep 600", cpus = 0, array = 3, max_parallel = 1 }
job "whole" { cmd = "sleep 600", cpus = 2, array = 3 }`, nil)
	waitJob(t, d, "gated[1]", "running", func(js JobStatus) bool { return js.State == "running" })
	if js := waitJob(t, d, "gated[2]", "waiting", func(js JobStatus) bool { return js.State == "waiting" }); js.Why != msgIndexGated(1) {
		t.Errorf("gated[2] waits: %q, want %q", js.Why, msgIndexGated(1))
	}
	waitJob(t, d, "whole[1]", "running", func(js JobStatus) bool { return js.State == "running" })
	if js := waitJob(t, d, "whole[2]", "waiting", func(js JobStatus) bool { return js.State == "waiting" }); !strings.HasPrefix(js.Why, "needs 2 cores") {
		t.Errorf("whole[2], in the machine's queue: %q", js.Why)
	}
	if js, _ := d.jobStatus("whole[3]"); js.Why != msgIndexBehind("whole[2]") {
		t.Errorf("whole[3] waits: %q, want %q", js.Why, msgIndexBehind("whole[2]"))
	}
}

// TestArrayStoppingKillAt: an array whose indices are being stopped says
// when the last of their SIGKILLs comes, as a job does (trial AI: none).
func TestArrayStoppingKillAt(t *testing.T) {
	t.Parallel()
	out := t.TempDir()
	d, _ := runDaemon(t, `job "sw" { cmd = { "sh", "-c", "trap '' TERM; touch `+out+`/trapped.$BERTH_ARRAY_INDEX; while :; do sleep 0.1; done" }, cpus = 0, array = 2, stop_timeout = "5s" }`, nil)
	waitJob(t, d, "sw", "running", func(js JobStatus) bool { return js.Array != nil && js.Array.Counts["running"] == 2 })
	waitFiles(t, filepath.Join(out, "trapped.1"), filepath.Join(out, "trapped.2"))
	asked := time.Now()
	if code, body := as(t, d, "root", "POST", jobPath("sw")+"/stop"); code != 200 {
		t.Fatalf("stop sw: %d %s", code, body)
	}
	js := waitJob(t, d, "sw", "stopping", func(js JobStatus) bool { return js.Array != nil && js.Array.Counts["stopping"] == 2 })
	if js.KillAt == nil || js.KillAt.Before(asked.Add(5*time.Second)) || js.KillAt.After(time.Now().Add(5*time.Second)) {
		t.Errorf("sw stopping: kill_at %v, want 5 s from its stop", js.KillAt)
	}
}

// TestArrayStopHeldFromRerun: a stop of an array done that was to run
// again after its parent says it is held from that run, as a job's does,
// and a second says it is stopped already (trial BA: "no index to stop").
func TestArrayStopHeldFromRerun(t *testing.T) {
	t.Parallel()
	d, dir := runDaemon(t, "", nil)
	path, next := filepath.Join(dir, "jobs.lua"), filepath.Join(t.TempDir(), "next")
	const arr = `job "arr" { cmd = "true", cpus = 0, after = "p", array = 2 }`
	testkit.PutFile(t, path, `job "p" { cmd = "true", cpus = 0 }`+"\n"+arr)
	reload(t, d)
	waitJob(t, d, "arr", "done", func(js JobStatus) bool { return js.State == "done" })
	testkit.PutFile(t, path, `job "p" { cmd = { "sh", "-c", "while [ ! -e `+next+` ]; do sleep 0.05; done" }, cpus = 0 }`+"\n"+arr)
	reload(t, d)
	waitJob(t, d, "arr", "out of date after p", func(js JobStatus) bool { return js.RunsAgainAfter == "p" })
	stop := func() ControlAnswer {
		t.Helper()
		code, body := as(t, d, "root", "POST", jobPath("arr")+"/stop")
		var ans ControlAnswer
		if err := json.Unmarshal([]byte(body), &ans); code != 200 || err != nil {
			t.Fatalf("stop arr: %d %s", code, body)
		}
		return ans
	}
	if ans := stop(); !ans.HeldFromRerun || ans.Already != "" || ans.Indices != 2 {
		t.Errorf("stop of arr, done and to run again after p: %+v, want held_from_rerun, 2 indices", ans)
	}
	waitJob(t, d, "arr", "stopped", func(js JobStatus) bool { return js.State == "stopped" })
	if ans := stop(); ans.Already != "stopped" || ans.HeldFromRerun || ans.Indices != 0 {
		t.Errorf("stop of arr stopped: %+v, want already stopped", ans)
	}
	if err := writeFile(next, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	waitJob(t, d, "p", "done", func(js JobStatus) bool { return js.State == "done" })
	if js, _ := d.jobStatus("arr"); js.State != "stopped" {
		t.Errorf("arr once p is done: %s, want stopped, held from its rerun", js.State)
	}
}
