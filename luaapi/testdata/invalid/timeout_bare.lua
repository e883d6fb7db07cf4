job "train" { cmd = "./train", timeout = "30" }
job "train2" { cmd = "./train", timeout = 30 }
