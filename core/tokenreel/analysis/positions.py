"""Acceptance rate per draft position, one entry per drafter arm, for every view to print.

The rate at position i is Σ draft tokens accepted at i / Σ verify steps whose draft reached i,
pooled over the arm's counted runs on the prompts every arm has (tokenreel.analysis.acceptance).
A drafter arm without per-position counts gets the reason and what would give them instead.
"""

from __future__ import annotations

from typing import Any

from tokenreel.analysis.engine_figures import engine_name
from tokenreel.analysis.ladder import LadderRow
from tokenreel.session.model import Session

# Per engine: where its per-position counts come from, said where an arm lacks them.
MISSING: dict[str, str] = {
    "vllm": "vLLM counts them in /metrics (vllm:spec_decode_num_accepted_tokens_per_pos: give the arm its"
            " metrics_url) and per request with vllm serve --per-request-spec-decode-metrics summary",
    "llamacpp": "llama.cpp counts them in /metrics (llamacpp:spec_decode_num_accepted_tokens_per_pos_total:"
                " start llama-server with --metrics and give the arm its metrics_url; older builds lack the counter)",
    "sglang": "SGLang counts them per request in sglext.spec_tokens_details.spec_correct_drafts_histogram"
              " (asked with return_spec_tokens_details; a build that does not send the histogram gives none)",
}
UNKNOWN_ENGINE = "the engine gave no per-position counts (vLLM and llama.cpp count them in /metrics)"
BASIS_TEXT = {
    "drafted": "verify steps whose draft reached the position (the engine counts them)",
    "drafts": "every verify step (the engine does not count drafts per position; exact when every draft had k tokens)",
}


def acceptance_positions(session: Session, ladder: list[LadderRow]) -> list[dict[str, Any]]:
    """Per drafter arm (one with an acceptance figure): its per-position rates, counts and
    denominator, or `missing` with the reason. Empty when no arm has per-position counts."""
    fingerprints = {arm.id: arm.fingerprint for arm in session.arms}
    entries: list[dict[str, Any]] = []
    for row in ladder:
        if row.acceptance_length is None and row.acceptance_rate is None:
            continue
        positions = row.acceptance_per_position
        if positions is None:
            engine = engine_name(fingerprints.get(row.arm, {}))
            entries.append({"arm": row.arm, "label": row.label, "rates": None, "accepted": None, "reached": None,
                            "basis": None, "missing": MISSING.get(engine, UNKNOWN_ENGINE)})
            continue
        entries.append({"arm": row.arm, "label": row.label, "rates": positions.rates,
                        "accepted": list(positions.accepted), "reached": list(positions.reached),
                        "basis": positions.basis, "missing": ""})
    return entries if any(e["rates"] is not None for e in entries) else []
