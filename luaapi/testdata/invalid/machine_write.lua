machine.gpus = 8
