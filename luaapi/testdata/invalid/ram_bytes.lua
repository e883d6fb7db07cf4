job "half" { cmd = "true", ram = machine.ram / 2 }
