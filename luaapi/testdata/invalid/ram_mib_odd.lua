job "train" { cmd = "./train", ram = 3000 }
