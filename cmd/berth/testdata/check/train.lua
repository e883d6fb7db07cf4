flavor "gpu-small" { cpus = 2, gpus = 1, ram = "4G" }

job "train" { cmd = { "python3", "train.py" }, cpus = 2, gpus = 4 }
job "sweep-1" { cmd = { "true" }, flavor = "gpu-huge" }
job "as-someone" { cmd = { "true" }, user = "no-such-user-berth" }
job "fine" { cmd = { "true" }, flavor = "gpu-small" }
