-- A pipeline: prepare → train → evaluate, with a service beside it.
--
-- `after = "prepare"` makes train wait until prepare's latest run of its
-- current definition ended with exit 0; until then train is `waiting`, and
-- berth status says what for ("after prepare (running, started 14:02)").
-- A parent that fails holds its dependants ("after prepare, which failed
-- (exit 3); runs when prepare succeeds"); they run once it succeeds.
--
-- Each job runs once per definition. Edit prepare (its cmd, env, dir, size…)
-- and once it has run the new definition to exit 0, train and then
-- evaluate run again after it; edit evaluate and only evaluate runs again.
-- `berth restart prepare` with the same definition re-runs prepare alone.
-- `berth start evaluate --ignore-deps` runs a held job once, now.
--
-- The commands are harmless stand-ins: replace them with your own.

-- The jobs hand their files on in their user's home (a fixed name in /tmp
-- would be anyone's to make first); $HOME is the job user's.
local data = '"$HOME"/berth-pipeline'

job "prepare" {
  cmd = { "sh", "-c", "mkdir -p " .. data .. " && seq 1 1000 > " .. data .. "/numbers.txt" },
  cpus = 1,
  description = "Fetch and clean the data set",
}

job "train" {
  cmd = { "sh", "-c", "awk '{ s += $1 } END { print s }' " .. data .. "/numbers.txt > " .. data .. "/model.txt" },
  cpus = 1,
  after = "prepare",
  description = "Fit the model on what prepare wrote",
}

job "evaluate" {
  cmd = { "sh", "-c", "test \"$(cat " .. data .. "/model.txt)\" = 500500 && echo model ok" },
  cpus = 1,
  after = { "train" },
  description = "Check the model",
}

-- after_any waits until the parents ended, whatever the result: a report
-- that runs whether or not the evaluation passed. It waits once: when
-- evaluate runs again later (after an edit upstream), report does not;
-- berth restart report runs it again.
job "report" {
  cmd = { "sh", "-c", "ls -l " .. data },
  cpus = 0,
  after_any = { "evaluate" },
  description = "Say what the pipeline left behind",
}

-- A service as a parent means "running": this job starts once the
-- service runs, and is not held while the service is restarted later.
job "cache" {
  cmd = { "sleep", "86400" },
  cpus = 0,
  restart = "always",
  description = "A stand-in for a database or a cache server",
}

job "warm-cache" {
  cmd = { "echo", "cache warmed" },
  cpus = 0,
  after = "cache",
}
