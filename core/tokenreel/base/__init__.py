"""What every floor shares: bounded file I/O, terminal-safe text, Ctrl-C handling, colour themes, the version.

- files.py: Every file tokenreel reads or writes goes through here: one bounded reader, one atomic writer.
- interrupts.py: Ctrl-C and SIGTERM, one rule for every long command: SIGTERM behaves like Ctrl-C.
- safe_text.py: Text from outside (servers, session files, configs) made safe to print and to name files with.
- theme.py: Colour themes, kept as JSON in assets/tokenreel/assets/themes so a new look needs no code change.
- version.py: The version of tokenreel, written into sessions and render manifests: the installed
  distribution's.
"""
