job "train" { cmd = "./train", restart = "sometimes" }
job "train2" { cmd = "./train", restart = "on_failure" }
job "train3" { cmd = "./train", restart = true }
