local t = {}
for i = 1, 1e9 do t[i] = ("x"):rep(4096) .. i end
