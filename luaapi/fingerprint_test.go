package luaapi

import (
	"reflect"
	"strings"
	"testing"
)

const fingerprintBase = `
flavor "gpu-small" { cpus = 8, gpus = 1, ram = "32G" }
job "train" {
  cmd = { "python3", "train.py" },
  dir = "/srv/ml",
  env = { A = "1", B = "2" },
  user = "ml",
  flavor = "gpu-small",
  restart = "on-failure",
  max_restarts = 3,
  timeout = "1h",
  stop_signal = "INT",
  stop_timeout = "20s",
  priority = 5,
  on_change = "restart",
  enabled = true,
  description = "d",
}
job "direct" { cmd = "make", cpus = 2, ram = "1G" }
`

// fingerprints evaluates src and combines it, as the daemon does, and
// returns the process and policy fingerprints of the named job.
func fingerprints(t *testing.T, src, name string) (string, string) {
	t.Helper()
	set := Combine([]*File{mustEval(t, src)})
	for _, j := range set.Jobs {
		if j.Name == name {
			return j.ProcessFingerprint(), j.PolicyFingerprint()
		}
	}
	t.Fatalf("no job %q", name)
	return "", ""
}

func TestEvalIsDeterministic(t *testing.T) {
	for _, src := range []string{fingerprintBase, `job "x" { cmd = "x", gpu = 1 }`} {
		a, b := evalString(t, src), evalString(t, src)
		if !reflect.DeepEqual(a, b) {
			t.Errorf("two evaluations differ:\n%+v\n%+v", a, b)
		}
	}
	p1, q1 := fingerprints(t, fingerprintBase, "train")
	p2, q2 := fingerprints(t, fingerprintBase, "train")
	if p1 != p2 || q1 != q2 {
		t.Errorf("fingerprints differ between loads")
	}
	if len(p1) != 64 || p1 == q1 {
		t.Errorf("fingerprints %q %q", p1, q1)
	}
}

func TestFingerprints(t *testing.T) {
	baseProc, basePolicy := fingerprints(t, fingerprintBase, "train")
	directProc, _ := fingerprints(t, fingerprintBase, "direct")
	tests := []struct {
		name          string
		old, new      string
		job           string
		process, pol  bool // which fingerprint changes
		directProcess bool
	}{
		{"restart", `restart = "on-failure"`, `restart = "always"`, "train", false, true, false},
		{"max_restarts", `max_restarts = 3`, `max_restarts = 4`, "train", false, true, false},
		{"timeout", `timeout = "1h"`, `timeout = "2h"`, "train", false, true, false},
		{"stop_signal", `stop_signal = "INT"`, `stop_signal = "TERM"`, "train", false, true, false},
		{"stop_timeout", `stop_timeout = "20s"`, `stop_timeout = "21s"`, "train", false, true, false},
		{"priority", `priority = 5`, `priority = 6`, "train", false, true, false},
		{"on_change", `on_change = "restart"`, `on_change = "finish"`, "train", false, true, false},
		{"enabled", `enabled = true`, `enabled = false`, "train", false, true, false},
		{"description", `description = "d"`, `description = "e"`, "train", false, true, false},
		{"same signal spelled differently", `stop_signal = "INT"`, `stop_signal = "sigint"`, "train", false, false, false},
		{"cmd", `"train.py" }`, `"train.py", "--fast" }`, "train", true, false, false},
		{"cmd split differently", `{ "python3", "train.py" }`, `{ "python3 train.py" }`, "train", true, false, false},
		{"dir", `dir = "/srv/ml"`, `dir = "/srv/ml2"`, "train", true, false, false},
		{"env value", `B = "2"`, `B = "3"`, "train", true, false, false},
		{"env key", `B = "2"`, `C = "2"`, "train", true, false, false},
		{"env order", `env = { A = "1", B = "2" }`, `env = { B = "2", A = "1" }`, "train", false, false, false},
		{"user", `user = "ml"`, `user = "ml2"`, "train", true, false, false},
		{"flavor name", `flavor "gpu-small" { cpus = 8, gpus = 1, ram = "32G" }
job "train" {`, `flavor "gpu-small" { cpus = 8, gpus = 1, ram = "32G" }
flavor "gpu-other" { cpus = 8, gpus = 1, ram = "32G" }
job "train" {`, "train", false, false, false},
		{"flavor numbers", `{ cpus = 8, gpus = 1, ram = "32G" }`, `{ cpus = 16, gpus = 2, ram = "64G" }`, "train", false, false, false},
		{"direct resources", `cpus = 2, ram = "1G"`, `cpus = 3, ram = "1G"`, "direct", false, false, true},
		{"swap", `cpus = 2, ram = "1G"`, `cpus = 2, ram = "1G", swap = "2G"`, "direct", false, false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if !strings.Contains(fingerprintBase, tt.old) {
				t.Fatalf("%q not in the base", tt.old)
			}
			src := strings.Replace(fingerprintBase, tt.old, tt.new, 1)
			proc, policy := fingerprints(t, src, "train")
			dproc, _ := fingerprints(t, src, "direct")
			if (proc != baseProc) != tt.process {
				t.Errorf("process fingerprint changed: %v, want %v", proc != baseProc, tt.process)
			}
			if (policy != basePolicy) != tt.pol {
				t.Errorf("policy fingerprint changed: %v, want %v", policy != basePolicy, tt.pol)
			}
			if (dproc != directProc) != tt.directProcess {
				t.Errorf("direct process fingerprint changed: %v, want %v", dproc != directProc, tt.directProcess)
			}
		})
	}
	// Using another flavor by name changes what the process is, even when
	// the two flavors have the same numbers.
	src := strings.Replace(fingerprintBase, `flavor "gpu-small" {`, `flavor "gpu-other" { cpus = 8, gpus = 1, ram = "32G" }
flavor "gpu-small" {`, 1)
	src = strings.Replace(src, `flavor = "gpu-small"`, `flavor = "gpu-other"`, 1)
	if proc, _ := fingerprints(t, src, "train"); proc == baseProc {
		t.Errorf("changing the flavor name kept the process fingerprint")
	}
}

// TestFingerprintsStay: a definition's process fingerprint is stored (a
// done batch job stays done for the same definition), so a field added
// later must leave the fingerprints of definitions that do not use it as
// they were. Pinned, so that such a change fails here first.
func TestFingerprintsStay(t *testing.T) {
	if p, _ := fingerprints(t, fingerprintBase, "direct"); p != "d9e5bb1bc57f8813143b066d0bcbd4e5ab63a2f9a7a9af4343a5e7a1cb3647d6" {
		t.Errorf("the process fingerprint of an unchanged definition changed: %s", p)
	}
}
