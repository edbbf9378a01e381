"""Machine-readable outputs carry every figure at full precision (issue 21): TTFT to the
nanosecond the archive holds, rates unrounded; rounding belongs to the tables people read."""

from __future__ import annotations

import csv
import io
import statistics
from pathlib import Path

import orjson
from typer.testing import CliRunner

from tokenreel.analysis.ladder import usable_runs
from tokenreel.analysis.metrics import last_token_index, run_metrics
from tokenreel.cli import app
from tokenreel.session import archive

SEED = Path(__file__).resolve().parent.parent / "sessions" / "seed-ladder-demo.json"


def invoke(*args: object) -> str:
    result = CliRunner().invoke(app, [str(a) for a in args], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.stdout


def test_json_and_csv_keep_the_archives_precision() -> None:
    session = archive.load(SEED)
    report = orjson.loads(invoke("report", SEED, "--format", "json"))
    rows = list(csv.DictReader(io.StringIO(invoke("report", SEED, "--format", "csv"))))
    for cell, row in zip(report["cells"], rows, strict=True):
        figures = [run_metrics(r) for r in session.runs_of(cell["arm"], cell["prompt"]) if r.status == "ok"]
        ttft = statistics.median(f.ttft_s for f in figures)
        decode = statistics.median(f.decode_tok_s for f in figures)
        assert cell["ttft_s"] == ttft and cell["decode_tok_s"] == decode
        assert float(row["ttft_s"]) == ttft and float(row["decode_tok_s"]) == decode
    # The archive's TTFTs are whole nanoseconds: rounding to ms (as before) would have lost digits.
    assert any(round(c["ttft_s"], 3) != c["ttft_s"] for c in report["cells"])
    assert any(round(row["decode_tok_s"], 3) != row["decode_tok_s"] for row in report["ladder"])
    markdown = invoke("report", SEED)
    first = report["ladder"][0]
    assert f"{first['decode_tok_s']:.1f} tok/s" in markdown and str(first["decode_tok_s"]) not in markdown


def test_cells_give_end_to_end_seconds_the_median_over_their_runs() -> None:
    """report --format json (and csv): each cell's e2e_s is the median over its usable runs of
    request send to the last token, at full precision."""
    session = archive.load(SEED)
    report = orjson.loads(invoke("report", SEED, "--format", "json"))
    rows = {(r["arm"], r["prompt"]): r for r in csv.DictReader(io.StringIO(invoke("report", SEED, "--format", "csv")))}
    for cell in report["cells"]:
        runs = usable_runs(session, cell["arm"], cell["prompt"])
        seconds = [r.chunks.t_ns[last_token_index(r.chunks)] / 1e9 for r in runs]
        assert cell["e2e_s"] == statistics.median(seconds)
        assert abs(cell["e2e_tok_s"] * cell["e2e_s"] / cell["output_tokens"] - 1) < 0.02
        assert float(rows[(cell["arm"], cell["prompt"])]["e2e_s"]) == cell["e2e_s"]
