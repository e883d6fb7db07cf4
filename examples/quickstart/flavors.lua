-- Flavors are named sizes. A job that says `flavor = "small"` asks for
-- exactly this much; edit the flavor and every job that uses it gets the new
-- size at its next start. Names may use dashes.
flavor "small" { cpus = 1, ram = "256M" }

-- `machine` tells a file what box it is loaded on, so one file can serve a
-- laptop and a server: here "medium" is half the cores berth may hand out.
flavor "medium" { cpus = math.max(1, math.floor(machine.cpus / 2)), ram = "1G" }
