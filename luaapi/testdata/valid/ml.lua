-- The example from DESIGN.md, as a person would write it.
flavor "gpu-small" { cpus = 8, gpus = 1, ram = "32G" }

job "train-resnet" {
  cmd     = { "python3", "train.py", "--epochs", "90" },
  dir     = "/srv/ml/resnet",
  flavor  = "gpu-small",
  env     = { WANDB_MODE = "offline" },
  user    = "ml",
  group   = "ml",
  restart = "on-failure",
  max_restarts = 5,
  timeout = "12h",
  stop_signal  = "SIGINT",
  stop_timeout = "30s",
  priority = 10,
  on_change = "restart",
  enabled = true,
  description = "ResNet-50, 90 epochs",
}

for seed = 1, 4 do
  job ("sweep-" .. seed) { cmd = { "python3", "sweep.py", "--seed", tostring(seed) }, cpus = 2, gpus = 1 }
end

if machine.gpus >= 4 then
  job "big-eval" { cmd = "python3 eval.py --all", cpus = machine.cpus / 2, gpus = 4, ram = "64GiB" }
end
