local f = io.open("/etc/shadow")
