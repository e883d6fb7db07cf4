job "train" { cmd = "./train", cpus = "8" }
