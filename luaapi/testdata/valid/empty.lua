-- A file may declare nothing at all.
local unused = machine.ram
