"""Why a re-recording differs: for each ladder row or ratio that differs, what moved with it.

A verdict says that an arm ran 6 % faster; a reader deciding whether to worry needs to know
what else moved. Each cause is one line, over the cells both sessions have, the i-th usable run
of a cell in A paired with the i-th in B:

- tokens: the output token counts, and at temperature 0 the answers (the earliest token where
  one parts from the other, `tokenreel.analysis.answers`);
- acceptance (an arm that drafts): pooled over the runs as `tokenreel.analysis.acceptance` pools
  it, per draft position where both archive it, and whether every run accepted the same drafts;
- the engine's own figure: its per-request decode rate (`Run.engine`), B / A of the mean over
  prompts of each cell's mean, beside tokenreel's own over the same runs. Moving by about as
  much says the engine itself ran faster or slower; not moving says the difference arose
  between the engine and tokenreel's stamps (its HTTP server, the network, the recording client);
- TTFT, when its mean moved beyond the tolerance and most cells moved so: alone ("TTFT only": a prompt cache, a
  prefill path) for an arm whose decode did not differ, since decode tok/s leaves TTFT out;
- flags: runs the endpoint, host or recorder gates flagged, and a GPU found busy, where either
  session has any;
- the recording facts that differ (`tokenreel.analysis.recording_facts`): kernel, CPU, GPU,
  driver, clocks, power limit, engine build.

A ratio that differs names the arm or arms whose own decode moved (at least half the ratio's
move); those arms are explained, the other not. A differing ratio of a drafter over the arm it
drafts for is also decomposed in both sessions (`tokenreel.analysis.decomposition`: tokens a step
x the step's cost), saying which factor moved.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import dataclass

from tokenreel.analysis.acceptance import Pooled, pool
from tokenreel.analysis.answers import compare as compare_answers
from tokenreel.analysis.comparison import Comparison
from tokenreel.analysis.decomposition import MOVER_TEXT, decompose, factor_text, mover
from tokenreel.analysis.drafting import drafted_arm
from tokenreel.analysis.figures import figure, signed_pct
from tokenreel.analysis.ladder import build_cells, mean_of, usable_runs
from tokenreel.analysis.metrics import output_tokens, run_metrics
from tokenreel.analysis.recording_facts import recording_differences
from tokenreel.analysis.selection import host_contended
from tokenreel.session.model import Run, Session

CAUSE_KINDS = ("ratio", "decomposition", "tokens", "acceptance", "engine", "ttft", "flags", "recording")
IN_STEP = 0.25  # the engine moved "by the same amount": within a quarter of tokenreel's move


@dataclass(frozen=True)
class Cause:
    """One line of why: `subject` is an arm id, "arm / base" for a ratio, "" for the whole
    recording; `a`, `b` and `change_pct` are the figure the line is about, where it has one."""

    subject: str
    kind: str  # one of CAUSE_KINDS
    text: str
    a: float | None = None
    b: float | None = None
    change_pct: float | None = None

    @property
    def line(self) -> str:
        return f"{self.subject}: {self.text}" if self.subject else self.text


Pairs = list[tuple[str, Run, Run]]  # (prompt, A's run, B's run)


def explain(a: Session, b: Session, c: Comparison) -> list[Cause]:
    """Every cause line of comparison `c` of `a` and `b`: the differing ratios' movers, then each
    explained arm's lines in A's order, then the recording facts that differ."""
    moved = {row.arm: row.decode_tok_s.diff_pct for row in c.ladder}
    causes: list[Cause] = []
    arms = [row.arm for row in c.ladder if row.verdict.differs]
    for ratio in c.ratios:
        if ratio.verdict.differs:
            line, movers = _ratio(ratio.arm, ratio.base, ratio.verdict.estimate_pct, moved)
            causes.append(line)
            prompts = [d.prompt for d in c.cells if d.arm == ratio.arm]
            causes += [cause for cause in (_decomposed(a, b, ratio.arm, ratio.base, prompts),) if cause is not None]
            arms += movers
    differing = set(arms)
    for row in c.ladder:
        ttft = _ttft(c, row.arm, row.arm not in differing)
        if row.arm not in differing:
            causes += [ttft] if ttft else []
            continue
        prompts = [d.prompt for d in c.cells if d.arm == row.arm]
        pairs = _pairs(a, b, row.arm, prompts)
        causes.append(_tokens(a, b, row.arm, pairs))
        causes += [cause for cause in (_acceptance(row.arm, pairs), _engine(row.arm, pairs), ttft,
                                       _flags(a, b, row.arm, prompts)) if cause is not None]
    differences, missing = recording_differences(a, b)
    causes += [Cause("", "recording", f"recorded differently: {d.text}") for d in differences]
    if differences or causes:
        causes += [Cause("", "recording", f"recording facts {line}") for line in missing]
    return causes


def _ratio(arm: str, base: str, change: float | None, moved: dict[str, float | None]) -> tuple[Cause, list[str]]:
    """Which side of a differing ratio moved: the arms whose decode moved by at least half the ratio's move."""
    sides = [(name, moved.get(name)) for name in (arm, base)]
    movers = [name for name, pct in sides if pct is not None and change is not None and abs(pct) >= abs(change) / 2]
    said = ", ".join(f"{name}'s {signed_pct(pct)}" for name, pct in sides)
    who = " and ".join(movers) if movers else "neither arm alone"
    return Cause(f"{arm} / {base}", "ratio", f"the ratio moved {signed_pct(change)}: decode {said}; it moved with {who}",
                 change_pct=change), movers


def _decomposed(a: Session, b: Session, arm: str, base: str, prompts: list[str]) -> Cause | None:
    """A drafter over the arm it drafts for, decomposed in A and in B over the compared prompts,
    and which factor moved; None for another pair, or where either side lacks the factors."""
    target = drafted_arm(a, a.arm(arm))
    if target is None or target.arm != base:
        return None
    sides = [decompose(s, [cell for cell in build_cells(s) if cell.prompt in prompts], arm, base, "suite", None) for s in (a, b)]
    if any(d.missing or d.speedup is None for d in sides):
        return None
    da, db = sides
    return Cause(f"{arm} / {base}", "decomposition",
                 f"A {factor_text(da)}; B {factor_text(db)}: {MOVER_TEXT[mover(da, db)]}", da.speedup, db.speedup,
                 _pct(da.speedup, db.speedup))


def _pairs(a: Session, b: Session, arm: str, prompts: list[str]) -> Pairs:
    return [(p, ra, rb) for p in prompts for ra, rb in zip(usable_runs(a, arm, p), usable_runs(b, arm, p), strict=False)]


def _tokens(a: Session, b: Session, arm: str, pairs: Pairs) -> Cause:
    """Token counts, and at temperature 0 the answers, run against paired run."""
    counts_a, counts_b = [output_tokens(ra) for _, ra, _ in pairs], [output_tokens(rb) for _, _, rb in pairs]
    other_counts = sum(x != y for x, y in zip(counts_a, counts_b, strict=True))
    n = len(pairs)
    parts = [f"counts differ in {other_counts} of {n} paired runs ({sum(counts_a):,} tokens in A, {sum(counts_b):,} in B)"
             if other_counts else f"the same counts in all {n} paired runs ({sum(counts_a):,} tokens)"]
    parted = []
    if a.settings.temperature != 0 or b.settings.temperature != 0:
        parts.append("answers not compared (not both at temperature 0)")
    else:
        parted = [(found.diverges_at_token, prompt) for prompt, ra, rb in pairs
                  if (found := compare_answers(ra, rb)).diverges_at_token is not None]
        if parted:
            token, prompt = min(parted)
            parts.append(f"answers differ in {len(parted)} of {n}, the earliest at token {token} ({prompt})")
        else:
            parts.append("the same answers in all of them (temperature 0)")
    moved = "moved" if other_counts or parted else "the same"
    return Cause(arm, "tokens", f"tokens {moved}: " + "; ".join(parts), float(sum(counts_a)), float(sum(counts_b)))


def _acceptance(arm: str, pairs: Pairs) -> Cause | None:
    """Pooled acceptance A against B (None when neither side drafted), per position where both have it."""
    items_a = [ra.acceptance for _, ra, _ in pairs if ra.acceptance is not None]
    items_b = [rb.acceptance for _, _, rb in pairs if rb.acceptance is not None]
    if not items_a and not items_b:
        return None
    pooled_a, pooled_b = pool(items_a), pool(items_b)
    length_a, length_b = pooled_a.length, pooled_b.length
    change = (length_b / length_a - 1) * 100 if length_a and length_b is not None else None
    counts = [(r.drafts, r.draft_tokens, r.accepted, r.mean_length, r.accepted_per_position)
              for r in (items_a if len(items_a) == len(items_b) == len(pairs) else [])]
    same_runs = bool(counts) and counts == [(r.drafts, r.draft_tokens, r.accepted, r.mean_length, r.accepted_per_position)
                                            for r in items_b]
    positions = _positions(pooled_a, pooled_b)
    how = "pooled" if pooled_a.pooled and pooled_b.pooled else "median of the runs"
    if length_a == length_b and same_runs:
        text = (f"acceptance the same: {figure(length_a, 2)} in both ({how}, {len(pairs)} paired runs); every run "
                f"accepted the same drafts{', position by position' if pooled_a.per_position else ''}")
    else:
        text = f"acceptance {'moved' if length_a != length_b else 'pooled the same'}: {figure(length_a, 2)} in A, " \
               f"{figure(length_b, 2)} in B ({signed_pct(change)}, {how})"
        text += f"; per position: {positions}" if positions else ""
        text += "" if same_runs or not counts else "; runs accepted other drafts"
    return Cause(arm, "acceptance", text, length_a, length_b, change)


def _positions(a: Pooled, b: Pooled) -> str:
    """"1: 0.95 → 0.93, 3: 0.80 → 0.72": the draft positions whose pooled rate differs."""
    if a.per_position is None or b.per_position is None:
        return ""
    rates = zip(a.per_position.rates, b.per_position.rates, strict=False)
    return ", ".join(f"{i}: {figure(x, 2)} → {figure(y, 2)}" for i, (x, y) in enumerate(rates, start=1) if x != y)


def _mean_change(pairs: Pairs, value: Callable[[Run], float | None]) -> tuple[float | None, float | None]:
    """(A's, B's) mean over prompts of each cell's mean of `value`, over the pairs where both runs have it."""
    cells: dict[str, tuple[list[float], list[float]]] = {}
    for prompt, ra, rb in pairs:
        va, vb = value(ra), value(rb)
        if va is not None and vb is not None:
            cell = cells.setdefault(prompt, ([], []))
            cell[0].append(va)
            cell[1].append(vb)
    return (mean_of([statistics.fmean(x) for x, _ in cells.values()]),
            mean_of([statistics.fmean(y) for _, y in cells.values()]))


def _pct(a: float | None, b: float | None) -> float | None:
    return (b / a - 1) * 100 if a and b is not None else None


def _engine(arm: str, pairs: Pairs) -> Cause:
    """The engine's own decode rate against tokenreel's, over the same runs."""
    engine_a, engine_b = _mean_change(pairs, lambda r: r.engine.decode_tok_s if r.engine else None)
    engine = _pct(engine_a, engine_b)
    if engine is None:
        sides = [side for side, runs in (("A", [p[1] for p in pairs]), ("B", [p[2] for p in pairs]))
                 if not any(r.engine and r.engine.decode_tok_s for r in runs)]
        return Cause(arm, "engine", f"the engine's own timing: not archived in {' and '.join(sides) or 'the same runs'}")
    ours = _pct(*_mean_change(pairs, lambda r: run_metrics(r).decode_tok_s if r.engine and r.engine.decode_tok_s else None))
    said = f"the engine's timing moved {signed_pct(engine)} (tokenreel's {signed_pct(ours)}, same runs)"
    return Cause(arm, "engine", f"{said}: {_engine_reading(engine, ours)}", engine_a, engine_b, engine)


def _engine_reading(engine: float, ours: float | None) -> str:
    if ours is None:
        return "tokenreel's own figure is missing on these runs"
    speed = "faster" if engine > 0 else "slower"
    if abs(engine - ours) <= IN_STEP * max(abs(ours), abs(engine)) or abs(engine - ours) < 0.1:
        return f"the engine itself ran {speed}" if abs(engine) >= 0.1 else "the engine ran as before"
    if abs(engine) <= IN_STEP * abs(ours):
        return "the engine ran as before: the difference arose between the engine and tokenreel's stamps"
    return f"the engine ran {speed}, and part of the difference arose outside it"


def _ttft(c: Comparison, arm: str, alone: bool) -> Cause | None:
    """The arm's mean TTFT over the cells, when it moved beyond the tolerance and most cells moved
    that way beyond it too (one slow cell is not the arm's TTFT)."""
    both = [f for f in (d.figures["ttft_s"] for d in c.cells if d.arm == arm) if f.a is not None and f.b is not None]
    mean_a, mean_b = mean_of([f.a for f in both]), mean_of([f.b for f in both])
    change = _pct(mean_a, mean_b)
    if change is None or abs(change) <= c.tolerance_pct:
        return None
    along = sum((f.diff_pct or 0) * change > 0 and abs(f.diff_pct or 0) > c.tolerance_pct for f in both)
    if 2 * along <= len(both):
        return None
    said = (f"{figure(mean_a, 3)} s in A, {figure(mean_b, 3)} s in B ({signed_pct(change)}, mean over the cells; "
            f"{along} of {len(both)} cells moved so)")
    if not alone:
        return Cause(arm, "ttft", f"TTFT moved too: {said}", mean_a, mean_b, change)
    gate = next(row.decode_tok_s.diff_pct for row in c.ladder if row.arm == arm)
    return Cause(arm, "ttft", f"TTFT only: {said}; decode tok/s, which leaves TTFT out, {signed_pct(gate)}, not judged different",
                 mean_a, mean_b, change)


FLAGS: dict[str, Callable[[Run], bool]] = {
    "contended at the endpoint": lambda r: r.contended is True,
    "host contended": host_contended,
    "recorder woke late (client busy)": lambda r: r.client_busy is True,
}


def _flags(a: Session, b: Session, arm: str, prompts: list[str]) -> Cause | None:
    """Measured runs a gate flagged (usable or not), where either session has any: a noisy
    neighbour is a cause."""
    runs = {side: [r for p in prompts for r in s.runs_of(arm, p) if r.status == "ok"] for side, s in (("A", a), ("B", b))}
    parts = []
    for name, flagged in FLAGS.items():
        in_a, in_b = (sum(flagged(r) for r in runs[side]) for side in ("A", "B"))
        if in_a or in_b:
            parts.append(f"{name}: {in_a} of {len(runs['A'])} runs in A, {in_b} of {len(runs['B'])} in B")
    busy = [side for side, s in (("A", a), ("B", b)) if any(g.status == "busy" for g in s.arm(arm).gpu)]
    if busy:
        parts.append(f"GPU busy at the gate in {' and '.join(busy)}")
    return Cause(arm, "flags", "flags: " + "; ".join(parts)) if parts else None
