local function depth(n) return 1 + depth(n + 1) end
depth(1)
