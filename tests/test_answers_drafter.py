"""A drafter's answers against the arm it drafts for; warmups in the nondeterminism check; a GPU's
divergences explained in one line; `drafts_for` validated in the config and kept in the archive.

Sessions are built with known texts (tests/session_factory.py): every expected figure is counted
here from the pieces.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.session_factory import MS, session, stream, words
from tests.test_recorder_config import write
from tokenreel.analysis.answers import build_answers
from tokenreel.recorder.config import ConfigError, load_config
from tokenreel.report import render_report
from tokenreel.session import archive
from tokenreel.session.model import ArchiveError, Run

N = 40
BASE = words(N)
QUANTIZED = [*BASE[:10], " quantized", *BASE[11:]]  # the 4-bit arm's own answer: token 11 differs
DRAFTED = [*QUANTIZED[:20], " drafted", *QUANTIZED[21:]]  # a drafter that strays from it at token 21


def three_arms(spec: list[str], warmup: list[str] | None = None, gpu: bool = False):
    """bf16, q4 and q4-spec (one run each; q4 a warmup first when given)."""
    s = session([
        ("bf16", "bf16", [stream(BASE, 50 * MS, 5 * MS)]),
        ("q4", "Q4_0", [stream(QUANTIZED, 40 * MS, 4 * MS)]),
        ("q4-spec", "Q4_0 + drafter", [stream(spec, 40 * MS, 2 * MS)]),
    ])
    engine = "llama.cpp, CUDA sm_90, -ngl 99" if gpu else "llama.cpp, CPU"
    for arm in s.arms:
        arm.settings = {"quantization": "bf16" if arm.id == "bf16" else "Q4_0", "engine": engine}
    s.arm("q4-spec").settings["drafter"] = "Q4_0 1-layer draft"
    s.arm("q4").settings["drafter"] = "none"
    if warmup is not None:
        for run in s.runs:
            run.index += 1
        first = next(r for r in s.runs if r.arm == "q4")
        s.runs.insert(0, Run(arm="q4", prompt="p1", index=0, warmup=True, usage={"completion_tokens": N},
                             token_source="usage_delta", chunks=stream(warmup, 40 * MS, 4 * MS)))
        s.runs.append(Run(arm="q4", prompt="p1", index=2, warmup=False, usage=first.usage,
                          token_source="usage_delta", chunks=first.chunks))
    return s


def row(answers, arm: str):
    return next(r for r in answers.prompts[0].arms if r.arm == arm)


def test_a_drafter_is_checked_against_the_arm_it_drafts_for():
    """Inferred from the declared settings (same but the drafter): the drafter that keeps Q4_0's
    tokens is the same answer, though it differs from bf16 at token 11 like Q4_0 does."""
    answers = build_answers(three_arms(list(QUANTIZED)))
    spec = row(answers, "q4-spec")
    assert (spec.reference, spec.identical) == ("q4", True)
    assert "the arm it drafts for (inferred from the declared settings)" in spec.note
    assert (row(answers, "q4").reference, row(answers, "q4").diverges_at_token) == ("bf16", 11)
    strayed = row(build_answers(three_arms(DRAFTED)), "q4-spec")
    assert (strayed.reference, strayed.identical, strayed.diverges_at_token) == ("q4", False, 21)


def test_drafts_for_declared_wins_and_without_it_nothing_is_guessed():
    s = three_arms(list(QUANTIZED))
    for arm in s.arms:
        arm.settings = {}
    assert row(build_answers(s), "q4-spec").reference == "bf16"  # no settings: the reference arm
    assert row(build_answers(s), "q4-spec").diverges_at_token == 11
    s.arm("q4-spec").drafts_for = "q4"
    spec = row(build_answers(s), "q4-spec")
    assert (spec.reference, spec.identical) == ("q4", True) and "(drafts_for)" in spec.note


def test_warmups_count_in_the_nondeterminism_check():
    """The measured runs agree; the warmup strays at token 8: flagged, and said to be the warmup."""
    s = three_arms(list(QUANTIZED), warmup=[*QUANTIZED[:7], " warm", *QUANTIZED[8:]])
    answers = build_answers(s)
    [flagged] = answers.nondeterministic
    assert (flagged.arm, flagged.runs, flagged.warmups_only) == ("q4", [0, 1, 2], True)
    assert "run 0 (warmup) differs from run 1 at token 8" in flagged.detail
    assert answers.repeat_checked_cells == 1
    same = build_answers(three_arms(list(QUANTIZED), warmup=list(QUANTIZED)))
    assert same.nondeterministic == [] and same.repeat_checked_cells == 1


def test_a_divergence_on_a_gpu_is_explained_in_one_line(tmp_path: Path):
    s = three_arms(DRAFTED, warmup=[*QUANTIZED[:7], " warm", *QUANTIZED[8:]], gpu=True)
    answers = build_answers(s)
    q4_line, spec_line = answers.gpu_notes  # in arm order
    assert spec_line == (
        f"q4-spec diverges from q4 at token 21 of {N} at the earliest (1 of 1 prompts): drafting on a GPU is not"
        " token-identical (its target verifies several tokens in one batch, and its kernels round differently by"
        " batch shape)")
    assert q4_line.startswith("q4: runs differ among themselves on 1 prompt(s) (only the warmups differ) on a GPU")
    assert build_answers(three_arms(DRAFTED, gpu=False)).gpu_notes == []  # no GPU declared: no GPU story
    path = tmp_path / "s.json"
    archive.save(s, path)
    report = render_report(archive.load(path), "md")
    assert spec_line in report and "warmups included" in report


ARMS = """
[session]
name = "x"
[[arms]]
id = "q4"
base_url = "http://127.0.0.1:1/v1"
model = "m"
[[arms]]
id = "spec"
base_url = "http://127.0.0.1:2/v1"
model = "m"
{spec}
"""


def test_a_divergence_in_bf16_on_a_cpu_is_explained_too() -> None:
    """A CPU engine serving bf16 (declared, or in the launch command) rounds by batch shape too."""
    s = three_arms(DRAFTED, warmup=[*QUANTIZED[:7], " warm", *QUANTIZED[8:]], gpu=False)
    s.arm("q4-spec").settings["quantization"] = "bf16"
    s.arm("q4").fingerprint = {"launch": ["vllm", "serve", "tiny", "--dtype", "bfloat16"]}
    q4_line, spec_line = build_answers(s).gpu_notes
    assert "drafting in 16-bit floats on the CPU is not token-identical" in spec_line, spec_line
    assert q4_line.startswith("q4: runs differ among themselves on 1 prompt(s) (only the warmups differ) in 16-bit"
                              " floats on the CPU"), q4_line


@pytest.mark.parametrize("line, hint", [
    ('drafts_for = "spec"', "names the arm itself"),
    ('drafts_for = "f16"', "no arm 'f16' (arms: q4, spec)"),
    ("drafts_for = 3", "must be a non-empty string"),
])
def test_drafts_for_is_checked_in_one_line(tmp_path: Path, line: str, hint: str):
    path = write(tmp_path, ARMS.format(spec=line))
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    message = str(caught.value)
    assert "\n" not in message and message.startswith(f"{path}: arms[1].drafts_for: ") and hint in message, message


def test_drafts_for_a_drafter_is_refused(tmp_path: Path):
    text = ARMS.format(spec='drafts_for = "q4"') + '[[arms]]\nid = "spec2"\nbase_url = "http://h:3/v1"\nmodel = "m"\ndrafts_for = "spec"\n'
    with pytest.raises(ConfigError, match=r"arms\[2\]\.drafts_for: arm 'spec' drafts for 'q4' itself"):
        load_config(write(tmp_path, text))


def test_drafts_for_is_archived_and_checked_on_load(tmp_path: Path):
    s = three_arms(list(QUANTIZED))
    s.arm("q4-spec").drafts_for = "q4"
    path = tmp_path / "s.json"
    archive.save(s, path)
    assert archive.load(path).arm("q4-spec").drafts_for == "q4"
    archive.save(three_arms(list(QUANTIZED)), tmp_path / "t.json")
    assert "drafts_for" not in (tmp_path / "t.json").read_text()  # undeclared: older files stay byte-identical
    text = path.read_text()
    assert text.count('"drafts_for":"q4"') == 1
    path.write_text(text.replace('"drafts_for":"q4"', '"drafts_for":"nope"'))
    with pytest.raises(ArchiveError, match=r"arms\[2\]\.drafts_for.*'nope' is not another arm"):
        archive.load(path)


def test_the_video_badge_checks_a_drafter_against_its_target_on_screen():
    """The badge asks the same check: the drafter that keeps Q4_0's tokens is "same as Q4_0";
    with Q4_0 off screen it is compared with the first arm, as every other arm is."""
    from tokenreel.renderer.options import RenderOptions
    from tokenreel.renderer.render_plan import build_plan
    from tokenreel.renderer.tracks import AnswerMark

    s = three_arms(list(QUANTIZED))
    marks = [t.answer for t in build_plan(s, RenderOptions(answer_badge=True, size="640x360")).arms]
    assert marks[2] == AnswerMark(same=True, against=1, lossless=True)
    assert marks[1] == AnswerMark(same=False, diverges_at_token=11, against=0)
    alone = build_plan(s, RenderOptions(answer_badge=True, size="640x360", arms=("bf16", "q4-spec")))
    assert alone.arms[1].answer == AnswerMark(same=False, diverges_at_token=11, against=0)


def test_a_declared_drafter_without_drafts_for_is_compared_with_the_arm_before_it():
    """`speculative` in [arms.settings], no drafts_for, and no arm whose settings match but for
    the drafter: the arm before it in the ladder is its target, in the report and the video."""
    from tokenreel.renderer.options import RenderOptions
    from tokenreel.renderer.render_plan import build_plan

    s = three_arms(list(QUANTIZED))
    for arm in s.arms:
        arm.settings = {}
    s.arm("q4-spec").settings["speculative"] = "dflash2"
    spec = row(build_answers(s), "q4-spec")
    assert (spec.reference, spec.identical) == ("q4", True)
    assert "the arm before it in the ladder" in spec.note
    marks = [t.answer for t in build_plan(s, RenderOptions(answer_badge=True, size="640x360")).arms]
    assert (marks[2].against, marks[2].same, marks[2].lossless) == (1, True, True)
    s.arm("q4-spec").settings["speculative"] = "none"
    assert row(build_answers(s), "q4-spec").reference == "bf16"  # "none" declares no drafter


def test_an_observed_drafter_is_compared_with_the_arm_before_it():
    """No settings at all, but the drafter's runs counted drafts: the arm before it."""
    from tokenreel.session.model import Acceptance

    s = three_arms(list(QUANTIZED))
    for arm in s.arms:
        arm.settings = {}
    for run in s.runs:
        if run.arm == "q4-spec":
            run.acceptance = Acceptance(mean_length=2.0, drafts=10, draft_tokens=40, accepted=10)
    assert row(build_answers(s), "q4-spec").reference == "q4"


def test_a_drafter_that_really_diverges_keeps_its_warning():
    """The drafter strays from its target at token 21: a warning badge; the quantized arm's
    difference from bf16 is said plainly, not as a warning."""
    from tokenreel.renderer.frames import FrameRenderer
    from tokenreel.renderer.options import RenderOptions
    from tokenreel.renderer.render_plan import build_plan

    plan = build_plan(three_arms(DRAFTED), RenderOptions(answer_badge=True, size="1920x1080", hold_s="0"))
    columns = FrameRenderer(plan).columns
    assert columns[0].fitted_badge == ()  # the baseline wears no badge: the others name it
    (text, _, style), = columns[2].fitted_badge
    assert style == "tool" and re.search(r"≠ diverges (from Q4_0 )?at token 21", text), text
    (text, _, style), = columns[1].fitted_badge
    assert style != "tool" and "differs" in text and "11" in text
