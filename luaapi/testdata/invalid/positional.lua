job "train" { "python3", "train.py" }
