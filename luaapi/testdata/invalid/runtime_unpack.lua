x = 1

local n = select("#", unpack({}, 1, 1e8))
