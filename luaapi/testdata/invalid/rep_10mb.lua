local s = ("x"):rep(10 * 1024 * 1024)
