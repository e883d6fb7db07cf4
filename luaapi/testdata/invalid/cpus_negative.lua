job "train" { cmd = "./train", cpus = -2 }
job "huge" { cmd = "./train", cpus = 100000, gpus = 2000 }
