"""The starter ladder `tokenreel init` writes: a commented config for one engine, whose comments
say what each key is for (from `config_schema`) and how to start each arm's server so that
tokenreel gets every figure the engine can give."""

from __future__ import annotations

import textwrap
from dataclasses import dataclass

from tokenreel.recorder.config_schema import ARM, SESSION, key_doc, toml_value
from tokenreel.recorder.enums import Choice
from tokenreel.session.model import Settings

STARTER_MAX_TOKENS = 512  # long enough for decode to dominate, short enough for a first ladder in minutes
WIDTH = 100


class StarterEngine(Choice):
    """The engine a starter ladder is written for (`tokenreel init --engine`)."""

    VLLM = "vllm"
    SGLANG = "sglang"
    LLAMACPP = "llamacpp"


@dataclass(frozen=True)
class ArmPlan:
    """One starter arm: its keys, the server command that serves it, and its declared settings."""

    id: str
    label: str
    model: str
    start: str
    settings: tuple[tuple[str, str], ...]
    drafts_for: str | None = None


@dataclass(frozen=True)
class EnginePlan:
    """An engine's default port (each arm takes the next one), the figures its flags turn on,
    and the three arms: original, quantized, quantized + drafter."""

    name: str
    port: int
    flags_note: str
    arms: tuple[ArmPlan, ArmPlan, ArmPlan]


_VLLM_FLAGS = "--enable-per-request-metrics --enable-prompt-tokens-details"
_SGLANG = "python -m sglang.launch_server --model-path"

PLANS = {
    StarterEngine.VLLM: EnginePlan(
        "vLLM", 8000,
        "--enable-per-request-metrics gives vLLM's own per-request timing (the report's engine agreement),"
        " --enable-prompt-tokens-details the cached prompt tokens, and --per-request-spec-decode-metrics summary"
        " the drafter's acceptance per request; /metrics is on by default.",
        (
            ArmPlan("original", "Original · bf16", "Qwen/Qwen3-8B",
                    f"vllm serve Qwen/Qwen3-8B --port {{port}} {_VLLM_FLAGS}", (("quantization", "bf16"),)),
            ArmPlan("quantized", "Quantized · FP8", "Qwen/Qwen3-8B-FP8",
                    f"vllm serve Qwen/Qwen3-8B-FP8 --port {{port}} {_VLLM_FLAGS}", (("quantization", "FP8"),)),
            ArmPlan("quantized-drafter", "FP8 + n-gram drafter", "Qwen/Qwen3-8B-FP8",
                    f"vllm serve Qwen/Qwen3-8B-FP8 --port {{port}} {_VLLM_FLAGS}"
                    """ --speculative-config '{"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_max": 4}'"""
                    " --per-request-spec-decode-metrics summary",
                    (("quantization", "FP8"), ("speculative", "ngram, k 4")), "quantized"),
        ),
    ),
    StarterEngine.SGLANG: EnginePlan(
        "SGLang", 30000,
        "--enable-metrics serves /metrics (the idle gate and the engine's counters); the recorder asks a"
        " drafting SGLang arm for its per-request acceptance (return_spec_tokens_details) itself.",
        (
            ArmPlan("original", "Original · bf16", "Qwen/Qwen3-8B",
                    f"{_SGLANG} Qwen/Qwen3-8B --port {{port}} --enable-metrics", (("quantization", "bf16"),)),
            ArmPlan("quantized", "Quantized · FP8", "Qwen/Qwen3-8B-FP8",
                    f"{_SGLANG} Qwen/Qwen3-8B-FP8 --port {{port}} --enable-metrics", (("quantization", "FP8"),)),
            ArmPlan("quantized-drafter", "FP8 + EAGLE3 drafter", "Qwen/Qwen3-8B-FP8",
                    f"{_SGLANG} Qwen/Qwen3-8B-FP8 --port {{port}} --enable-metrics --speculative-algorithm EAGLE3"
                    " --speculative-draft-model-path YOUR-EAGLE3-DRAFT --speculative-num-steps 3"
                    " --speculative-eagle-topk 1 --speculative-num-draft-tokens 4",
                    (("quantization", "FP8"), ("speculative", "eagle3, k 3")), "quantized"),
        ),
    ),
    StarterEngine.LLAMACPP: EnginePlan(
        "llama.cpp", 8080,
        "--metrics serves /metrics (the idle gate and the drafter's counters); llama.cpp sends its own"
        " timings and draft counts with every response.",
        (
            ArmPlan("original", "Original · F16", "model-F16",
                    "llama-server -m model-F16.gguf --alias model-F16 --port {port} --metrics", (("quantization", "F16"),)),
            ArmPlan("quantized", "Quantized · Q4_K_M", "model-Q4_K_M",
                    "llama-server -m model-Q4_K_M.gguf --alias model-Q4_K_M --port {port} --metrics",
                    (("quantization", "Q4_K_M"),)),
            ArmPlan("quantized-drafter", "Q4_K_M + draft model", "model-Q4_K_M",
                    "llama-server -m model-Q4_K_M.gguf --alias model-Q4_K_M -md draft-Q8_0.gguf --port {port} --metrics",
                    (("quantization", "Q4_K_M"), ("speculative", "draft model draft-Q8_0")), "quantized"),
        ),
    ),
}


def _comment(text: str, indent: str = "") -> list[str]:
    return textwrap.wrap(text, WIDTH - 2 - len(indent), initial_indent=f"{indent}# ", subsequent_indent=f"{indent}# ",
                         break_on_hyphens=False, break_long_words=False)


def _key(lines: list[str], doc: str | None, name: str, value: str) -> None:
    if doc is not None:
        lines.extend(_comment(doc))
    lines.append(f"{name} = {value}")


def starter_ladder(engine: StarterEngine, arms: int = 3, name: str = "ladder", config_name: str = "ladder.toml") -> str:
    """The starter config's text: `arms` (1 to 3) of the engine's original, quantized and
    quantized + drafter arms, each on the engine's default port and the next ones."""
    if not 1 <= arms <= 3:
        raise ValueError(f"--arms: a starter ladder has 1, 2 or 3 arms, got {arms}")
    plan = PLANS[engine]
    chosen = plan.arms[:arms]
    lines = [
        *_comment(f"A starter ladder for {plan.name}: {', '.join(arm.label for arm in chosen)}, measured one arm at a time"
                  " on the same prompts. Change each arm's model to yours (and base_url if its server runs elsewhere),"
                  " start each server as its comment says, then:"),
        f"#   tokenreel record --config {config_name} --check   # every endpoint answers?",
        f"#   tokenreel record --config {config_name}           # records sessions/{name}.json",
        f"#   tokenreel report sessions/{name}.json",
        *_comment(f"Server flags: {plan.flags_note}"),
        "# Every key, its type and default: the config reference (docs/config.md).",
        "",
        "[session]",
    ]
    defaults = Settings()
    session = {
        "name": toml_value(name),
        "prompts": toml_value(defaults.prompts),
        "max_tokens": str(STARTER_MAX_TOKENS),
        "ignore_eos": toml_value(True),
        "temperature": toml_value(defaults.temperature),
        "warmup": str(defaults.warmup),
        "repeats": str(defaults.repeats),
    }
    for key, value in session.items():
        _key(lines, key_doc(SESSION, key), key, value)
    for i, arm in enumerate(chosen):
        port = plan.port + i
        root = f"http://127.0.0.1:{port}"
        documented = i == 0 or None  # the first arm says what each key is for; the others what differs
        start = arm.start.replace("{port}", str(port))
        lines += ["", "[[arms]]", "# Start its server (one line, to copy):", f"#   {start}", ""]
        keys = {"id": toml_value(arm.id), "label": toml_value(arm.label), "base_url": toml_value(f"{root}/v1"),
                "model": toml_value(arm.model), "metrics_url": toml_value(f"{root}/metrics")}
        if arm.drafts_for is not None:  # the third arm: its target, the second, is always there
            keys["drafts_for"] = toml_value(arm.drafts_for)
        for key, value in keys.items():
            _key(lines, key_doc(ARM, key) if documented or key == "drafts_for" else None, key, value)
        lines += ["", "[arms.settings]"]
        if documented:
            lines += _comment("What the endpoint cannot tell about itself, shown beside the arm in the report.")
        lines += [f"{key} = {toml_value(value)}" for key, value in arm.settings]
    return "\n".join(lines) + "\n"
