"""The row engine: one row from its wheel to its verdict (``row``), and what a comparison of two runs reads from the
wheels (``drift``). The commands (``smoke.commands``) parse their options, call this and map its outcome to an exit
code; no command imports another."""
