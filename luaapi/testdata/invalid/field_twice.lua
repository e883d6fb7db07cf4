-- a field given twice: the first would never be read
job "t1" {
  cmd = "true",
  timeout = "5 min",
  cpus = 1,
  timeout = "1h",
}
