-- A long-running service: restarted whenever it ends, with delays that grow
-- from 1 s to 1 min while it keeps failing, and start over once it has stayed
-- up for a minute.
job "ticker" {
  cmd = { "sh", "-c", "while true; do date; sleep 5; done" },
  cpus = 1,
  restart = "always",
  stop_signal = "SIGTERM",   -- what `berth stop ticker` sends first…
  stop_timeout = "5s",       -- …and how long it waits before SIGKILL
  description = "Prints the time every five seconds",
}
