"""SSE parsing without a network: framing, token sources, role chunk, per-response acceptance."""

from __future__ import annotations

import re
from typing import Any

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tokenreel.analysis.metrics import first_token_index
from tokenreel.recorder.client.response_stats import response_acceptance
from tokenreel.recorder.client.run_bounds import RunBounds, StreamFailure
from tokenreel.recorder.client.stream import StreamParser
from tokenreel.session.model import Chunks


def sse(*events: dict[str, Any] | str) -> bytes:
    return b"".join(b"data: " + (e.encode() if isinstance(e, str) else orjson.dumps(e)) + b"\n\n" for e in events)


def chat(content: str = "", usage: int | None = None, **choice: Any) -> dict[str, Any]:
    event: dict[str, Any] = {"choices": [{"index": 0, "delta": {"content": content}, **choice}]}
    if usage is not None:
        event["usage"] = {
            "prompt_tokens": 5, "completion_tokens": usage, "total_tokens": 5 + usage, "prompt_tokens_details": None
        }
    return event


ROLE = {"choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}], "usage": {"completion_tokens": 0}}
SPEC_STREAM = sse(
    ROLE,
    chat("Hi", usage=1),
    chat(" there, how", usage=5),
    chat(" are you", usage=8, finish_reason="length"),
    {"choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": 8, "total_tokens": 13}},
    "[DONE]",
)


def parse(data: bytes, reads: list[int] | None = None) -> tuple[StreamParser, Chunks]:
    """Feed data split at the given cut points; read i arrives at t = i."""
    chunks = Chunks()
    parser = StreamParser(chunks, RunBounds.of(1 << 17))
    cuts = [0, *(reads or []), len(data)]
    for t, (a, b) in enumerate(zip(cuts, cuts[1:], strict=False)):
        if a < b:
            parser.feed(t, data[a:b])
    parser.end_of_body(len(cuts))
    return parser, chunks


def test_continuous_usage_gives_tokens_per_multi_token_chunk() -> None:
    parser, chunks = parse(SPEC_STREAM)
    outcome = parser.finish()
    assert parser.done
    assert outcome.token_source == "usage_delta"
    assert chunks.tokens == [0, 1, 4, 3, 0]
    assert chunks.content == ["", "Hi", " there, how", " are you", ""]
    assert outcome.usage == {"prompt_tokens": 5, "completion_tokens": 8, "total_tokens": 13}
    assert outcome.finish_reason == "length"


@pytest.mark.parametrize(
    ("ids", "kept"),
    [(["chatcmpl-7", "chatcmpl-7"], "chatcmpl-7"), ([None, "cmpl-2"], "cmpl-2"), ([None, None], None), (["x" * 257, "y"], "y")],
)
def test_the_response_id_is_the_first_event_id(ids: list[str | None], kept: str | None) -> None:
    """The server's name for the request (Run.response_id); one longer than the archive takes is skipped."""
    events = [chat("Hi", usage=1), chat(" you", usage=2)]
    parser, _ = parse(sse(*({**e, "id": i} if i is not None else e for e, i in zip(events, ids, strict=False)), "[DONE]"))
    assert parser.finish().response_id == kept


def test_role_chunk_is_stored_but_is_not_the_first_token() -> None:
    _, chunks = parse(SPEC_STREAM)
    assert (chunks.tokens[0], chunks.content[0]) == (0, "")
    assert first_token_index(chunks) == 1


def test_a_count_on_the_role_chunk_moves_to_the_first_token() -> None:
    early_role = ROLE | {"usage": {"completion_tokens": 1}}
    parser, chunks = parse(sse(early_role, chat("Hi", usage=1), chat(" you", usage=3), "[DONE]"))
    assert parser.finish().token_source == "usage_delta"
    assert chunks.tokens == [0, 1, 2]


@given(st.lists(st.integers(min_value=1, max_value=len(SPEC_STREAM) - 1), unique=True, max_size=12).map(sorted))
def test_any_split_of_the_bytes_gives_the_same_events(cuts: list[int]) -> None:
    parser, chunks = parse(SPEC_STREAM, cuts)
    parser.finish()
    assert chunks.tokens == [0, 1, 4, 3, 0] and chunks.content[1:4] == ["Hi", " there, how", " are you"]
    assert chunks.t_ns == sorted(chunks.t_ns)
    # an event is stamped with the read that completed its line
    for i, end in enumerate(m.end() for m in re.finditer(rb"data: \{.*?\}\n", SPEC_STREAM)):
        assert chunks.t_ns[i] == sum(1 for c in cuts if c < end)


def test_events_in_one_read_share_its_arrival_time() -> None:
    chunks = Chunks()
    parser = StreamParser(chunks, RunBounds.of(1 << 17))
    parser.feed(7, SPEC_STREAM)
    assert chunks.t_ns == [7] * 5


def test_without_continuous_usage_one_token_per_text_event_reconciled_with_usage() -> None:
    tail = {"choices": [], "usage": {"completion_tokens": 8}}
    data = sse(ROLE | {"usage": None}, chat("Hi"), chat(" there, how"), chat(" are you"), tail, "[DONE]")
    parser, chunks = parse(data)
    outcome = parser.finish()
    assert outcome.token_source == "per_event"
    assert chunks.tokens == [0, 1, 1, 6, 0]
    assert sum(chunks.tokens) == outcome.usage["completion_tokens"]


def test_per_event_reconciles_downwards_without_negative_counts() -> None:
    data = sse(chat("a"), chat("b"), chat("c"), {"choices": [], "usage": {"completion_tokens": 1}}, "[DONE]")
    parser, chunks = parse(data)
    parser.finish()
    assert chunks.tokens == [1, 0, 0, 0]


def test_token_ids_then_logprobs_are_used_when_usage_is_not_continuous() -> None:
    data = sse(chat("Hi", token_ids=[1]), chat(" there", token_ids=[2, 3, 4]), "[DONE]")
    parser, chunks = parse(data)
    assert parser.finish().token_source == "token_ids" and chunks.tokens == [1, 3]
    chat_lp = sse(chat("Hi", logprobs={"content": [{}]}), chat(" you", logprobs={"content": [{}, {}]}), "[DONE]")
    parser, chunks = parse(chat_lp)
    assert parser.finish().token_source == "logprobs" and chunks.tokens == [1, 2]
    completions_lp = sse({"choices": [{"text": "ab", "logprobs": {"tokens": ["a", "b"]}}]}, "[DONE]")
    parser, chunks = parse(completions_lp)
    assert parser.finish().token_source == "logprobs" and chunks.tokens == [2] and chunks.content == ["ab"]


def test_reasoning_and_tool_calls_are_kept_and_count_as_text() -> None:
    tool = {"index": 0, "function": {"name": "get_weather", "arguments": '{"city":'}}
    data = sse(
        {"choices": [{"delta": {"reasoning": "think"}}]},
        {"choices": [{"delta": {"reasoning_content": "more"}}]},
        {"choices": [{"delta": {"tool_calls": [tool]}}]},
        "[DONE]",
    )
    parser, chunks = parse(data)
    parser.finish()
    assert chunks.reasoning == ["think", "more", ""]
    assert chunks.tool == ["", "", 'get_weather{"city":']
    assert chunks.tokens == [1, 1, 1] and first_token_index(chunks) == 0


def test_comments_and_other_fields_are_skipped() -> None:
    crlf = sse(chat("x", usage=1), "[DONE]").replace(b"\n", b"\r\n")
    data = b": keep-alive\n\nevent: message\nid: 3\nretry: 10\r\n" + crlf
    parser, chunks = parse(data)
    parser.finish()
    assert parser.done and chunks.content == ["x"] and chunks.tokens == [1]


def test_last_line_without_newline_still_counts() -> None:
    parser, _ = parse(sse(chat("x")) + b"data: [DONE]")
    assert parser.done


@pytest.mark.parametrize(
    ("data", "problem"),
    [
        (b'data: {"choices": [\n\n', "malformed JSON in stream after 0 events"),
        (b"data: [1, 2]\n\n", "malformed stream event"),
        (b'{"id": "chatcmpl-1", "choices": []}\n', "malformed stream line"),
        (
            b'data: {"error": {"message": "CUDA out of memory.", "type": "InternalServerError"}}\n\n',
            "error event after 0 tokens: CUDA out of memory;",
        ),
    ],
)
def test_stream_failures_are_one_line(data: bytes, problem: str) -> None:
    chunks = Chunks()
    parser = StreamParser(chunks, RunBounds.of(1 << 17))
    parser.feed(0, sse(chat("kept", usage=1)))
    with pytest.raises(StreamFailure) as caught:
        parser.feed(1, data)
    assert problem.replace("0 events", "1 events").replace("0 tokens", "1 tokens") in str(caught.value)
    assert "\n" not in str(caught.value)
    assert chunks.content == ["kept"]


def test_vllm_per_request_spec_metrics() -> None:
    spec = {
        "mean_acceptance_length": 3.5,
        "draft_acceptance_rate": 0.35,
        "num_spec_steps": 10,
        "num_draft_tokens": 70,
        "num_accepted_draft_tokens": 25,
    }
    final = {"choices": [], "usage": {"completion_tokens": 36}, "metrics": {"speculative_decoding": spec}}
    data = sse(chat("x", usage=1), final, "[DONE]")
    parser, _ = parse(data)
    acceptance = parser.finish().acceptance
    assert acceptance is not None and acceptance.source == "metrics.speculative_decoding"
    a = acceptance
    assert (a.mean_length, a.rate, a.drafts, a.draft_tokens, a.accepted) == (3.5, 25 / 70, 10, 70, 25)


def test_sglang_and_llamacpp_per_request_spec_stats() -> None:
    details = {
        "spec_accept_length": 3.0,
        "spec_accept_rate": 0.5,
        "spec_verify_ct": 4,
        "spec_num_proposed_drafts": 16,
        "spec_num_correct_drafts": 8,
    }
    sglang = response_acceptance(("sglext.spec_tokens_details", details))
    assert sglang is not None and (sglang.mean_length, sglang.rate, sglang.drafts) == (3.0, 0.5, 4)
    llama = response_acceptance(("timings", {"predicted_n": 64, "draft_n": 40, "draft_n_accepted": 30}))
    assert llama is not None and (llama.mean_length, llama.rate, llama.source) == (None, 0.75, "timings")
    assert response_acceptance(("timings", {"draft_n": 0, "draft_n_accepted": 0})) is None
    data = sse({"choices": [{"delta": {"content": "x"}}], "sglext": {"spec_tokens_details": details}}, "[DONE]")
    parser, _ = parse(data)
    assert parser.finish().acceptance == sglang
