local json = require("json")
