job "hides" { cmd = { "sh", "-c", "setsid sleep 1000 &" }, env = { BERTH_RUN = "1" } }
