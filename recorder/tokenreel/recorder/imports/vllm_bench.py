"""`vllm bench serve --save-result --save-detailed`'s result file as peer requests.

Per request the file keeps `ttfts` (s, request start to the first chunk), `itls` (s, the gap
from each chunk to the next: chunks, not tokens; one chunk may carry several tokens under
speculative decoding), `output_lens`, `input_lens`, `generated_texts` (the whole reply),
`errors` ("" for success) and, in newer versions, `start_times` (the client's perf_counter at
send). Run-level: `model_id`, `backend`, `label`, `date`, `num_prompts`, `request_rate`,
`max_concurrency`. Without --save-detailed the per-request lists are absent.
"""

from __future__ import annotations

import json
import os
from typing import Any

from tokenreel.recorder.imports.build import PeerRequest, PeerRun, check_seconds, finite_list, request_prompt
from tokenreel.session.fields import FieldReader
from tokenreel.session.model import ArchiveError

TOOL = "vllm bench serve"
REQUIRED = ("ttfts", "itls", "output_lens", "errors")
OPTIONAL = ("input_lens", "generated_texts", "start_times")


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
    requests = [_request(r, lists, i) for i in range(count)]
    return PeerRun(tool=TOOL, file=os.path.basename(path), model=_text(d.get("model_id")) or "unknown model",
                   requests=requests, version=version or _text(d.get("version")), summary=_summary(d),
                   lacks=_lacks(requests, d), notes=_notes(d))


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
    if d.get("max_concurrency") is not None or d.get("request_rate") not in (None, "inf"):
        notes.append(f"requests overlapped (max_concurrency {d.get('max_concurrency')}, request_rate"
                     f" {d.get('request_rate')}): figures are under that load, not one request at a time")
    elif d.get("request_rate") == "inf":
        notes.append("request_rate inf without max_concurrency: every request was sent at once, so figures are"
                     " under that load, not one request at a time")
    return notes
