job "a" { cmd = {} }
job "b" { cmd = "" }
job "c" { cmd = "   " }
job "d" { cmd = { "" } }
