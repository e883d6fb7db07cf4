job "train" {
  cpus = 4,
}
