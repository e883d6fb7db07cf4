job "train" { cmd = "./train", timeout = "soon" }
