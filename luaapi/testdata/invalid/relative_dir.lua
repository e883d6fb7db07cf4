job "train" { cmd = "./train", dir = "srv/ml" }
