"""What an arm's launch command, vLLM's `system_fingerprint` and the declared settings say of how
it was served: dtype, quantization, KV cache dtype, speculative method and k, vLLM's config hash,
and whether the engine forced its drafts' acceptance (synthetic acceptance).

Two vLLM arms that differ only in `--dtype` answer /version and /v1/models alike; the launch
command and the config hash in `system_fingerprint` (`vllm-<version>-<hash>`, on a stream's final
chunk) tell them apart. An engine that forces acceptance (vLLM's speculative config
`"rejection_sample_method": "synthetic"`, SGLang's `SGLANG_SIMULATE_ACC_LEN`, TensorRT-LLM's
`TLLM_SPEC_DECODE_FORCE_NUM_ACCEPTED_TOKENS`) drafts at a rate it was told, not the model's:
such an arm is labelled wherever its acceptance or speed-up shows, and never headlines.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Sequence
from typing import Any

from tokenreel.session.model import Arm, fingerprint_summary

SYNTHETIC_LABEL = "synthetic acceptance: not the model's output"
# Environment variables that force acceptance (a positive value turns it on), and their engine.
FORCED_ACCEPTANCE_ENV = {
    "SGLANG_SIMULATE_ACC_LEN": "SGLang",
    "TLLM_SPEC_DECODE_FORCE_NUM_ACCEPTED_TOKENS": "TensorRT-LLM",
}
# Flags whose value is one fingerprint field (vLLM and SGLang spell these alike).
_VALUE_FLAGS = {
    "--dtype": "dtype", "--quantization": "quantization", "-q": "quantization", "--kv-cache-dtype": "kv_cache_dtype",
    "--speculative-algorithm": "speculative",  # SGLang
}
_SPEC_FLAGS = ("--speculative-config", "-sc")  # vLLM: a JSON object (or dotted keys: --speculative-config.method)
# llama-server's flags for what tells two of its arms apart: the weights file (its quantization
# shows in the name), the KV cache type, a draft model and its draft length. Read only when the
# program is llama-server (python's own -m is a module, not a model file).
_LLAMA_VALUE_FLAGS = {"-m": "model_file", "--model": "model_file", "-ctk": "kv_cache_dtype", "--cache-type-k": "kv_cache_dtype"}
_LLAMA_SPEC_FLAGS = {"-md": "model", "--model-draft": "model", "--draft-max": "num_speculative_tokens",
                     "--spec-draft-n-max": "num_speculative_tokens",
                     "--draft": "num_speculative_tokens", "--draft-n": "num_speculative_tokens"}
_SGLANG_DRAFT_TOKENS = "--speculative-num-draft-tokens"
_ENV_ASSIGNMENT = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)=(.*)", re.DOTALL)
_SHELLS = ("sh", "bash", "dash", "zsh")
_SYSTEM_FINGERPRINT = re.compile(r"vllm-(?P<version>.+)-(?P<hash>[0-9a-fA-F]+)")


def config_hash(system_fingerprint: Any) -> str:
    """The config hash in vLLM's `system_fingerprint` ("vllm-0.32.0-5eed1ad0" -> "5eed1ad0"), or ""."""
    match = _SYSTEM_FINGERPRINT.fullmatch(system_fingerprint) if isinstance(system_fingerprint, str) else None
    return match["hash"] if match else ""


def _canonical(flag: str) -> str:
    """vLLM's parser reads --speculative_config as --speculative-config: long options compared with dashes."""
    return "--" + flag[2:].replace("_", "-") if flag.startswith("--") else flag


def _forced(name: str, value: str) -> str:
    """"SGLANG_SIMULATE_ACC_LEN=3 (SGLang)" where a forced-acceptance variable is set to a positive number."""
    if name not in FORCED_ACCEPTANCE_ENV:
        return ""
    try:
        on = float(value) > 0
    except ValueError:
        return ""
    return f"{name}={value} ({FORCED_ACCEPTANCE_ENV[name]})" if on else ""


def _speculative(spec: dict[str, Any], out: dict[str, str]) -> None:
    """Method, k and draft model of a vLLM speculative config (or llama-server's -md and
    --draft-max as one); synthetic acceptance where it says so."""
    parts = [str(spec.get("method") or ("draft model" if spec.get("model") else "speculative"))]
    if spec.get("num_speculative_tokens") is not None:
        parts.append(f"k {spec['num_speculative_tokens']}")
    if spec.get("model"):
        parts.append(f"draft {str(spec['model']).rstrip('/').rsplit('/', 1)[-1]}")
    out["speculative"] = ", ".join(parts)
    if spec.get("rejection_sample_method") == "synthetic":
        length = spec.get("synthetic_acceptance_length")
        said = f", synthetic_acceptance_length {length}" if length is not None else ""
        out["synthetic_acceptance"] = f"vLLM speculative config rejection_sample_method synthetic{said}"


def _spec_json(text: str) -> dict[str, Any] | None:
    try:
        spec = json.loads(text)
    except ValueError:
        return None
    return spec if isinstance(spec, dict) else None


def launch_settings(argv: Sequence[str]) -> dict[str, str]:
    """dtype, quantization, kv_cache_dtype, speculative ("ngram, k 4"), llama-server's model_file,
    and synthetic_acceptance (where it was seen) as a launch command says them: `env A=B` or bare `A=B` prefixes,
    `--flag value` and `--flag=value`, vLLM's `--speculative-config`/`--speculative_config`/`-sc`
    JSON or its dotted keys, and a `sh -c "..."` command line split as the shell would."""
    out, spec, draft_tokens = _parse_launch(argv)
    if "unreadable" in spec:
        out["speculative"] = f"unreadable --speculative-config {spec['unreadable']!r}"
    elif spec:
        _speculative(spec, out)
    if draft_tokens and "speculative" in out and not spec:
        out["speculative"] += f", draft tokens {draft_tokens}"
    return out


def launch_speculative_config(argv: Sequence[str]) -> dict[str, Any]:
    """vLLM's speculative config as a launch command gives it (JSON or dotted keys); {} without one."""
    return _parse_launch(argv)[1]


def _parse_launch(argv: Sequence[str]) -> tuple[dict[str, str], dict[str, Any], str]:
    """The value flags and forced-acceptance variables (`launch_settings`), the speculative config
    and SGLang's draft-token count of a launch command."""
    out: dict[str, str] = {}
    args = list(argv)
    if args and args[0].rsplit("/", 1)[-1] in _SHELLS and "-c" in args[:-1]:
        try:
            return _parse_launch(shlex.split(args[args.index("-c") + 1]))
        except ValueError:  # an unbalanced quote: the shell would refuse it too
            return out, {}, ""
    through_env = bool(args) and args[0].rsplit("/", 1)[-1] == "env"
    args = args[through_env:]
    while args and (through_env and args[0] in ("-i", "--ignore-environment") or _ENV_ASSIGNMENT.fullmatch(args[0])):
        match = _ENV_ASSIGNMENT.fullmatch(args.pop(0))
        if match and (forced := _forced(match[1], match[2])):
            out["synthetic_acceptance"] = forced
    spec: dict[str, Any] = {}
    draft_tokens = ""
    llama = bool(args) and args[0].rsplit("/", 1)[-1].startswith("llama-server")
    value_flags = {**_VALUE_FLAGS, **_LLAMA_VALUE_FLAGS} if llama else _VALUE_FLAGS
    i = 0
    while i < len(args):
        flag, eq, value = args[i].partition("=") if args[i].startswith("--") else (args[i], "", "")
        flag = _canonical(flag)
        base, dot, key = flag.partition(".")
        llama_spec = llama and flag in _LLAMA_SPEC_FLAGS
        known = (flag in value_flags or flag in _SPEC_FLAGS or flag == _SGLANG_DRAFT_TOKENS or llama_spec
                 or (dot and base in _SPEC_FLAGS))
        if known and not eq:
            if i + 1 >= len(args):
                break
            i += 1
            value = args[i]
        if flag in value_flags:
            out[value_flags[flag]] = value.rstrip("/").rsplit("/", 1)[-1] if value_flags[flag] == "model_file" else value
        elif llama_spec:
            spec[_LLAMA_SPEC_FLAGS[flag]] = int(value) if value.isdigit() else value
        elif flag in _SPEC_FLAGS:
            spec.update(_spec_json(value) or {"unreadable": value})
        elif dot and base in _SPEC_FLAGS:
            spec[key.replace("-", "_")] = int(value) if value.isdigit() else value
        elif flag == _SGLANG_DRAFT_TOKENS:
            draft_tokens = value
        i += 1
    return out, spec, draft_tokens


def declared_synthetic(settings: dict[str, str]) -> str:
    """Synthetic acceptance as [arms.settings] declares it: a forced-acceptance variable as a key,
    `rejection_sample_method = "synthetic"`, a speculative config, or a command line in a value."""
    for key, value in settings.items():
        if key == "synthetic_acceptance" and value.strip().lower() not in ("", "no", "false", "0", "off"):
            return f"declared in [arms.settings] (synthetic_acceptance = {value!r})"
        if forced := _forced(key, value):
            return f"{forced}, declared in [arms.settings]"
        if key == "rejection_sample_method" and value == "synthetic":
            return "rejection_sample_method synthetic, declared in [arms.settings]"
        spec = _spec_json(value) if value.lstrip().startswith("{") else None
        said = launch_settings([_SPEC_FLAGS[0], value]) if spec else _command_settings(value)
        if said.get("synthetic_acceptance"):
            return f"{said['synthetic_acceptance']}, declared in [arms.settings] {key}"
    return ""


def _command_settings(text: str) -> dict[str, str]:
    """A command line written in a settings value ("SGLANG_SIMULATE_ACC_LEN=3 python -m sglang...")."""
    try:
        return launch_settings(shlex.split(text)) if " " in text.strip() or "=" in text else {}
    except ValueError:
        return {}


def launch_argv(arm: Arm) -> list[str]:
    """The arm's archived launch command (its string arguments), [] when it was not launched by tokenreel."""
    launch = arm.fingerprint.get("launch") if isinstance(arm.fingerprint, dict) else None
    return [v for v in launch if isinstance(v, str)] if isinstance(launch, list) else []


def synthetic_acceptance(arm: Arm) -> str:
    """Where the arm's engine was seen forcing acceptance (its launch command or its declared
    settings), or "" when nothing says it did."""
    launched = launch_settings(launch_argv(arm)).get("synthetic_acceptance", "")
    if launched:
        return f"{launched} in the launch command"
    return declared_synthetic(arm.settings)


def synthetic_text(arm: Arm) -> str:
    """"synthetic acceptance: not the model's output (where it was seen)", or "" for a real drafter."""
    where = synthetic_acceptance(arm)
    return f"{SYNTHETIC_LABEL} ({where})" if where else ""


def serving_identity(arm: Arm) -> dict[str, str]:
    """The fingerprint summary (what the endpoints said) with what the launch command says where
    the endpoints were silent, vLLM's config hash, and the synthetic-acceptance label."""
    out = fingerprint_summary(arm)
    for key, value in launch_settings(launch_argv(arm)).items():
        if key != "synthetic_acceptance":
            out.setdefault(key, value)
    fingerprint = arm.fingerprint.get("system_fingerprint") if isinstance(arm.fingerprint, dict) else None
    if (digest := config_hash(fingerprint)) and "config_hash" not in out:
        out["config_hash"] = digest
    if synthetic := synthetic_text(arm):
        out["synthetic_acceptance"] = synthetic
    return out


def real_acceptance_arms(arms: Sequence[Arm]) -> list[str]:
    """Ids of the arms whose engine did not force acceptance, in order: those a headline may compare."""
    return [arm.id for arm in arms if not synthetic_acceptance(arm)]
