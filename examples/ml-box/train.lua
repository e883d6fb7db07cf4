-- One training run on one card. If the box has a card free it starts at
-- once; otherwise it waits its turn, and `berth status` says for what.
job "train-resnet" {
  cmd      = { "python3", "train.py", "--epochs", "90" },
  dir      = "/srv/ml/resnet",
  flavor   = "gpu-small",
  env      = { WANDB_MODE = "offline" },   -- your env wins over berth's
  restart  = "on-failure",
  max_restarts = 3,
  timeout  = "12h",             -- stopped after this, reason "timed out"
  stop_signal  = "SIGINT",      -- lets the script save a checkpoint
  stop_timeout = "60s",
  on_change = "finish",         -- an edit waits for this run to end
  description = "ResNet-50, 90 epochs",
}
