job "train" { cmd = "./train", env = { A = "1", CONFIG = { lr = 0.1 }, FLAG = true, INF = 1/0, NAN = 0/0 } }
