job "train" { cmd = "./train", gpus = "2" }
