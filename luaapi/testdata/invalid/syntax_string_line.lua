job "train" {
  cmd = "./train --fast,
  cpus = 1,
}
