"""What every floor shares: bounded file I/O, terminal-safe text, Ctrl-C handling, colour themes, the version."""
