package luaapi

import (
	"reflect"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/berthd/berth/accounting"
)

func TestLoadValid(t *testing.T) {
	set := loadDir(t, "testdata/valid", testOptions())
	for _, e := range append(set.Errors, set.Problems...) {
		t.Errorf("unexpected: %v", e)
	}
	var paths []string
	for _, f := range set.Files {
		paths = append(paths, f.Path)
		if len(f.Hash) != 64 {
			t.Errorf("%s: hash %q", f.Path, f.Hash)
		}
	}
	wantPaths := []string{"testdata/valid/empty.lua", "testdata/valid/ml.lua", "testdata/valid/services.lua", "testdata/valid/shared.lua"}
	if !reflect.DeepEqual(paths, wantPaths) {
		t.Errorf("files %q, want %q", paths, wantPaths)
	}

	gpuSmall := accounting.Resources{CPUs: 8, GPUs: 1, RAMBytes: 32 * accounting.GiB}
	wantFlavors := []Flavor{
		{Name: "cpu-large", Pos: Pos{"testdata/valid/shared.lua", 3}, Resources: accounting.Resources{CPUs: 16, RAMBytes: 64 * accounting.GiB}},
		{Name: "gpu-pair", Pos: Pos{"testdata/valid/shared.lua", 4}, Resources: accounting.Resources{CPUs: 16, GPUs: 2, RAMBytes: 3 * accounting.TiB / 2}},
		{Name: "gpu-small", Pos: Pos{"testdata/valid/ml.lua", 2}, Resources: gpuSmall},
		{Name: "tiny", Pos: Pos{"testdata/valid/shared.lua", 5}, Resources: accounting.Resources{CPUs: 1}},
	}
	if !reflect.DeepEqual(set.Flavors, wantFlavors) {
		t.Errorf("flavors\n got %+v\nwant %+v", set.Flavors, wantFlavors)
	}

	jobs := make(map[string]Job)
	var names []string
	for _, j := range set.Jobs {
		jobs[j.Name] = j
		names = append(names, j.Name)
	}
	wantNames := []string{"0-first", "api", "big-eval", "finetune", "metrics.exporter", "nightly-report",
		"preprocess", "random-port", "sweep-1", "sweep-2", "sweep-3", "sweep-4", "train-resnet"}
	if !reflect.DeepEqual(names, wantNames) {
		t.Fatalf("jobs %q, want %q", names, wantNames)
	}

	ml := func(line int) Pos { return Pos{"testdata/valid/ml.lua", line} }
	svc := func(line int) Pos { return Pos{"testdata/valid/services.lua", line} }
	shared := func(line int) Pos { return Pos{"testdata/valid/shared.lua", line} }
	job := func(name string, pos Pos, edit func(*Job)) Job {
		j := newJob(name, pos)
		edit(&j)
		return j
	}
	service := func(name string, port int, edit func(*Job)) Job {
		return job(name, svc(14), func(j *Job) {
			j.Cmd = []string{"/bin/sh", "-c", "exec ./serve --port " + strconv.Itoa(port)}
			j.Dir = "/srv/" + name
			j.Env = map[string]string{"PORT": strconv.Itoa(port), "RATIO": "0.5", "NAME": name, "SEED": "9007199254740992"}
			j.Restart = RestartAlways
			j.StopSignal = syscall.SIGTERM
			j.StopTimeout = 90 * time.Second
			j.OnChange = OnChangeFinish
			j.Resources = accounting.Resources{}
			edit(j)
		})
	}
	sweep := func(seed string) Job {
		return job("sweep-"+seed, ml(23), func(j *Job) {
			j.Cmd = []string{"python3", "sweep.py", "--seed", seed}
			j.Resources = accounting.Resources{CPUs: 2, GPUs: 1}
		})
	}
	tests := []Job{
		job("train-resnet", ml(4), func(j *Job) {
			j.Cmd = []string{"python3", "train.py", "--epochs", "90"}
			j.Dir = "/srv/ml/resnet"
			j.Flavor = "gpu-small"
			j.Resources = gpuSmall
			j.Env = map[string]string{"WANDB_MODE": "offline"}
			j.User, j.Group = "ml", "ml"
			j.Restart = RestartOnFailure
			j.MaxRestarts = 5
			j.Timeout = 12 * time.Hour
			j.StopSignal = syscall.SIGINT
			j.StopTimeout = 30 * time.Second
			j.Priority = 10
			j.OnChange = OnChangeRestart
			j.Enabled = true
			j.Description = "ResNet-50, 90 epochs"
		}),
		sweep("1"), sweep("2"), sweep("3"), sweep("4"),
		job("big-eval", ml(27), func(j *Job) {
			j.Cmd = []string{"/bin/sh", "-c", "python3 eval.py --all"}
			j.Resources = accounting.Resources{CPUs: 16, GPUs: 4, RAMBytes: 64 * accounting.GiB}
		}),
		service("api", 8080, func(*Job) {}),
		service("metrics.exporter", 9100, func(j *Job) {
			j.Enabled = false
			j.Priority = -5
			j.Description = "node metrics"
		}),
		job("nightly-report", svc(20), func(j *Job) {
			j.Cmd = []string{"/usr/local/bin/report", "--since", "1d"}
			j.Timeout = 48 * time.Hour
			j.User = "reports"
			j.MaxRestarts = 0
		}),
		job("finetune", shared(10), func(j *Job) {
			j.Cmd = []string{"python3", "finetune.py", "--layer=1,--layer=2,--layer=3"}
			j.Flavor = "gpu-small"
			j.Resources = gpuSmall
			j.Env = map[string]string{"RUN": "run-07", "TAG": "a_b_c"}
		}),
		job("preprocess", shared(16), func(j *Job) {
			j.Cmd = []string{"make", "data"}
			j.Flavor = "cpu-large"
			j.Resources = accounting.Resources{CPUs: 16, RAMBytes: 64 * accounting.GiB}
			j.Priority = 1000
		}),
		job("0-first", shared(17), func(j *Job) {
			j.Cmd = []string{"/bin/sh", "-c", "true"}
			j.Flavor = "tiny"
		}),
	}
	for _, want := range tests {
		t.Run(want.Name, func(t *testing.T) {
			got := jobs[want.Name]
			got.Order, got.Lines = 0, FieldLines{} // below
			if !reflect.DeepEqual(got, want) {
				t.Errorf("\n got %+v\nwant %+v", got, want)
			}
		})
	}
	// Each job's place among its file's declarations, whatever its name.
	for name, want := range map[string]int{"finetune": 0, "preprocess": 1, "0-first": 2} {
		if got := jobs[name].Order; got != want {
			t.Errorf("%s: Order %d, want %d (shared.lua declares it %s)", name, got, want, []string{"first", "second", "third"}[want])
		}
	}

	// Where the fields that later checks may find wrong were written, for
	// a table written at its declaration.
	for _, c := range []struct {
		job, field string
		line       int
	}{{"nightly-report", "user", 23}, {"finetune", "flavor", 12}, {"finetune", "after", 0}, {"api", "flavor", 0}} {
		if got := jobs[c.job].Lines.of(c.field); got != c.line {
			t.Errorf("%s: %s on line %d, want %d", c.job, c.field, got, c.line)
		}
	}

	// math.random is seeded from the file: a port in range, the same on
	// every load.
	port := jobs["random-port"].Cmd[2]
	if n, err := strconv.Atoi(port); err != nil || n < 20000 || n > 30000 {
		t.Errorf("random port %q", port)
	}
	again := loadDir(t, "testdata/valid", testOptions())
	if !reflect.DeepEqual(again, set) {
		t.Errorf("a second load differs")
	}
}

// The first evaluation of a file leaves flavored jobs unresolved; Combine
// resolves them.
func TestEvalLeavesFlavorUnresolved(t *testing.T) {
	f := mustEval(t, `
flavor "gpu" { cpus = 4, gpus = 1 }
job "a" { cmd = "x", flavor = "gpu" }
`)
	if got := f.Jobs[0].Resources; got != (accounting.Resources{}) {
		t.Errorf("Eval resolved resources: %v", got)
	}
	set := Combine([]*File{f})
	if got := set.Jobs[0].Resources; got != (accounting.Resources{CPUs: 4, GPUs: 1}) {
		t.Errorf("Combine resources: %v", got)
	}
	if f.Jobs[0].Resources != (accounting.Resources{}) {
		t.Errorf("Combine modified its input")
	}
}

// TestHeldBytes: every string a definition holds counts toward what the
// daemon bounds per person, not cmd and env alone: a person's files of
// long descriptions took a daemon to gigabytes.
func TestHeldBytes(t *testing.T) {
	base := Job{Cmd: []string{"true"}, Dir: "/"}
	for _, c := range []struct {
		name string
		set  func(j *Job)
		more int
	}{
		{"description", func(j *Job) { j.Description = strings.Repeat("d", 4000) }, 4000},
		{"dir", func(j *Job) { j.Dir = "/" + strings.Repeat("a", 4000) }, 4000},
		{"after", func(j *Job) { j.After = []string{strings.Repeat("p", 60), "q"} }, 61 + 2*48},
		{"after_any", func(j *Job) { j.AfterAny = []string{"q"} }, 1 + 48},
		{"user and group", func(j *Job) { j.User, j.Group = "ml", "gpu" }, 5},
		{"flavor", func(j *Job) { j.Flavor = "small" }, 5},
		{"env", func(j *Job) { j.Env = map[string]string{"A": "bc"} }, 3 + 2*48},
	} {
		j := base
		c.set(&j)
		if got := j.HeldBytes() - base.HeldBytes(); got != c.more {
			t.Errorf("%s: %d more bytes held, want %d", c.name, got, c.more)
		}
	}
}
