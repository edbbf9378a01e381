"""The report says what each arm was: its endpoint's fingerprint summary and declared settings."""

from __future__ import annotations

import csv
import io

import orjson

from tests.test_token_counting import _estimated_session
from tokenreel.report import render_report


def test_every_report_format_shows_each_arms_fingerprint_and_settings() -> None:
    session = _estimated_session()
    arm = session.arms[0]
    arm.fingerprint = {"props": {}, "summary": {"engine": "llamacpp", "version": "b7100", "speculative": "draft model, n_max 16"}}
    arm.settings = {"quantization": "Q4_0", "drafter": "Qwen3-0.6B"}
    markdown = render_report(session, "md")
    assert "| A | llamacpp · version b7100 · speculative draft model, n_max 16 | quantization = Q4_0; drafter = Qwen3-0.6B |" in markdown
    entry = orjson.loads(render_report(session, "json"))["arms"][0]
    assert entry["fingerprint"]["speculative"] == "draft model, n_max 16" and entry["settings"]["drafter"] == "Qwen3-0.6B"
    [row] = list(csv.DictReader(io.StringIO(render_report(session, "csv"))))
    assert row["arm_settings"] == "quantization=Q4_0; drafter=Qwen3-0.6B"
    assert row["arm_fingerprint"] == "llamacpp; version b7100; speculative draft model, n_max 16"
