flavor "1gpu" { gpus = 1 }
flavor "gpu.small" { gpus = 1 }
job "train" { cmd = "./train", flavor = "GPU Small" }
job "tune" { cmd = "./tune", flavor = "Small" }
