job "serve" {
  cmd = "./serve",
  restrat = "always",
}
