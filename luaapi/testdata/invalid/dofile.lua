dofile("/etc/berth/common.lua")
