package supervisor

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/berthd/berth/supervisor/testkit"
)

func TestMemberName(t *testing.T) {
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
	_ = testkit.WaitFor
	_ = time.Second
}
