job "train" { cmd = "./train", ram = "32X" }
flavor "big" { ram = "lots" }
