"""`tokenreel import vllm-bench`: result files built here from vllm bench serve's documented
schema (vllm/benchmarks/serve.py: the result dict and --save-detailed's per-request lists), then
report, compare and render on the session. `check_import` holds any result file to the
invariants; a file written by a real `vllm bench serve` can be passed to it as well."""

from __future__ import annotations

import json
import math
import random
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from tests.test_render_encode import probe
from tokenreel.analysis.figures import figure
from tokenreel.analysis.metrics import run_metrics
from tokenreel.cli import app
from tokenreel.recorder.imports import vllm_bench
from tokenreel.renderer import manifest as manifests
from tokenreel.renderer import verify
from tokenreel.renderer.frames import FrameRenderer
from tokenreel.renderer.options import Align, RenderOptions
from tokenreel.renderer.placed_text import RULE, notes
from tokenreel.renderer.render_plan import build_plan
from tokenreel.renderer.text.clusters import boundaries
from tokenreel.renderer.tracks import arm_track
from tokenreel.session import archive
from tokenreel.session.model import Session

# A reply a plain split would break: marks on their letters, a ZWJ emoji, a flag, CR LF, CJK.
HARD_TEXT = "Cafe\u0301 na\u0131\u0308ve \U0001F469\u200D\U0001F52C then \U0001F1EB\U0001F1F7\r\n東京 ok"


def invoke(*args: object) -> Any:
    return CliRunner().invoke(app, [str(a) for a in args], catch_exceptions=False)


def bench_result(requests: int = 6, seed: int = 1, step_ms: float = 8.0, tokens_per_chunk: int = 1,
                 failed: tuple[int, ...] = (), output_len: int = 24, text: str = "", backend: str = "openai",
                 role_gap_ms: float | None = None, no_role: tuple[int, ...] = ()) -> dict[str, Any]:
    """What vllm bench serve --save-result --save-detailed writes: run-level fields, then one entry
    per request in each list (seconds; a failed request has ttft 0, no itls, an error). text:
    every reply's text (its request number appended), else " word" a token. role_gap_ms: each
    request (but those in no_role) starts with a role chunk that long before its first token, as
    vllm bench 0.32's chat client times it (ttft at the role chunk, the gap to the first token in itls)."""
    rng = random.Random(seed)
    ttfts, itls, outputs, texts, errors, starts = [], [], [], [], [], []
    for i in range(requests):
        if i in failed:
            ttfts.append(0.0), itls.append([]), outputs.append(0), texts.append(""), errors.append("Traceback: boom")
        else:
            chunks = -(-output_len // tokens_per_chunk)
            ttfts.append(0.05 + rng.random() * 0.01)
            role = [role_gap_ms / 1000] if role_gap_ms is not None and i not in no_role else []
            itls.append(role + [step_ms * tokens_per_chunk / 1000 * (1 + 0.1 * rng.random()) for _ in range(chunks - 1)])
            outputs.append(output_len), texts.append(f"{text} {i}" if text else " word" * output_len), errors.append("")
        starts.append(1000.0 + i)
    return {"date": "20260101-120000", "endpoint_type": backend, "backend": backend, "label": None,
            "model_id": "tiny-llama", "tokenizer_id": "tiny-llama", "num_prompts": requests, "request_rate": "inf",
            "burstiness": 1.0, "max_concurrency": 1, "duration": 3.2, "completed": requests - len(failed),
            "failed": len(failed), "input_lens": [32] * requests, "output_lens": outputs, "ttfts": ttfts,
            "itls": itls, "start_times": starts, "generated_texts": texts, "errors": errors,
            "mean_ttft_ms": 55.0}


def write(tmp_path: Path, name: str, data: Any) -> Path:
    path = tmp_path / name
    path.write_text(data if isinstance(data, str) else json.dumps(data))
    return path


def role_chunk_read(data: dict[str, Any]) -> bool:
    """Whether the file's first chunks are vLLM 0.32's role chunks, to be dropped: a chat backend, and
    every ok request's first gap under the importer's bound."""
    ok = [itl for itl, error in zip(data["itls"], data["errors"], strict=True) if not error]
    return (data.get("backend") in vllm_bench.CHAT_BACKENDS and bool(ok)
            and all(itl and itl[0] < vllm_bench.ROLE_GAP_S for itl in ok))


def check_import(result_file: Path, session_file: Path, arm: str = "peer") -> Session:
    """Import `result_file` as arm `arm` and hold the session to the file: one run per request,
    failures failed, each ok run's first token at its ttft (at ttft + itls[0] where the first chunks
    are role chunks, which are dropped), its chunks at the itls' running sums, its completion tokens
    the output length, and decode (n - 1 first-chunk token) over first to last chunk. The arm's
    notes say which reading was applied."""
    result = invoke("import", "vllm-bench", result_file, "--arm", arm, "--out", session_file)
    assert result.exit_code == 0, result.output
    data = json.loads(result_file.read_text())
    session = archive.load(session_file)
    imported = session.arm(arm).imported
    assert imported is not None and imported.tool == "vllm bench serve" and imported.file == result_file.name
    assert "chunk_text" in imported.lacks and "prompts" in imported.lacks
    role = role_chunk_read(data)
    assert imported.notes[0].startswith("role chunk dropped") == role, imported.notes
    runs = [run for run in session.runs if run.arm == arm]
    assert len(runs) == len(data["ttfts"])
    for run, ttft, itl, n, error in zip(runs, data["ttfts"], data["itls"], data["output_lens"], data["errors"], strict=True):
        if error:
            assert run.status == "failed" and run.error
            continue
        first, gaps = (ttft + itl[0], itl[1:]) if role else (ttft, itl)
        assert run.status == "ok" and len(run.chunks) == len(gaps) + 1
        assert run.chunks.t_ns[0] == round(first * 1e9)
        assert abs(run.chunks.t_ns[-1] - (ttft + sum(itl)) * 1e9) <= len(itl) + 1
        assert sum(run.chunks.tokens) == n == run.usage["completion_tokens"]
        assert run.token_source == ("chunk_count" if len(gaps) + 1 == n else "per_event")
        assert run.acceptance is None  # vllm bench keeps no acceptance per request
        figures = run_metrics(run)
        assert figures.ttft_s is not None and math.isclose(figures.ttft_s, first, abs_tol=1e-9)
        if len(gaps) + 1 == n and n > 1:
            assert math.isclose(figures.decode_tok_s or 0, (n - 1) / sum(gaps), rel_tol=1e-6)
    return session


def test_import_then_report_compare_and_render(tmp_path: Path) -> None:
    fast = write(tmp_path, "fast.json", bench_result(step_ms=5, failed=(2,)))
    slow = write(tmp_path, "slow.json", bench_result(step_ms=10, seed=2))
    session = check_import(fast, tmp_path / "a.json", arm="fast")
    assert session.arm("fast").fingerprint["summary"]["imported from"] == "vllm bench serve (fast.json)"
    added = invoke("import", "vllm-bench", slow, "--arm", "slow", "--label", "Slow", "--into", tmp_path / "a.json")
    assert added.exit_code == 0, added.output
    both = archive.load(tmp_path / "a.json")
    assert [arm.id for arm in both.arms] == ["fast", "slow"] and both.arm("slow").label == "Slow"

    report = invoke("report", tmp_path / "a.json", "--format", "json")
    assert report.exit_code == 0, report.output
    ladder = json.loads(report.output)
    assert "fast" in json.dumps(ladder) and "slow" in json.dumps(ladder)

    check_import(slow, tmp_path / "b.json", arm="fast")
    compared = invoke("compare", tmp_path / "a.json", tmp_path / "b.json", "--format", "json")
    assert compared.exit_code in (1, 3), compared.output  # the same arm id, twice as slow: not reproduced
    assert "fast" in compared.output

    check_render(tmp_path / "a.json", [fast, slow], tmp_path / "clip.mp4")


def check_render(session_file: Path, result_files: list[Path], out: Path, size: str = "320x180") -> Path:
    """Render the imported session's first prompt and hold the video to the files: it plays, ffprobe
    reads it, its manifest names every arm whose text was placed and the rule, the footer and the
    end card say so, and `tokenreel verify` re-renders it byte for byte."""
    rendered = invoke("render", session_file, "--prompt", "request-00001", "--size", size, "--fps", "10",
                      "--title-s", "0.5", "--hold-s", "1", "--out", out)
    assert rendered.exit_code == 0, rendered.output
    assert "placed over the chunks by length" in rendered.output
    assert out.is_file() and int(probe(out, "nb_read_frames")["nb_read_frames"]) > 1
    manifest = json.loads(out.with_name(out.name + ".render.json").read_text())
    session = archive.load(session_file)
    assert manifest["reconstructed"] == [
        {"arm": arm.id, "tool": "vllm bench serve", "version": "", "file": path.name, "rule": RULE}
        for arm, path in zip(session.arms, result_files, strict=True)
    ]
    plan = build_plan(session, RenderOptions(prompt="request-00001", size=size, fps=10))
    renderer = FrameRenderer(plan)
    assert renderer.prompt_line() == f"{notes('vllm bench serve')[0]}."  # under the title, the whole race long
    assert any("Text placed by length; times exact" in wording for wording in renderer.footer_wordings())
    assert renderer.end_card.facts_lines(False)[-1] in notes("vllm bench serve")
    verified = invoke("verify", out.with_name(out.name + ".render.json"))
    assert verified.exit_code == 0 and "identical" in verified.output, verified.output
    return out


def check_placed_text(session: Session, result: dict[str, Any], arm: str) -> None:
    """Every ok request of `result`, as the replay plays it: its chunks' times and tokens the
    session's (so the file's), its text spread evenly over them at cluster boundaries, and the
    pieces joined back exactly the file's generated_texts[i]."""
    for i, (text, error) in enumerate(zip(result["generated_texts"], result["errors"], strict=True)):
        if error:
            continue
        run = next(r for r in session.runs if r.arm == arm and r.prompt == f"request-{i + 1:05d}")
        track = arm_track(session, run, Align.SEND)
        assert track.text_placed and "".join(track.content) == text
        assert list(track.t_ns) == run.chunks.t_ns and list(track.tokens) == run.chunks.tokens
        assert len(track.content) == len(run.chunks) == len(result["itls"][i]) + (not role_chunk_read(result))
        cuts = set(boundaries(text))
        at = 0
        for n, piece in enumerate(track.content):
            at += len(piece)
            assert at in cuts, (n, piece)  # no character is split between two chunks
            even = (n + 1) * len(text) / len(track.content)
            assert abs(at - even) <= 1 + max(b - a for a, b in zip(sorted(cuts), sorted(cuts)[1:], strict=False))


@pytest.mark.parametrize("tokens_per_chunk", [1, 3])
def test_placed_text_joins_back_to_each_reply(tmp_path: Path, tokens_per_chunk: int) -> None:
    data = bench_result(tokens_per_chunk=tokens_per_chunk, output_len=25, text=HARD_TEXT, failed=(1,))
    path = write(tmp_path, "hard.json", data)
    session = check_import(path, tmp_path / "s.json")
    check_placed_text(session, data, "peer")
    short = bench_result(requests=1, output_len=40, text="ok")  # fewer characters than chunks: some show none
    session = check_import(write(tmp_path, "short.json", short), tmp_path / "short.session.json")
    check_placed_text(session, short, "peer")


def test_tall_video_of_a_speculative_import_verifies(tmp_path: Path) -> None:
    """9:16, chunks of three tokens (counts estimated, ≈): the text still flows and the file verifies."""
    files = [write(tmp_path, f"{name}.json", bench_result(requests=2, step_ms=ms, tokens_per_chunk=3, output_len=30,
                                                          text=HARD_TEXT, seed=seed))
             for name, ms, seed in (("target", 20.0, 1), ("drafted", 9.0, 2))]
    check_import(files[0], tmp_path / "s.json", arm="target")
    assert invoke("import", "vllm-bench", files[1], "--arm", "drafted", "--into", tmp_path / "s.json").exit_code == 0
    check_render(tmp_path / "s.json", files, tmp_path / "tall.mp4", size="180x320")


def test_reply_without_text_is_refused_in_one_line(tmp_path: Path) -> None:
    data = bench_result(requests=2)
    data["generated_texts"][0] = ""
    path = write(tmp_path, "blank.json", data)
    check_import(path, tmp_path / "s.json", arm="a")
    assert invoke("import", "vllm-bench", path, "--arm", "b", "--into", tmp_path / "s.json").exit_code == 0
    rendered = invoke("render", tmp_path / "s.json", "--prompt", "request-00001", "--size", "320x180",
                      "--out", tmp_path / "c.mp4")
    assert rendered.exit_code == 2 and len(rendered.output.strip().splitlines()) == 1, rendered.output
    assert "blank.json" in rendered.output and "holds none" in rendered.output
    assert not (tmp_path / "c.mp4").exists()


def test_edited_reconstruction_in_the_manifest_is_found(tmp_path: Path) -> None:
    """The manifest's reconstructed list is derived again on verify: one rewritten (and resealed)
    to hide the placement is a manifest that does not describe its video."""
    files = [write(tmp_path, f"{arm}.json", bench_result(requests=1, step_ms=ms, seed=seed))
             for arm, ms, seed in (("a", 5.0, 1), ("b", 9.0, 2))]
    check_import(files[0], tmp_path / "s.json", arm="a")
    assert invoke("import", "vllm-bench", files[1], "--arm", "b", "--into", tmp_path / "s.json").exit_code == 0
    out = check_render(tmp_path / "s.json", files, tmp_path / "clip.mp4")
    path = out.with_name(out.name + ".render.json")
    data = json.loads(path.read_text())
    del data["reconstructed"]
    data[manifests.SEAL] = manifests.seal(data)
    path.write_text(json.dumps(data))
    [result] = verify.verify([path])
    assert result.status == verify.MANIFEST_EDITED and "reconstructed" in result.message, result.message


def test_chunks_of_several_tokens_are_an_estimate_said_so(tmp_path: Path) -> None:
    path = write(tmp_path, "spec.json", bench_result(tokens_per_chunk=3, output_len=25))
    session = check_import(path, tmp_path / "s.json")
    imported = session.arm("peer").imported
    assert imported is not None and "token_counts" in imported.lacks
    assert all(run.tokens_estimated for run in session.runs)


REAL = Path(__file__).parent / "data" / "vllm-cpu"  # written by vllm bench serve 0.32 against a vLLM 0.32 CPU server


def check_report(session_file: Path, data: dict[str, Any]) -> dict[str, Any]:
    """`tokenreel report --format json` on an imported session: its TTFT is the mean over the runs
    of the first token's arrival (ttft + itls[0] where role chunks were dropped), later than vllm
    bench's own mean_ttft_ms by the role chunks' mean gap."""
    report = invoke("report", session_file, "--format", "json")
    assert report.exit_code == 0, report.output
    out = json.loads(report.output)
    [row] = out["ladder"]
    role = role_chunk_read(data)
    firsts = [ttft + (itl[0] if role else 0) for ttft, itl, e in zip(data["ttfts"], data["itls"], data["errors"], strict=True)
              if not e]
    assert math.isclose(row["ttft_s"], sum(firsts) / len(firsts), rel_tol=1e-9)
    gaps = [itl[0] for itl, e in zip(data["itls"], data["errors"], strict=True) if not e and role]
    mean_gap = sum(gaps) / len(firsts)
    assert math.isclose(row["ttft_s"], data["mean_ttft_ms"] / 1000 + mean_gap, rel_tol=1e-9)
    return out


def test_real_chat_file_without_drafter_has_one_token_a_chunk(tmp_path: Path) -> None:
    """vllm bench 0.32's openai-chat times vLLM's role chunk as the first token: every request's
    first gap is the role chunk's. Dropped, each run has exactly one token a chunk and its TTFT at
    the first token's chunk."""
    path = REAL / "bf16-bench-serve.json"
    data = json.loads(path.read_text())
    assert role_chunk_read(data)  # the file's own gaps, checked here, not assumed
    session = check_import(path, tmp_path / "s.json")
    imported = session.arm("peer").imported
    assert imported is not None and "token_counts" not in imported.lacks
    for run, ttft, itl, n in zip(session.runs, data["ttfts"], data["itls"], data["output_lens"], strict=True):
        assert run.token_source == "chunk_count" and not run.tokens_estimated
        assert run.chunks.tokens == [1] * n and len(run.chunks) == len(itl) == n
        assert math.isclose(run_metrics(run).ttft_s or 0, ttft + itl[0], abs_tol=1e-9)
        assert "no spec_decode fields" in run.acceptance_note
    report = check_report(tmp_path / "s.json", data)
    assert report["ladder"][0]["acceptance_length"] is None
    assert vllm_bench.SPEC_KEY not in report["arms"][0]["fingerprint"]


def test_real_chat_file_with_drafter_shows_the_file_s_pooled_acceptance(tmp_path: Path) -> None:
    """A draft model (k 4): the role chunk is dropped as without one, the tokens a chunk stay an
    estimate, and the benchmark-wide acceptance shows on the arm, pooled, never on a run."""
    path = REAL / "bf16-draft-bench-serve.json"
    data = json.loads(path.read_text())
    assert role_chunk_read(data)
    session = check_import(path, tmp_path / "s.json")
    arm = session.arm("peer")
    assert arm.imported is not None and "token_counts" in arm.imported.lacks
    assert all(run.tokens_estimated and run.acceptance is None for run in session.runs)
    spec = {key: value for key, value in data.items() if key.startswith("spec_decode_")}
    assert arm.fingerprint["spec_decode"] == spec  # full precision in the session
    shown = arm.fingerprint["summary"][vllm_bench.SPEC_KEY]
    assert shown.startswith(f"length {figure(data['spec_decode_acceptance_length'], 2)};") and "pooled over" in shown
    assert f"{data['spec_decode_num_drafts']} drafts" in shown and f"{data['completed']} ok requests" in shown
    report = check_report(tmp_path / "s.json", data)
    assert report["arms"][0]["fingerprint"][vllm_bench.SPEC_KEY] == shown
    [row] = report["ladder"]
    assert row["acceptance_length"] is None and vllm_bench.SPEC_KEY in row["acceptance_note"]


@pytest.mark.parametrize("backend", ["openai-chat", "openai"])
def test_generated_chat_file_with_role_chunks_drops_them(tmp_path: Path, backend: str) -> None:
    """A chat file whose every ok request starts with a 0.015 ms gap: role chunks, dropped, one token
    a chunk. The same gaps in a completions file (no role chunk there) are kept as chunks."""
    data = bench_result(backend=backend, role_gap_ms=0.015, failed=(2,))
    session = check_import(write(tmp_path, "r.json", data), tmp_path / "s.json")
    ok = [run for run in session.runs if run.status == "ok"]
    imported = session.arm("peer").imported
    assert imported is not None
    if backend == "openai-chat":
        assert all(run.token_source == "chunk_count" for run in ok) and "token_counts" not in imported.lacks
    else:
        assert imported.notes[0].startswith("backend openai: no role chunk") and "token_counts" in imported.lacks


def test_generated_chat_file_without_role_chunks_is_read_as_is(tmp_path: Path) -> None:
    """A chat file whose first gaps are decode steps (as vllm bench 0.33 writes it): nothing dropped."""
    data = bench_result(backend="openai-chat")
    session = check_import(write(tmp_path, "r.json", data), tmp_path / "s.json")
    imported = session.arm("peer").imported
    assert imported is not None and imported.notes[0].startswith("no role chunk: backend openai-chat")
    assert all(run.token_source == "chunk_count" for run in session.runs)


def test_some_role_chunks_are_not_guessed_at(tmp_path: Path) -> None:
    """Only some requests' first gap looks like a role chunk: the chunks stay as the file has them,
    and the arm's note names the requests that looked so."""
    data = bench_result(backend="openai-chat", role_gap_ms=0.015, no_role=(1, 4))
    session = check_import(write(tmp_path, "r.json", data), tmp_path / "s.json")
    imported = session.arm("peer").imported
    assert imported is not None and imported.notes[0].startswith("chunks kept as the file has them")
    named = [f"request-{i + 1:05d}" for i in range(len(data["ttfts"])) if i not in (1, 4)]
    assert all(name in imported.notes[0] for name in named) and "request-00002" not in imported.notes[0]
    assert f"{len(named)} of {len(data['ttfts'])}" in imported.notes[0]
    assert "token_counts" in imported.lacks  # the role chunks counted as token chunks: an estimate, said so


def test_same_arm_twice_is_refused(tmp_path: Path) -> None:
    path = write(tmp_path, "r.json", bench_result())
    check_import(path, tmp_path / "s.json")
    again = invoke("import", "vllm-bench", path, "--arm", "peer", "--into", tmp_path / "s.json")
    assert again.exit_code == 2 and "already in the session" in again.output


def _hostile(kind: str) -> Any:
    data = bench_result()
    if kind == "not json":
        return '{"ttfts": [0.1,'
    if kind == "no detail":
        return {k: v for k, v in data.items() if k not in ("ttfts", "itls")}
    if kind == "wrong type":
        data["itls"][1] = "fast"
    elif kind == "negative":
        data["ttfts"][0] = -0.5
    elif kind == "nan":
        data["ttfts"][0] = math.nan  # json.dumps writes NaN, as vllm bench's json.dump would
    elif kind == "lengths":
        data["output_lens"].pop()
    elif kind == "spec":
        data["spec_decode_num_drafts"] = "many"
    elif kind == "top list":
        return [data]
    return data


@pytest.mark.parametrize(("kind", "field"), [
    ("not json", "not JSON"), ("no detail", "--save-detailed"), ("wrong type", "itls[1]"), ("negative", "ttfts[0]"),
    ("nan", "ttfts[0]"), ("lengths", "output_lens"), ("spec", "spec_decode_num_drafts"), ("top list", "expected an object"),
])
def test_hostile_file_gets_one_line_and_exit_2(tmp_path: Path, kind: str, field: str) -> None:
    path = write(tmp_path, "bad.json", _hostile(kind))
    result = invoke("import", "vllm-bench", path, "--out", tmp_path / "s.json")
    assert result.exit_code == 2
    line = result.output.strip()
    assert "\n" not in line and "bad.json" in line and field in line, line
    assert not (tmp_path / "s.json").exists()


def test_gigantic_file_is_refused_unread(tmp_path: Path) -> None:
    from tokenreel.base.files import INPUTS

    path = tmp_path / "huge.json"
    with path.open("wb") as handle:
        handle.truncate(INPUTS["peer result"].limit + 1)  # sparse: no disk used
    result = invoke("import", "vllm-bench", path, "--out", tmp_path / "s.json")
    assert result.exit_code == 2 and "huge.json" in result.output and "MiB" in result.output
