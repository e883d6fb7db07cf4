job "ctl" {
  cmd = "true",
  env = { TITLE = "\27]0;pwned\7", OK = "tab\there\nnewline" },
}
job "bin" { cmd = "true", env = { BLOB = "\255\254" } }
