"""The HTTP/SSE client: one streamed request, every read time-stamped, turned into archived chunks.

- bounded_http.py: Small bounded HTTP reads: every answer the recorder reads besides the stream itself.
- kernel_clock.py: Kernel receive times for every read of a streamed response, so a busy client cannot skew
  them.
- request_body.py: What one run's request sends: its URL, headers, timeouts and JSON body, and the fields the
  recorder adds to it per engine.
- response_stats.py: What the engine said of one request, beside its tokens: speculative-decoding acceptance
  and its own figures (`Acceptance`, `EngineFigures`), each value checked before the archive takes it.
- run_bounds.py: THE RUN BOUNDS: what one streamed run may hold, checked as each event is read (not at save).
- sse_client.py: Send one streaming request to an arm and record every event with its arrival time.
- stream.py: Turn the bytes of an OpenAI-compatible SSE stream into archived chunks (no I/O here).
- token_counts.py: How many tokens each streamed event carried, decided once the stream is over.
- wakeup.py: Ask Linux to wake the recording thread ahead of busy neighbours (a short EEVDF slice).
"""
