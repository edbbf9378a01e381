"""The batch-1 roofline: bytes a decode step reads against the GPUs' bandwidth, per arm.

On the archived H200 llama.cpp ladder (its GPU named by NVML in the file), on GGUF files the
project's own generator writes, and on a safetensors checkpoint written here; the missing cases
name the key that would give the figure.
"""

from __future__ import annotations

import json
import struct
import subprocess
from copy import deepcopy
from pathlib import Path

import numpy as np
import pytest

from tests.engines import build, models
from tokenreel.analysis.bandwidth import arm_bandwidth, card_for
from tokenreel.analysis.gguf import read_gguf
from tokenreel.analysis.ladder import build_cells, build_ladder
from tokenreel.analysis.roofline import WEIGHTS_ONLY, arm_roofline
from tokenreel.analysis.weights import kv_bytes_per_token, target_weights
from tokenreel.recorder.config import ConfigError, load_config
from tokenreel.report.data import build_report
from tokenreel.report.markdown import to_markdown
from tokenreel.session.archive import load
from tokenreel.session.gpu import gpu_hardware
from tokenreel.session.model import Arm, Session

H200 = Path(__file__).resolve().parent.parent / "sessions" / "h200-llamacpp" / "session.json"


@pytest.fixture(scope="module")
def h200() -> Session:
    return load(H200)


def _meta_size(arm: Arm) -> int:
    [model] = arm.fingerprint["models"]["data"]
    return int(model["meta"]["size"])


def _entries(session: Session) -> dict[str, dict]:
    return {e["arm"]: e for e in build_report(session)["roofline"]}


def test_h200_session_names_its_gpu(h200: Session) -> None:
    assert {gpu_hardware(arm.gpu) for arm in h200.arms} == {"1x NVIDIA H200"}
    assert card_for("NVIDIA H200").bandwidth_gbps == 4800


def test_h200_percent_of_bandwidth_is_its_definition(h200: Session) -> None:
    report = build_report(h200)
    decode = {row["arm"]: row["decode_tok_s"] for row in report["ladder"]}
    entries = {e["arm"]: e for e in report["roofline"]}
    for arm in h200.arms[:2]:  # f16 and Q4_0: no drafter
        entry = entries[arm.id]
        assert entry["bytes_per_token"] == _meta_size(arm)
        assert entry["pct_of_limit"] == pytest.approx(100 * decode[arm.id] * _meta_size(arm) / 4800e9, rel=1e-12)
        assert entry["limit_tok_s"] == pytest.approx(4800e9 / _meta_size(arm), rel=1e-12)
        assert entry["bound"] == WEIGHTS_ONLY  # the GGUFs are not on this machine: no model shape, no KV
    assert entries["f16"]["bytes_per_token"] > entries["q4_0"]["bytes_per_token"]
    markdown = to_markdown(report, h200)
    assert "% of the NVIDIA H200's 4.8 TB/s limit" in markdown


def test_drafter_arm_missing_its_draft_size_then_declared(h200: Session) -> None:
    entry = _entries(h200)["q4_0-draft"]
    assert entry["pct_of_limit"] is None
    assert any("draft_weights_gb" in why for why in entry["missing"])
    session = deepcopy(h200)
    drafter = session.arms[2]
    drafter.settings["draft_weights_gb"] = "0.05"  # the way a user declares it
    report = build_report(session)
    entry = next(e for e in report["roofline"] if e["arm"] == drafter.id)
    row = next(r for r in report["ladder"] if r["arm"] == drafter.id)
    per_step = _meta_size(drafter) + 0.05e9
    assert entry["bytes_per_step"] == pytest.approx(per_step)
    assert entry["tokens_per_step"] == row["acceptance_length"]
    assert entry["steps_s"] == pytest.approx(row["decode_tok_s"] / row["acceptance_length"])
    assert entry["pct_of_limit"] == pytest.approx(100 * row["decode_tok_s"] * (per_step / row["acceptance_length"]) / 4800e9)
    assert "steps/s" in to_markdown(report, session)


def test_unknown_gpu_and_sizes_say_the_key(h200: Session) -> None:
    session = deepcopy(h200)
    arm = session.arms[0]
    arm.gpu = []
    arm.settings.pop("hardware")
    assert "hardware.bandwidth_gbps" in (arm_bandwidth(arm).missing or "")
    arm.settings["hardware"] = "1x Imaginary GPU 9000"
    assert "no datasheet bandwidth for 'Imaginary GPU 9000'" in arm_bandwidth(arm).missing
    arm.settings["bandwidth_gbps"] = "1000.0"
    assert arm_bandwidth(arm).gbps == 1000.0
    arm.fingerprint = {}
    size = target_weights(arm)
    assert size.bytes is None and "weights_gb" in size.missing


def _config(tmp_path: Path, hardware: str) -> Path:
    path = tmp_path / "c.toml"
    path.write_text(f'[session]\nprompts = "builtin:speed"\n{hardware}\n\n'
                    '[[arms]]\nid = "a"\nbase_url = "http://127.0.0.1:1/v1"\nmodel = "m"\n', encoding="utf-8")
    return path


def test_hardware_bandwidth_override_key(tmp_path: Path) -> None:
    config = load_config(_config(tmp_path, 'hardware = { name = "1x NVIDIA H200", bandwidth_gbps = 4000 }'))
    [arm] = config.arms
    assert arm.settings == {"hardware": "1x NVIDIA H200", "bandwidth_gbps": "4000.0"}
    assert arm_bandwidth(arm).gbps == 4000.0  # the override wins over the H200's datasheet 4800
    assert arm_bandwidth(load_config(_config(tmp_path, 'hardware = "2x NVIDIA H100 80GB HBM3"')).arms[0]).gbps == 2 * 3350
    with pytest.raises(ConfigError, match="session.hardware.bandwidth_gbps"):
        load_config(_config(tmp_path, "hardware.bandwidth_gbps = -1"))
    with pytest.raises(ConfigError, match="session.hardware.speed: unknown key"):
        load_config(_config(tmp_path, "hardware.speed = 1"))


@pytest.fixture(scope="module")
def gguf_files(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, dict[str, np.ndarray], models.Spec]:
    """An f16 GGUF written by the project's model generator and its Q4_0 by the pinned llama-quantize."""
    if not (build.gguf_py_dir() / "gguf").is_dir() or not build.binary("llama-quantize").is_file():
        pytest.skip("the pinned llama.cpp (gguf-py, llama-quantize) is not built here: tests/engines/build.py builds it")
    spec = models.Spec(name="roofline", vocab=256, n_embd=64, n_ff=128, n_head=4, n_layer=2)
    weights = models._weights(spec, jobs=1)
    tokenizer = ([f"t{i}" for i in range(spec.vocab)], [1] * spec.vocab, [])
    folder = tmp_path_factory.mktemp("gguf")
    f16, q4 = folder / "m-f16.gguf", folder / "m-q4_0.gguf"
    models.write_gguf(f16, spec, spec.n_layer, weights, tokenizer, "roofline")
    subprocess.run([str(build.binary("llama-quantize")), str(f16), str(q4), "Q4_0"], check=True, capture_output=True)
    return f16, q4, weights, spec


def test_gguf_reader_bytes_are_the_tensors_sizes(gguf_files: tuple[Path, Path, dict[str, np.ndarray], models.Spec]) -> None:
    f16, q4, weights, spec = gguf_files
    info = read_gguf(f16)
    assert info.tensor_bytes == sum(w.nbytes for w in weights.values())
    assert info.tensors == len(weights)
    gguf = models._gguf()
    for path in (f16, q4):
        assert read_gguf(path).tensor_bytes == sum(int(t.n_bytes) for t in gguf.GGUFReader(str(path)).tensors)
    assert read_gguf(q4).tensor_bytes < info.tensor_bytes / 2
    assert info.kv_shape() == (spec.n_layer, spec.n_head, 2 * spec.n_embd // spec.n_head)


def test_local_gguf_gives_weights_and_kv(gguf_files: tuple[Path, Path, dict[str, np.ndarray], models.Spec], h200: Session) -> None:
    f16, _, weights, spec = gguf_files
    session = deepcopy(h200)
    arm = session.arms[0]
    arm.fingerprint["launch"] = ["llama-server", "-m", str(f16), "-ctk", "q8_0"]
    assert target_weights(arm).bytes == sum(w.nbytes for w in weights.values())  # the file wins over meta.size
    kv = kv_bytes_per_token(arm).bytes
    assert kv == spec.n_layer * spec.n_head * (2 * spec.n_embd // spec.n_head) * 34 / 32
    cells = build_cells(session)
    entry = arm_roofline(session, arm, build_ladder(session, cells)[0])
    assert entry.bound == ""
    assert entry.kv_bytes == pytest.approx(kv * entry.context_tokens)
    assert entry.bytes_per_step == pytest.approx(target_weights(arm).bytes + kv * entry.context_tokens)


def _safetensors(path: Path, tensors: dict[str, tuple[str, list[int], int]]) -> int:
    """A safetensors file of zero-filled tensors (name: dtype, shape, bytes); returns the data bytes."""
    header, offset = {}, 0
    for name, (dtype, shape, size) in tensors.items():
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + size]}
        offset += size
    text = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(text)) + text + bytes(offset))
    return offset


def test_safetensors_checkpoint_and_config_shape(tmp_path: Path, h200: Session) -> None:
    folder = tmp_path / "ckpt"
    folder.mkdir()
    total = _safetensors(folder / "model-1.safetensors", {"a": ("BF16", [64, 32], 4096), "b": ("BF16", [32], 64)})
    total += _safetensors(folder / "model-2.safetensors", {"c": ("F8_E4M3", [128, 8], 1024)})
    (folder / "config.json").write_text(json.dumps(
        {"num_hidden_layers": 3, "num_attention_heads": 8, "num_key_value_heads": 2, "hidden_size": 256, "torch_dtype": "bfloat16"}))
    arm = Arm(id="v", label="v", base_url="http://127.0.0.1:1/v1", model="m",
              fingerprint={"launch": ["vllm", "serve", str(folder), "--kv-cache-dtype", "fp8"]})
    assert target_weights(arm).bytes == total
    assert kv_bytes_per_token(arm).bytes == 3 * 2 * (2 * 32) * 1.0
    (folder / "model.safetensors.index.json").write_text(json.dumps({"metadata": {"total_size": 123456}}))
    assert target_weights(arm).bytes == 123456


def test_roofline_chart_is_drawn_where_an_arm_has_the_figure(h200: Session, tmp_path: Path) -> None:
    from tokenreel.report.charts import write_charts

    first = write_charts(h200, tmp_path / "a", ["svg"], prompt_ids=["code-1"])
    again = write_charts(h200, tmp_path / "b", ["svg"], prompt_ids=["code-1"])
    assert (tmp_path / "a" / "roofline.svg") in first
    assert (tmp_path / "a" / "roofline.svg").read_bytes() == (tmp_path / "b" / "roofline.svg").read_bytes()
    from tokenreel.analysis.figures import figure

    share = figure(_entries(h200)["f16"]["pct_of_limit"], 1, " %")
    assert share in (tmp_path / "a" / "roofline.svg").read_text()  # f16's share, as the report prints it
    assert len(again) == len(first)


def test_simulated_ladder_declares_the_seed_sizes() -> None:
    """The built-in config's declared sizes and card, on the archived demo ladder's arms."""
    config = {arm.id: arm for arm in load_config("builtin:simulated-ladder").arms}
    session = load(H200.parent.parent / "seed-ladder-demo.json")
    for arm in session.arms:
        arm.settings.update(config[arm.id].settings)
    report = build_report(session)
    rows = {row["arm"]: row for row in report["ladder"]}
    for entry in report["roofline"]:
        row = rows[entry["arm"]]
        per_step = {"bf16": 54e9, "nvfp4": 22e9, "nvfp4-dflash2": 25.2e9}[entry["arm"]]
        per_token = per_step / (row["acceptance_length"] if entry["drafter"] else 1)
        assert entry["pct_of_limit"] == pytest.approx(100 * row["decode_tok_s"] * per_token / 8000e9)


def test_the_record_summary_prints_the_figured_arms_and_names_the_rest(h200: Session) -> None:
    """The terminal summary after `record`: figured arms a line each, the others named once (the
    report says why); a ladder with no arm figured (the archived demo, no sizes) prints no roofline."""
    from tokenreel.report.roofline_text import ROOFLINE_TITLE
    from tokenreel.report.terminal_tables import summary_tables

    def texts(session: Session) -> list[str]:
        return [str(part) for part in summary_tables(session, "c.toml", "s.json") if not hasattr(part, "columns")]

    lines = texts(h200)
    at = lines.index(ROOFLINE_TITLE)
    assert [line.split(":")[0].strip() for line in lines[at + 1:at + 3]] == [a.label for a in h200.arms[:2]]
    assert "% of the NVIDIA H200's 4.8 TB/s limit" in lines[at + 1]
    assert lines[at + 3] == (f"  no roofline for {h200.arms[2].label}: the report says what is missing and the key to set")
    demo = load(H200.parents[1] / "seed-ladder-demo.json")
    assert ROOFLINE_TITLE not in texts(demo) and not any("NVML" in line for line in texts(demo))


@pytest.mark.parametrize(("session", "stem", "page"), [("h200-llamacpp/session.json", "roofline", "roofline-h200.png"),
                                                      ("seed-ladder-demo.json", "decomposition", "decomposition-demo.png")])
def test_the_docs_charts_are_what_plot_draws_of_the_archived_sessions(session: str, stem: str, page: str, tmp_path: Path) -> None:
    """docs/roofline-h200.png and docs/decomposition-demo.png: `tokenreel plot SESSION --format png`'s."""
    from tests.test_cli import invoke

    repo = H200.parents[2]
    result = invoke("plot", repo / "sessions" / session, "--out", tmp_path, "--format", "png")
    assert result.exit_code == 0, result.output
    assert (tmp_path / f"{stem}.png").read_bytes() == (repo / "docs" / page).read_bytes(), f"re-plot docs/{page}"
