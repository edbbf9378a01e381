"""Speed-ups defined once (core/tokenreel/analysis/claims.py): the suite's are the ladder's to the last bit, an
answer's are its median runs' own figures, and the words never show a multiplier below 1."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.session_factory import MS, session, stream, words
from tokenreel.analysis.claims import all_speedups, claim_text, headline, interval_text, scope_text
from tokenreel.analysis.ladder import build_cells, build_ladder, median_run
from tokenreel.analysis.metrics import run_metrics
from tokenreel.report.data import build_report
from tokenreel.report.terminal_tables import summary_tables
from tokenreel.session import archive

DEMO = Path(__file__).resolve().parents[1] / "sessions" / "seed-ladder-demo.json"


@pytest.fixture(scope="module")
def demo_report() -> dict:
    return build_report(archive.load(DEMO))


def test_suite_decode_speed_ups_are_the_ladder_s_own(demo_report: dict) -> None:
    first = demo_report["ladder"][0]["arm"]
    suite = {(s["arm"], s["vs"]): s for s in demo_report["speedups"] if s["scope"] == "suite" and s["metric"] == "decode"}
    for row in demo_report["ladder"][1:]:
        assert suite[(row["arm"], first)]["value"] == row["vs_first"]  # the same float, not approximately
        assert suite[(row["arm"], first)]["prompts"] == demo_report["prompts_compared"] == 4
    assert demo_report["headline"]["value"] == demo_report["ladder"][-1]["vs_first"]
    assert demo_report["headline"]["text"] == "4.42x faster decode"


def test_an_answer_s_speed_up_is_its_median_runs_own(demo_report: dict) -> None:
    session = archive.load(DEMO)
    entries = [s for s in demo_report["speedups"] if s["scope"] == "prompt"]
    assert len(entries) == 2 * 3 * len(session.prompts)  # both metrics, 3 pairs of arms, every prompt
    for entry in entries:
        mine = median_run(session, entry["arm"], entry["prompt"])
        theirs = median_run(session, entry["vs"], entry["prompt"])
        a, b = run_metrics(mine), run_metrics(theirs)
        expected = a.decode_tok_s / b.decode_tok_s if entry["metric"] == "decode" else b.e2e_s / a.e2e_s
        assert entry["value"] == expected and list(entry["runs"]) == [mine.index, theirs.index]


def test_words_invert_a_slower_arm_and_say_a_missing_figure() -> None:
    assert claim_text(4.419, "decode") == "4.42x faster decode"
    assert claim_text(0.8, "e2e") == "1.25x slower end to end"
    assert claim_text(None, "decode") == "no decode figure"


def test_an_interval_is_worded_as_its_claim_is() -> None:
    """The bounds of a slower arm's interval are inverted with its multiplier, so they bracket it."""
    assert interval_text(2.14, [1.97, 2.31]) == "95 % interval 1.97–2.31x"
    assert claim_text(0.5, "decode") == "2.00x slower decode"
    assert interval_text(0.5, [0.45, 0.55]) == "95 % interval 1.82–2.22x"
    assert interval_text(4.42, None) == "" and interval_text(None, [1.0, 2.0]) == ""


def test_a_one_arm_session_has_no_headline_and_a_slow_pair_says_so() -> None:
    one = session([("a", "A", [stream(words(10), 50 * MS, 10 * MS)])])
    assert headline(one, build_cells(one)) is None
    two = session([("a", "A", [stream(words(40), 50 * MS, 10 * MS)]), ("b", "B", [stream(words(40), 50 * MS, 20 * MS)])])
    cells = build_cells(two)
    claim = headline(two, cells)
    assert claim is not None and claim.value == build_ladder(two, cells)[-1].vs_first < 1
    assert claim_text(claim.value, claim.metric).endswith("slower decode") and scope_text(claim) == "over 1 prompt"
    assert {(s.metric, s.scope) for s in all_speedups(two, cells)} == {
        (metric, scope) for metric in ("decode", "e2e", "ttft") for scope in ("suite", "category", "prompt")
    } - {("ttft", "prompt")}


def test_record_s_closing_table_says_the_headline_the_report_says(demo_report: dict) -> None:
    ladder = summary_tables(archive.load(DEMO))[0]
    claim = demo_report["headline"]
    assert str(ladder.caption).startswith(f"{claim['text']}: {claim['arm_label']} vs {claim['vs_label']}, {claim['scope_text']}")
