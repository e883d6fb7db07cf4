job "a" {
  command = "true",
  cwd = "/tmp",
  environment = { A = "1" },
  memory = "1G",
}
