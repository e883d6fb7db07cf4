local ok, err = pcall(function()
  job "train" { cmd = "./train", gpu = 1 }
end)
