job "train" { cmd = "./train", vram = "12G" }
