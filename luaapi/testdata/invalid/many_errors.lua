for i = 1, 60 do
  job ("bad-" .. i) { cmd = "./x", gpu = i }
end
