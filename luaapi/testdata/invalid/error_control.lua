-- A message with control characters is shown escaped, on one line: it
-- cannot clear a screen, colour text, or forge a line of its own.
error("\27[2J\27[31mFAKE\r\n  /etc/berth/jobs.d/x.lua:1: fine\t\194\155end\127")
