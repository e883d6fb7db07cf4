jbo "x" { cmd = "true" }
