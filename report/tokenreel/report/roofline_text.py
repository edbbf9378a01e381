"""The roofline as one line per arm, the words every view (markdown, terminal, HTML) prints.

"bf16: 97.1 tok/s, 65.6 % of the NVIDIA B200's 8.0 TB/s limit (148.1 tok/s) for 54 GB a token";
a drafter arm per step, its tokens per step said; an arm without a figure says what is missing
and the key that would give it.
"""

from __future__ import annotations

from typing import Any

from tokenreel.analysis.figures import figure

GB = 1e9
ROOFLINE_TITLE = ("Memory-bandwidth roofline at batch 1 (each decode step reads the weights and the KV cache;"
                  " limit = bandwidth / bytes a step):")


def gigabytes(value: float) -> str:
    """Bytes as GB, two decimals under 10 GB (a small model's 0.64 GB), one above."""
    return figure(value / GB, 2 if value < 10 * GB else 1, " GB")


def _card(card: str) -> str:
    return f"the {card.removeprefix('1x ')}'s" if card else "the GPUs'"


def roofline_line(entry: dict[str, Any], label: str) -> str:
    """One arm's roofline sentence (its report entry), or what is missing for it."""
    if entry["pct_of_limit"] is None:
        return f"{label}: no roofline: {'; '.join(entry['missing']) or 'no figure'}"
    limit = f"{_card(entry['card'])} {figure(entry['bandwidth_gbps'] / 1000, 1)} TB/s limit"
    pct = figure(entry["pct_of_limit"], 1, " %")
    if entry["drafter"]:
        parts = f"{gigabytes(entry['weights_bytes'])} + draft {gigabytes(entry['draft_bytes'])}"
        kv = f" + KV {gigabytes(entry['kv_bytes'])}" if entry["kv_bytes"] is not None else ""
        text = (f"{label}: {figure(entry['steps_s'], 1)} steps/s ({figure(entry['decode_tok_s'], 1)} tok/s at"
                f" {figure(entry['tokens_per_step'], 2)} tokens a step), {pct} of {limit}"
                f" ({figure(entry['limit_steps_s'], 1)} steps/s) for {gigabytes(entry['bytes_per_step'])} a step ({parts}{kv})")
    else:
        kv = f" (KV {gigabytes(entry['kv_bytes'])})" if entry["kv_bytes"] is not None else ""
        text = (f"{label}: {figure(entry['decode_tok_s'], 1)} tok/s, {pct} of {limit}"
                f" ({figure(entry['limit_tok_s'], 1)} tok/s) for {gigabytes(entry['bytes_per_token'])} a token{kv}")
    if entry["pct_of_limit"] > 100:
        text += "; above the limit: a size or the bandwidth is wrong (set it, see the keys)"
    return f"{text}; {entry['bound']} ({entry['kv_source']})" if entry["bound"] else text


def roofline_lines(report: dict[str, Any]) -> list[str]:
    """Every arm's line, in ladder order; [] for a report without a roofline entry."""
    labels = {a["arm"]: a["label"] for a in report["arms"]}
    return [roofline_line(entry, labels.get(entry["arm"], entry["arm"])) for entry in report.get("roofline", [])]
