job "train" { cmd = "./train", gpus = "a100:1" }
