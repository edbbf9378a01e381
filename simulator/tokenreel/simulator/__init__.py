"""Simulated vLLM-like endpoints: a stand-in engine for the demo and the tests, not part of recording.

- answer_text.py: Deterministic, realistic answer text for the simulated engine.
- control.py: The simulator's test controls (POST /sim/state): busy gauges, background traffic, faults.
- counters.py: The /metrics of each simulated engine: names, labels, when counters move, how they print.
- endpoint.py: One simulated engine endpoint: routes, timing, faults; the wire shape comes from its engine.
- generation.py: What one request will generate, decided before its first byte: tokens, steps, drafts.
- planned_answers.py: Planned answers: a JSONL of {"prompt", "answer"} a profile serves instead of its passages.
- profiles.py: Serving configurations that the simulator imitates.
- sent.py: What a simulated endpoint really sent, per streamed generation request (GET /sim/sent).
- server.py: Simulated OpenAI-compatible engines on loopback: vLLM 0.33, SGLang 0.5 or llama.cpp.
- shape.py: What an engine shape is: the bytes a request's plan turns into, and the engine's info pages.
- shape_llamacpp.py: llama.cpp server's OpenAI stream and info endpoints, as a recorder sees them.
- shape_sglang.py: SGLang 0.5's OpenAI stream and info endpoints, as a recorder sees them.
- shape_vllm.py: vLLM 0.33's OpenAI stream, as a recorder sees it.
- truth.py: How far a recording's times lie from what the simulator really sent.
- wire.py: Bytes and JSON that every simulated engine shape shares (no engine specifics here).
- written_answers.py: The simulator's written text, kept as data in assets/tokenreel/assets/simulator/.
"""
