local hosts = { { name = "a" }, { name = "b" } }
for i = 1, 3 do
  local h = hosts[i]
  job ("probe-" .. h.name) { cmd = "./probe" }
end
