job "train" { cmd = "./train }
