-- the quotes forgotten: a job with no flavor, one core and no card
flavor "gpu-small" { cpus = 2, gpus = 1 }
small = nil
job "train" { cmd = "true", flavor = gpu_small }
