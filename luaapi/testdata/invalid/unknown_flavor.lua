flavor "gpu-large" { cpus = 16, gpus = 2 }

for i = 1, 2 do
  job ("sweep-" .. i) { cmd = "./sweep", flavor = "gpu-huge" }
end
job "typo" { cmd = "./x", flavor = "gpu-lrage" }
