job "train" { cmd = "./train" }
flavor "small" { cpus = 1 }

job "train" { cmd = "./train --again" }
flavor "small" { cpus = 2 }
