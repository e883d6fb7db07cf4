for i = 1, 2 do job ("s" .. i) { cmd = "true", array = 6000 } end
