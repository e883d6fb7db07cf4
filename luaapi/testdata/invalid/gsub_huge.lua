local s = ("x"):rep(20000):gsub("x", ("y"):rep(64))
