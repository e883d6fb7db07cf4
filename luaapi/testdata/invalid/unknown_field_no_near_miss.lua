job "serve" { cmd = "./serve", colour = "blue" }
flavor "small" { cpus = 1, cmd = "x" }
