"""The renderer: a session replayed side by side at real speed into a video, byte-identical on every machine.

- canvas.py: Drawing on a frame: an RGB array, the painters of each font role, and the runs of text, panels
  and badges every part of a frame (title card, race, end card) is made of.
- column.py: A race column: one arm's wrapped stream, progress bar and running figures, drawn by keys.
- encode.py: ffmpeg recipes per output format, and the pipe that feeds raw frames to ffmpeg.
- end_card.py: The end card: the race's verdict on a frame of its own, held at the end of the video.
- end_facts.py: The end card's small print: what the arms raced ran on and when, from the session's archive; a
  fact none of them gave is said to be missing.
- frames.py: Frame i of the video as a pure function of i: title card, side-by-side replay, end card.
- layout.py: Where everything goes on the frame, in whole pixels, for any size and number of arms.
- manifest.py: The render manifest: `FILE.render.json` next to every rendered FILE.
- options.py: The user's render options, and every check of them that needs no session.
- placed_text.py: An imported reply's text over its chunks: the one rule a replay of a peer's result follows.
- race_claims.py: Every speed-up a video draws, as a claim: its text, its figure at full precision (the
  report's), where it is drawn and the first frame showing it, never before its evidence.
- ray_chunks.py: A video's chunks as Ray tasks (`render-all --ray`): the fan-out of `render`'s local workers.
- render.py: Render a session into a video file, a GIF or a poster PNG, plus its manifest.
- render_plan.py: From a session and the user's options (options.py) to everything the frames need, checked up
  front.
- timeline.py: Which chunks each frame shows, in integer arithmetic only.
- title_card.py: The title card: the title, the subtitle and the arms about to race, centred on the stage.
- tracks.py: Each arm's replayed run as the frames draw it: its chunks on the replay clock, its final figures,
  its speed-ups in the video's metric, its finishing place and its answer's badge.
- verify.py: Re-render what render manifests describe and say whether the bytes are the same, and if not, why.
- yuv.py: RGB frames to the yuv420p planes that H.264 and VP9 encode, converting only what changed.
- catalogue/: A catalogue: every prompt of several sessions in every layout and theme, rendered with one index
  page.
- text/: The text engine: fonts, shaping, bidi, markdown and code styles, laid out on a monospace grid and
  drawn.
"""
