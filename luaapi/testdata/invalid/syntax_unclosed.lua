job "train" {
  cmd = "./train",
  cpus = 4

job "eval" {
  cmd = "./eval",
}
