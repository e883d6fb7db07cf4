job "alone"
job "twice" "again"
job { cmd = "./x" }
job (42) { cmd = "./x" }
