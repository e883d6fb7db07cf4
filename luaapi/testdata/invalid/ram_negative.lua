job "train" { cmd = "./train", ram = "-1G" }
