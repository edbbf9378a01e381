"""Someone else's prompt set (JSONL, CSV or Parquet) turned into a tokenreel suite.

Why: a per-category claim needs enough prompts in each category, and the sets people already
have (SPEED-Bench, an evaluation export, a spreadsheet) come in other shapes. Every row is checked
before anything is written (a `tests` or `answer` column grades the rows that fill it,
`tokenreel.recorder.grading_columns`), and every problem is one `PromptError` line naming the file, the line
(JSONL, CSV) or row (Parquet) and the column, so a set is converted whole or not at all.
"""

from __future__ import annotations

import csv
import io
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import pyarrow as pa
import pyarrow.parquet as pq

from tokenreel.base.files import INPUTS, read_input, write_atomic
from tokenreel.base.safe_text import shown_path
from tokenreel.recorder.grading_columns import GRADING_COLUMNS, grading_columns, grading_of
from tokenreel.recorder.prompt_error import PromptError
from tokenreel.recorder.secrets import one_line
from tokenreel.session.model import Prompt

# Prompts a set may give: ten times what a two-arm ladder of five runs a prompt could record
# within a session's run bound (session.model.MAX_RUNS). With the suite file's own cap, it bounds
# the memory an import takes, however small the rows or well compressed the file.
MAX_PROMPTS = 100_000
BATCH_ROWS = 1024  # Parquet rows decoded at a time

# Where the prompt text is looked for, in this order, when no column is named.
PROMPT_COLUMNS = ("prompt", "question", "turns", "messages", "text")
ID_COLUMN = "id"


@dataclass(frozen=True)
class Columns:
    """The columns that hold each field. id None: `id` when the set has it, else ids are
    <category>-<n> in file order; prompt None: the first of PROMPT_COLUMNS the set has."""

    id: str | None = None
    category: str = "category"
    prompt: str | None = None


@dataclass(frozen=True)
class _Row:
    where: str  # how an error about it starts: "FILE:3" (a line of a text file) or "FILE row 3"
    place: str  # how a later duplicate names it: "line 3" or "row 3"
    values: dict[str, Any]


@dataclass(frozen=True)
class _Table:
    header: list[str]  # the columns (JSONL: the first row's keys)
    rows: Callable[[list[str]], Iterator[_Row]]  # the rows, given the columns needed (Parquet reads only those), one at a time


def import_prompt_set(path: Path, columns: Columns = Columns(), system: str | None = None) -> list[Prompt]:
    """The prompts of a set, every row checked. Text and the first of a list of turns become
    the user message (after `system`, when given); a list of {role, content} messages is kept
    as the chat (`system` goes first when it has no system message of its own)."""
    reader = _READERS.get(path.suffix.lower())
    if reader is None:
        raise PromptError(f"{shown_path(path)}: cannot tell the format from {path.suffix or 'a name without an extension'}; "
                          f"give a .jsonl, .json, .csv or .parquet file")
    try:
        raw = read_input(path, "prompt set")
    except OSError as exc:
        raise PromptError(f"{shown_path(path)}: {exc}") from None
    table = reader(path, raw)
    if not table.header:
        raise _no_rows(path)
    prompt_column = columns.prompt or next((c for c in PROMPT_COLUMNS if c in table.header), None)
    if prompt_column is None:
        raise PromptError(f"{shown_path(path)}: no prompt column (none of {', '.join(PROMPT_COLUMNS)}); name it with "
                          f"--prompt-column; {_listing(table.header)}")
    id_column = columns.id or (ID_COLUMN if ID_COLUMN in table.header else None)
    needed = {"--category-column": columns.category, "--prompt-column": prompt_column, "--id-column": id_column}
    for option, name in needed.items():
        if name is not None and name not in table.header:
            raise PromptError(f"{shown_path(path)}: no column {name!r} ({option}); {_listing(table.header)}")
    graded = [column for column in GRADING_COLUMNS if column in table.header]
    rows = table.rows(list(dict.fromkeys([*(name for name in needed.values() if name is not None), *graded])))
    prompts: list[Prompt] = []
    seen: dict[str, str] = {}
    numbers: Counter[str] = Counter()
    size, cap = 0, INPUTS["prompts"].limit
    for row in rows:
        if len(prompts) == MAX_PROMPTS:
            raise PromptError(f"{shown_path(path)}: more than {MAX_PROMPTS} prompts ({row.place} and on); import a part of the set")
        category = _text(row, columns.category, "category")
        numbers[category] += 1
        if id_column is None:
            prompt_id = f"{category}-{numbers[category]}"  # unique: the number after the last '-' tells them apart
        else:
            prompt_id = _text(row, id_column, "id")
            if prompt_id in seen:
                raise PromptError(f"{row.where}: column {id_column!r}: duplicate id {prompt_id!r} (first on {seen[prompt_id]})")
            seen[prompt_id] = row.place
        messages, text = _prompt(row, prompt_column, system)
        grading = grading_of(row.values, row.where, blank_is_absent=True)
        prompts.append(Prompt(id=prompt_id, category=category, messages=messages, prompt=text, grading=grading))
        size += len(_suite_line(prompts[-1]))
        if size > cap:
            raise _too_big(path, f"by {row.place}")
    if not prompts:
        raise _no_rows(path)
    return prompts


def category_counts(prompts: list[Prompt]) -> dict[str, int]:
    """Prompts per category, in the order the categories first appear."""
    return dict(Counter(p.category for p in prompts))


def write_suite(prompts: list[Prompt], out: Path) -> Path:
    """Write the prompts as a JSONL suite (atomically) that `load_prompts` reads; refused when it
    would be larger than the cap a prompt file is read with."""
    data = b"".join(_suite_line(p) for p in prompts)
    cap = INPUTS["prompts"].limit
    if len(data) > cap:
        raise PromptError(f"--out {shown_path(out)}: the suite would be {len(data) / (1 << 20):.0f} MiB, more than the "
                          f"{cap >> 20} MiB tokenreel reads as a prompt file; import a part of the set")
    return write_atomic(out, data)


def _suite_line(p: Prompt) -> bytes:
    """The prompt as a line of the suite file `load_prompts` reads."""
    text = {"messages": p.messages} if p.messages else {"prompt": p.prompt}
    return orjson.dumps({"id": p.id, "category": p.category, **text, **grading_columns(p.grading)}) + b"\n"


def _too_big(path: Path, where: str) -> PromptError:
    return PromptError(f"{shown_path(path)}: the suite would be more than the {INPUTS['prompts'].limit >> 20} MiB tokenreel"
                       f" reads as a prompt file ({where}); import a part of the set")


def _no_rows(path: Path) -> PromptError:
    return PromptError(f"{shown_path(path)}: no rows; a set needs one row per prompt, each with a category and a prompt")


def _listing(header: list[str]) -> str:
    """The columns as a user would type them: a name with control characters (ESC, BEL) escaped."""
    names = [name if name.isprintable() else repr(name) for name in header]
    return f"its columns: {', '.join(names)}" if header else "it has no columns"


def _value(row: _Row, column: str) -> Any:
    if column not in row.values:
        raise PromptError(f"{row.where}: no column {column!r}; {_listing(list(row.values))}")
    return row.values[column]


def _found(value: Any) -> str:
    shown = repr(value)
    return f"{type(value).__name__} {shown if len(shown) <= 40 else shown[:37] + '...'}"


def _text(row: _Row, column: str, what: str) -> str:
    return _checked(row, column, _value(row, column), what, "text")


def _checked(row: _Row, column: str, value: Any, what: str, expected: str) -> str:
    """`value` when it is text that is not blank, else the row's one-line error."""
    if value is None or value == [] or (isinstance(value, str) and not value.strip()):
        raise PromptError(f"{row.where}: column {column!r}: empty {what}")
    if not isinstance(value, str):
        raise PromptError(f"{row.where}: column {column!r}: expected {expected}, found {_found(value)}")
    return value


def _prompt(row: _Row, column: str, system: str | None) -> tuple[list[dict[str, str]], str]:
    """(messages, "") or ([], text), as a Prompt holds them."""
    value = _value(row, column)
    if isinstance(value, list) and value and all(isinstance(turn, str) for turn in value):
        value = value[0]  # turns (SPEED-Bench, MT-Bench): the first turn is the prompt
    elif isinstance(value, list) and value and all(isinstance(message, dict) for message in value):
        messages = [_message(row, column, i, message) for i, message in enumerate(value, start=1)]
        if not any(m["content"].strip() for m in messages if m["role"] != "system"):
            raise PromptError(f"{row.where}: column {column!r}: empty prompt")
        if system and messages[0]["role"] != "system":
            messages.insert(0, {"role": "system", "content": system})
        return messages, ""
    text = _checked(row, column, value, "prompt", "text, a list of turns or a list of {role, content} messages")
    if system:
        return [{"role": "system", "content": system}, {"role": "user", "content": text}], ""
    return [], text


def _message(row: _Row, column: str, number: int, message: dict[str, Any]) -> dict[str, str]:
    role, content = message.get("role"), message.get("content")
    if not isinstance(role, str) or not isinstance(content, str):
        raise PromptError(f"{row.where}: column {column!r}: message {number} needs text 'role' and 'content'")
    return {"role": role, "content": content}


# ---------------------------------------------------------------------------------------------
# Readers: one per format, each giving the columns and the rows with where each one is.


def _jsonl(path: Path, raw: bytes) -> _Table:
    def rows(_: list[str]) -> Iterator[_Row]:
        for number, line in enumerate(io.BytesIO(raw), start=1):
            if not line.strip():
                continue
            try:
                values = orjson.loads(line)
            except orjson.JSONDecodeError as exc:
                raise PromptError(f"{shown_path(path)}:{number}: not valid JSON ({exc}); give one JSON object per line") from None
            if not isinstance(values, dict):
                raise PromptError(f"{shown_path(path)}:{number}: expected one JSON object per line, found {type(values).__name__}")
            yield _Row(f"{shown_path(path)}:{number}", f"line {number}", values)

    first = next(rows([]), None)
    return _Table(list(first.values) if first else [], rows)


def _csv(path: Path, raw: bytes) -> _Table:
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise PromptError(f"{shown_path(path)}: not UTF-8 text (byte {exc.start}); save the CSV as UTF-8") from None

    def reading() -> Iterator[tuple[int, list[str]]]:
        """(line number, cells) of each record, the header first."""
        reader = csv.reader(io.StringIO(text, newline=""))
        limit = csv.field_size_limit(INPUTS["prompt set"].limit)  # a long-context prompt is one cell
        try:
            start = 1
            for cells in reader:
                yield start, cells
                start = reader.line_num + 1
        except csv.Error as exc:
            raise PromptError(f"{shown_path(path)}:{reader.line_num}: not valid CSV ({exc})") from None
        finally:
            csv.field_size_limit(limit)

    header = next(reading(), (1, []))[1]

    def rows(_: list[str]) -> Iterator[_Row]:
        records = reading()
        next(records, None)  # the header
        for start, cells in records:
            if len(cells) > len(header):
                raise PromptError(f"{shown_path(path)}:{start}: {len(cells)} cells, but the header names {len(header)} columns")
            if cells:  # a blank line
                values = dict(zip(header, cells + [""] * len(header), strict=False))
                yield _Row(f"{shown_path(path)}:{start}", f"line {start}", values)

    return _Table(header, rows)


def _parquet(path: Path, raw: bytes) -> _Table:
    try:
        parquet = pq.ParquetFile(pa.BufferReader(raw))
    except pa.ArrowException as exc:
        raise PromptError(f"{shown_path(path)}: not a Parquet file tokenreel can read ({exc})") from None

    def rows(columns: list[str]) -> Iterator[_Row]:
        # Their decoded size, before one is decoded: a small file of well-compressed cells is not read
        # into memory only to be refused (dictionary-encoded rows are bounded as they come, above).
        meta, wanted = parquet.metadata, set(columns)
        decoded = sum(group.column(i).total_uncompressed_size for group in (meta.row_group(g) for g in range(meta.num_row_groups))
                      for i in range(group.num_columns) if group.column(i).path_in_schema in wanted)
        if decoded > INPUTS["prompts"].limit:
            raise _too_big(path, f"its columns {', '.join(columns)} hold {decoded >> 20} MiB")
        number = 0
        try:
            for batch in parquet.iter_batches(batch_size=BATCH_ROWS, columns=columns):
                for values in batch.to_pylist():
                    number += 1
                    yield _Row(f"{shown_path(path)} row {number}", f"row {number}", values)
        except (pa.ArrowException, ValueError, OverflowError) as exc:  # a value Python cannot hold (a date past year 9999)
            raise PromptError(f"{shown_path(path)} rows {number + 1} to {number + BATCH_ROWS}: cannot read its columns"
                              f" {', '.join(columns)} ({one_line(str(exc), 200)})") from None

    return _Table(parquet.schema_arrow.names, rows)


_READERS: dict[str, Callable[[Path, bytes], _Table]] = {".jsonl": _jsonl, ".json": _jsonl, ".csv": _csv, ".parquet": _parquet}
