package accounting

import (
	"maps"
	"slices"
	"strings"
	"testing"
)

func TestEnv(t *testing.T) {
	threads := func(n string) map[string]string {
		m := map[string]string{}
		for _, v := range ThreadVars {
			m[v] = n
		}
		return m
	}
	with := func(base map[string]string, kv ...string) map[string]string {
		m := maps.Clone(base)
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	grant := Grant{CPUIDs: []int{4, 5, 6, 7}, GPUs: []int{1, 2}}
	tests := []struct {
		name string
		in   EnvInput
		want map[string]string
	}{{
		name: "grant on a machine named by index",
		in:   EnvInput{Job: "train", Run: "17", Grant: grant, Cards: []string{"0", "1", "2", "3"}},
		want: with(threads("4"), "CUDA_VISIBLE_DEVICES", "1,2", "CUDA_DEVICE_ORDER", "PCI_BUS_ID", "BERTH_JOB", "train", "BERTH_RUN", "17", "BERTH_CPUS", "4", "BERTH_GPUS", "1,2"),
	}, {
		// CUDA's own order puts the fastest card first: an index is the
		// books' card only in PCI bus order. A UUID names its card in
		// any order.
		name: "cards named through the daemon's own mask",
		in:   EnvInput{Job: "train", Run: "1", Grant: grant, Cards: []string{"GPU-a", "GPU-b", "GPU-c"}},
		want: with(threads("4"), "CUDA_VISIBLE_DEVICES", "GPU-b,GPU-c", "BERTH_JOB", "train", "BERTH_RUN", "1", "BERTH_CPUS", "4", "BERTH_GPUS", "GPU-b,GPU-c"),
	}, {
		name: "mask of indices: card 0 of the books is device 2",
		in:   EnvInput{Job: "j", Run: "1", Grant: Grant{CPUIDs: []int{2}, GPUs: []int{0}}, Cards: []string{"2", "3"}},
		want: with(threads("1"), "CUDA_VISIBLE_DEVICES", "2", "CUDA_DEVICE_ORDER", "PCI_BUS_ID", "BERTH_JOB", "j", "BERTH_RUN", "1", "BERTH_CPUS", "1", "BERTH_GPUS", "2"),
	}, {
		name: "a share of a card: its card, and the frameworks told their part",
		in: EnvInput{Job: "j", Run: "4", Grant: Grant{CPUIDs: []int{2}, GPUs: []int{1}, GPUMemBytes: 10 * GiB},
			Cards: []string{"0", "1"}, CardMem: []int64{80 * GiB, 80 * GiB}},
		want: with(threads("1"), "CUDA_VISIBLE_DEVICES", "1", "CUDA_DEVICE_ORDER", "PCI_BUS_ID", "XLA_PYTHON_CLIENT_MEM_FRACTION", "0.125", "TF_FORCE_GPU_ALLOW_GROWTH", "true",
			"BERTH_JOB", "j", "BERTH_RUN", "4", "BERTH_CPUS", "1", "BERTH_GPUS", "1", "BERTH_GPU_MEM", "10737418240"),
	}, {
		name: "a share's fraction is rounded down, and its env wins",
		in: EnvInput{Job: "j", Run: "4", Grant: Grant{CPUIDs: []int{2}, GPUs: []int{0}, GPUMemBytes: 20 * GiB},
			Cards: []string{"MIG-x"}, CardMem: []int64{78 * GiB}, Declared: map[string]string{"TF_FORCE_GPU_ALLOW_GROWTH": "false"}},
		want: with(threads("1"), "CUDA_VISIBLE_DEVICES", "MIG-x", "XLA_PYTHON_CLIENT_MEM_FRACTION", "0.256", "TF_FORCE_GPU_ALLOW_GROWTH", "false",
			"BERTH_JOB", "j", "BERTH_RUN", "4", "BERTH_CPUS", "1", "BERTH_GPUS", "MIG-x", "BERTH_GPU_MEM", "21474836480"),
	}, {
		name: "no card asked on a machine with cards sees none",
		in:   EnvInput{Job: "prep", Run: "2", Grant: Grant{CPUIDs: []int{2, 3}}, Cards: []string{"0", "1"}},
		want: with(threads("2"), "CUDA_VISIBLE_DEVICES", "", "BERTH_JOB", "prep", "BERTH_RUN", "2", "BERTH_CPUS", "2", "BERTH_GPUS", ""),
	}, {
		// --gpus 0 under a daemon whose CUDA_VISIBLE_DEVICES names cards:
		// berth hands out none of them, and no job may see them.
		name: "cards kept out of berth's hands are hidden all the same",
		in: EnvInput{Daemon: map[string]string{"CUDA_VISIBLE_DEVICES": "2,3"}, Job: "j", Run: "3", Grant: Grant{CPUIDs: []int{2}},
			HasCards: true},
		want: with(threads("1"), "CUDA_VISIBLE_DEVICES", "", "BERTH_JOB", "j", "BERTH_RUN", "3", "BERTH_CPUS", "1", "BERTH_GPUS", ""),
	}, {
		name: "unaccounted on a machine whose cards are kept out of berth's hands",
		in:   EnvInput{Job: "web", Run: "3", Unaccounted: true, MachineCPUs: 4, UnaccountedJobs: 2, HasCards: true},
		want: with(threads("2"), "CUDA_VISIBLE_DEVICES", "", "BERTH_JOB", "web", "BERTH_RUN", "3", "BERTH_CPUS", "2", "BERTH_GPUS", ""),
	}, {
		name: "a machine without cards leaves the daemon's value alone",
		in:   EnvInput{Daemon: map[string]string{"CUDA_VISIBLE_DEVICES": "-1"}, Job: "j", Run: "3", Grant: Grant{CPUIDs: []int{2}}},
		want: with(threads("1"), "CUDA_VISIBLE_DEVICES", "-1", "BERTH_JOB", "j", "BERTH_RUN", "3", "BERTH_CPUS", "1", "BERTH_GPUS", ""),
	}, {
		name: "the grant overrides the daemon's thread counts",
		in:   EnvInput{Daemon: map[string]string{"OMP_NUM_THREADS": "64", "PATH": "/usr/bin"}, Job: "j", Run: "4", Grant: Grant{CPUIDs: []int{2, 3}}},
		want: with(threads("2"), "PATH", "/usr/bin", "BERTH_JOB", "j", "BERTH_RUN", "4", "BERTH_CPUS", "2", "BERTH_GPUS", ""),
	}, {
		name: "declared env wins over the grant and the daemon",
		in: EnvInput{
			Daemon: map[string]string{"HOME": "/root", "XLA_FLAGS": "--old"},
			Job:    "j", Run: "5", Grant: grant, Cards: []string{"0", "1", "2"},
			Declared: map[string]string{"OMP_NUM_THREADS": "1", "CUDA_VISIBLE_DEVICES": "0,1,2", "XLA_FLAGS": "--xla_gpu_autotune_level=0", "CUDA_DEVICE_ORDER": "FASTEST_FIRST"},
		},
		want: with(threads("4"), "HOME", "/root", "OMP_NUM_THREADS", "1", "CUDA_VISIBLE_DEVICES", "0,1,2", "XLA_FLAGS", "--xla_gpu_autotune_level=0", "CUDA_DEVICE_ORDER", "FASTEST_FIRST",
			"BERTH_JOB", "j", "BERTH_RUN", "5", "BERTH_CPUS", "4", "BERTH_GPUS", "1,2"),
	}, {
		name: "the job's user's login variables over the daemon's; declared env over both",
		in: EnvInput{
			Daemon: map[string]string{"HOME": "/root", "USER": "root", "LOGNAME": "root", "SHELL": "/bin/bash", "PATH": "/usr/bin"},
			Login:  map[string]string{"HOME": "/home/ml", "USER": "ml", "LOGNAME": "ml", "SHELL": "/bin/zsh"},
			Job:    "j", Run: "6", Grant: Grant{CPUIDs: []int{2}},
			Declared: map[string]string{"SHELL": "/bin/dash"},
		},
		want: with(threads("1"), "HOME", "/home/ml", "USER", "ml", "LOGNAME", "ml", "SHELL", "/bin/dash", "PATH", "/usr/bin",
			"BERTH_JOB", "j", "BERTH_RUN", "6", "BERTH_CPUS", "1", "BERTH_GPUS", ""),
	}, {
		name: "PWD is the run's dir, not where the daemon was started",
		in:   EnvInput{Daemon: map[string]string{"PWD": "/home/admin"}, Job: "j", Run: "7", Dir: "/srv/ml", Grant: Grant{CPUIDs: []int{2}}},
		want: with(threads("1"), "PWD", "/srv/ml", "BERTH_JOB", "j", "BERTH_RUN", "7", "BERTH_CPUS", "1", "BERTH_GPUS", ""),
	}, {
		name: "a declared PWD wins over the run's dir",
		in:   EnvInput{Job: "j", Run: "7", Dir: "/srv/ml", Grant: Grant{CPUIDs: []int{2}}, Declared: map[string]string{"PWD": "/x"}},
		want: with(threads("1"), "PWD", "/x", "BERTH_JOB", "j", "BERTH_RUN", "7", "BERTH_CPUS", "1", "BERTH_GPUS", ""),
	}, {
		// The loader refuses these; should one get through, a job that
		// renamed its run would hide its escaped processes from the sweep.
		name: "declared env cannot set berth's own variables",
		in: EnvInput{
			Job: "j", Run: "5", Grant: Grant{CPUIDs: []int{2}},
			Declared: map[string]string{"BERTH_RUN": "1", "BERTH_JOB": "other", "BERTH_CPUS": "64", "BERTH_GPUS": "0", "BERTH_ANYTHING": "x", "BERTHA": "ok"},
		},
		want: with(threads("1"), "BERTHA", "ok", "BERTH_JOB", "j", "BERTH_RUN", "5", "BERTH_CPUS", "1", "BERTH_GPUS", ""),
	}, {
		name: "unaccounted: fair share of the machine's cores",
		in:   EnvInput{Job: "web", Run: "6", Unaccounted: true, MachineCPUs: 14, UnaccountedJobs: 4, Cards: []string{"0"}},
		want: with(threads("3"), "CUDA_VISIBLE_DEVICES", "", "BERTH_JOB", "web", "BERTH_RUN", "6", "BERTH_CPUS", "3", "BERTH_GPUS", ""),
	}, {
		name: "unaccounted: at least one thread",
		in:   EnvInput{Job: "web", Run: "7", Unaccounted: true, MachineCPUs: 2, UnaccountedJobs: 50},
		want: with(threads("1"), "BERTH_JOB", "web", "BERTH_RUN", "7", "BERTH_CPUS", "1", "BERTH_GPUS", ""),
	}, {
		name: "unaccounted: the daemon's own thread counts stand",
		in:   EnvInput{Daemon: map[string]string{"OMP_NUM_THREADS": "8", "GOMAXPROCS": "2"}, Job: "web", Run: "8", Unaccounted: true, MachineCPUs: 6, UnaccountedJobs: 1},
		want: with(threads("6"), "OMP_NUM_THREADS", "8", "GOMAXPROCS", "2", "BERTH_JOB", "web", "BERTH_RUN", "8", "BERTH_CPUS", "6", "BERTH_GPUS", ""),
	}, {
		name: "unaccounted: a thread count the daemon set to no count says nothing, and the share is given",
		in: EnvInput{Daemon: map[string]string{"OMP_NUM_THREADS": "", "GOMAXPROCS": " ", "MKL_NUM_THREADS": "0", "BLIS_NUM_THREADS": "-1", "NUMBA_NUM_THREADS": "abc"},
			Job: "web", Run: "8", Unaccounted: true, MachineCPUs: 6, UnaccountedJobs: 2},
		want: with(threads("3"), "BERTH_JOB", "web", "BERTH_RUN", "8", "BERTH_CPUS", "3", "BERTH_GPUS", ""),
	}, {
		name: "unaccounted with no jobs counted still divides safely",
		in:   EnvInput{Job: "web", Run: "9", Unaccounted: true, MachineCPUs: 6},
		want: with(threads("6"), "BERTH_JOB", "web", "BERTH_RUN", "9", "BERTH_CPUS", "6", "BERTH_GPUS", ""),
	}}
	// What berth sets of its own names is what RunVars lists (berth show
	// marks those, and no other BERTH_ name, as berth's).
	for _, tt := range tests {
		for k := range tt.want {
			if strings.HasPrefix(k, ReservedPrefix) && !slices.Contains(RunVars, k) {
				t.Errorf("%s: Env sets %s, which RunVars does not list", tt.name, k)
			}
		}
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Env(tt.in)
			for k, v := range tt.want {
				if g, ok := got[k]; !ok || g != v {
					t.Errorf("%s = %q (set %v), want %q", k, g, ok, v)
				}
			}
			for k, v := range got {
				if _, ok := tt.want[k]; !ok {
					t.Errorf("unexpected %s=%q", k, v)
				}
			}
		})
	}
}

func TestEnvDoesNotModifyInputs(t *testing.T) {
	daemon := map[string]string{"PATH": "/bin"}
	declared := map[string]string{"A": "1"}
	Env(EnvInput{Daemon: daemon, Declared: declared, Job: "j", Run: "1"})
	if len(daemon) != 1 || len(declared) != 1 {
		t.Fatalf("inputs changed: %v %v", daemon, declared)
	}
}
