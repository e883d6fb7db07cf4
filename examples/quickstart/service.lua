-- A long-running service: restarted whenever it ends, with delays that grow
-- from 1 s to 1 min while it keeps failing, and start over once it has stayed
-- up for a minute.
--
-- It mostly sleeps, so it asks for no core of its own: cpus = 0 makes it
-- unaccounted. It never waits and holds nothing, and it is told a fair
-- share of the machine's threads instead of all of them. A job that does
-- real work should ask for its cores, so that it waits for them.
job "ticker" {
  cmd = { "sh", "-c", "while true; do date; sleep 5; done" },
  cpus = 0,
  restart = "always",
  stop_signal = "SIGTERM",   -- what `berth stop ticker` sends first…
  stop_timeout = "5s",       -- …and how long it waits before SIGKILL
  description = "Prints the time every five seconds",
}
