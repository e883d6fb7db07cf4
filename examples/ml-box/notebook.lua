-- A notebook server that should always be up. cpus = 0 makes it unaccounted:
-- it never waits and holds nothing, and its thread variables are set to a fair
-- share of the machine instead of all of it.
job "notebook" {
  cmd = { "jupyter", "lab", "--no-browser", "--port", "8888" },
  dir = "/srv/ml",
  cpus = 0,
  restart = "always",
  description = "Shared JupyterLab on :8888",
}
