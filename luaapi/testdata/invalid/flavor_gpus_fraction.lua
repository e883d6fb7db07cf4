flavor "x" { gpus = 1.5 }
