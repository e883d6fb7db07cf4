job "both" { cmd = "./train", gpus = 1, gpu_mem = "20G" }
job "bare" { cmd = "./train", gpu_mem = 20 }
job "unit" { cmd = "./train", gpu_mem = "20 gigs" }
job "free" { cmd = "./train", cpus = 0, gpu_mem = "4G" }
job "typo" { cmd = "./train", gpu_memory = "4G" }
flavor "half" { cpus = 4, gpus = 2, gpu_mem = "40G" }
quota "alice" { gpu_mem = 40 }
job "nothing" { cmd = "x", cpus = 1, gpu_mem = "0G" }
job "zero" { cmd = "x", cpus = 1, gpu_mem = "0" }
job "zeronum" { cmd = "x", cpus = 1, gpu_mem = 0 }
