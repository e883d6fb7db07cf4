job "train" { cmd = "./train", cpus = 0, gpus = 1 }
job "train2" { cmd = "./train", cpus = 0, ram = "8G" }
flavor "odd" { cpus = 0, gpus = 2 }
