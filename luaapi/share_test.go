package luaapi

import (
	"testing"

	"github.com/berthd/berth/accounting"
)

// TestGPUMemDecoded: gpu_mem asks a share of one card, directly or
// through a flavor, and is a quota's bound on shares.
func TestGPUMemDecoded(t *testing.T) {
	f := evalString(t, `
flavor "gpu-slice" { cpus = 2, gpu_mem = "10G" }
job "infer" { cmd = "./serve", gpu_mem = "20G", ram = "8G" }
job "small" { cmd = "./serve", flavor = "gpu-slice" }
`)
	if len(f.Errors) > 0 {
		t.Fatal(f.Errors)
	}
	if want := (accounting.Resources{CPUs: 2, GPUMemBytes: 10 * accounting.GiB}); f.Flavors[0].Resources != want {
		t.Errorf("flavor %+v, want %+v", f.Flavors[0].Resources, want)
	}
	if want := (accounting.Resources{CPUs: 1, GPUMemBytes: 20 * accounting.GiB, RAMBytes: 8 * accounting.GiB}); f.Jobs[0].Resources != want {
		t.Errorf("infer %+v, want %+v", f.Jobs[0].Resources, want)
	}
	set := Combine([]*File{f})
	for _, j := range set.Jobs {
		if j.Name == "small" && j.Resources.GPUMemBytes != 10*accounting.GiB {
			t.Errorf("small through its flavor: %+v", j.Resources)
		}
	}
}

// A share is what the process is: a new gpu_mem restarts the run.
func TestGPUMemFingerprint(t *testing.T) {
	a := newJob("infer", Pos{})
	a.Cmd = []string{"./serve"}
	b := a.clone()
	b.Resources.GPUMemBytes = 20 * accounting.GiB
	c := b.clone()
	c.Resources.GPUMemBytes = 30 * accounting.GiB
	if a.ProcessFingerprint() == b.ProcessFingerprint() || b.ProcessFingerprint() == c.ProcessFingerprint() {
		t.Error("gpu_mem is not part of the process fingerprint")
	}
}
