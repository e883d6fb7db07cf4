-- Arguments and environment that together are more than a job's may be:
-- each string fits, all of them do not. Just under the bound is fine.
local arg = string.rep("x", 100000)
local big = { "echo" }
for i = 1, 11 do big[#big + 1] = arg end
job "many" { cmd = big }
job "mixed" { cmd = { "echo", arg, arg, arg, arg, arg, arg }, env = { A = arg, B = arg, C = arg, D = arg, E = arg } }
local fits = { "echo" }
for i = 1, 10 do fits[#fits + 1] = arg end
job "fits" { cmd = fits, env = { A = string.rep("y", 40000) } }
-- Many short arguments: the kernel counts a pointer for each too.
local tiny = { "echo" }
for i = 1, 110000 do tiny[#tiny + 1] = "x" end
job "tiny" { cmd = tiny }
