job "train" { cmd = "./train", env = { A = "1", CONFIG = { lr = 0.1 }, FLAG = true } }
