-- Strings longer than a process may be given: refused at load, not at
-- every start.
job "a" { cmd = string.rep("x", 140000) }
job "b" { cmd = { "echo", string.rep("y", 131072) } }
job "c" { cmd = "true", env = { BIG = string.rep("z", 131070) } }
job "d" { cmd = { "echo", string.rep("y", 131071) } }
