package supervisor

import (
	"maps"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"testing"

	"github.com/berthd/berth/accounting"
)

// TestEnvironOver: a run's environment list, merged from the daemon's
// sorted entries and what the run lays over them, is the list of the
// whole environment accounting.Env gives, whatever the run replaces or
// adds, and wherever its keys sort among the daemon's.
func TestEnvironOver(t *testing.T) {
	t.Parallel()
	daemonEnvs := []map[string]string{
		{},
		{"PATH": "/usr/bin:/bin", "HOME": "/root", "LANG": "C.UTF-8", "EMPTY": ""},
		{"A": "first", "OMP_NUM_THREADS": "3", "PATH": "/bin", "PATH2": "x", "zz": "last", "_": "/usr/bin/env"},
	}
	inputs := []accounting.EnvInput{
		{Job: "plain", Run: "1", Grant: accounting.Grant{CPUIDs: []int{0, 1}}},
		{Job: "login", Run: "2", Login: map[string]string{"HOME": "/home/ml", "USER": "ml", "LOGNAME": "ml", "SHELL": "/bin/sh"}},
		{Job: "declared", Run: "3", Declared: map[string]string{"PATH": "/opt/bin", "A": "", "AA": "between", "BERTH_RUN": "hidden", "~": "after all"}},
		// An unaccounted job keeps a thread count the daemon was given.
		{Job: "unaccounted", Run: "4", Unaccounted: true, MachineCPUs: 8, UnaccountedJobs: 3},
		{Job: "cards", Run: "5", Cards: []string{"0", "1"}, CardMem: []int64{1 << 30, 1 << 30},
			Grant: accounting.Grant{CPUIDs: []int{2}, GPUs: []int{1}, GPUMemBytes: 1 << 28}},
		{Job: "array", Run: "6", Array: &accounting.ArrayIndex{Index: 2, Size: 5}, HasCards: true},
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 200 {
		// Random keys from a small alphabet collide with each other and
		// with the derived variables' places in the order.
		declared := map[string]string{}
		for range rng.IntN(6) {
			declared[randomKey(rng)] = strconv.Itoa(rng.IntN(100))
		}
		inputs = append(inputs, accounting.EnvInput{Job: "random", Run: "7", Declared: declared,
			Login: map[string]string{randomKey(rng): "login"}})
	}
	for _, daemonEnv := range daemonEnvs {
		d := &Daemon{environ: daemonEnv, environKeys: slices.Sorted(maps.Keys(daemonEnv)), environKV: environList(daemonEnv)}
		for _, in := range inputs {
			in.Daemon = daemonEnv
			if got, want := d.environOver(accounting.EnvOver(in)), environList(accounting.Env(in)); !slices.Equal(got, want) {
				t.Errorf("daemon %v, job %s: environOver = %q, want %q", daemonEnv, in.Job, got, want)
			}
		}
	}
}

func randomKey(rng *rand.Rand) string {
	const letters = "AOPZ_a"
	b := make([]byte, 1+rng.IntN(3))
	for i := range b {
		b[i] = letters[rng.IntN(len(letters))]
	}
	return string(b)
}

// BenchmarkRunEnvironment: what a run's environment costs the daemon
// beside the fork, with this process's environment as the daemon's.
func BenchmarkRunEnvironment(b *testing.B) {
	env := environMap(os.Environ())
	d := &Daemon{environ: env, environKeys: slices.Sorted(maps.Keys(env)), environKV: environList(env)}
	in := accounting.EnvInput{Daemon: env, Job: "train", Run: "1234", Grant: accounting.Grant{CPUIDs: []int{1}}, MachineCPUs: 2}
	b.ReportAllocs()
	for b.Loop() {
		over := accounting.EnvOver(in)
		over["BERTH_INSTANCE"] = "0123456789abcdef"
		_ = d.environOver(over)
	}
}
