flavor "small" { cpus = 2 }
job "train" { cmd = "./train" }
