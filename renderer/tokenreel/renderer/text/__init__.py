"""The text engine: fonts, shaping, bidi, markdown and code styles, laid out on a monospace grid and drawn."""
