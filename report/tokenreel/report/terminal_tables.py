"""The ladder as terminal tables: what `record` prints at its end.

FitTable fits a narrow terminal by truncating its label columns with "…"; numbers are never
wrapped, truncated or cut.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict
from typing import Any

from rich.console import Console, ConsoleOptions, RenderResult
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text

from tokenreel.analysis.claims import claim_text, headline, scope_text
from tokenreel.analysis.figures import figure
from tokenreel.analysis.ladder import ITSELF, Cell, LadderRow, build_cells, build_ladder, category_table
from tokenreel.analysis.roofline import rooflines
from tokenreel.analysis.selection import DEFAULT_SELECTION
from tokenreel.report.data import decomposition_entry, report_view
from tokenreel.report.roofline_text import ROOFLINE_TITLE, roofline_line
from tokenreel.report.wording import acceptance_text, arms_shown_lines, decomposition_table, ratio_text
from tokenreel.session.model import Session

MIN_LABEL = 6  # a label column narrower than this would say nothing ("Orig…")


class FitTable(Table):
    """A table whose label columns give way when the width is short; its numbers never do.

    Add columns with label_column() and number_column(). When the table is wider than the
    space it is given, first the headers of number columns wrap at their spaces, then label
    columns are truncated with "…" (widest first, down to a few characters), then headers of
    number columns are truncated. A number column is never narrower than its widest value, so
    a value is never wrapped, truncated or cut. The title is kept on one line when it fits.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.labels: set[int] = set()

    def label_column(self, header: str | Text, **kwargs: Any) -> None:
        self.labels.add(len(self.columns))
        self.add_column(header, no_wrap=True, overflow="ellipsis", **kwargs)

    def number_column(self, header: str | Text, **kwargs: Any) -> None:
        kwargs.setdefault("justify", "right")
        self.add_column(header, overflow="ellipsis", **kwargs)

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        self._fit(console, options)
        yield from super().__rich_console__(console, options)

    def _fit(self, console: Console, options: ConsoleOptions) -> None:
        """Set each column's max_width so that the table fits options.max_width, if it can."""

        def width(renderables: Iterable[Any]) -> int:
            return max((Measurement.get(console, options, r).maximum for r in renderables), default=0)

        natural: list[int] = []
        stages: tuple[list[int], list[int], list[int]] = ([], [], [])
        for index, column in enumerate(self.columns):
            column.max_width = None
            values = width(column.cells)
            header = str(column.header)
            full = max(values, width([header]))
            natural.append(full)
            if index in self.labels:
                stages[0].append(full)
                stages[1].append(min(full, MIN_LABEL))
            else:
                words = max((len(word) for word in header.split()), default=0)
                stages[0].append(max(values, min(full, words)))
                stages[1].append(stages[0][-1])
            stages[2].append(stages[1][-1] if index in self.labels else values)
        _, right, _, left = self.padding
        overhead = self._extra_width + (left + right) * len(self.columns)
        widths = list(natural)
        excess = sum(widths) + overhead - options.max_width
        for floors in stages:
            while excess > 0:
                shrinkable = [i for i, (w, f) in enumerate(zip(widths, floors, strict=False)) if w > f]
                if not shrinkable:
                    break
                widths[max(shrinkable, key=lambda i: widths[i] - floors[i])] -= 1
                excess -= 1
        # Still too wide (a terminal narrower than the numbers alone): rich squeezes every column.
        for column, fitted, full in zip(self.columns, widths, natural, strict=False):
            if fitted < full:
                column.max_width = fitted
        if self.title:
            title = width([self.title])
            self.min_width = title if title <= options.max_width else None


def summary_tables(session: Session, config: str = "CONFIG", out: str = "SESSION") -> list[Table | Text]:
    """The ladder and the per-category table, as `tokenreel report` computes them: of the arms
    recorded so far, then the line naming those not recorded yet (`record --config config --out
    out` records them)."""
    view = report_view(session)
    session = view.session
    cells = build_cells(session)
    ladder = build_ladder(session, cells)
    title = session.name + (" (simulated endpoints)" if session.simulated else "")
    claim = headline(session, cells)
    caption = None
    if claim is not None:  # the story in the words the report and the video's end card use
        labels = {a.id: a.label for a in session.arms}
        caption = Text(f"{claim_text(claim.value, claim.metric)}: {labels[claim.arm]} vs {labels[claim.vs]}, {scope_text(claim)}")
        missing = next((r.vs_first_ci95_note for r in ladder if r.vs_first_ci95 is None and r.vs_first_ci95_note != ITSELF), "")
        caption.append("; [low–high]: 95 % interval over prompts" if claim.ci95 else f"; {missing}" if missing else "")
    table = FitTable(title=Text(title, style="table.title"), title_justify="left", caption=caption, caption_justify="left")
    table.number_column("Step", justify="left")
    table.label_column("Arm")
    # The acceptance rate gets a column only in a ladder that has one (a speculative arm).
    rates = any(row.acceptance_rate is not None for row in ladder)
    for column in ("Decode tok/s", "vs prior", "vs first", "TTFT s", "Accept. len") + (("Accept. rate",) if rates else ()):
        table.number_column(column)
    for i, row in enumerate(ladder, start=1):
        rate = (figure(None if row.acceptance_rate is None else row.acceptance_rate * 100, 0, " %"),) if rates else ()
        length = acceptance_text(row.acceptance_length, row.acceptance_approximate, row.synthetic_acceptance)
        table.add_row(
            str(i),
            Text(row.label),
            figure(row.decode_tok_s),
            ratio_text(row.vs_prior, row.vs_prior_ci95),
            ratio_text(row.vs_first, row.vs_first_ci95),
            figure(row.ttft_s, 2),
            length,
            *rate,
        )
    categories = category_table(session, cells)
    by_category = FitTable(title="Decode tok/s by prompt category", title_justify="left")
    by_category.label_column("Category")
    for row in ladder:
        by_category.number_column(Text(row.label))
    for category, values in categories.items():
        by_category.add_row(Text(category), *(figure(values.get(row.arm)) for row in ladder))
    shown = arms_shown_lines(view.not_recorded, [], config, out)
    return [table, by_category, *_decomposition(session, cells), *_roofline(session, ladder), *(Text(line) for line in shown)]


def _roofline(session: Session, ladder: list[LadderRow]) -> list[Text]:
    """The figured arms' roofline lines and, where some arm has none, one line naming them; nothing
    where no arm is figured (a simulated or remote ladder with no sizes: the report says why)."""
    entries = rooflines(session, ladder)
    figured = [roofline_line(asdict(r), r.label) for r in entries if r.pct_of_limit is not None]
    if not figured:
        return []
    unfigured = [r.label for r in entries if r.pct_of_limit is None]
    rest = [f"  no roofline for {', '.join(unfigured)}: the report says what is missing and the key to set"] if unfigured else []
    return [Text(ROOFLINE_TITLE), *(Text(f"  {line}") for line in figured), *(Text(line) for line in rest)]


def _decomposition(session: Session, cells: list[Cell]) -> list[Table | Text]:
    """A drafter's speed-up as tokens a step x step ratio, with its notes; nothing where no arm drafts."""
    report = {"decomposition": decomposition_entry(session, cells, DEFAULT_SELECTION),
              "arms": [{"arm": a.id, "label": a.label} for a in session.arms]}
    headers, rows, notes = decomposition_table(report)
    if not headers:
        return []
    table = FitTable(title="Speed-up decomposed", title_justify="left")
    table.label_column(headers[0])
    table.label_column(headers[1])
    for header in headers[2:]:
        table.number_column(header)
    for row in rows:
        table.add_row(Text(row[0]), Text(row[1]), *row[2:])
    return [table, *(Text(note) for note in notes)]
