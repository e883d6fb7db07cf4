job "train" { cmd = "./train", stop_timeout = "0s" }
job "train2" { cmd = "./train", timeout = "0d" }
job "train3" { cmd = "./train", timeout = "0" }
