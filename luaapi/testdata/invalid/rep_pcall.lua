local ok = pcall(string.rep, "x", 1e9)
job "fine" { cmd = "./fine" }
