-- error() with a table: no message says where; the traceback does

error({ code = 1 })
