package supervisor

import (
	"slices"
	"testing"
)

// TestEnvironOf: a run's environment list, its entries taken from the
// daemon's where they are the daemon's, is the list of the environment,
// whatever the run changes, adds or takes away.
func TestEnvironOf(t *testing.T) {
	d := &Daemon{environKV: map[string]string{}}
	d.environ = environMap([]string{"PATH=/usr/bin:/bin", "HOME=/root", "LANG=C.UTF-8", "EMPTY="})
	for k, v := range d.environ {
		d.environKV[k] = k + "=" + v
	}
	for _, env := range []map[string]string{
		{},
		d.environ,
		{"PATH": "/usr/bin:/bin", "HOME": "/home/ml", "OMP_NUM_THREADS": "4"},
		{"PATH": "/usr/bin:/bin:/x", "LANG": "C", "EMPTY": "now set", "BERTH_RUN": "7"},
		{"HOME": "", "PATH=": "odd"},
	} {
		if got, want := d.environOf(env), environList(env); !slices.Equal(got, want) {
			t.Errorf("environOf(%v) = %q, want %q", env, got, want)
		}
	}
}
