job "a" { cmd = "./a", after = "b" }
job "b" { cmd = "./b", after = "a" }
job "x" { cmd = "./x", after = "y" }
job "y" { cmd = "./y", after_any = { "z" } }
job "z" { cmd = "./z", after = { "x" } }
job "downstream" { cmd = "./d", after = "x" }
