-- c.lua is fine, and uses a flavor from a.lua.
job "third" { cmd = "./third", flavor = "small" }
