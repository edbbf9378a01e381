"""Token counts, TTFT and per-response spec stats against engine shapes the simulator lacks.

Each test runs a small aiohttp server on loopback that streams exactly like one engine does
(llama.cpp: one event per token, a token ending mid-character held back and merged into the next
event, no running usage, `timings` per token on request; vLLM 0.33: an empty-text chunk that
carries the first token; SGLang: spec stats only on request), and records it with the real
client (fingerprint first, then runs, as the runner does).
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import pytest
from aiohttp import web
from tokenizers import Tokenizer, models, pre_tokenizers

from tests.test_recorder_support import chat_prompt, fast_settings, serve
from tokenreel.analysis.metrics import NS_PER_S, first_token_index, run_metrics
from tokenreel.recorder.client.run_bounds import RunBounds
from tokenreel.recorder.client.sse_client import stream_run
from tokenreel.recorder.client.stream import StreamParser
from tokenreel.recorder.client.token_counts import tokenizer_counts
from tokenreel.recorder.config import ConfigError, load_config
from tokenreel.recorder.engines.fingerprint import fingerprint
from tokenreel.report import build_report, render_report
from tokenreel.report.wording import ESTIMATED_NOTE
from tokenreel.session import archive, model, validate
from tokenreel.session.model import Arm, Chunks, Run, Session

PROMPT = chat_prompt("Write about a café.", "prose")
# llama.cpp's pieces for the reply: token 3 ends mid-character ("caf" + first byte of "é"), so
# llama.cpp sends no event for it and its text rides on token 4's event.
PIECES = ["A", " small", " caf", "\xc3", "\xa9", " near", " the", " sea", ".", " It", " opens", " early"]
TEXTS = ["A", " small", " caf", None, "é", " near", " the", " sea", ".", " It", " opens", " early"]
STEP_S = 0.01


def sse(event: dict[str, Any] | str) -> bytes:
    return b"data: " + (event.encode() if isinstance(event, str) else orjson.dumps(event)) + b"\n\n"


async def _stream(request: web.Request, events: list[tuple[float, dict[str, Any]]]) -> web.StreamResponse:
    response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
    await response.prepare(request)
    for delay, event in events:
        if delay:
            await asyncio.sleep(delay)
        await response.write(sse(event))
    await response.write(sse("[DONE]"))
    return response


def llamacpp_app(seen: list[dict[str, Any]], draft: bool = False) -> web.Application:
    """llama.cpp's server as the recorder sees it (source: tools/server/server-context.cpp, server-task.cpp)."""

    async def models_(request: web.Request) -> web.Response:
        meta = {"vocab_type": 2, "n_vocab": 151936, "n_ctx": 4096, "n_ctx_train": 262144, "ftype": "Q4_0"}
        return web.json_response({"object": "list", "data": [
            {"id": "qwen-q4_0.gguf", "object": "model", "owned_by": "llamacpp", "meta": meta}
        ]})

    async def props(request: web.Request) -> web.Response:
        params = {"n_predict": -1, "speculative.n_max": 16 if draft else 0, "speculative.n_min": 0, "speculative.p_min": 0.75}
        return web.json_response({
            "default_generation_settings": {"n_ctx": 4096, "speculative": draft, "params": params},
            "total_slots": 1, "model_path": "/models/qwen-q4_0.gguf", "build_info": "b7100-abc",
            "bos_token": "<|endoftext|>", "eos_token": "<|im_end|>",
        })

    async def chat(request: web.Request) -> web.StreamResponse:
        body = await request.json()
        seen.append(body)
        per_token = body.get("timings_per_token") is True
        envelope = {"object": "chat.completion.chunk", "model": "qwen"}
        events: list[tuple[float, dict[str, Any]]] = []
        decoded = 0
        for i, text in enumerate(TEXTS):
            decoded += 1
            if i == 0:
                role = {"choices": [{"index": 0, "delta": {"role": "assistant", "content": None}}], **envelope}
                events.append((STEP_S, role))
            if text is None:
                continue  # held back: no event at all
            event: dict[str, Any] = {"choices": [{"index": 0, "delta": {"content": text}}], **envelope}
            if per_token:
                event["timings"] = {"predicted_n": decoded, "predicted_ms": 10.0 * decoded}
            events.append((0 if i == 0 else STEP_S, event))
        finish = {"choices": [{"index": 0, "finish_reason": "length", "delta": {}}], **envelope}
        events.append((0, finish))
        usage = {"completion_tokens": len(TEXTS), "prompt_tokens": 9, "total_tokens": 9 + len(TEXTS)}
        events.append((0, {"choices": [], "usage": usage, "timings": {"predicted_n": decoded}, **envelope}))
        return await _stream(request, events)

    app = web.Application()
    app.router.add_get("/v1/models", models_)
    app.router.add_get("/props", props)
    app.router.add_post("/v1/chat/completions", chat)
    return app


async def record_runs(app: web.Application, count: int, **arm_changes: Any) -> tuple[Arm, list[Run]]:
    """Fingerprint the arm, then stream `count` runs of PROMPT, as the runner does."""
    async with serve(app) as root:
        arm = Arm(id="x", label="x", base_url=f"{root}/v1", model="qwen", **arm_changes)
        settings = fast_settings(max_tokens=len(TEXTS))
        runs = []
        async with aiohttp.ClientSession() as http:
            arm.fingerprint = await fingerprint(http, arm)
            for index in range(count):
                run = Run(arm=arm.id, prompt=PROMPT.id, index=index, warmup=index == 0)
                await stream_run(http, arm, PROMPT, settings, run)
                runs.append(run)
    return arm, runs


# --- defect 5: no running usage ------------------------------------------------------------


def test_llamacpp_counts_come_from_timings_per_token_and_include_the_held_back_token() -> None:
    """llama.cpp ignores continuous_usage_stats: before, every event got 1 token and the held-back
    one landed on the last event; now its running `timings.predicted_n` counts it where it arrived."""
    seen: list[dict[str, Any]] = []
    _, [run] = asyncio.run(record_runs(llamacpp_app(seen), 1))
    assert run.status == "ok", run.error
    assert seen[0].get("timings_per_token") is True
    assert run.token_source == "timings" and not run.tokens_estimated
    merged = run.chunks.content.index("é")
    assert run.chunks.tokens[merged] == 2
    text_counts = [n for i, n in enumerate(run.chunks.tokens) if run.chunks.has_text(i)]
    assert text_counts == [1, 1, 1, 2, 1, 1, 1, 1, 1, 1, 1]
    assert sum(run.chunks.tokens) == len(TEXTS) and run.chunks.tokens[0] == 0  # role event: no token


def generic_app(seen: list[dict[str, Any]], tokens_per_event: int = 4, events: int = 10) -> web.Application:
    """An OpenAI-compatible server that sends no usage at all (not even at the end), several tokens
    per event (speculative decoding), and logprobs only when asked."""

    async def chat(request: web.Request) -> web.StreamResponse:
        body = await request.json()
        seen.append(body)
        out = []
        for i in range(events):
            words = [f" w{i}_{j}" for j in range(tokens_per_event)]
            choice: dict[str, Any] = {"index": 0, "delta": {"content": "".join(words)}}
            if body.get("logprobs"):
                choice["logprobs"] = {"content": [{"token": w, "logprob": -0.1} for w in words]}
            out.append((STEP_S, {"choices": [choice]}))
        return await _stream(request, out)

    app = web.Application()
    app.router.add_post("/v1/chat/completions", chat)
    return app


def test_a_run_without_counts_is_marked_estimated_and_later_runs_ask_for_logprobs() -> None:
    """No usage at all: n was the number of events (-75% here) and nobody was told. Now the warmup
    run says it is estimated, and the recorder asks for logprobs from then on: exact counts."""
    seen: list[dict[str, Any]] = []
    _, (warmup, measured) = asyncio.run(record_runs(generic_app(seen), 2))
    assert "logprobs" not in seen[0] and seen[1]["logprobs"] is True
    assert warmup.token_source == "per_event" and warmup.tokens_estimated
    assert measured.token_source == "logprobs" and not measured.tokens_estimated
    assert measured.chunks.tokens == [4] * 10
    m = run_metrics(measured)
    assert m.output_tokens == 40 and m.decode_tok_s == pytest.approx(36 * NS_PER_S / (
        measured.chunks.t_ns[-1] - measured.chunks.t_ns[0]))


def word_tokenizer(path: Path) -> Path:
    """A Hugging Face tokenizer.json: one token per whitespace-separated word."""
    vocab = {"[UNK]": 0, **{f"w{i}_{j}": 1 + i * 4 + j for i in range(10) for j in range(4)}}
    tokenizer = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tokenizer.save(str(path))
    return path


def test_a_local_tokenizer_counts_when_the_server_gives_no_counts(tmp_path: Path) -> None:
    seen: list[dict[str, Any]] = []
    path = word_tokenizer(tmp_path / "tokenizer.json")
    _, runs = asyncio.run(record_runs(generic_app(seen), 2, tokenizer=str(path)))
    assert all("logprobs" not in body for body in seen)  # a local count costs the server nothing
    assert [r.token_source for r in runs] == ["tokenizer", "tokenizer"]
    assert runs[1].chunks.tokens == [4] * 10 and not runs[1].tokens_estimated


def test_tokenizer_counts_a_split_character_on_the_event_that_completes_it() -> None:
    alphabet = sorted(pre_tokenizers.ByteLevel.alphabet())
    tokenizer = Tokenizer(models.BPE(vocab={c: i for i, c in enumerate(alphabet)}, merges=[]))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    # one token per byte: "é" is two tokens, both counted on the event that carries "é"
    assert tokenizer_counts(tokenizer, ["", "caf", "é", " x"]) == [0, 3, 2, 2]


def test_config_names_a_tokenizer_and_a_bad_one_is_one_line(tmp_path: Path) -> None:
    path = word_tokenizer(tmp_path / "tok.json")
    arms = '[[arms]]\nid = "a"\nbase_url = "http://127.0.0.1:1/v1"\nmodel = "m"\n'
    config = tmp_path / "c.toml"
    config.write_text(f'[session]\nprompts = "builtin:ladder4"\ntokenizer = "tok.json"\n{arms}')
    assert load_config(config).arms[0].tokenizer == str(path.resolve())
    (tmp_path / "bad.json").write_text("{}")
    config.write_text(f'[session]\nprompts = "builtin:ladder4"\n{arms}tokenizer = "bad.json"\n')
    with pytest.raises(ConfigError) as caught:
        load_config(config)
    message = str(caught.value)
    assert message.startswith(f"{config}: arms[0].tokenizer: cannot load") and "\n" not in message


def _estimated_session() -> Session:
    chunks = Chunks()
    for i in range(10):
        chunks.append((i + 1) * 10_000_000, 1, f" w{i}")
    run = Run(arm="a", prompt="p", index=0, warmup=False, token_source="per_event", chunks=chunks)
    prompt = model.Prompt(id="p", category="prose", messages=[{"role": "user", "content": "x"}], prompt="")
    arm = Arm(id="a", label="A", base_url="http://127.0.0.1:1/v1", model="m")
    return Session(name="s", settings=model.Settings(warmup=0, repeats=1), prompts=[prompt], arms=[arm], runs=[run])


def test_the_report_marks_estimated_counts() -> None:
    session = _estimated_session()
    markdown = render_report(session, "md")
    assert ESTIMATED_NOTE in markdown and "tok/s\\*" in markdown
    report = build_report(session)
    assert report["cells"][0]["tokens_estimated"] is True and report["cells"][0]["token_counts"] == "per_event"
    assert report["arms"][0]["tokens_estimated"] is True
    assert "per_event,true" in render_report(session, "csv")  # csv booleans are true/false
    # the field round-trips and older files without it load as what they were: per_event
    data = orjson.loads(archive.dumps(session))
    assert validate.from_dict(data).runs[0].tokens_estimated
    del data["runs"][0]["token_source"]
    assert validate.from_dict(data).runs[0].token_source == "per_event"


# --- defect 6: TTFT on an empty-text chunk that carries a token ------------------------------


def test_ttft_is_the_first_chunk_after_the_role_that_carries_a_token() -> None:
    """vLLM 0.33: the first token decodes to part of a character, so its chunk has content ""
    but usage 1. It is the first token; before, TTFT waited for the next chunk with text."""

    async def chat(request: web.Request) -> web.StreamResponse:
        def chunk(content: str, n: int) -> dict[str, Any]:
            return {"choices": [{"index": 0, "delta": {"content": content}}], "usage": {"completion_tokens": n}}

        role = {"choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}], "usage": {"completion_tokens": 0}}
        events = [(0.0, role), (0.0, chunk("", 1)), (0.05, chunk("é", 2)), (0.01, chunk(" ok", 3)),
                  (0.0, {"choices": [], "usage": {"completion_tokens": 3}})]
        return await _stream(request, events)

    app = web.Application()
    app.router.add_post("/v1/chat/completions", chat)
    _, [run] = asyncio.run(record_runs(app, 1))
    assert run.status == "ok", run.error
    assert run.chunks.tokens[:4] == [0, 1, 1, 1] and first_token_index(run.chunks) == 1
    assert run_metrics(run).ttft_s == run.chunks.t_ns[1] / NS_PER_S
    assert run.chunks.t_ns[2] - run.chunks.t_ns[1] >= 40_000_000  # so the old answer was visibly late


def test_role_counts_still_move_to_the_first_token() -> None:
    chunks = Chunks()
    parser = StreamParser(chunks, RunBounds.of(1 << 17))
    role = {"choices": [{"delta": {"role": "assistant", "content": ""}}], "usage": {"completion_tokens": 1}}
    first = {"choices": [{"delta": {"content": ""}}], "usage": {"completion_tokens": 2}}
    parser.feed(0, sse(role) + sse(first) + sse({"choices": [{"delta": {"content": "x"}}], "usage": {"completion_tokens": 3}}))
    parser.finish()
    assert chunks.tokens == [0, 2, 1] and first_token_index(chunks) == 1


# --- defect 7: SGLang's spec stats are opt-in -------------------------------------------------


def sglang_app(seen: list[dict[str, Any]], rejects: bool = False) -> web.Application:
    details = {"spec_accept_length": 3.0, "spec_accept_rate": 0.5, "spec_verify_ct": 4,
               "spec_num_proposed_drafts": 16, "spec_num_correct_drafts": 8}

    async def models_(request: web.Request) -> web.Response:
        return web.json_response({"object": "list", "data": [{"id": "qwen", "owned_by": "sglang", "max_model_len": 8192}]})

    async def server_info(request: web.Request) -> web.Response:
        return web.json_response({"model_path": "qwen", "speculative_algorithm": "EAGLE3", "speculative_num_steps": 3,
                                  "internal_states": [{}], "version": "0.5.23"})

    async def chat(request: web.Request) -> web.StreamResponse:
        body = await request.json()
        seen.append(body)
        if rejects and "return_spec_tokens_details" in body:
            return web.json_response({"object": "error", "message": "extra fields not permitted"}, status=400)
        events = [(0.0, {"choices": [{"index": 0, "delta": {"content": "hi"}}], "usage": {"completion_tokens": 1}})]
        final: dict[str, Any] = {"choices": [], "usage": {"completion_tokens": 1}}
        if body.get("return_spec_tokens_details") is True:
            final["sglext"] = {"spec_tokens_details": details}
        return await _stream(request, [*events, (0.0, final)])

    app = web.Application()
    app.router.add_get("/v1/models", models_)
    app.router.add_get("/server_info", server_info)
    app.router.add_post("/v1/chat/completions", chat)
    return app


def test_sglang_is_asked_for_its_spec_stats() -> None:
    seen: list[dict[str, Any]] = []
    arm, [run] = asyncio.run(record_runs(sglang_app(seen), 1))
    assert seen[0].get("return_spec_tokens_details") is True
    assert arm.fingerprint["summary"]["engine"] == "sglang"
    assert run.acceptance is not None and run.acceptance.source == "sglext.spec_tokens_details"
    assert run.acceptance.mean_length == 3.0


def test_a_server_that_rejects_the_added_field_is_retried_without_it() -> None:
    seen: list[dict[str, Any]] = []
    _, runs = asyncio.run(record_runs(sglang_app(seen, rejects=True), 2))
    assert [r.status for r in runs] == ["ok", "ok"], [r.error for r in runs]
    assert ["return_spec_tokens_details" in body for body in seen] == [True, False, False]
    # an arm option turns it off too: extra_body overrides what the recorder adds
    seen.clear()
    asyncio.run(record_runs(sglang_app(seen), 1, extra_body={"return_spec_tokens_details": False}))
    assert seen[0]["return_spec_tokens_details"] is False
