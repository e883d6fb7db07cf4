job "a" { cmd = "./a", after = 3 }
job "b" { cmd = "./b", after = { "ok", 4 } }
job "c" { cmd = "./c", after = { first = "a" } }
job "d" { cmd = "./d", after_any = "Bad Name" }
job "e" { cmd = "./e", afetr = "a" }
job "z" { cmd = "./z", after = "sweep[2]" }
