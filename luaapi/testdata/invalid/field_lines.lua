-- Mistakes found once the file has run are said on the field's line too.
job "train" {
  cmd    = { "python3", "train.py" },
  flavor = "gpu-smal",
  after  = "prepare",
}
job "eval" {
  cmd       = "true",
  cpus      = 1,
  after_any = { "train", "nosuch" },
}
