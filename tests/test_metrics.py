"""Metric definitions: TTFT skips the role chunk, decode excludes the first chunk's tokens."""

from __future__ import annotations

import math

from hypothesis import given, settings
from hypothesis import strategies as st

from tokenreel.analysis.metrics import NS_PER_S, run_metrics
from tokenreel.session.model import Chunks, Clock, Run


def make_run(events: list[tuple[int, int, str]], completion_tokens: int | None) -> Run:
    chunks = Chunks()
    for t_ns, tokens, text in events:
        chunks.append(t_ns, tokens, text)
    usage = None if completion_tokens is None else {"completion_tokens": completion_tokens}
    return Run(arm="a", prompt="p", index=1, warmup=False, usage=usage, chunks=chunks)


def test_role_chunk_is_not_ttft_and_first_chunk_tokens_are_excluded() -> None:
    run = make_run(
        [
            (500_000_000, 0, ""),  # role-only chunk
            (740_000_000, 1, "Hi"),
            (750_000_000, 4, " there, how"),
            (1_740_000_000, 5, " are you"),
            (1_740_100_000, 0, ""),  # final usage chunk
        ],
        completion_tokens=10,
    )
    m = run_metrics(run)
    assert m.ttft_s == 0.74
    assert m.first_chunk_tokens == 1
    assert math.isclose(m.decode_tok_s, 9 / 1.0)
    assert math.isclose(m.tpot_ms, 1000 / 9)
    assert math.isclose(m.e2e_tok_s, 10 / 1.74)


def test_server_usage_wins_over_chunk_sum() -> None:
    run = make_run([(1, 1, "a"), (NS_PER_S + 1, 1, "b")], completion_tokens=7)
    assert run_metrics(run).output_tokens == 7
    assert run_metrics(make_run([(1, 1, "a"), (2, 2, "b")], None)).output_tokens == 3


def test_no_text_gives_no_rates() -> None:
    m = run_metrics(make_run([(5, 0, "")], completion_tokens=0))
    assert (m.ttft_s, m.decode_tok_s, m.tpot_ms, m.e2e_tok_s) == (None, None, None, None)


events = st.lists(
    st.tuples(st.integers(0, 10**12), st.integers(0, 50), st.text(max_size=3)), max_size=40
).map(lambda evs: sorted(evs, key=lambda e: e[0]))


@settings(max_examples=300, deadline=None)
@given(events, st.one_of(st.none(), st.integers(0, 5000)))
def test_metrics_are_never_nan_or_negative(evs, completion) -> None:
    m = run_metrics(make_run(evs, completion))
    for value in (m.ttft_s, m.decode_tok_s, m.tpot_ms, m.e2e_tok_s):
        assert value is None or (math.isfinite(value) and value >= 0)
    assert m.output_tokens >= 0


def test_on_the_kernel_clock_decode_counts_only_what_reads_timed_exactly() -> None:
    """The first token's read also took the next token (one time for both): decode counts the
    tokens after that read. The last token's read also took the usage chunk, written right after
    it: the interval still ends there (ending at the read before would drop a speculative arm's
    last accepted burst). TTFT and end-to-end keep the first and last token's times."""
    events = [
        (500_000_000, 0, ""),  # role-only chunk
        (740_000_000, 1, "Hi"),  # read together with the next token: both get its time
        (740_000_000, 1, " there"),
        (840_000_000, 2, ", how"),
        (940_000_000, 3, " are you"),
        (1_040_000_000, 3, " today"),  # read together with the usage chunk
        (1_040_000_000, 0, ""),
    ]
    run = make_run(events, completion_tokens=10)
    user = run_metrics(run)  # the user clock (or an old session): the definition as before
    assert (user.first_chunk_tokens, user.decode_tokens) == (1, 9) and math.isclose(user.decode_tok_s, 9 / 0.3)
    run.clock = Clock(source="kernel")
    kernel = run_metrics(run)
    assert (kernel.first_chunk_tokens, kernel.decode_tokens) == (2, 8)
    assert math.isclose(kernel.decode_tok_s, 8 / 0.3)  # 2 + 3 + 3 tokens over 740 -> 1040 ms
    assert kernel.ttft_s == 0.74 and math.isclose(kernel.e2e_tok_s, 10 / 1.04)
