job "train" { cmd = "./train", env = { ["1BAD"] = "x", ["WITH-DASH"] = "y", [1] = "z" } }
job "train2" { cmd = "./train", env = "A=1" }
