job "train" { cmd = "./train", priority = 5000 }
job "train2" { cmd = "./train", priority = 1.5 }
