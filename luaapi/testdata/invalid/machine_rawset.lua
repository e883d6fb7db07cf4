rawset(machine, "gpus", 8)
