job "a" { cmd = "./a", array = 0 }
job "b" { cmd = "./b", array = 2.5 }
job "c" { cmd = "./c", array = "100" }
job "d" { cmd = "./d", array = { from = 10, to = 1 } }
job "e" { cmd = "./e", array = { from = 0, to = 200000 } }
job "f" { cmd = "./f", array = { 1, 10 } }
job "g" { cmd = "./g", array = { from = 1 } }
job "h" { cmd = "./h", array = { from = -1, to = 3 } }
job "i" { cmd = "./i", max_parallel = 4 }
job "j" { cmd = "./j", array = 10, max_parallel = 0 }
job "k" { cmd = "./k", array = 1000000 }
job "l" { cmd = "./l", array = { from = 1, to = 3, step = 2 } }
job "m" { cmd = "./m", array = { to = 3 } }
