-- error() with a number: the traceback says where

error(42)
