job "train" { cmd = "./train", timeout = "-5m" }
