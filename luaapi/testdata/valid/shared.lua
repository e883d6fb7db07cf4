-- Flavors shared by other files, and jobs that use a flavor declared in
-- another file (ml.lua declares gpu-small).
flavor "cpu-large" { cpus = 16, ram = "64G" }
flavor "gpu-pair"  { cpus = 16, gpus = 2, ram = "1.5T" }
flavor "tiny"      { }

local args = {}
for i = 1, 3 do args[#args + 1] = "--layer=" .. i end

job "finetune" {
  cmd = { "python3", "finetune.py", table.concat(args, ",") },
  flavor = "gpu-small",
  env = { RUN = ("run-%02d"):format(7), TAG = ("a-b-c"):gsub("%-", "_") },
}

job "preprocess" { cmd = { "make", "data" }, flavor = "cpu-large", priority = 1000 }
job "0-first" { cmd = "true", flavor = "tiny" }

-- math.random is seeded from the file, so this is the same on every load.
job "random-port" { cmd = { "serve", "--port", tostring(math.random(20000, 30000)) } }
