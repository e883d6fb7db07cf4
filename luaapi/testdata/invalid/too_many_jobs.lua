for i = 1, 10001 do
  job ("j" .. i) { cmd = "true" }
end
