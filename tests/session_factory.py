"""Small synthetic sessions built in code, with chosen chunk times and texts, for renderer tests."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from tokenreel.session.model import Acceptance, Arm, Chunks, Prompt, Run, Session, Settings

MS = 1_000_000  # ns

WORDS = (
    "the model streams tokens to the client while the server keeps decoding and every chunk "
    "carries a few of them so the replay has something to show at each frame of the video"
).split()


def stream(pieces: Sequence[str], ttft_ns: int, step_ns: int, tokens: int = 1, reasoning: Sequence[str] = ()) -> Chunks:
    """A role-only chunk, then reasoning pieces and content pieces one per step from ttft_ns,
    then a usage-only tail chunk one step after the last text.
    """
    chunks = Chunks()
    chunks.append(ttft_ns // 2, 0)
    t = ttft_ns
    for piece in reasoning:
        chunks.append(t, tokens, reasoning=piece)
        t += step_ns
    for piece in pieces:
        chunks.append(t, tokens, content=piece)
        t += step_ns
    chunks.append(t, 0)
    return chunks


def words(count: int, start: int = 0) -> list[str]:
    """count word tokens (with leading spaces and an occasional newline), deterministic."""
    out = []
    for i in range(start, start + count):
        word = WORDS[(i * 7) % len(WORDS)]
        out.append(("\n" if i % 37 == 36 else " ") + word)
    return out


def ladder(speeds: dict[str, dict[str, Sequence[float]]], tokens: int = 32, name: str = "Synthetic ladder") -> Session:
    """A ladder of several prompts at known speeds: arm -> prompt id -> each run's decode tok/s.
    Runs stream one token a chunk, evenly spaced, so each decodes at its speed (to the nanosecond
    the step is rounded to); a prompt's category is its id up to the last "-" ("code-2": code)."""
    prompt_ids = list(dict.fromkeys(p for runs in speeds.values() for p in runs))
    session = Session(
        name=name,
        settings=Settings(max_tokens=1024, ignore_eos=False, warmup=0,
                          repeats=max(len(runs) for prompts in speeds.values() for runs in prompts.values())),
        prompts=[Prompt(id=p, category=p.rsplit("-", 1)[0], messages=[{"role": "user", "content": f"Prompt {p}."}], prompt="")
                 for p in prompt_ids],
        arms=[Arm(id=a, label=a.upper(), base_url="http://127.0.0.1:9/v1", model=f"model-{a}") for a in speeds],
    )
    for arm_id, prompts in speeds.items():
        for prompt_id, runs in prompts.items():
            for index, speed in enumerate(runs):
                chunks = stream(words(tokens), 50 * MS, round(1e9 / speed))
                session.runs.append(Run(arm=arm_id, prompt=prompt_id, index=index, warmup=False,
                                        usage={"completion_tokens": tokens}, token_source="usage_delta", chunks=chunks))
    return session


def session(
    arms: Sequence[tuple[str, str, Sequence[Chunks]]],
    prompt: str = "Explain how speculative decoding speeds up generation.",
    category: str = "conversation",
    acceptance: dict[str, float] | None = None,
    name: str = "Synthetic ladder",
) -> Session:
    """arms: (id, label, runs' chunks); run i of an arm gets index i, all measured and ok."""
    session = Session(
        name=name,
        settings=Settings(max_tokens=1024, ignore_eos=False, warmup=0, repeats=3),
        prompts=[Prompt(id="p1", category=category, messages=[{"role": "user", "content": prompt}], prompt="")],
        arms=[Arm(id=a, label=label, base_url="http://127.0.0.1:9/v1", model=f"model-{a}") for a, label, _ in arms],
    )
    for arm_id, _, runs in arms:
        for index, chunks in enumerate(runs):
            session.runs.append(_run(arm_id, "p1", index, chunks, (acceptance or {}).get(arm_id)))
    return session


def _run(arm_id: str, prompt_id: str, index: int, chunks: Chunks, acceptance: float | None = None) -> Run:
    """A measured, ok run whose token counts came from the server, as a real recording of vLLM."""
    return Run(
        arm=arm_id,
        prompt=prompt_id,
        index=index,
        warmup=False,
        usage={"completion_tokens": sum(chunks.tokens)},
        token_source="usage_delta",
        acceptance=Acceptance(mean_length=acceptance, source="metrics") if acceptance else None,
        chunks=chunks,
    )


def suite(
    arms: Sequence[tuple[str, str, int]], categories: Sequence[str] = ("prose", "code", "reasoning"), per_category: int = 2
) -> Session:
    """A suite of per_category prompts in each category ("prose-1", ...), one run per arm and
    prompt: arm (id, label, ms per token) streams 24 words, a little slower on some prompts than
    others (by prompt and arm alike), so its speed-up over another arm varies and has an interval."""
    first = session([(a, label, []) for a, label, _ in arms], name="Synthetic suite")
    prompt = first.prompts[0]
    first.prompts = [replace(prompt, id=f"{c}-{n + 1}", category=c) for c in categories for n in range(per_category)]
    for k, p in enumerate(first.prompts):
        for i, (arm_id, _, step_ms) in enumerate(arms):
            step_ns = step_ms * MS * (100 + 3 * ((k * (i + 2)) % 5)) // 100
            first.runs.append(_run(arm_id, p.id, 0, stream(words(24), 40 * MS, step_ns)))
    return first
