job "train" { cmd = "./train", on_change = "finnish" }
