job "train" {
  cmd = = "./train",
}
