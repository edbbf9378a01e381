"""`tokenreel prompts import`: a JSONL, CSV or Parquet set becomes a suite that `load_prompts` reads
back; every bad set is one line (the file, the line or row, the column), exit 2, nothing written.
Real files throughout, the Parquet ones written with pyarrow."""

from __future__ import annotations

import csv
import os
import time
from collections.abc import Callable
from pathlib import Path

import orjson
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.test_cli import invoke
from tokenreel.recorder.suites import MIN_PER_CATEGORY, load_prompts
from tokenreel.session.model import Prompt

SYSTEM = "You are a helpful assistant."
SPEED_CATEGORIES = ("coding", "math", "stem", "humanities", "writing", "summarization", "roleplay", "rag",
                    "multilingual", "reasoning", "qa")


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_bytes(b"".join(orjson.dumps(row) + b"\n" for row in rows))
    return path


def write_csv(path: Path, header: list[str], rows: list[list[str]], encoding: str = "utf-8") -> Path:
    with path.open("w", newline="", encoding=encoding) as handle:
        writer = csv.writer(handle)
        writer.writerow(header)
        writer.writerows(rows)
    return path


def write_parquet(path: Path, columns: dict[str, list]) -> Path:
    pq.write_table(pa.table(columns), path)
    return path


def imported(tmp_path: Path, source: Path, *args: str) -> tuple[list[Prompt], list[str]]:
    """The suite as `load_prompts` reads it back, and the lines the command printed."""
    out = tmp_path / "suite.jsonl"
    result = invoke("prompts", "import", source, "--out", out, *args)
    assert result.exit_code == 0, result.output
    return load_prompts(str(out), tmp_path), result.output.splitlines()


def user(text: str) -> dict[str, str]:
    return {"role": "user", "content": text}


def test_jsonl_round_trips_with_a_system_message(tmp_path: Path) -> None:
    source = write_jsonl(tmp_path / "set.jsonl", [
        {"id": "q1", "category": "math", "question": "What is 2 + 2? Explain.", "source": "mine"},
        {"id": "q2", "category": "code", "question": "Écris une boucle en Python.\nAvec des tests.", "source": 3},
    ])
    prompts, lines = imported(tmp_path, source, "--system", SYSTEM)
    system = {"role": "system", "content": SYSTEM}
    assert prompts == [
        Prompt("q1", "math", [system, user("What is 2 + 2? Explain.")], ""),
        Prompt("q2", "code", [system, user("Écris une boucle en Python.\nAvec des tests.")], ""),
    ]
    assert lines[0] == f"2 prompts in 2 categories written to {tmp_path / 'suite.jsonl'} (category counts: math 1, code 1)"


def test_messages_are_kept_as_the_chat_and_ids_are_made_per_category(tmp_path: Path) -> None:
    source = write_jsonl(tmp_path / "chats.json", [
        {"category": "chat", "messages": [{"role": "system", "content": "Be terse."}, user("Hi")]},
        {"category": "chat", "messages": [{"role": "user", "content": "Hello", "name": "ana"}]},
        {"category": "other", "messages": [user("Why?")]},
    ])
    prompts, _ = imported(tmp_path, source, "--system", SYSTEM)
    assert [(p.id, p.messages) for p in prompts] == [
        ("chat-1", [{"role": "system", "content": "Be terse."}, user("Hi")]),  # its own system message stays
        ("chat-2", [{"role": "system", "content": SYSTEM}, user("Hello")]),
        ("other-1", [{"role": "system", "content": SYSTEM}, user("Why?")]),
    ]


def test_csv_round_trips_quoted_cells_and_a_byte_order_mark(tmp_path: Path) -> None:
    text = 'Summarize this:\n"Quoted", with commas, and\nthree lines.'
    source = write_csv(tmp_path / "set.csv", ["category", "prompt", "notes"],
                       [["a", "First prompt", ""], ["b", text, "n"], ["a", "日本語で答えてください。", ""]],
                       encoding="utf-8-sig")
    prompts, _ = imported(tmp_path, source)
    assert prompts == [Prompt("a-1", "a", [], "First prompt"), Prompt("b-1", "b", [], text),
                       Prompt("a-2", "a", [], "日本語で答えてください。")]


def test_parquet_turns_give_the_first_turn_and_messages_stay_a_chat(tmp_path: Path) -> None:
    turns = write_parquet(tmp_path / "turns.parquet", {
        "question_id": ["x7", "x8"], "category": ["math", "rag"],
        "turns": [["Solve it.", "Now explain it to a child."], ["Read this, then answer."]],
        "multiturn": [True, False],
    })
    prompts, _ = imported(tmp_path, turns, "--id-column", "question_id")
    assert prompts == [Prompt("x7", "math", [], "Solve it."), Prompt("x8", "rag", [], "Read this, then answer.")]
    chats = write_parquet(tmp_path / "chats.parquet", {
        "category": ["c"], "conversation": [[{"role": "system", "content": "S"}, {"role": "user", "content": "U"}]],
    })
    prompts, _ = imported(tmp_path, chats, "--prompt-column", "conversation", "--force")
    assert prompts == [Prompt("c-1", "c", [{"role": "system", "content": "S"}, user("U")], "")]


def jsonl(rows: list[dict]) -> Callable[[Path], Path]:
    return lambda folder: write_jsonl(folder / "set.jsonl", rows)


def csv_file(header: list[str], rows: list[list[str]]) -> Callable[[Path], Path]:
    return lambda folder: write_csv(folder / "set.csv", header, rows)


def parquet(columns: dict[str, list]) -> Callable[[Path], Path]:
    return lambda folder: write_parquet(folder / "set.parquet", columns)


def text_file(name: str, text: str) -> Callable[[Path], Path]:
    def make(folder: Path) -> Path:
        (folder / name).write_text(text, encoding="utf-8")
        return folder / name
    return make


OK_ROW = {"id": "a", "category": "c", "prompt": "Fine."}


@pytest.mark.parametrize(
    ("make", "args", "line"),
    [
        (jsonl([OK_ROW, {"id": "b", "prompt": "No category."}]), [],
         "set.jsonl:2: no column 'category'; its columns: id, prompt"),
        (csv_file(["id", "prompt"], [["a", "x"]]), [],
         "set.csv: no column 'category' (--category-column); its columns: id, prompt"),
        (csv_file(["id", "category"], [["a", "c"]]), [],
         "set.csv: no prompt column (none of prompt, question, turns, messages, text); name it with --prompt-column; "
         "its columns: id, category"),
        (csv_file(["category", "prompt"], [["c", "x"]]), ["--id-column", "qid"],
         "set.csv: no column 'qid' (--id-column); its columns: category, prompt"),
        (csv_file(["category", "prompt"], [["c", "x"], ["c", "  "]]), [], "set.csv:3: column 'prompt': empty prompt"),
        (parquet({"category": ["c", None], "prompt": ["x", "y"]}), [], "set.parquet row 2: column 'category': empty category"),
        (jsonl([OK_ROW, {**OK_ROW, "id": "b"}, OK_ROW]), [],
         "set.jsonl:3: column 'id': duplicate id 'a' (first on line 1)"),
        (parquet({"id": ["a", "a"], "category": ["c", "c"], "prompt": ["x", "y"]}), [],
         "set.parquet row 2: column 'id': duplicate id 'a' (first on row 1)"),
        (jsonl([{**OK_ROW, "id": 7}]), [], "set.jsonl:1: column 'id': expected text, found int 7"),
        (parquet({"category": [3], "prompt": ["x"]}), [], "set.parquet row 1: column 'category': expected text, found int 3"),
        (jsonl([{"category": "c", "prompt": {"text": "x"}}]), [],
         "set.jsonl:1: column 'prompt': expected text, a list of turns or a list of {role, content} messages, "
         "found dict {'text': 'x'}"),
        (parquet({"category": ["c"], "turns": pa.array([[]], pa.list_(pa.string()))}), [],
         "set.parquet row 1: column 'turns': empty prompt"),
        (jsonl([{"category": "c", "messages": [{"role": "user"}]}]), [],
         "set.jsonl:1: column 'messages': message 1 needs text 'role' and 'content'"),
        (csv_file(["category", "prompt"], []), [], "set.csv: no rows; a set needs one row per prompt, each with a category and a prompt"),
        (jsonl([]), [], "set.jsonl: no rows; a set needs one row per prompt, each with a category and a prompt"),
        (text_file("set.jsonl", '{"category": "c", "prompt": "x"}\n{"category": \n'), [], "set.jsonl:2: not valid JSON ("),
        (text_file("set.txt", "category,prompt\nc,x\n"), [],
         "set.txt: cannot tell the format from .txt; give a .jsonl, .json, .csv or .parquet file"),
    ],
)
def test_a_bad_set_is_one_line_naming_the_file_row_and_column(
    tmp_path: Path, make: Callable[[Path], Path], args: list[str], line: str
) -> None:
    source = make(tmp_path)
    out = tmp_path / "suite.jsonl"
    result = invoke("prompts", "import", source, "--out", out, *args)
    assert result.exit_code == 2
    [said] = result.output.splitlines()
    assert said.startswith(f"tokenreel: {tmp_path}/{line}"), said
    assert not out.exists()


def test_a_category_under_eight_prompts_is_warned_about_once(tmp_path: Path) -> None:
    rows = [["big", f"Prompt {i}"] for i in range(MIN_PER_CATEGORY)] + [["small", "One"], ["small", "Two"]]
    _, lines = imported(tmp_path, write_csv(tmp_path / "set.csv", ["category", "prompt"], rows))
    assert lines == [
        f"10 prompts in 2 categories written to {tmp_path / 'suite.jsonl'} (category counts: big 8, small 2)",
        "warning: category 'small' has 2 prompts: too few for a per-category interval: at least 8 are needed",
    ]


def test_an_existing_suite_needs_force(tmp_path: Path) -> None:
    source = write_jsonl(tmp_path / "set.jsonl", [OK_ROW])
    out = tmp_path / "suite.jsonl"
    out.write_text("mine\n")
    refused = invoke("prompts", "import", source, "--out", out)
    assert refused.exit_code == 2 and "already exists; pass --force" in refused.output and out.read_text() == "mine\n"
    assert invoke("prompts", "import", source, "--out", out, "--force").exit_code == 0
    assert load_prompts(str(out), tmp_path) == [Prompt("a", "c", [], "Fine.")]


def test_the_set_is_read_through_the_bounded_reader(tmp_path: Path) -> None:
    """A FIFO named like a set is refused from its stat (it would block a plain open)."""
    fifo = tmp_path / "set.jsonl"
    os.mkfifo(fifo)
    result = invoke("prompts", "import", fifo, "--out", tmp_path / "suite.jsonl")
    assert result.exit_code == 2
    assert result.output.splitlines() == [
        f"tokenreel: {fifo}: is not a regular file (a FIFO), expected a prompt set (JSONL, CSV or Parquet)"
    ]


def test_a_suite_past_the_prompt_file_cap_is_refused(tmp_path: Path) -> None:
    """The suite must load with `load_prompts`, which reads at most 64 MiB of a prompt file."""
    source = write_jsonl(tmp_path / "set.jsonl", [{"category": "long", "prompt": "word " * (14 << 20)}])
    result = invoke("prompts", "import", source, "--out", tmp_path / "suite.jsonl")
    assert result.exit_code == 2
    assert "set.jsonl: the suite would be more than the 64 MiB tokenreel reads as a prompt file (by line 1)" in result.output
    assert not (tmp_path / "suite.jsonl").exists()


@pytest.mark.parametrize("kind", ["csv of 5 M rows", "parquet of 20 M dictionary rows", "parquet with one 400 MB cell"])
def test_a_huge_set_is_refused_before_memory_grows(tmp_path: Path, kind: str) -> None:
    """Sets within the 512 MiB input cap whose rows would expand past what a suite can hold: the
    import streams them and stops at the suite's limits (100,000 prompts, 64 MiB) or, for Parquet,
    at the columns' decoded size, in one line, exit 2, within a few hundred MiB."""
    from tests.test_hostile_reports import tokenreel

    if kind.startswith("csv"):
        source = tmp_path / "set.csv"
        source.write_bytes(b"category,prompt\n" + b"c,hi\n" * 5_000_000)
        words = "more than 100000 prompts (line 100002 and on)"
    elif "dictionary" in kind:
        source = tmp_path / "set.parquet"
        pq.write_table(pa.table({"category": pa.array(["c"] * 20_000_000).dictionary_encode(),
                                 "prompt": pa.array(["hi"] * 20_000_000).dictionary_encode()}), source)
        words = "more than 100000 prompts (row 100001 and on)"
    else:
        source = tmp_path / "set.parquet"
        pq.write_table(pa.table({"category": ["c"], "prompt": ["x" * (400 << 20)]}), source, compression="zstd")
        words = "the suite would be more than the 64 MiB tokenreel reads as a prompt file (its columns category, prompt hold 400 MiB)"
    result, seconds, peak_mib = tokenreel("prompts", "import", source, "--out", "suite.jsonl", cwd=tmp_path)
    print(f"{kind}: {source.stat().st_size >> 20} MiB file, exit {result.returncode} in {seconds:.1f} s, peak {peak_mib:.0f} MiB")
    assert result.returncode == 2 and words in result.stderr and len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert peak_mib < 700, peak_mib
    assert not (tmp_path / "suite.jsonl").exists()


def test_a_speed_bench_shaped_set_imports_quickly(tmp_path: Path) -> None:
    """11 categories x 80 rows, the columns of SPEED-Bench's qualitative split, as Parquet."""
    rows = [(category, n) for category in SPEED_CATEGORIES for n in range(80)]
    passage = "A paragraph of context that the question is about, long enough to look like a real prompt. " * 4
    source = write_parquet(tmp_path / "qualitative.parquet", {
        "question_id": [f"{category}-q{n:03d}" for category, n in rows],
        "category": [category for category, _ in rows],
        "sub_category": ["general"] * len(rows),
        "turns": [[f"{passage}Question {n} about {category}?", "And a follow-up."] for category, n in rows],
        "source": ["generated"] * len(rows),
        "src_id": [str(i) for i in range(len(rows))],
        "difficulty": ["medium"] * len(rows),
        "multiturn": [True] * len(rows),
    })
    started = time.perf_counter()
    prompts, lines = imported(tmp_path, source, "--id-column", "question_id", "--system", SYSTEM)
    elapsed = time.perf_counter() - started
    assert elapsed < 10, elapsed
    assert len(prompts) == 880 and prompts[0].id == "coding-q000" and prompts[0].messages[1]["content"].endswith("about coding?")
    counts = ", ".join(f"{category} 80" for category in SPEED_CATEGORIES)
    assert lines == [f"880 prompts in 11 categories written to {tmp_path / 'suite.jsonl'} (category counts: {counts})"]


def test_a_parquet_value_python_cannot_hold_names_its_rows_and_columns(tmp_path: Path) -> None:
    """A date past year 9999 (Arrow holds it, Python cannot): one line naming the file, the rows
    and the columns, not "unexpected error"; a column name with control characters is escaped."""
    source = tmp_path / "set.parquet"
    pq.write_table(pa.table({"category": ["c"], "prompt": pa.array([3_000_000], pa.date32()), "odd\x1b[31m\x07": ["x"]}),
                   source)
    result = invoke("prompts", "import", source, "--out", tmp_path / "suite.jsonl")
    assert result.exit_code == 2 and len(result.output.strip().splitlines()) == 1, result.output
    assert "set.parquet rows 1 to 1024: cannot read its columns category, prompt (" in result.output, result.output
    missing = invoke("prompts", "import", source, "--out", tmp_path / "suite.jsonl", "--prompt-column", "nope")
    assert missing.exit_code == 2 and "'odd\\x1b[31m\\x07'" in missing.output, missing.output
