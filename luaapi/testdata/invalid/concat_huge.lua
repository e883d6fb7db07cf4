local parts = {}
for i = 1, 200 do parts[i] = ("x"):rep(10000) end
local s = table.concat(parts)
