job "train" { cmd = "./train", enabled = "yes", description = 42 }
job "train2" { cmd = "./train", user = "", group = 7 }
