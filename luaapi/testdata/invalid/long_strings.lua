-- Strings the kernel does not bound for a job are bounded here: the
-- daemon holds each for as long as the job is declared.
local long = string.rep("a", 4096)
job "d" { cmd = "true", dir = "/" .. long }
job "ok" { cmd = "true", dir = "/" .. string.rep("a", 4094), description = string.rep("d", 4096) }
job "desc" { cmd = "true", description = long .. "d" }
job "u" { cmd = "true", user = string.rep("u", 257), group = string.rep("g", 257) }
job "t" { cmd = "true", timeout = string.rep("1", 100) .. "s", ram = string.rep("9", 65) .. "G" }
