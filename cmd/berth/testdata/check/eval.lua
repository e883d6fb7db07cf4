job "eval" { cmd = "python3 eval.py", gpu = 1 }
