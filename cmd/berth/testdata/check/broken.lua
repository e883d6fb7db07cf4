job "half" { cmd = { "true" },
