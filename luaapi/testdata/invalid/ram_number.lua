job "train" { cmd = "./train", ram = 32 }
