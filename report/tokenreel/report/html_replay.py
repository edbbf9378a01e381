"""The HTML report's replay: each arm's median run per prompt (`tokenreel.analysis.ladder.median_run`,
as the video plays by default) from the archived arrival times, measured from request send.

Its script (assets/tokenreel/assets/html/replay.js) reads the runs from a JSON <script> element.
Answer text is untrusted: the JSON is escaped so it cannot end its element, and the script
inserts text with textContent.
"""

from __future__ import annotations

import math
import re
from typing import Any

import orjson

from tokenreel.analysis.claims import typical_prompt
from tokenreel.analysis.figures import MISSING, clock_seconds, figure
from tokenreel.analysis.ladder import build_cells, median_run
from tokenreel.analysis.metrics import first_token_index, last_token_index, output_tokens, run_metrics
from tokenreel.analysis.selection import RunSelection
from tokenreel.analysis.serving_config import real_acceptance_arms
from tokenreel.base.safe_text import BIDI_CONTROLS, esc
from tokenreel.report.data import Report, report_selection
from tokenreel.session.model import Run, Session

_BIDI = re.compile(f"[{BIDI_CONTROLS}]")
SPEEDS = ("0.25", "0.5", "1", "2", "4")
NS_PER_MS = 1_000_000


def _track(session: Session, run: Run) -> dict[str, Any]:
    """One arm's median run for the replay: every event's time (ns from request send), tokens and text."""
    chunks = run.chunks
    first = first_token_index(chunks)
    last = last_token_index(chunks)
    m = run_metrics(run)
    track: dict[str, Any] = {
        "arm": run.arm,
        "run": run.index,
        "t": chunks.t_ns,
        "tokens": chunks.tokens,
        "first": first,
        "last": last,
        "total": max(session.settings.max_tokens, output_tokens(run)),
        "estimated": run.tokens_estimated,
        "ttft": figure(m.ttft_s, 2, " s"),
        "decode": figure(m.decode_tok_s, 1),
        "done": clock_seconds(chunks.t_ns[last]) if last is not None else MISSING,
    }
    for name in ("content", "reasoning", "tool"):
        column = getattr(chunks, name)
        if any(column):
            track[name] = column
    return track


def _places(tracks: list[dict[str, Any]]) -> None:
    """Finishing place among the arms of one prompt (ties share a place), as the video's."""
    finishes = sorted({t["t"][t["last"]] for t in tracks if t.get("last") is not None})
    for t in tracks:
        if t.get("last") is not None:
            t["place"] = 1 + sum(1 for f in finishes if f < t["t"][t["last"]])


def replay_data(session: Session, report: Report) -> dict[str, Any]:
    """What replay.js plays: per prompt, each arm's median run under the report's selection (or why it has none)."""
    selection = report_selection(report)
    missing = {(m["arm"], m["prompt"]): m["reason"] for m in report["missing_cells"]}
    prompts: list[dict[str, Any]] = []
    for prompt in session.prompts:
        tracks: list[dict[str, Any]] = []
        for arm in session.arms:
            run = median_run(session, arm.id, prompt.id, selection)
            if run is None or first_token_index(run.chunks) is None:
                why = missing.get((arm.id, prompt.id), "no usable run with a decode speed (fewer than two token events)")
                tracks.append({"arm": arm.id, "missing": why})
            else:
                tracks.append(_track(session, run))
        _places(tracks)
        end_ns = max((t["t"][-1] for t in tracks if t.get("t")), default=0)
        prompts.append({
            "id": prompt.id,
            "category": prompt.category,
            "messages": [[m.get("role", ""), m.get("content", "")] for m in prompt.messages],
            "prompt": prompt.prompt,
            "end_ms": math.ceil(end_ns / NS_PER_MS),
            "tracks": tracks,
        })
    return {"arms": [a.id for a in session.arms], "prompts": prompts, "default": default_index(session, selection)}


def default_index(session: Session, selection: RunSelection) -> int:
    """The prompt the replay opens on: as a video's default, the one whose decode speed-up of the
    headline's arms is nearest the suite's (`typical_prompt`); the first where none has one."""
    arms = real_acceptance_arms(session.arms)
    if len(arms) < 2:
        return 0
    found = typical_prompt(session, build_cells(session, selection), "decode", arms[-1], arms[0], selection)
    return 0 if found is None else [p.id for p in session.prompts].index(found[0])


def script_json(data: dict[str, Any]) -> str:
    """JSON that is safe inside <script>: every '<' escaped, so no text can end the element, and
    every bidi control too, so the page's bytes hold none raw (the values are unchanged)."""
    return _BIDI.sub(lambda m: f"\\u{ord(m.group()):04x}", orjson.dumps(data).decode().replace("<", "\\u003c"))


def replay_section(session: Session, data: dict[str, Any], colors: dict[str, str]) -> tuple[str, set[tuple[str, str, int]]]:
    """The player's section (its controls and one panel per arm; replay.js fills them), and the
    runs it plays, which the runs table marks."""
    if not data["prompts"] or not session.arms:
        nothing = "<p class=note>Nothing to replay: the session has no prompts or no arms.</p>"
        return f'<section id="replay"><h2>Replay</h2>{nothing}</section>', set()
    options = "".join(
        f'<option value="{i}"{" selected" if i == data["default"] else ""}>{esc(p["id"])} ({esc(p["category"])})</option>'
        for i, p in enumerate(data["prompts"])
    )
    speeds = "".join(
        f'<button type="button" data-speed="{s}" aria-pressed="{"true" if s == "1" else "false"}">{s}×</button>' for s in SPEEDS
    )
    panels = "".join(
        f'<article class="arm-panel" data-arm="{esc(arm.id)}" data-tokens="0" style="--accent:{colors[arm.id]}">'
        f'<header><span class="dot"></span><span class="label">{esc(arm.label)}</span><span class="run dim"></span></header>'
        '<div class="big"><span class="rate">—</span><span class="unit"> tok/s decode</span></div>'
        '<div class="stats"><span class="count"></span><span class="ttft"></span><span class="elapsed"></span></div>'
        '<div class="progress"><div class="fill"></div></div>'
        '<pre class="stream" tabindex="0"></pre></article>'
        for arm in session.arms
    )
    replayed = {(t["arm"], p["id"], t["run"]) for p in data["prompts"] for t in p["tracks"] if "run" in t}
    section = (
        '<section id="replay"><h2>Replay</h2>'
        "<p class=note>Each arm's median run of the prompt (the run the video plays by default), streamed at the "
        "recorded pace: time is measured from request send, so TTFT shows; the arms were recorded one after another "
        "and race here side by side.</p>"
        '<div class="controls">'
        f'<label>Prompt <select id="prompt">{options}</select></label>'
        '<button type="button" id="play" class="play">▶ Play</button>'
        f'<div class="speeds" role="group" aria-label="Playback speed">{speeds}</div>'
        '<input type="range" id="scrub" min="0" max="0" step="1" value="0" aria-label="Time from request send (ms)">'
        '<output id="clock" data-ms="0">0.000 s</output>'
        "</div>"
        '<details class="prompt-text"><summary id="prompt-summary">Prompt</summary><div id="prompt-messages"></div></details>'
        f'<div class="panels" style="--arms:{min(len(session.arms), 4)}">{panels}</div>'
        "</section>"
    )
    return section, replayed
