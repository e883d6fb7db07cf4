job "eval" { cmmd = { "python3", "eval.py" } }
