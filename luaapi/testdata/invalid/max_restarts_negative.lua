job "train" { cmd = "./train", max_restarts = -1 }
