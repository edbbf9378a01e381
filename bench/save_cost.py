"""What one more save costs as a session grows: the recorder saves the whole session after every run.

Builds sessions of 100, 1,000 and 10,000 runs through the public model API, each run like one
recorded on a real engine (about 1,000 streamed events on the kernel clock, with acceptance,
host pressure and the engine's figures), saves each once, then appends a run and saves again,
several times, and prints the median of those saves beside the floor no save can go under: the
atomic write of the same bytes (`tokenreel.base.files.write_atomic`: temp file, fsync, rename),
and what the save costs beyond that write per run the session holds.

    python bench/save_cost.py                 # 100, 1,000, 10,000 runs, 5 saves each
    python bench/save_cost.py --runs 100 1000 --saves 9 --events 500
"""

from __future__ import annotations

import argparse
import random
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from tokenreel.base import files
from tokenreel.session import Arm, Prompt, Run, Session, Settings, save
from tokenreel.session.archive import dumps
from tokenreel.session.model import Acceptance, Chunks, Clock, EngineFigures, Gate, HostPressure

WORDS = ("the", " model", " streams", " tokens", " while", " the", " server", " keeps", " decoding", ",", " and",
         " every", " chunk", " carries", " a", " few", "\n\n", "```", "python", "\n", "def", " merge", "(", "):")


def run(arm: str, prompt: str, index: int, events: int, rng: random.Random) -> Run:
    """One measured run as a real llama.cpp arm records it: a role chunk, then `events` text events."""
    chunks = Chunks()
    t = 10_000_000 + rng.randrange(5_000_000)
    chunks.append(t, 0)
    chunks.client_delay_us.append(200)
    for _ in range(events):
        if rng.random() > 0.3:  # about a third of the events share a read with the one before
            t += rng.randrange(500_000, 12_000_000)
        chunks.append(t, rng.choice((1, 1, 1, 2, 3)), content=rng.choice(WORDS))
        chunks.client_delay_us.append(rng.randrange(80, 400))
    return Run(
        arm=arm, prompt=prompt, index=index, warmup=False, started_at="2026-12-02T18:55:48.063+00:00", http_status=200,
        finish_reason="length", usage={"completion_tokens": events, "prompt_tokens": 79, "total_tokens": events + 79},
        token_source="timings", gate=Gate(status="idle", running=0.0, waiting=0.0), contended=False,
        acceptance=Acceptance(mean_length=6.9, rate=0.74, drafts=148.0, draft_tokens=1183.0, accepted=875.0, source="timings+metrics"),
        clock=Clock(source="kernel", delay_p50_ms=0.078, delay_p99_ms=0.223, delay_max_ms=0.26), client_busy=False,
        host=HostPressure(source="/proc/pressure/cpu", some_pct=0.11, before_pct=0.25), send_monotonic_ns=758_191_812_745 + index,
        response_id=f"chatcmpl-{rng.getrandbits(96):024x}",
        engine=EngineFigures(decode_tok_s=1277.9, prompt_tokens=79, cached_prompt_tokens=0, source="llama.cpp timings"),
        chunks=chunks,
    )


def session(runs: int, events: int, rng: random.Random) -> Session:
    """A ladder of three arms over 50 prompts, `runs` runs in the order the recorder stores them."""
    arms = [Arm(id=a, label=a.upper(), base_url="http://127.0.0.1:8080/v1", model=f"model-{a}") for a in ("f16", "q4", "q4-draft")]
    prompts = [Prompt(id=f"p{i}", category="code", messages=[{"role": "user", "content": f"Prompt {i}."}], prompt="") for i in range(50)]
    built = Session(name="save cost", settings=Settings(warmup=0, repeats=runs), prompts=prompts, arms=arms)
    built.runs = [run(arms[i % 3].id, prompts[i // 3 % 50].id, i, events, rng) for i in range(runs)]
    return built


def timed(action: Callable[[], object]) -> float:
    start = time.perf_counter()
    action()
    return time.perf_counter() - start


def measure(size: int, saves: int, events: int, path: Path) -> tuple[int, float, float]:
    """(file bytes, median seconds of a save after one more run, median seconds of writing those bytes alone)."""
    rng = random.Random(size)
    recording = session(size, events, rng)
    save(recording, path)  # the save before: what a recording had written when this run came
    saving = []
    for _ in range(saves):
        recording.runs.append(run("f16", "p0", len(recording.runs), events, rng))
        saving.append(timed(lambda: save(recording, path)))
    payload = dumps(recording)
    writing = [timed(lambda: files.write_atomic(path, payload)) for _ in range(saves)]
    return len(payload), statistics.median(saving), statistics.median(writing)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, nargs="+", default=[100, 1_000, 10_000])
    parser.add_argument("--saves", type=int, default=5, help="saves timed at each size (the median is printed)")
    parser.add_argument("--events", type=int, default=1_000, help="streamed events per run")
    args = parser.parse_args()
    print(f"{'runs':>7} {'file MB':>8} {'save s':>8} {'write s':>8} {'save/write':>10} {'rest per run µs':>16}  (medians of {args.saves})")
    with tempfile.TemporaryDirectory() as folder:
        for size in args.runs:
            size_bytes, saving, writing = measure(size, args.saves, args.events, Path(folder) / "session.json")
            rest = (saving - writing) / size * 1e6  # what the save adds to the write, per run the session holds
            print(f"{size:>7,} {size_bytes / 1e6:>8.1f} {saving:>8.3f} {writing:>8.3f} {saving / writing:>10.1f} {rest:>16.0f}", flush=True)


if __name__ == "__main__":
    main()
