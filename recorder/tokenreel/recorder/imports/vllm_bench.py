"""`vllm bench serve --save-result --save-detailed`'s result file as peer requests.

Per request the file keeps `ttfts` (s, request start to the first chunk), `itls` (s, the gap
from each chunk to the next: chunks, not tokens; one chunk may carry several tokens under
speculative decoding), `output_lens`, `input_lens`, `generated_texts` (the whole reply),
`errors` ("" for success) and, in newer versions, `start_times` (the client's perf_counter at
send). Run-level: `model_id`, `backend` (and `endpoint_type`, the same), `label`, `date`,
`num_prompts`, `request_rate`, `max_concurrency`, and where the server counted drafts during
the benchmark, `spec_decode_*`: acceptance over the whole benchmark, not per request. Without
--save-detailed the per-request lists are absent.

vllm bench's openai-chat client up to 0.32 stamps `ttft` at the first chunk with `choices`:
vLLM's role chunk (`delta: {role: assistant, content: ""}`, no token), sent from the same
engine step just before the first token's chunk, which then becomes `itls[0]`. 0.33 skips it.
"""

from __future__ import annotations

import json
import os
from dataclasses import replace
from typing import Any

from tokenreel.analysis.figures import figure
from tokenreel.recorder.imports.build import PeerRequest, PeerRun, check_seconds, finite_list, request_prompt
from tokenreel.session.fields import FieldReader
from tokenreel.session.model import ArchiveError

TOOL = "vllm bench serve"
REQUIRED = ("ttfts", "itls", "output_lens", "errors")
OPTIONAL = ("input_lens", "generated_texts", "start_times")
# The backends vllm bench serves with its chat-completions request function (ASYNC_REQUEST_FUNCS).
CHAT_BACKENDS = ("openai-chat",)
# A first gap below this is the role chunk's, not a token's: vLLM sends the role chunk and the
# first token's chunk from one engine step, back to back (0.010-0.016 ms apart, measured on a
# CPU server), while the gap from one token's chunk to the next is a whole decode step, which
# takes milliseconds even for a tiny model on a GPU.
ROLE_GAP_S = 0.001
NAMED = 10  # requests named in a note; the rest are counted
SPEC_COUNTS = ("spec_decode_num_drafts", "spec_decode_draft_tokens", "spec_decode_accepted_tokens")
SPEC_FIGURES = ("spec_decode_acceptance_length", "spec_decode_acceptance_rate")
SPEC_POSITIONS = "spec_decode_per_position_acceptance_rates"
SPEC_KEY = "acceptance (engine, pooled)"  # the fingerprint summary's row for them


def parse(payload: bytes, path: str, version: str = "") -> PeerRun:
    """The file's requests, or an ArchiveError naming the file and the first bad field."""
    r = FieldReader(path)
    try:
        data = json.loads(payload)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        extra = " (several results appended with --append-result? import one at a time)" if "Extra data" in str(exc) else ""
        raise ArchiveError(path, "", f"not JSON: {exc}{extra}") from None
    d = r.obj(data, "")
    missing = [key for key in REQUIRED if key not in d]
    if missing:
        raise r.fail(missing[0], "absent: the file has no per-request results; run vllm bench serve with --save-detailed")
    lists = {key: r.list_(d[key], key) for key in (*REQUIRED, *OPTIONAL) if key in d}
    count = len(lists["ttfts"])
    for key, values in lists.items():
        if len(values) != count:
            raise r.fail(key, f"{len(values)} entries where ttfts has {count}")
    requests, reading = _role_chunks([_request(r, lists, i) for i in range(count)], _backend(d))
    spec = _spec_decode(r, d)
    summary = _summary(d)
    if spec:
        summary[SPEC_KEY] = _spec_text(spec, sum(not q.error for q in requests))
    return PeerRun(tool=TOOL, file=os.path.basename(path), model=_text(d.get("model_id")) or "unknown model",
                   requests=requests, version=version or _text(d.get("version")), summary=summary,
                   lacks=_lacks(requests, d), notes=[reading, *_notes(d)],
                   fingerprint={"spec_decode": spec} if spec else {}, acceptance_note=_acceptance_note(spec))


def _request(r: FieldReader, lists: dict[str, list[Any]], i: int) -> PeerRequest:
    error = r.str_(lists["errors"][i], f"errors[{i}]")
    start = lists.get("start_times")
    return PeerRequest(
        prompt=request_prompt(i),
        error=error,
        ttft_s=check_seconds(r, lists["ttfts"][i], f"ttfts[{i}]"),
        gaps_s=finite_list(r, lists["itls"][i], f"itls[{i}]"),
        output_tokens=r.nonneg_int(lists["output_lens"][i], f"output_lens[{i}]"),
        prompt_tokens=r.nonneg_int(lists["input_lens"][i], f"input_lens[{i}]") if "input_lens" in lists else None,
        text=r.str_(lists["generated_texts"][i], f"generated_texts[{i}]") if "generated_texts" in lists else "",
        send_monotonic_ns=round(check_seconds(r, start[i], f"start_times[{i}]") * 1e9) if start is not None else None,
    )


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _backend(d: dict[str, Any]) -> str:
    return _text(d.get("backend")) or _text(d.get("endpoint_type"))


def _role_chunks(requests: list[PeerRequest], backend: str) -> tuple[list[PeerRequest], str]:
    """The requests with the role chunk dropped where every ok request's first gap says there was
    one, and the note saying which reading was applied. Where only some requests' first gap looks
    like a role chunk nothing is guessed: the chunks stay as the file has them."""
    if backend not in CHAT_BACKENDS:
        return requests, (f"backend {backend or 'not named'}: no role chunk to drop; the first chunk is the first"
                          " token's, as the file has it")
    ok = [q for q in requests if not q.error]
    role = [q.prompt for q in ok if q.gaps_s and q.gaps_s[0] < ROLE_GAP_S]
    bound = f"{figure(ROLE_GAP_S * 1000, 0)} ms"
    if ok and len(role) == len(ok):
        dropped = [q if q.error or not q.gaps_s else replace(q, ttft_s=q.ttft_s + q.gaps_s[0], gaps_s=q.gaps_s[1:])
                   for q in requests]
        return dropped, (f"role chunk dropped: backend {backend} and every ok request's first gap under {bound}, the"
                         " role chunk (no token, no text) vllm bench's chat client before 0.33 times as the first"
                         " token; each run's first token is at ttft + itls[0], its TTFT, and its chunks are the rest")
    if role:
        named = ", ".join(role[:NAMED]) + (f" and {len(role) - NAMED} more" if len(role) > NAMED else "")
        return requests, (f"chunks kept as the file has them: backend {backend}, but only {len(role)} of {len(ok)} ok"
                          f" requests' first gap is under {bound}, like a role chunk ({named}); in those the first"
                          " chunk may be the role chunk (no token), so their TTFT may be early and their token"
                          " counts per chunk off")
    return requests, (f"no role chunk: backend {backend}, and no ok request's first gap is under {bound}; the first"
                      " chunk is the first token's, as vllm bench 0.33 times it")


def _spec_decode(r: FieldReader, d: dict[str, Any]) -> dict[str, Any]:
    """The run-level spec-decode fields the file has, checked (vllm bench writes them only where
    the server's /metrics counted drafts during the benchmark)."""
    out: dict[str, Any] = {key: r.nonneg_int(d[key], key) for key in SPEC_COUNTS if d.get(key) is not None}
    out |= {key: r.nonneg_num(d[key], key) for key in SPEC_FIGURES if d.get(key) is not None}
    if d.get(SPEC_POSITIONS) is not None:
        out[SPEC_POSITIONS] = finite_list(r, d[SPEC_POSITIONS], SPEC_POSITIONS)
    return out


def _spec_text(spec: dict[str, Any], requests: int) -> str:
    parts = []
    if (length := spec.get("spec_decode_acceptance_length")) is not None:
        parts.append(f"length {figure(length, 2)}")
    if (rate := spec.get("spec_decode_acceptance_rate")) is not None:
        parts.append(f"rate {figure(rate, 1)}%")
    counts = [f"{spec[key]} {key.removeprefix('spec_decode_').replace('num_', '').replace('_', ' ')}"
              for key in SPEC_COUNTS if key in spec]
    if counts:
        parts.append(", ".join(counts))
    if spec.get(SPEC_POSITIONS):
        parts.append("per position " + " / ".join(figure(v, 2) for v in spec[SPEC_POSITIONS]))
    return (f"{'; '.join(parts)}: the server's spec-decode counters over the whole benchmark, pooled over the"
            f" file's {requests} ok requests, not per request")


def _acceptance_note(spec: dict[str, Any]) -> str:
    """Why each imported run has no acceptance of its own."""
    if spec:
        return (f"vllm bench serve keeps acceptance over the whole benchmark, not per request: see the arm's"
                f" fingerprint ({SPEC_KEY})")
    return ("vllm bench serve's file has no spec_decode fields: it writes them only where the server's /metrics"
            " counted drafts during the benchmark (no drafter, or no /metrics)")


def _summary(d: dict[str, Any]) -> dict[str, str]:
    keys = ("backend", "label", "date", "num_prompts", "request_rate", "burstiness", "max_concurrency")
    return {key: str(d[key]) for key in keys if d.get(key) is not None and not isinstance(d[key], (dict, list))}


def _lacks(requests: list[PeerRequest], d: dict[str, Any]) -> dict[str, str]:
    lacks = {
        "chunk_text": "vllm bench keeps each reply's text whole, not per chunk (kept on the run's last chunk)",
        "prompts": "vllm bench keeps no prompt text: requests are paired across arms by their order",
        "settings": "vllm bench keeps no sampling settings (temperature, max tokens, ignore_eos)",
    }
    ok = [q for q in requests if not q.error]
    if any(len(q.gaps_s or []) + 1 != q.output_tokens for q in ok):
        lacks["token_counts"] = ("vllm bench keeps chunks, not tokens, and some requests' chunk counts differ from"
                                 " their output tokens: one token a chunk, the rest on the last (an estimate, marked ≈)")
    return lacks


def _notes(d: dict[str, Any]) -> list[str]:
    notes = ["chunk arrival times rebuilt exactly from vllm bench's ttfts and itls (gaps between chunks),"
             " relative to each request's start"]
    if d.get("max_concurrency") == 1:
        notes.append("max_concurrency 1: one request at a time")
    elif d.get("max_concurrency") is not None or d.get("request_rate") not in (None, "inf"):
        notes.append(f"requests overlapped (max_concurrency {d.get('max_concurrency')}, request_rate"
                     f" {d.get('request_rate')}): figures are under that load, not one request at a time")
    elif d.get("request_rate") == "inf":
        notes.append("request_rate inf without max_concurrency: every request was sent at once, so figures are"
                     " under that load, not one request at a time")
    return notes
