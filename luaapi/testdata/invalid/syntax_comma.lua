job "train" {
  cmd = { "./train" }
  cpus = 4,
}
