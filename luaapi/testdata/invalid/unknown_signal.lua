job "train" { cmd = "./train", stop_signal = "SIGSTOP" }
job "train2" { cmd = "./train", stop_signal = 15 }
