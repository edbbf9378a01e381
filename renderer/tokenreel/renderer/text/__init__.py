"""The text engine: fonts, shaping, bidi, markdown and code styles, laid out on a monospace grid and drawn.

- bidi.py: The Unicode bidirectional algorithm (UAX #9) for a paragraph, and the visual order of a line.
- blocks.py: A stream's layout made a block at a time, as frames read it: a frame late in a long answer
  lays out the few blocks its rows show, not the answer before them.
- cells.py: The units text is laid out in: grid cells, clusters, and the grid's metrics at a font size.
- clusters.py: Text into grid clusters: each user-perceived character, and the font and width it is drawn
  with.
- fonts.py: The bundled fonts, which codepoints each one covers, and which one draws a given character.
- highlight.py: Syntax colours for the streamed answer: fenced ``` blocks, or all of it for code prompts; the
  answer itself is shown as markdown renders it (markdown.py).
- markup.py: Markdown source as people read it: the text a frame shows, its styles, and where each source
  offset lands in it.
- painter.py: Clusters into pixels: glyphs drawn once per (text, font, colours) into cell-sized tiles.
- paragraph.py: A prose paragraph with right-to-left text in it, laid out as its readers expect.
- raster.py: Glyphs by id into pixels: FreeType for outlines, the font's own PNGs for colour emoji.
- rtl_runs.py: Right-to-left runs on the grid: a run of RTL clusters of one font and style, with the spaces,
  punctuation and digits between them, merged into one cell as wide as the run and shaped as a unit, its
  numbers in their order; a merged run shows once the whole run has streamed in.
- sections.py: Where a stream's layout starts afresh: after each line break, and in a long paragraph, a new
  line at the first space past every SECTION characters; and the blocks a layout is made in.
- shaping.py: HarfBuzz shaping of one run of text (one font, one direction): which glyphs, and where.
- wrap.py: Clusters into lines: greedy word wrap of a stream, laid out from its final text a block at a
  time (blocks.py).
"""
