-- A job runs after at most 100 jobs, after and after_any together.
local names, more = {}, {}
for i = 1, 101 do names[i] = "p" .. i end
for i = 1, 100 do more[i] = "q" .. i end
job "many" { cmd = "true", after = names }
job "both" { cmd = "true", after = { "a" }, after_any = more }
