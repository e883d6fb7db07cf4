flavor "gpu-small" { cpus = 8, gpus = 1, ram = "32G" }
job "train" { cmd = "./train", flavor = "gpu-small", cpus = 4 }
