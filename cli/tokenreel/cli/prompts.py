"""`tokenreel prompts import`: your own prompt set (JSONL, CSV, Parquet) as a tokenreel suite."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from tokenreel.base.safe_text import shown_path
from tokenreel.cli.app import app, check_writable, err, fail, user_errors
from tokenreel.cli.terminal import Command, Group

prompts_app = typer.Typer(
    cls=Group,
    add_completion=False,
    no_args_is_help=True,
    rich_markup_mode=None,
    help="""Prompt suites: bring your own prompt set to `tokenreel record`.

A suite is a JSONL file of {id, category, messages | prompt} rows, named by [session] prompts
(or builtin:mixed, builtin:speed, builtin:ladder4, random:N, and the graded humaneval, arith:N).

Example:

\b
  tokenreel prompts import qualitative.parquet --id-column question_id --out speed-bench.jsonl""",
)
app.add_typer(prompts_app, name="prompts", short_help="Turn your own prompt set (JSONL, CSV, Parquet) into a suite for record.")


@prompts_app.command("import", cls=Command, short_help="Convert a JSONL, CSV or Parquet prompt set into a tokenreel suite.")
def import_set(
    source: Annotated[
        Path, typer.Argument(metavar="FILE", help="The set: .jsonl or .json (one object a line), .csv (a header row) or .parquet.")
    ],
    out: Annotated[
        Path, typer.Option("--out", "-o", metavar="FILE", help="The suite to write (JSONL).")
    ] = Path("prompts.jsonl"),
    id_column: Annotated[
        str | None,
        typer.Option(metavar="COLUMN", help="Ids (default: id; a set without it gets <category>-<n>, in file order)."),
    ] = None,
    category_column: Annotated[str, typer.Option(metavar="COLUMN", help="Categories; every row needs one.")] = "category",
    prompt_column: Annotated[
        str | None,
        typer.Option(metavar="COLUMN", help="The prompt (default: the first of prompt, question, turns, messages, text the set has)."),
    ] = None,
    system: Annotated[
        str | None, typer.Option(metavar="TEXT", help="A system message for every prompt that has none.")
    ] = None,
    force: Annotated[bool, typer.Option(help="Overwrite --out if it exists.")] = False,
) -> None:
    """Convert a prompt set into a suite that `[session] prompts` can name, checking every row.

    A prompt is text (the user message), a list of turns (SPEED-Bench, MT-Bench: only the
    first turn is used, as the user message; later turns need the model's own answers) or a
    list of {role, content} messages (kept as the chat). A `tests` column (with `entry_point`,
    `prelude`) or an `answer` column (with `extract`, `pattern`) grades the rows that fill it
    (docs/grading.md). A missing column, an empty or
    non-text value, a duplicate id or a set without rows is one line naming the file, the
    line (JSONL, CSV) or row (Parquet) and the column, and nothing is written (exit 2).

    One line on stderr sums up the suite: prompts, categories and the count in each; a
    category with fewer than 8 prompts gets a warning (too few for a per-category interval).
    An existing --out is not overwritten without --force.

    Examples:

    \b
      tokenreel prompts import qualitative.parquet --id-column question_id --out speed-bench.jsonl
      tokenreel prompts import evals.csv --prompt-column input --category-column task --system "You are a helpful assistant."
      # then, in the config: [session] prompts = "speed-bench.jsonl" (a path relative to the config)
    """
    from tokenreel.recorder.prompt_sets import Columns, category_counts, import_prompt_set, write_suite
    from tokenreel.recorder.suites import MIN_PER_CATEGORY

    if system is not None and not system.strip():
        fail("--system: give the system message's text, or leave --system out")
    check_writable(out, force)
    with user_errors():
        prompts = import_prompt_set(source, Columns(id_column, category_column, prompt_column), system)
    with user_errors(out):
        write_suite(prompts, out)
    counts = category_counts(prompts)
    listed = ", ".join(f"{category} {count}" for category, count in counts.items())
    err.print(f"{_many(len(prompts), 'prompt')} in {_many(len(counts), 'category', 'categories')} written to {shown_path(out)} "
              f"(category counts: {listed})", markup=False, soft_wrap=True)
    for category, count in counts.items():
        if count < MIN_PER_CATEGORY:
            err.print(f"warning: category {category!r} has {_many(count, 'prompt')}: too few for a per-category interval: "
                      f"at least {MIN_PER_CATEGORY} are needed", markup=False, soft_wrap=True)


def _many(count: int, one: str, more: str | None = None) -> str:
    return f"{count} {one if count == 1 else more or one + 's'}"
