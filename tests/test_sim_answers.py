"""The built-in prompts get simulated answers about their own prompt (issue 9, item 9)."""

from __future__ import annotations

import doctest
import re
import statistics
import types
from pathlib import Path

import httpx
import orjson
import pytest

from tests.test_cli import run_cli, write_config
from tokenreel.assets import names
from tokenreel.recorder.suites import load_prompts, random_prompt
from tokenreel.session import archive
from tokenreel.session.model import Prompt
from tokenreel.simulator.answer_text import Reply, builtin_answer, classify, reply_for, tokenize
from tokenreel.simulator.profiles import SEED_LADDER
from tokenreel.simulator.server import SimCluster
from tokenreel.simulator.written_answers import BUILTIN

REPO = Path(__file__).resolve().parents[1]
SUITES = names("prompts", ".jsonl")
SHIPPED_MAX_TOKENS = 512  # assets/tokenreel/assets/configs/simulated-ladder.toml; the demo forces 256
DEMO_TOKENS = 256

# Words each answer must contain, by prompt id: what makes it an answer to *that* prompt.
TOPIC = {
    "conversation-1": ["new city", "meet people", "Volunteer", "neighbours", "first month"],
    "conversation-2": ["starter", "nail polish remover", "acetone", "feed", "mould"],
    "conversation-3": ["Lisbon", "Alfama", "pastel de nata", "walk", "market"],
    "reasoning-1": ["09:40", "312 ÷ 96 = 3.25", "7-minute stop", "**13:02**"],
    "reasoning-2": ["packs of 10", "4.20", "6.50", "**76 pens**", "49.70"],
    "reasoning-3": ["187.50", "Ana", "Ben", "Chen", "**84.00**", "**69.00**", "**34.50**"],
    "prose-1": ["night train", "Europe", "Nightjet", "European Sleeper", "flight"],
    "prose-2": ["lighthouse", "keeper", "letter", "island", "Forty years", "1984"],
    "prose-3": ["winter", "Spring", "Summer", "Autumn", "harbour", "town"],
    "code-1": ["def merge_intervals(", "intervals", "-> list[tuple[float, float]]", '"""', ">>> "],
    "code-2": ["class LRUCache", "def get(", "def put(", "O(1)", "doubly linked list"],
    "code-3": ["def parse_iso_datetime(", "trailing `Z`", "timezone", "fromisoformat", ">>> "],
}
ANSWERED_SUITES = ("ladder4", "mixed")  # speed's ids (reasoning-1...) are its own prompts
# What the first DEMO_TOKENS tokens (what `tokenreel demo` shows) already contain: the whole
# merge function, up to its closing fence.
EARLY = {"code-1": "    return merged\n```", "reasoning-1": "312 ÷ 96", "conversation-1": "meet people"}


def suite_prompts() -> list[tuple[str, Prompt]]:
    """(suite, prompt) for every prompt of every built-in suite."""
    return [(suite, prompt) for suite in SUITES for prompt in load_prompts(f"builtin:{suite}", REPO)]


def builtin_prompts() -> list[Prompt]:
    """The built-in prompts with written answers (ladder4's, and mixed's first three a category), once each."""
    seen: dict[str, Prompt] = {}
    for suite, prompt in suite_prompts():
        if suite in ANSWERED_SUITES and prompt.id in TOPIC:
            seen.setdefault(prompt.id, prompt)
    return list(seen.values())


def user_text(prompt: Prompt) -> str:
    return [m["content"] for m in prompt.messages if m["role"] == "user"][-1]


def test_every_builtin_prompt_has_its_own_answer() -> None:
    prompts = builtin_prompts()
    assert {p.id for p in prompts} == set(TOPIC) == {a for a, *_ in BUILTIN}
    texts = set()
    for prompt in prompts:
        text = user_text(prompt)
        reply = reply_for(text)
        assert builtin_answer(text) == prompt.id and reply.answer == prompt.id
        # the category (and so the drafter's acceptance) is the suite's and the classifier's
        assert reply.category == prompt.category == classify(text)
        texts.add("".join(reply.tokens(reply.natural_len)))
    assert len(texts) == len(prompts)  # no two prompts share an answer


def test_the_other_builtin_prompts_fall_back_to_the_category_pools() -> None:
    """mixed's later prompts and all of speed's have no written answer: each gets a passage of a
    pool, mixed's of its own category (so the simulated drafter's acceptance follows the suite)."""
    others = [(suite, p) for suite, p in suite_prompts() if not (suite in ANSWERED_SUITES and p.id in TOPIC)]
    assert len(others) == 20 + 88
    for suite, prompt in others:
        text = user_text(prompt)
        reply = reply_for(text)
        assert builtin_answer(text) is None and reply.answer is None and reply == reply_for(text)
        assert reply.category == (prompt.category if suite == "mixed" else classify(text))
        assert len(reply.tokens(SHIPPED_MAX_TOKENS)) == SHIPPED_MAX_TOKENS


def test_speed_categories_record_and_report_against_the_simulator(tmp_path: Path, make_sim) -> None:
    """The simulator sees the text, never the category, so speed's (rag, multilingual...) record
    like any other; the report has a row for each. One prompt a category, two arms."""
    firsts = [p for p in load_prompts("builtin:speed", REPO) if p.id.endswith("-1")]
    suite = tmp_path / "speed-firsts.jsonl"
    suite.write_bytes(b"".join(orjson.dumps({"id": p.id, "category": p.category, "messages": p.messages}) + b"\n"
                               for p in firsts))
    cluster = make_sim([SEED_LADDER[0], SEED_LADDER[2]])
    config = write_config(tmp_path / "c.toml", cluster, max_tokens=32, prompts=str(suite))
    record = run_cli("record", "--config", config, "--out", tmp_path / "s.json")
    assert record.returncode == 0, record.stderr
    session = archive.load(tmp_path / "s.json")
    assert len(session.runs) == 2 * 11 and all(run.status == "ok" for run in session.runs)
    report = run_cli("report", tmp_path / "s.json", "--format", "json")
    assert report.returncode == 0, report.stderr
    assert list(orjson.loads(report.stdout)["categories"]) == [p.category for p in firsts]


@pytest.mark.parametrize("prompt_id", sorted(TOPIC))
def test_answer_is_about_its_prompt(prompt_id: str) -> None:
    [prompt] = [p for p in builtin_prompts() if p.id == prompt_id]
    reply = reply_for(user_text(prompt))
    answer = "".join(reply.tokens(reply.natural_len))
    for word in TOPIC[prompt_id]:
        assert word in answer, (prompt_id, word)
    if prompt_id in EARLY:
        assert EARLY[prompt_id] in "".join(reply.tokens(DEMO_TOKENS))


@pytest.mark.parametrize("prompt", builtin_prompts(), ids=lambda p: p.id)
def test_answer_lengths_and_continuation(prompt: Prompt) -> None:
    text = user_text(prompt)
    reply = reply_for(text)
    # ends naturally, but only after the shipped config's forced length: no repeat shows there
    assert SHIPPED_MAX_TOKENS < reply.natural_len <= 1500
    answer = reply.tokens(reply.natural_len)
    assert 2.5 <= statistics.mean(map(len, answer)) <= 5.0 and "\n" in answer
    # ignore_eos: past the natural end other text follows; the answer never starts over
    long = reply.tokens(3 * reply.natural_len)
    assert len(long) == 3 * reply.natural_len
    n = reply.natural_len
    assert long[:n] == answer and long[n : n + 2] == ["\n", "\n"]
    opening = answer[:30]
    assert not any(long[k : k + 30] == opening for k in range(1, len(long) - 30))
    for k in (0, 1, DEMO_TOKENS, SHIPPED_MAX_TOKENS, n + 1):
        assert reply.tokens(k) == long[:k]
    # determinism: the same prompt always gives the same tokens, whitespace aside
    assert reply_for(text) == reply
    assert reply_for("  " + text.replace(" ", "\n", 1) + "\n") == reply


@pytest.mark.parametrize("prompt_id", ["code-1", "code-2", "code-3"])
def test_code_answers_are_real_python(prompt_id: str) -> None:
    """Every ```python block runs in turn, and the docstrings' doctests pass."""
    [(_, _, prompt, answer)] = [e for e in BUILTIN if e[0] == prompt_id]
    blocks = re.findall(r"```python\n(.*?)```", answer, re.S)
    assert blocks and all(len(line) <= 79 for b in blocks for line in b.splitlines())
    module = types.ModuleType(f"answer_{prompt_id.replace('-', '_')}")
    for block in blocks:
        exec(compile(block, prompt_id, "exec"), module.__dict__)  # noqa: S102 - our own text
    result = doctest.testmod(module)
    assert result.failed == 0
    assert result.attempted >= (3 if prompt_id != "code-2" else 0)


def test_merge_intervals_answer_is_correct() -> None:
    [answer] = [e[3] for e in BUILTIN if e[0] == "code-1"]
    module = types.ModuleType("answer_code_1")
    exec(compile(re.findall(r"```python\n(.*?)```", answer, re.S)[0], "code-1", "exec"), module.__dict__)
    merge = module.merge_intervals
    assert merge(iter([(8, 10), (1, 3), (2, 6), (6, 7)])) == [(1, 7), (8, 10)]
    assert merge([(1.5, 2.0), (0.0, 1.0)]) == [(0.0, 1.0), (1.5, 2.0)]


def test_lru_answer_evicts_least_recently_used() -> None:
    [answer] = [e[3] for e in BUILTIN if e[0] == "code-2"]
    module = types.ModuleType("answer_code_2")
    exec(compile(re.findall(r"```python\n(.*?)```", answer, re.S)[0], "code-2", "exec"), module.__dict__)
    cache = module.LRUCache(2)
    cache.put("a", 1)
    cache.put("b", 2)
    assert cache.get("a") == 1
    cache.put("c", 3)
    assert cache.get("b") is None and cache.get("a") == 1 and cache.get("c") == 3
    cache.put("a", 10)
    cache.put("d", 4)
    assert cache.get("c") is None and cache.get("a") == 10 and len(cache) == 2


def test_other_prompts_fall_back_to_the_category_pools() -> None:
    for text, category in [
        ("Implement a Python function that rate-limits API calls.", "code"),
        ("Implement a Python function that merges overlapping time intervals.", "code"),
        ("Calculate 15 percent of 240", "reasoning"),
        ("Write an essay on bread", "prose"),
        ("Hi! Any tips for a weekend in Lisbon?", "conversation"),
        (random_prompt(64).prompt, classify(random_prompt(64).prompt)),
    ]:
        reply = reply_for(text)
        assert builtin_answer(text) is None and reply.answer is None
        assert reply.category == category and reply == reply_for(text)
        assert 150 <= reply.natural_len <= 600
    assert Reply("code", 1).tokens(10) == tokenize(
        "The bug is in how the loop counts tokens: it assumes one token per chunk"
    )[:10]


def test_simulated_endpoint_streams_the_builtin_answer(sim: SimCluster) -> None:
    """Over HTTP with a system message, as the recorder sends it: the code answer, forced."""
    [prompt] = [p for p in builtin_prompts() if p.id == "code-1"]
    body = {"model": "Qwen/Qwen3.8-27B", "messages": prompt.messages, "max_tokens": DEMO_TOKENS,
            "ignore_eos": True, "return_token_ids": True}
    answer = httpx.post(sim.base_url("bf16") + "/chat/completions", json=body, timeout=10.0).json()
    content = answer["choices"][0]["message"]["content"]
    assert content == "".join(reply_for(user_text(prompt)).tokens(DEMO_TOKENS))
    assert "def merge_intervals(" in content and answer["usage"]["completion_tokens"] == DEMO_TOKENS


def test_a_forced_length_past_every_passage_still_never_repeats_the_answer() -> None:
    """Past all the simulator's text it generates more (seeded: the same tokens every time)."""
    reply = reply_for(user_text(builtin_prompts()[0]))
    long = reply.tokens(40_000)
    assert len(long) == 40_000 and long == reply.tokens(40_000)
    opening = long[:30]
    assert not any(long[k : k + 30] == opening for k in range(1, len(long) - 30))
    tail = long[-5_000:]
    assert len(set(tail)) > 200 and "".join(tail).count("\n\n") > 5  # words and paragraphs, not one token over and over
