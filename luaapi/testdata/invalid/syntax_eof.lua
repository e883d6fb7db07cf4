job "train" {
  cmd = "./train",
