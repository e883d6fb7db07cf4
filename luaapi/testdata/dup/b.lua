-- b.lua loads after a.lua, so the duplicate is b's error and b is rejected whole.
flavor "small" { cpus = 4 }

job "other" { cmd = "./other" }
job "train" { cmd = "./train --other" }
