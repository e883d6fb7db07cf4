-- BERTH_RUN is how the stop sweep finds a run's setsid escapees: a job must
-- not be able to hide them by setting it. BERTHA is an ordinary name.
job "escape" { cmd = "setsid sleep 1000 &", env = { BERTH_RUN = "1", BERTH_INSTANCE = "x", BERTHA = "ok" } }
