job "train" { cmd = "./train", gpus = 0.5 }
