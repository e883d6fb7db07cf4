-- Long-running services: string commands, policies, env with numbers.
local function service(name, port, extra)
  local t = {
    cmd = string.format("exec ./serve --port %d", port),
    dir = "/srv/" .. name,
    env = { PORT = port, RATIO = 0.5, NAME = name, SEED = 2^53 },
    restart = "always",
    stop_signal = "term",
    stop_timeout = "1m30s",
    on_change = "finish",
    cpus = 0,
  }
  for k, v in pairs(extra or {}) do t[k] = v end
  job (name) (t)
end

service("api", 8080)
service("metrics.exporter", 9100, { enabled = false, priority = -5, description = "node metrics" })

job "nightly-report" {
  cmd = { "/usr/local/bin/report", "--since", "1d" },
  timeout = "2d",
  user = "reports",
  max_restarts = 0,
  restart = "no",
}

print("declared services on", machine.hostname)
