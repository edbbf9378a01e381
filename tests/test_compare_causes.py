"""`tokenreel compare`'s cause lines: for each ladder row or ratio that differs, what moved with it.

Only one recording of the 288-run llama.cpp ladder on an H200 is archived
(sessions/h200-llamacpp/session.json, with the engine's own per-request timing and the GPU
gate's readings), so its re-recording "a day later" is made from it: the drafter arm's token
times after the first token shortened by 6.05 % and its engine decode rate raised by 6.04 %, the
kernel another. The two llama.cpp sessions in tests/data/h200-llamacpp/ are a real pair: the same
ladder with the host-RAM prompt cache on and off.
"""

from __future__ import annotations

import statistics
from pathlib import Path

import orjson
import pytest

from tests.test_cli import REPO, invoke
from tokenreel.analysis.acceptance import pool
from tokenreel.session import archive
from tokenreel.session.model import Acceptance, Run, Session

LADDER = REPO / "sessions" / "h200-llamacpp" / "session.json"
H200 = REPO / "tests" / "data" / "h200-llamacpp"
DRAFTER = "q4_0-draft"
FASTER, ENGINE_FASTER = 1.0605, 1.0604


def _faster(run: Run, factor: float) -> None:
    """The run decodes `factor` times as fast: every offset after the first token's shortened."""
    t = run.chunks.t_ns
    first = next(i for i, tokens in enumerate(run.chunks.tokens) if tokens)
    t[first + 1:] = [t[first] + round((x - t[first]) / factor) for x in t[first + 1:]]


def _kernel(session: Session, release: str) -> None:
    session.host["kernel"] = release


@pytest.fixture(scope="module")
def rerecorded(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Session]:
    """(A, B, A loaded): B is A's drafter run faster by the engine, on another kernel, with the
    CPU facts the recorder now archives (A, recorded before, has none)."""
    folder = tmp_path_factory.mktemp("causes")
    a = archive.load(LADDER)
    _kernel(a, a.host["platform"].split("-")[1])
    archive.save(a, folder / "a.json")
    b = archive.load(folder / "a.json")
    _kernel(b, "6.1.141-another")
    b.host.update({"cpu_model": "another CPU", "cpus": "16"})
    for run in b.runs:
        if run.arm == DRAFTER:
            _faster(run, FASTER)
            if run.engine is not None and run.engine.decode_tok_s:
                run.engine.decode_tok_s *= ENGINE_FASTER
    archive.save(b, folder / "b.json")
    return folder / "a.json", folder / "b.json", a


def causes_of(*args: object) -> tuple[int, dict, list[dict]]:
    result = invoke("compare", *args, "--format", "json")
    data = orjson.loads(result.stdout)
    return result.exit_code, data, data["causes"]


def test_the_engine_ran_faster_the_answers_and_acceptance_the_same(rerecorded: tuple[Path, Path, Session]) -> None:
    path_a, path_b, a = rerecorded
    code, data, causes = causes_of(path_a, path_b)
    assert code == 1
    differ = {row["arm"] for row in data["ladder"] if row["verdict"] == "faster"}
    assert differ == {DRAFTER}
    explained = {c["subject"] for c in causes if c["kind"] not in ("ratio", "decomposition", "recording")}
    assert explained == {DRAFTER}  # f16 and q4_0 did not move: nothing to explain
    by_kind = {c["kind"]: c for c in causes if c["subject"] == DRAFTER}
    measured = [r for r in a.runs if r.arm == DRAFTER and not r.warmup]
    assert by_kind["tokens"]["text"].startswith("tokens the same")
    assert f"all {len(measured)} paired runs" in by_kind["tokens"]["text"] and "the same answers" in by_kind["tokens"]["text"]
    assert by_kind["tokens"]["a"] == by_kind["tokens"]["b"] == sum(r.usage["completion_tokens"] for r in measured if r.usage)
    pooled = pool([r.acceptance for r in measured if r.acceptance])
    assert by_kind["acceptance"]["a"] == by_kind["acceptance"]["b"] == pytest.approx(pooled.length)
    assert "acceptance the same" in by_kind["acceptance"]["text"] and "every run accepted the same drafts" in by_kind["acceptance"]["text"]
    engine = by_kind["engine"]
    assert engine["change_pct"] == pytest.approx((ENGINE_FASTER - 1) * 100, abs=1e-9)
    assert "the engine's timing moved +6.04 %" in engine["text"] and engine["text"].endswith("the engine itself ran faster")
    assert "tokenreel's +6.05 %" in engine["text"]
    assert "ttft" not in by_kind and "flags" not in by_kind  # only the decode moved; no gate flagged a run
    ratios = [c for c in causes if c["kind"] == "ratio"]
    assert {c["subject"] for c in ratios} == {f"{DRAFTER} / f16", f"{DRAFTER} / q4_0"}
    assert all(c["text"].endswith(f"it moved with {DRAFTER}") for c in ratios)
    # the drafter over the arm it drafts for, decomposed in both: acceptance the same, the step cheaper
    [decomposed] = [c for c in causes if c["kind"] == "decomposition"]
    assert decomposed["subject"] == f"{DRAFTER} / q4_0", decomposed
    assert decomposed["text"].endswith("the step's cost moved, acceptance hardly"), decomposed["text"]
    length = f"{pooled.length:.2f} tokens a step"
    assert decomposed["text"].startswith(f"A {length}") and f"; B {length}" in decomposed["text"]
    assert decomposed["change_pct"] == pytest.approx((FASTER - 1) * 100, abs=0.5)
    recording = [c["text"] for c in causes if c["kind"] == "recording"]
    assert recording == [
        f"recorded differently: kernel: {a.host['kernel']} in A, 6.1.141-another in B",
        "recording facts not archived in A: CPU, CPUs",
    ]
    markdown = invoke("compare", path_a, path_b).stdout
    lines = [f"- {c['line']}" for c in causes]
    assert all(line in markdown for line in lines)
    assert markdown.index(lines[-1]) < markdown.index("| Arm |")  # before the tables


def test_a_session_against_itself_has_no_cause(rerecorded: tuple[Path, Path, Session]) -> None:
    path_a, _, _ = rerecorded
    _, _, causes = causes_of(path_a, path_a)
    assert causes == []


def _accepting_fewer(run: Run, fewer: float) -> None:
    acc = run.acceptance
    assert acc is not None and acc.accepted is not None and acc.drafts and acc.draft_tokens
    accepted = acc.accepted - fewer
    run.acceptance = Acceptance(1 + accepted / acc.drafts, accepted / acc.draft_tokens, acc.drafts, acc.draft_tokens,
                                accepted, acc.source)


def test_other_answers_other_drafts_a_flagged_host_and_a_slower_client_are_each_named(tmp_path: Path) -> None:
    """B's drafter: tokenreel's times 6.05 % shorter but the engine's own unchanged (the difference
    outside the engine), one answer changed at an event, one run accepting 10 drafts fewer, three
    runs on a contended host, and every GPU under a lower power limit."""
    a = archive.load(LADDER)
    b = archive.load(LADDER)
    drafter = [r for r in b.runs if r.arm == DRAFTER and not r.warmup]
    for run in drafter:
        _faster(run, FASTER)
    changed = drafter[5]
    event = next(i for i, text in enumerate(changed.chunks.content) if i >= 40 and text)
    changed.chunks.content[event] = "\u2603" + changed.chunks.content[event]
    _accepting_fewer(drafter[7], 10)
    for run in drafter[:3]:
        assert run.host is not None
        run.host.contended = True
    for arm in b.arms:
        for check in arm.gpu:
            for device in check.devices:
                device.power_limit_mw = 600_000
    archive.save(a, tmp_path / "a.json")
    archive.save(b, tmp_path / "b.json")
    code, _, causes = causes_of(tmp_path / "a.json", tmp_path / "b.json")
    assert code == 1
    by_kind = {c["kind"]: c for c in causes if c["subject"] == DRAFTER}
    token = sum(changed.chunks.tokens[:event]) + 1
    assert by_kind["tokens"]["text"].startswith("tokens moved")
    assert f"answers differ in 1 of {len(drafter)}, the earliest at token {token} ({changed.prompt})" in by_kind["tokens"]["text"]
    measured_a = [r.acceptance for r in a.runs if r.arm == DRAFTER and not r.warmup and r.acceptance]
    accepted_a = sum(x.accepted or 0 for x in measured_a)
    drafts = sum(x.drafts or 0 for x in measured_a)
    acceptance = by_kind["acceptance"]
    assert acceptance["a"] == pytest.approx(1 + accepted_a / drafts)
    assert acceptance["b"] == pytest.approx(1 + (accepted_a - 10) / drafts)
    assert acceptance["text"].startswith("acceptance moved") and acceptance["text"].endswith("runs accepted other drafts")
    engine = by_kind["engine"]
    assert abs(engine["change_pct"]) < 1e-9
    assert "the difference arose between the engine and tokenreel's stamps" in engine["text"]
    assert by_kind["flags"]["text"] == f"flags: host contended: 0 of {len(drafter)} runs in A, 3 of {len(drafter)} in B"
    limit_a = statistics.mode(d.power_limit_mw for arm in a.arms for c in arm.gpu for d in c.devices if d.power_limit_mw)
    assert f"recorded differently: GPU power limit: {limit_a // 1000} W in A, 600 W in B (all arms)" in [c["text"] for c in causes]


def test_a_prompt_cache_turned_off_is_ttft_only() -> None:
    """The real pair: the host-RAM prompt cache restored each repeat's KV state in A (tens of ms
    of TTFT), not in B; decode tok/s differs nowhere, so each arm's line is TTFT only."""
    code, data, causes = causes_of(H200 / "session-default-cache.json", H200 / "session-cache-ram-0.json")
    assert code == 3
    assert {c["kind"] for c in causes} == {"ttft"}
    for cause in causes:
        cells = [d["figures"]["ttft_s"] for d in data["cells"] if d["arm"] == cause["subject"]]
        mean_a, mean_b = statistics.fmean(f["a"] for f in cells), statistics.fmean(f["b"] for f in cells)
        assert (cause["a"], cause["b"]) == pytest.approx((mean_a, mean_b))
        assert mean_b < mean_a / 2 and cause["text"].startswith("TTFT only")
    assert [c["subject"] for c in causes] == [row["arm"] for row in data["ladder"]]


def test_csv_carries_the_cause_lines(rerecorded: tuple[Path, Path, Session]) -> None:
    path_a, path_b, _ = rerecorded
    _, _, causes = causes_of(path_a, path_b)
    text = invoke("compare", path_a, path_b, "--format", "csv").stdout
    rows = [line for line in text.splitlines() if line.startswith("cause,")]
    assert len(rows) == len(causes) > 0
