"""DIR/index.html: every video of a catalogue with its poster, by session and prompt.

A static page: no script, no fetch beyond the catalogue's own files (linked relative to DIR, so
the folder can move or be served as is), every text from a session escaped (`safe_text.esc`),
and nothing that changes from run to run, so the same catalogue writes the same bytes.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from itertools import groupby
from pathlib import Path

from tokenreel.base.safe_text import esc
from tokenreel.renderer.catalogue.run_jobs import FAILED, Outcome

INDEX = "index.html"
_STYLE = (
    "body{font-family:system-ui,sans-serif;margin:2em;background:#111;color:#eee}"
    "h2{margin-top:2em}.videos{display:flex;flex-wrap:wrap;gap:1.5em;align-items:flex-start}"
    "figure{margin:0}video{max-width:480px;max-height:480px;display:block;background:#000}"
    "figcaption{margin-top:.4em;font-size:.9em}.failed{color:#f88}"
)


def _link(path: Path, out: Path) -> str:
    """A catalogue file as the page links it: relative to DIR, with '/', escaped."""
    return esc(Path(os.path.relpath(path, out)).as_posix())


def _figure(outcome: Outcome, out: Path) -> str:
    job = outcome.job
    caption = f"{esc(job.layout.name)} · {esc(job.theme_label)}"
    if outcome.status == FAILED:
        return f'<figure class="failed"><figcaption>{caption}: not rendered: {esc(outcome.reason)}</figcaption></figure>'
    return (
        f'<figure><video controls preload="none" poster="{_link(job.poster, out)}" src="{_link(job.video, out)}"></video>'
        f"<figcaption>{caption}</figcaption></figure>"
    )


def index_page(outcomes: Sequence[Outcome], out: Path) -> bytes:
    """The page, grouped by session file, then prompt, in the catalogue's order."""
    rendered = sum(outcome.status != FAILED for outcome in outcomes)
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>tokenreel catalogue</title><style>{_STYLE}</style></head><body>",
        f"<h1>tokenreel catalogue</h1><p>{rendered} of {len(outcomes)} videos</p>",
    ]
    for session, by_session in groupby(outcomes, key=lambda o: o.job.session):
        parts.append(f"<section><h2>{esc(session.stem)}</h2>")
        for prompt, by_prompt in groupby(by_session, key=lambda o: o.job.prompt):
            parts.append(f'<h3>{esc(prompt)}</h3><div class="videos">')
            parts.extend(_figure(outcome, out) for outcome in by_prompt)
            parts.append("</div>")
        parts.append("</section>")
    parts.append("</body></html>")
    return ("\n".join(parts) + "\n").encode()
