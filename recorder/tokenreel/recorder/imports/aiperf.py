"""AIPerf's `profile_export.jsonl` (one record a request) as peer requests.

A record: `metadata` (`session_num`, the request's place in its phase; `conversation_id`, the
data set entry it sent, as in AIPerf's inputs.json; `turn_index`; `request_start_ns` epoch ns;
`benchmark_phase` "warmup" or "profiling"; ...), `metrics` (each `{"value", "unit"}`:
`time_to_first_token`, `request_latency`, `output_sequence_length`, `input_sequence_length`,
`inter_token_latency`, and `inter_chunk_latency`, a list, where AIPerf exported it), `error`
(absent or null, or `{code, type, message}`). AIPerf keeps no reply text.
"""

from __future__ import annotations

import json
import os
from datetime import datetime, timezone
from typing import Any

from tokenreel.recorder.imports.build import PeerRequest, PeerRun, check_seconds, request_prompt
from tokenreel.session.fields import FieldReader
from tokenreel.session.model import ArchiveError

TOOL = "aiperf"
SECONDS_PER = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0, "sec": 1.0}


def parse(payload: bytes, path: str, version: str = "", model: str = "") -> PeerRun:
    """The file's records (`model`: the model measured, which records do not name), or an
    ArchiveError naming the file, the line and the first bad field."""
    r = FieldReader(path)
    try:
        lines = payload.decode("utf-8").splitlines()
    except UnicodeDecodeError as exc:
        raise ArchiveError(path, "", f"not UTF-8 text: {exc}") from None
    requests: list[PeerRequest] = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ArchiveError(path, f"line {number}", f"not JSON: {exc}") from None
        requests.append(_request(r, record, f"line {number}", len(requests)))
    if not requests:
        raise ArchiveError(path, "", "holds no records")
    per_chunk = all(q.gaps_s is not None for q in requests if not q.error)
    lacks = {
        "chunk_text": "AIPerf keeps no reply text",
        "prompts": ("AIPerf's records hold no prompt text: requests are paired across arms by conversation_id"
                    " (the data set entry), else by session_num"),
        "settings": "AIPerf's records keep no sampling settings",
    }
    if not per_chunk:
        lacks["token_times"] = ("no per-token arrival times: AIPerf kept only per-request figures (the first token"
                                " at its TTFT, the rest at its last response)")
    elif any(len(q.gaps_s or []) + 1 != q.output_tokens for q in requests if not q.error):
        lacks["token_counts"] = "AIPerf keeps chunks, not tokens, per response: one token a chunk, the rest on the last"
    notes = (["chunk arrival times rebuilt exactly from AIPerf's time_to_first_token and inter_chunk_latency"]
             if per_chunk else
             ["two events a request: the first token at time_to_first_token, the other tokens at request_latency,"
              " so decode is AIPerf's own (output_sequence_length - 1) / (request_latency - time_to_first_token)"])
    return PeerRun(tool=TOOL, file=os.path.basename(path), model=model or "unknown model",
                   requests=requests, version=version, lacks=lacks, notes=notes)


def _metric(r: FieldReader, metrics: dict[str, Any], name: str, where: str) -> Any:
    """A metric's value (None when the record has none); durations converted to seconds."""
    entry = metrics.get(name)
    if entry is None:
        return None
    entry = r.obj(entry, f"{where}.metrics.{name}")
    unit = r.get(entry, "unit", f"{where}.metrics.{name}", r.str_, "")
    value = entry.get("value")
    if unit == "tokens":
        return r.nonneg_int(value, f"{where}.metrics.{name}.value")
    scale = SECONDS_PER.get(unit)
    if scale is None:
        raise r.fail(f"{where}.metrics.{name}.unit", f"unknown unit {unit!r} (expected ns, us, ms or s)")
    if isinstance(value, list):
        return [check_seconds(r, r.nonneg_num(v, f"{where}.metrics.{name}.value[{i}]") * scale,
                              f"{where}.metrics.{name}.value[{i}]") for i, v in enumerate(value)]
    return check_seconds(r, r.nonneg_num(value, f"{where}.metrics.{name}.value") * scale, f"{where}.metrics.{name}.value")


def _request(r: FieldReader, record: Any, where: str, position: int) -> PeerRequest:
    d = r.obj(record, where)
    meta = r.get(d, "metadata", where, r.obj, {})
    session_num = r.get(meta, "session_num", f"{where}.metadata", r.nonneg_int, position)
    # the data set entry sent: warm-up requests take entries too, so session_num n of the profiling
    # phase is not entry n, and an entry sent twice is two runs of one prompt
    conversation = r.get(meta, "conversation_id", f"{where}.metadata", r.opt_str, None)
    turn = meta.get("turn_index")
    turn = 0 if turn is None else r.nonneg_int(turn, f"{where}.metadata.turn_index")
    prompt = (conversation or request_prompt(session_num)) + (f"-turn{turn}" if turn else "")
    start_ns = r.get(meta, "request_start_ns", f"{where}.metadata", r.opt_int, None)
    started_at = (datetime.fromtimestamp(start_ns / 1e9, timezone.utc).isoformat()
                  if isinstance(start_ns, int) and 0 <= start_ns < 2**62 else "")
    warmup = r.get(meta, "benchmark_phase", f"{where}.metadata", r.str_, "profiling") != "profiling"
    error = d.get("error")
    if error is not None:
        e = r.obj(error, f"{where}.error")
        message = " ".join(str(e.get(k, "")) for k in ("code", "type", "message") if e.get(k) is not None)
        return PeerRequest(prompt=prompt, error=message or "failed", warmup=warmup, started_at=started_at)
    metrics = r.obj(d.get("metrics"), f"{where}.metrics")
    ttft = _metric(r, metrics, "time_to_first_token", where)
    latency = _metric(r, metrics, "request_latency", where)
    tokens = _metric(r, metrics, "output_sequence_length", where)
    if tokens is None:
        tokens = _metric(r, metrics, "output_token_count", where)
    for name, value in (("time_to_first_token", ttft), ("request_latency", latency), ("output_sequence_length", tokens)):
        if value is None or isinstance(value, list):
            raise r.fail(f"{where}.metrics.{name}", "absent or not one number: a streaming profile's record has it")
    gaps = _metric(r, metrics, "inter_chunk_latency", where)
    if gaps is not None and not isinstance(gaps, list):
        raise r.fail(f"{where}.metrics.inter_chunk_latency", "expected a list of gaps")
    return PeerRequest(prompt=prompt, ttft_s=ttft, gaps_s=gaps, end_s=latency, output_tokens=tokens,
                       prompt_tokens=_metric(r, metrics, "input_sequence_length", where),
                       warmup=warmup, started_at=started_at)
