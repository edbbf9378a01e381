"""The options `render` and `render-all` share, declared once so both help pages say the same.

Each is a type for a parameter of the same name (`run: Run = "median"`): typer takes the
option's name from the parameter, its metavar and help from here. An option with a fixed set
of values takes the renderer's Enum (`tokenreel.renderer.options`), any case, so typer refuses
another value before anything is loaded.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from tokenreel.cli.app import EXCLUDE_HOST_HELP
from tokenreel.renderer.options import Align as AlignValue
from tokenreel.renderer.options import Metric as MetricValue

Run = Annotated[
    str, typer.Option(metavar="median|N", help="'median' (median-speed measured run of each arm) or a run index.")
]

Arms = Annotated[
    str | None, typer.Option(metavar="IDS", help="Arm ids side by side, comma-separated, at most 4 (default: all).")
]

Speed = Annotated[
    str, typer.Option(metavar="FACTOR", help="Playback speed; 1 is real time (fractions like 1/2 work).")
]

TitleS = Annotated[
    str, typer.Option("--title-s", metavar="SECONDS", help="Seconds of title card before t = 0 (0: none).")
]

Logo = Annotated[
    Path | None, typer.Option(metavar="PNG", help="A PNG logo for the title card's top-right corner.")
]

HoldS = Annotated[
    str,
    typer.Option(
        "--hold-s", metavar="SECONDS",
        help="Seconds the headline end card is shown, after a short pause on the final state (0: none).",
    ),
]

Align = Annotated[
    AlignValue | None,
    typer.Option(
        metavar="send|first-token", case_sensitive=False,
        help="Where the race's clocks start; the metric sets it (decode: each arm's first token; e2e: request send), "
        "so the finish times a viewer can time give the speed-up the video states.  [default: the metric's]",
    ),
]

Metric = Annotated[
    MetricValue,
    typer.Option(
        metavar="decode|e2e", case_sensitive=False,
        help="The one metric of every speed-up the video shows: decode (decode tok/s, the report's headline) "
        "or e2e (end to end: time from request send to the last token). It sets the race's clock.",
    ),
]

Workers = Annotated[
    int | None, typer.Option(min=1, metavar="N", help="Worker processes (the output is the same for any number).")
]

MaxDuration = Annotated[
    str,
    typer.Option(
        "--max-duration", metavar="SECONDS",
        help="Refuse a replay longer than this, in seconds of video (default 1800: 30 min; at most 86400).",
    ),
]

AnswerBadge = Annotated[
    bool,
    typer.Option(
        "--answer-badge",
        help="Once an arm's stream is done, badge its column: 'same answer as <first arm>' or "
        "'diverges at token N' (the first arm's says 'reference answer').",
    ),
]

ExcludeHostContended = Annotated[bool, typer.Option(help=EXCLUDE_HOST_HELP)]
