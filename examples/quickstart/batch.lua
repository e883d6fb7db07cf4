-- Short batch jobs: each runs once, to completion, and is then `done`.
-- berth will not run a done job again when the daemon restarts; an edit to
-- what the job runs (its cmd, env, dir, size…) or `berth restart JOB` does.

job "hello" {
  cmd = "echo hello from $BERTH_JOB, run $BERTH_RUN, with $OMP_NUM_THREADS threads",
  flavor = "small",
  description = "A string cmd runs under /bin/sh -c",
}

-- A list cmd is an argv: no shell, no quoting surprises.
job "count" {
  cmd = { "seq", "1", "5" },
  flavor = "small",
}

-- Files are programs: this loop declares three jobs, chunk-1 … chunk-3.
for i = 1, 3 do
  job ("chunk-" .. i) {
    cmd = { "sh", "-c", "echo chunk " .. i .. ", cores granted: $BERTH_CPUS; sleep 2" },
    flavor = "small",
    priority = 10 - i,       -- higher goes first when they must wait
  }
end

-- The same, as an array: one job of six indices, sweep[1] … sweep[6], at
-- most two at a time, one line in berth status. Each index sees
-- BERTH_ARRAY_INDEX and BERTH_ARRAY_SIZE (berth show sweep, berth logs
-- sweep --index 3).
job "sweep" {
  cmd = "echo seed $BERTH_ARRAY_INDEX of $BERTH_ARRAY_SIZE; sleep 1",
  flavor = "small",
  array = 6,
  max_parallel = 2,
}
