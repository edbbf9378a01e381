"""Same answers: arms against the reference, runs against each other, in every report format.

Sessions are built with known texts (tests/session_factory.py) so every expected figure is
counted here from the pieces, never taken from the code under test.
"""

from __future__ import annotations

import csv
import io
import json
import time
from dataclasses import replace

from tests.session_factory import MS, session, stream, words
from tests.test_cli import invoke, write_config
from tokenreel.analysis.answers import answer_of, build_answers, compare, similarity
from tokenreel.report import render_report
from tokenreel.session import archive
from tokenreel.session.model import Chunks, Run
from tokenreel.simulator.profiles import NVFP4_DIVERGES_AT

N = 60
BASE = words(N)
CHANGED = 30  # 0-based piece index of the first differing token: token 31
ODD = "#ZEBRA crossing"  # shares no first character with any piece (they start with " " or "\n")


def diverged(at: int = CHANGED, piece: str = ODD) -> list[str]:
    out = list(BASE)
    out[at] = piece
    return out


def ladder(reference: list[list[str]], arm: list[list[str]], tokens: tuple[int, int] = (1, 1)):
    """Two arms; each run given as its pieces; `tokens` per event for (reference, arm)."""
    return session([
        ("bf16", "Original · bf16", [stream(p, 500 * MS, 10 * MS, tokens[0]) for p in reference]),
        ("nvfp4", "Quantized · NVFP4", [stream(p, 400 * MS, 7 * MS, tokens[1]) for p in arm]),
    ])


def arm_row(s, arm: str = "nvfp4"):
    answers = build_answers(s)
    return next(row for row in answers.prompts[0].arms if row.arm == arm)


def joined_pieces(pieces: list[str], size: int) -> list[str]:
    return ["".join(pieces[i:i + size]) for i in range(0, len(pieces), size)]


def test_identical_arms_are_the_same_answer():
    row = arm_row(ladder([BASE], [list(BASE)]))
    assert row.identical is True
    assert row.common_prefix_tokens == N
    assert row.common_prefix_chars == len("".join(BASE))
    assert row.similarity == 1.0
    assert row.diverges_at_token is None
    assert build_answers(ladder([BASE], [list(BASE)])).reference_arm == "bf16"


def test_divergence_found_at_its_token_with_prefix_and_context():
    row = arm_row(ladder([BASE], [diverged()]))
    assert row.identical is False
    assert row.diverges_at_token == CHANGED + 1
    assert row.common_prefix_tokens == CHANGED
    assert row.common_prefix_chars == len("".join(BASE[:CHANGED]))
    # the context: the words just before, the mark, then each side's own continuation
    before = BASE[CHANGED - 1].strip()
    assert row.reference_context.split("»")[0].endswith(before)
    assert row.reference_context.split("»")[1].startswith(" " + BASE[CHANGED].strip())
    assert row.arm_context.split("»")[1].startswith("#ZEBRA")
    assert len(row.arm_context) <= 50 and len(row.reference_context) <= 50
    assert 0 < row.similarity < 1


def test_divergence_in_the_first_and_the_last_token():
    first = arm_row(ladder([BASE], [diverged(0)]))
    assert (first.diverges_at_token, first.common_prefix_tokens, first.common_prefix_chars) == (1, 0, 0)
    assert first.arm_context.startswith("»#ZEBRA")
    last = arm_row(ladder([BASE], [diverged(N - 1)]))
    assert last.diverges_at_token == N
    assert last.common_prefix_chars == len("".join(BASE[:-1]))


def test_shorter_answer_diverges_after_its_end():
    row = arm_row(ladder([BASE], [BASE[:40]]))
    assert row.identical is False
    assert row.diverges_at_token == 41
    assert row.common_prefix_chars == len("".join(BASE[:40]))
    assert row.arm_context.endswith("»⟨end⟩")
    assert "stops where the reference goes on" in row.note


def test_multi_token_events_count_only_whole_events():
    # every event carries 3 tokens (a speculative step); piece 31 (0-based) differs: the event of
    # pieces 30-32 is not wholly shared, so 30 tokens are, and the divergence is placed at 31
    pieces = joined_pieces(BASE, 3)
    changed = joined_pieces(diverged(31, " #ZEBRA"), 3)
    row = arm_row(ladder([pieces], [changed], tokens=(3, 3)))
    assert (row.common_prefix_tokens, row.diverges_at_token) == (30, 31)
    # a reference streamed one token per event places it exactly: 31 shared, 32 differs
    row = arm_row(ladder([BASE], [changed], tokens=(1, 3)))
    assert (row.common_prefix_tokens, row.diverges_at_token) == (31, 32)
    identical = arm_row(ladder([BASE], [pieces], tokens=(1, 3)))
    assert identical.identical and identical.common_prefix_tokens == N


def test_token_without_text_counts_with_the_text_after_it():
    # a token that decodes to part of a character comes as an event with no text (vLLM)
    def run(*texts: str) -> Run:
        chunks = Chunks()
        for t, text in enumerate(texts):
            chunks.append((t + 1) * MS, 1, content=text)
        return Run(arm="a", prompt="p1", index=0, warmup=False, token_source="usage_delta", chunks=chunks)

    result = compare(run("Hi", "", "é", " there"), run("Hi", "", "é", " where"))
    assert (result.common_prefix_chars, result.common_prefix_tokens, result.diverges_at_token) == (4, 3, 4)
    result = compare(run("Hi", "", "é", " there"), run("Hi", "", "è", " there"))
    assert (result.common_prefix_chars, result.common_prefix_tokens, result.diverges_at_token) == (2, 1, 2)


def test_reasoning_and_content_are_told_apart():
    s = session([
        ("bf16", "bf16", [stream(BASE[10:], 500 * MS, 10 * MS, reasoning=BASE[:10])]),
        ("nvfp4", "nvfp4", [stream(BASE, 400 * MS, 7 * MS)]),
    ])
    row = arm_row(s)
    assert row.identical is False
    assert (row.common_prefix_chars, row.diverges_at_token) == (0, 1)
    assert "as content here and reasoning in the reference" in row.note


def test_context_has_no_control_characters():
    row = arm_row(ladder([BASE], [diverged(piece="\x1b[2J\x07\n\tboom")]))
    assert row.diverges_at_token == CHANGED + 1
    assert not any(ord(c) < 32 or 0x7F <= ord(c) < 0xA0 for c in row.arm_context)
    assert "boom" in row.arm_context


def test_nondeterministic_runs_flagged_at_temperature_zero():
    s = ladder([BASE, BASE, diverged(45)], [BASE, BASE])
    answers = build_answers(s)
    assert [(n.arm, n.prompt, n.runs) for n in answers.nondeterministic] == [("bf16", "p1", [0, 1, 2])]
    assert "run 2 differs from run 0 at token 46" in answers.nondeterministic[0].detail
    assert answers.repeat_checked_cells == 2
    # the arms are compared on their first usable runs, which agree
    assert arm_row(s).identical is True


def test_differing_runs_expected_not_flagged_above_temperature_zero():
    s = ladder([BASE, diverged(45)], [BASE, diverged(5)])
    s.settings = replace(s.settings, temperature=0.7)
    answers = build_answers(s)
    assert answers.nondeterministic == []
    assert "0.7" in answers.note and "expected" in answers.note and "2 of 2" in answers.note
    s.settings = replace(s.settings, temperature=0.0)
    assert len(build_answers(s).nondeterministic) == 2


def test_arm_without_usable_run_is_missing_with_the_reason():
    s = ladder([BASE], [BASE])
    for run in s.runs:
        if run.arm == "nvfp4":
            run.status, run.error = "failed", "HTTP 500"
    row = arm_row(s)
    assert row.identical is None and row.similarity is None
    assert "no usable run of nvfp4" in row.note


def test_baseline_is_the_reference():
    s = ladder([BASE], [diverged()])
    answers = build_answers(s, "nvfp4")
    assert answers.reference_arm == "nvfp4"
    row = next(r for r in answers.prompts[0].arms if r.arm == "bf16")
    assert row.diverges_at_token == CHANGED + 1
    assert row.arm_context.split("»")[1].startswith(" " + BASE[CHANGED].strip())


def test_similarity_counts_shared_words():
    # every 10th word replaced by a word the reference never has: 90% of the words are shared
    other = [f" Q{i}x" if i % 10 == 5 else w for i, w in enumerate(words(1000))]
    ref, arm = ladder([words(1000)], [other]).runs
    assert similarity(answer_of(ref), answer_of(arm)) == 0.9


def test_similarity_of_5000_token_answers_takes_well_under_a_second():
    tokens = 5000
    repetitive = [f" w{i % 40}" for i in range(tokens)]  # difflib takes seconds on this shape
    shuffled = repetitive[:143] + [f" w{(i * 7) % 40}" for i in range(tokens - 143)]
    for a, b in ((words(tokens), words(tokens)[:143] + words(tokens - 143, 999)), (repetitive, shuffled)):
        ref, arm = ladder([a], [b]).runs
        start = time.thread_time()  # CPU time: a quadratic diff costs seconds of it, other load none
        result = compare(ref, arm)
        elapsed = time.thread_time() - start
        assert result.diverges_at_token == 144
        assert elapsed < 0.5, f"{elapsed:.3f} s of CPU"


def test_report_formats_carry_the_answers():
    s = ladder([BASE], [diverged()])
    data = json.loads(render_report(s, "json"))
    assert data["answers"]["reference_arm"] == "bf16"
    rows = {row["arm"]: row for row in data["answers"]["prompts"][0]["arms"]}
    assert rows["nvfp4"]["identical"] is False and rows["nvfp4"]["diverges_at_token"] == CHANGED + 1
    assert rows["nvfp4"]["common_prefix_chars"] == len("".join(BASE[:CHANGED]))
    assert rows["bf16"]["identical"] is None and rows["bf16"]["note"].startswith("reference")

    markdown = render_report(s, "md")
    line = next(x for x in markdown.splitlines() if x.startswith("| p1 | Quantized · NVFP4 |"))
    assert "| no |" in line and f"token {CHANGED + 1}" in line and "#ZEBRA" in line

    table = list(csv.DictReader(io.StringIO(render_report(s, "csv"))))
    by_arm = {row["arm"]: row for row in table}
    assert by_arm["nvfp4"]["identical"] == "false"
    assert by_arm["nvfp4"]["diverges_at_token"] == str(CHANGED + 1)
    assert by_arm["nvfp4"]["common_prefix_tokens"] == str(CHANGED)
    assert by_arm["bf16"]["identical"] == "" and by_arm["bf16"]["answer_note"].startswith("reference")

    same = ladder([BASE], [list(BASE)])
    assert json.loads(render_report(same, "json"))["answers"]["prompts"][0]["arms"][1]["identical"] is True
    assert next(x for x in render_report(same, "md").splitlines() if "| Quantized · NVFP4 |" in x and "| yes |" in x)


def test_report_lists_nondeterminism():
    markdown = render_report(ladder([BASE, diverged(45)], [BASE]), "md")
    assert "Nondeterministic at temperature 0" in markdown
    assert "- bf16 / p1 (runs 0, 1): run 1 differs from run 0 at token 46" in markdown


def test_recorded_simulator_ladder_diverges_where_the_quantized_weights_do(tmp_path, sim):
    """Recorded through the real recorder: NVFP4's answers part from bf16's at its set token on
    every prompt; the drafter arm, on the NVFP4 weights, says exactly what NVFP4 says, and is
    compared with it (its runs counted drafts: it drafts for the arm before it)."""
    config = write_config(tmp_path / "ladder.toml", sim, max_tokens=NVFP4_DIVERGES_AT + 40, repeats=2)
    session_file = tmp_path / "ladder.json"
    assert invoke("record", "--config", config, "--out", session_file).exit_code == 0
    recorded = archive.load(session_file)
    answers = build_answers(recorded)
    assert answers.nondeterministic == [] and answers.repeat_checked_cells == 3 * len(recorded.prompts)
    for prompt in answers.prompts:
        rows = {row.arm: row for row in prompt.arms}
        assert rows["nvfp4"].identical is False, prompt.prompt
        assert rows["nvfp4"].diverges_at_token == NVFP4_DIVERGES_AT, (prompt.prompt, rows["nvfp4"])
        assert rows["nvfp4"].similarity > 0.9
        drafter = rows["nvfp4-dflash2"]
        assert (drafter.reference, drafter.identical) == ("nvfp4", True), (prompt.prompt, drafter)
    lossless = build_answers(recorded, "nvfp4")
    for prompt in lossless.prompts:
        drafter = next(row for row in prompt.arms if row.arm == "nvfp4-dflash2")
        assert drafter.identical is True, prompt.prompt
