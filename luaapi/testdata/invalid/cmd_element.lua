job "train" { cmd = { "python3", "train.py", "--epochs", 90 } }
job "holes" { cmd = { "python3", nil, "x" } }
job "named" { cmd = { prog = "python3" } }
job "number" { cmd = 42 }
