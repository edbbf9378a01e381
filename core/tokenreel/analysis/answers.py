"""Same answers? Each arm's text against the reference arm's, and runs of one arm among themselves.

A speed-up is only worth having when the faster arm says the same thing: speculative decoding
is lossless against its own target at temperature 0, quantization is not, and a video whose
answers diverge silently is misleading. This module is the one place that says what "the same
answer" means; the report and the video badge both ask it.

- The answer of a run is its streamed text in event order; within one event reasoning comes
  before content, content before tool-call deltas. The three streams stay apart: every
  character carries its stream, so "Paris" as reasoning and "Paris" as content differ.
- Each arm's first usable run (`tokenreel.analysis.ladder.usable_runs`) is compared with the reference
  arm's (the session's first arm, or the report's --baseline); a drafter arm's with the arm it
  drafts for (`tokenreel.analysis.drafting`: declared `drafts_for`, else inferred from the declared
  settings or the ladder's order), whose greedy tokens speculative decoding must keep.
- Runs of one arm on one prompt are compared among themselves, warmups included (a warmup's
  text is archived like any run's): at temperature 0 each should repeat the first measured run.
- On a GPU, or in 16-bit floats on a CPU, a text that differs at temperature 0 is explained in
  one line (`gpu_divergences`): the kernels reduce in an order that depends on the batch shape
  (a verify step's several tokens, a prompt computed whole or read back from the cache), and
  with few mantissa bits a near-tie can flip.
- Token figures are event-granular: the common prefix in tokens counts the tokens of the events
  whose text lies wholly inside the common character prefix (an event carrying several tokens,
  as under speculative decoding, counts only once all of its text matched), on whichever of
  the two runs streamed in finer events (both tokenize the same text the same way when the arms
  serve one model). It is a lower bound; where the counts are estimated (one token per event,
  `Run.tokens_estimated`) the note says so.
- Similarity is difflib's ratio 2M/T over words (letters and digits together, every other
  character alone, each with its stream): T words in both answers, M the exact longest common subsequence, computed bit-parallel so the
  cost depends only on the lengths, never on the text (a few ms for two different 5,000-token
  answers). difflib.SequenceMatcher itself took 5.5 s (autojunk=False) and 1.5 s
  (autojunk=True) on repetitive 5,000-word answers, and with autojunk never matches a frequent
  word. Unrelated prose scores about 0.2 (the, of, a...). Rounded down to 4 decimals, so a
  differing answer never reads 1.0.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from tokenreel.analysis.drafting import DRAFTED_HOW, drafted_arm
from tokenreel.analysis.ladder import usable_runs
from tokenreel.analysis.metrics import output_tokens
from tokenreel.analysis.selection import DEFAULT_SELECTION, RunSelection
from tokenreel.base.safe_text import strip_controls
from tokenreel.session.model import Run, Session

# One letter per stream, in the order an event's deltas are read.
STREAM_NAMES = {"r": "reasoning", "c": "content", "t": "tool"}
# A word with the whitespace before it: letters and digits together, any other character alone
# (punctuation; Thai and CJK, written without spaces, go character by character); trailing
# whitespace alone.
_WORD = re.compile(r"\s*(?:[^\W\u0e00-\u0e7f\u2e80-\u9fff\uf900-\ufaff\U00020000-\U0003ffff]+|\S)|\s+")
_STREAM_RUN = re.compile(r"r+|c+|t+")
CONTEXT_CHARS = 20  # each side of the divergence: the shown context stays about 40 characters
DIVERGE_MARK = "»"
END_MARK = "⟨end⟩"
NEWLINE_MARK, TAB_MARK = "⏎", "⇥"


@dataclass(frozen=True)
class Answer:
    """One run's text with, per character, the stream it came from, and where each event ends."""

    text: str
    streams: str  # one letter of STREAM_NAMES per character of text
    event_ends: tuple[int, ...]  # character offset just after each event's text
    event_tokens: tuple[int, ...]  # tokens each event carried
    estimated: bool  # token counts guessed one per event


@dataclass(frozen=True)
class Comparison:
    """One arm's answer against the reference's. Token figures are event-granular lower bounds."""

    identical: bool
    common_prefix_tokens: int
    common_prefix_chars: int
    similarity: float
    diverges_at_token: int | None  # 1-based; None when identical
    reference_context: str  # a few words each side of the first divergence, "" when identical
    arm_context: str
    note: str


@dataclass(frozen=True)
class ArmAnswer:
    """A row of the report: one arm on one prompt; figures None (with the note) when not comparable."""

    arm: str
    reference: str | None  # the arm it is compared with; None for the reference arm itself
    identical: bool | None
    common_prefix_tokens: int | None
    common_prefix_chars: int | None
    similarity: float | None
    diverges_at_token: int | None
    reference_context: str | None
    arm_context: str | None
    note: str


@dataclass(frozen=True)
class PromptAnswers:
    prompt: str
    category: str
    arms: list[ArmAnswer]


@dataclass(frozen=True)
class Nondeterminism:
    """Runs of one arm on one prompt whose texts differ among themselves."""

    arm: str
    prompt: str
    runs: list[int]  # indices of the runs compared, warmups included
    detail: str
    warmups_only: bool = False  # the measured runs agree; only warmups differ from them


@dataclass(frozen=True)
class Answers:
    reference_arm: str | None
    prompts: list[PromptAnswers]
    nondeterministic: list[Nondeterminism]  # only at temperature 0; see note otherwise
    repeat_checked_cells: int  # arm x prompt cells with two or more runs (warmups included) to compare
    temperature: float
    note: str  # what differing texts mean at this temperature
    gpu_notes: list[str]  # one line per arm on a GPU whose texts differ at temperature 0: why


def answer_of(run: Run) -> Answer:
    """The run's text, in event order (reasoning, content, tool within an event)."""
    chunks = run.chunks
    parts: list[str] = []
    streams: list[str] = []
    ends: list[int] = []
    length = 0
    for i in range(len(chunks)):
        for letter, texts in zip("rct", (chunks.reasoning, chunks.content, chunks.tool), strict=False):
            piece = texts[i]
            if piece:
                parts.append(piece)
                streams.append(letter * len(piece))
                length += len(piece)
        ends.append(length)
    return Answer("".join(parts), "".join(streams), tuple(ends), tuple(chunks.tokens), run.tokens_estimated)


def common_prefix(a: Answer, b: Answer) -> int:
    """Characters (text and stream) the two answers share from the start."""
    limit = min(len(a.text), len(b.text))
    lo, hi = 0, limit
    # Binary search on slice equality: C-speed comparisons instead of a Python loop per character.
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if a.text[:mid] == b.text[:mid] and a.streams[:mid] == b.streams[:mid]:
            lo = mid
        else:
            hi = mid - 1
    return lo


def tokens_within(answer: Answer, chars: int) -> int:
    """Tokens of the events whose text ends within the first `chars` characters.

    An event that carries tokens but no text (a token that decodes to part of a character) is
    counted with the next event that carries text, since its token is part of that text; a
    text-less event after the last text counts when the whole answer lies inside.
    """
    counted = pending = 0
    start = 0
    for end, tokens in zip(answer.event_ends, answer.event_tokens, strict=False):
        if end == start:
            pending += tokens
            continue
        if end > chars:
            return counted
        counted += pending + tokens
        pending = 0
        start = end
    return counted + pending


def words(answer: Answer) -> list[tuple[str, str]]:
    """(stream, word with the whitespace before it), split where the stream changes too."""
    units: list[tuple[str, str]] = []
    for run in _STREAM_RUN.finditer(answer.streams):
        stream = run.group()[0]
        units.extend((stream, word) for word in _WORD.findall(answer.text, run.start(), run.end()))
    return units


def lcs_length(a: list[int], b: list[int]) -> int:
    """Length of the longest common subsequence, bit-parallel (Hyyrö 2004).

    Bit i of `v` is 0 where a[i] ends a match used so far; each symbol of b costs a few
    big-integer operations over len(a) bits, so the cost is len(a) * len(b) / 64 machine
    words whatever the text (difflib's matcher can take seconds on repetitive text).
    """
    masks: dict[int, int] = {}
    for i, symbol in enumerate(a):
        masks[symbol] = masks.get(symbol, 0) | (1 << i)
    full = (1 << len(a)) - 1
    v = full
    for symbol in b:
        u = v & masks.get(symbol, 0)
        v = ((v + u) | (v - u)) & full
    return len(a) - v.bit_count()


def similarity(a: Answer, b: Answer) -> float:
    """difflib's ratio 2M/T over words, M their exact longest common subsequence; see the module doc."""
    if a.text == b.text and a.streams == b.streams:
        return 1.0
    wa, wb = words(a), words(b)
    head = 0  # the shared opening is in every longest common subsequence: no need to compare it
    while head < min(len(wa), len(wb)) and wa[head] == wb[head]:
        head += 1
    ids: dict[tuple[str, str], int] = {}
    rest_a = [ids.setdefault(w, len(ids)) for w in wa[head:]]
    rest_b = [ids.setdefault(w, len(ids)) for w in wb[head:]]
    matched = head + lcs_length(rest_a, rest_b)
    return 2 * matched * 10_000 // (len(wa) + len(wb)) / 10_000  # integers: 0.29 stays 0.29


def _clean(text: str) -> str:
    """Context for one line of a table or a badge: no control characters, line breaks and tabs
    shown as ⏎ and ⇥ (collapsing them would hide an indent that differs), spaces kept."""
    return strip_controls(text).replace("\n", NEWLINE_MARK).replace("\t", TAB_MARK)


def context(answer: Answer, at: int) -> str:
    """About CONTEXT_CHARS of text before and after character `at`, marked », cut between words
    where that keeps at least half of it; "…" where the text goes on, ⟨end⟩ where it ended."""
    start = max(0, at - 2 * CONTEXT_CHARS)  # raw characters: control characters may drop out
    before = _clean(answer.text[start:at])
    if len(before) > CONTEXT_CHARS or start > 0:
        before = before[-CONTEXT_CHARS:]
        space = before.find(" ")
        before = "…" + (before[space + 1:] if 0 <= space <= CONTEXT_CHARS // 2 else before)
    if at >= len(answer.text):
        return f"{before}{DIVERGE_MARK}{END_MARK}"
    stop = at + 2 * CONTEXT_CHARS
    after = _clean(answer.text[at:stop])
    if len(after) > CONTEXT_CHARS or stop < len(answer.text):
        after = after[:CONTEXT_CHARS]
        space = after.rfind(" ")
        after = (after[:space] if space >= CONTEXT_CHARS // 2 else after) + "…"
    return f"{before}{DIVERGE_MARK}{after}"


def _stream_change(reference: Answer, arm: Answer, at: int) -> str:
    """Why two answers differ where their characters agree: one streamed it as another kind."""
    if at < len(reference.text) and at < len(arm.text) and reference.text[at] == arm.text[at]:
        return (f"the same text, but as {STREAM_NAMES[arm.streams[at]]} here and "
                f"{STREAM_NAMES[reference.streams[at]]} in the reference")
    return ""


def compare(reference: Run, run: Run) -> Comparison:
    """`run`'s answer against `reference`'s."""
    ref, arm = answer_of(reference), answer_of(run)
    estimated = ref.estimated or arm.estimated
    note = "token counts estimated (one per event)" if estimated else ""
    if ref.text == arm.text and ref.streams == arm.streams:
        tokens = max(tokens_within(ref, len(ref.text)), tokens_within(arm, len(arm.text)))
        return Comparison(True, tokens, len(ref.text), 1.0, None, "", "", note)
    chars = common_prefix(ref, arm)
    tokens = max(tokens_within(ref, chars), tokens_within(arm, chars))
    if chars == len(arm.text):
        note = _join(note, "the answer stops where the reference goes on")
    elif chars == len(ref.text):
        note = _join(note, "the answer goes on where the reference stops")
    note = _join(note, _stream_change(ref, arm, chars))
    return Comparison(
        identical=False,
        common_prefix_tokens=tokens,
        common_prefix_chars=chars,
        similarity=similarity(ref, arm),
        diverges_at_token=tokens + 1,
        reference_context=context(ref, chars),
        arm_context=context(arm, chars),
        note=note,
    )


def _join(*notes: str) -> str:
    return "; ".join(n for n in notes if n)


def _arm_answer(session: Session, reference_id: str, arm_id: str, prompt_id: str, selection: RunSelection) -> ArmAnswer:
    if arm_id == reference_id:
        return ArmAnswer(arm_id, None, None, None, None, None, None, None, None,
                         "reference: the other arms are compared with it")
    target = drafted_arm(session, session.arm(arm_id))
    if target is not None:
        reference_id = target.arm
    why = f"vs {reference_id}, the arm it drafts for ({DRAFTED_HOW[target.how]})" if target else ""
    ref_runs = usable_runs(session, reference_id, prompt_id, selection)
    runs = usable_runs(session, arm_id, prompt_id, selection)
    missing = [who for who, have in ((f"reference arm {reference_id}", ref_runs), (arm_id, runs)) if not have]
    if missing:
        return ArmAnswer(arm_id, reference_id, None, None, None, None, None, None, None,
                         _join(why, f"no usable run of {' nor of '.join(missing)} (see missing cells)"))
    c = compare(ref_runs[0], runs[0])
    return ArmAnswer(arm_id, reference_id, c.identical, c.common_prefix_tokens, c.common_prefix_chars, c.similarity,
                     c.diverges_at_token, c.reference_context or None, c.arm_context or None, _join(why, c.note))



def repeated_runs(session: Session, arm_id: str, prompt_id: str) -> list[Run]:
    """The runs that completed, warmups included, the first measured one first (what the others
    should repeat); contended ones too: their text is an answer all the same."""
    runs = [r for r in session.runs_of(arm_id, prompt_id, measured_only=False) if r.status == "ok"]
    return sorted(runs, key=lambda r: (r.warmup, r.index))


def differing_runs(runs: list[Run]) -> Nondeterminism | None:
    """Runs of one arm on one prompt, when their texts are not all the same as the first's."""
    if len(runs) < 2:
        return None
    first = runs[0]
    parts = []
    measured_differ = False
    for run in runs[1:]:
        c = compare(first, run)
        if not c.identical:
            measured_differ |= not run.warmup
            kind = " (warmup)" if run.warmup else " (contended)" if run.contended else ""
            parts.append(f"run {run.index}{kind} differs from run {first.index} at token "
                         f"{c.diverges_at_token} (similarity {c.similarity:.4f}): {c.arm_context}")
    if not parts:
        return None
    return Nondeterminism(first.arm, first.prompt, sorted(r.index for r in runs), "; ".join(parts), not measured_differ)


# What a declared setting says when a GPU served the arm (-ngl is no sign: -ngl 0 runs on the CPU).
GPU_WORDS = re.compile(r"\b(cuda|rocm|gpus?|nvidia|amd instinct|[ahbl]\d{2,3}s?|gb\d{3}|rtx|mi\d{3}x?|sm_\d+)\b", re.I)


def on_gpu(session: Session, arm_id: str) -> bool:
    """The arm's declared settings (or the session's hardware) say a GPU served it; the endpoints
    cannot say it."""
    return not session.simulated and any(GPU_WORDS.search(v) for v in session.arm(arm_id).settings.values())


# A 16-bit float dtype in the declared settings or the launch command (--dtype bfloat16, bf16).
HALF_WORDS = re.compile(r"\b(bf16|bfloat16|fp16|float16|half)\b", re.I)


def rounding_place(session: Session, arm_id: str) -> str:
    """Where the arm's kernels round by batch shape ("on a GPU", "in 16-bit floats on the CPU"),
    as the declared settings and the launch command say; "" when they say neither."""
    if on_gpu(session, arm_id):
        return "on a GPU"
    arm = session.arm(arm_id)
    launch = arm.fingerprint.get("launch") if isinstance(arm.fingerprint, dict) else None
    words = [*arm.settings.values(), *(launch if isinstance(launch, list) else [])]
    half = not session.simulated and any(isinstance(w, str) and HALF_WORDS.search(w) for w in words)
    return "in 16-bit floats on the CPU" if half else ""


def gpu_divergences(session: Session, prompts: list[PromptAnswers], differing: list[Nondeterminism]) -> list[str]:
    """One line per arm on a GPU (or in 16-bit floats on a CPU) whose answer differs from the arm
    it drafts for, or whose runs differ among themselves: where first, and why that is no bug at
    temperature 0."""
    lines = []
    for arm in session.arms:
        place = rounding_place(session, arm.id)
        if not place:
            continue
        target = drafted_arm(session, arm)
        rows = [row for p in prompts for row in p.arms if row.arm == arm.id and row.identical is False]
        if target is not None and rows:
            first = min(rows, key=lambda row: row.diverges_at_token or 0)
            tokens = max((output_tokens(r) for r in session.runs if r.arm == arm.id and not r.warmup), default=0)
            lines.append(f"{arm.id} diverges from {target.arm} at token {first.diverges_at_token} of {tokens} at the"
                         f" earliest ({len(rows)} of {sum(1 for p in prompts for row in p.arms if row.arm == arm.id)}"
                         f" prompts): drafting {place} is not token-identical (its target verifies several tokens"
                         " in one batch, and its kernels round differently by batch shape)")
        cells = [n for n in differing if n.arm == arm.id]
        if cells:
            warmups = sum(n.warmups_only for n in cells)
            which = "only the warmups differ" if warmups == len(cells) else f"only the warmups on {warmups}"
            lines.append(f"{arm.id}: runs differ among themselves on {len(cells)} prompt(s) ({which}) {place}:"
                         " batch-dependent kernels (a warmup computes its prompt whole, a repeat may read it back"
                         " from the prompt cache), not a bug")
    return lines


def build_answers(session: Session, reference: str | None = None, selection: RunSelection = DEFAULT_SELECTION) -> Answers:
    """Every prompt's arms against the reference arm (a drafter against its target), and runs
    that differ among themselves, warmups included."""
    reference_id = reference or (session.arms[0].id if session.arms else None)
    prompts = []
    differing: list[Nondeterminism] = []
    checked = 0
    for prompt in session.prompts:
        if reference_id is not None:
            rows = [_arm_answer(session, reference_id, arm.id, prompt.id, selection) for arm in session.arms]
            prompts.append(PromptAnswers(prompt.id, prompt.category, rows))
        for arm in session.arms:
            runs = repeated_runs(session, arm.id, prompt.id)
            checked += len(runs) >= 2
            found = differing_runs(runs)
            if found is not None:
                differing.append(found)
    temperature = session.settings.temperature
    if temperature == 0:
        note = "temperature 0: every arm should repeat its own answer; differing runs are flagged as nondeterministic"
        return Answers(reference_id, prompts, differing, checked, temperature, note,
                       gpu_divergences(session, prompts, differing))
    note = (f"temperature {temperature:g}: answers are sampled, so differing runs and arms are expected, not flagged"
            f" ({len(differing)} of {checked} arm × prompt cells with differing runs)")
    return Answers(reference_id, prompts, [], checked, temperature, note, [])
