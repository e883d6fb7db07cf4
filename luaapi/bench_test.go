package luaapi

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// benchFile is a realistic job file of about 20 lines: a flavor or two and
// a handful of jobs, some in a loop.
const benchFile = `-- file %[1]d
flavor "gpu-%[1]d" { cpus = 8, gpus = 1, ram = "32G" }
flavor "cpu-%[1]d" { cpus = 4, ram = "8G" }

job "train-%[1]d" {
  cmd = { "python3", "train.py", "--epochs", "90" },
  dir = "/srv/ml/%[1]d",
  flavor = "gpu-%[1]d",
  env = { WANDB_MODE = "offline", SEED = %[1]d },
  restart = "on-failure",
  timeout = "12h",
  stop_timeout = "30s",
  description = "training run %[1]d",
}

for i = 1, 3 do
  job (string.format("sweep-%[1]d-%%d", i)) { cmd = { "python3", "sweep.py", tostring(i) }, flavor = "cpu-%[1]d" }
end

job "serve-%[1]d" { cmd = "exec ./serve --port " .. (8000 + %[1]d), cpus = 0 }
`

func BenchmarkLoad1000(b *testing.B) {
	dir := b.TempDir()
	for i := range 1000 {
		src := fmt.Sprintf(benchFile, i)
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("%04d.lua", i)), []byte(src), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	opts := Options{Machine: testMachine}
	for b.Loop() {
		set := loadDir(b, dir, opts)
		if len(set.Errors)+len(set.Problems) > 0 || len(set.Jobs) != 5000 {
			b.Fatalf("%d jobs, errors %v %v", len(set.Jobs), set.Errors, set.Problems)
		}
	}
}
