job "prepare" { cmd = "./prepare" }
job "train" { cmd = "./train", after = "prepair" }
job "eval" { cmd = "./eval", after_any = { "train", "report" } }
job "self" { cmd = "./self", after = { "self" } }
