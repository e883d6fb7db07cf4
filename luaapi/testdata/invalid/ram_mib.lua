job "train" { cmd = "./train", ram = 4096 }
