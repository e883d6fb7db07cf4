-- A sweep: the same script over 20 seeds, at most 4 at a time, and a
-- report once every seed is done.
--
-- `array = 20` makes one job of 20 indices, named sweep[1] … sweep[20].
-- Each index is its own run with its own placement (here a core each),
-- and sees BERTH_ARRAY_INDEX (1 … 20) and BERTH_ARRAY_SIZE (20).
-- `max_parallel = 4` lets at most 4 of them hold a place at once; the
-- others wait in line, and the array takes one job's place in the
-- machine's queue, so a sweep never crowds out the jobs that came after it.
--
-- berth status shows the array on one line (sweep  array  7 done · 4 running
-- · 9 waiting); berth show sweep lists the indices by state;
-- berth logs sweep --index 7 is one index's output; berth restart sweep
-- --failed runs the failed indices again. Each index runs once per
-- definition: a daemon restart reruns none that finished, an edit of cmd
-- reruns them all, and a larger array runs only the new indices.
--
-- The commands are harmless stand-ins: replace them with your own.

-- In the job user's home: a fixed name in /tmp would be anyone's to make first.
local out = '"$HOME"/berth-sweep'

job "sweep" {
  cmd = { "sh", "-c", "mkdir -p " .. out .. " && echo $(( BERTH_ARRAY_INDEX * BERTH_ARRAY_INDEX )) > " .. out .. "/seed-$BERTH_ARRAY_INDEX.txt" },
  cpus = 1,
  array = 20,           -- or { from = 0, to = 19 }
  max_parallel = 4,
  description = "One training run per seed",
}

-- An array as a parent: after waits for every index to be done.
job "summary" {
  cmd = { "sh", "-c", "cat " .. out .. "/seed-*.txt | awk '{ s += $1 } END { print \"sum of squares:\", s }'" },
  cpus = 1,
  after = "sweep",
  description = "Gather what the sweep wrote",
}
