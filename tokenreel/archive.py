"""The session archive: one self-contained JSON file per recording session.

Everything needed to re-analyse and re-render a session without its endpoints lives here:
settings (minus secrets), arm fingerprints, prompts, and every run with the arrival time of
every streamed chunk. Chunks are stored column-wise (one list per field) because a session can
hold millions of tokens: columns load fast and keep the file small.

Loading validates every field and raises `ArchiveError` naming the file and the field.
Saving is atomic (temp file, fsync, rename), so the file on disk is never half-written.

Rules that keep one bad server value from poisoning a session (issue 11):

- The recorder never saves what the loader rejects. `save` runs the loader's own validation
  (`from_dict`) on exactly what it writes; a run that fails it is kept with status `invalid`
  and the reason (`quarantine`: the offending part, such as its chunks, is dropped), so the
  file always loads and `--resume` re-records that run.
- Every float that reaches a metric is finite and bounded: an acceptance length outside
  [1, MAX_ACCEPTANCE_LENGTH], a rate outside [0, 1] or a count above MAX_COUNT is dropped to
  None with a note (`bound_acceptance`, applied at save and at load alike).
- Which clock stamped each run is stated (issue 13): `Run.clock` says "kernel" (t_ns is the
  kernel's receive time of the read that delivered the event) or "user" with the reason, and a
  kernel-clock run keeps the user-space stamps too (`Chunks.client_delay_us`). Sessions written
  before it (no `clock`) load with `clock` None: user-space stamps, as recorded then.
- One writer per session: `SessionLock` (fcntl.flock on `.<file name>.lock` next to the file)
  is held for a whole `record`; a second writer is refused at once, naming the holder's pid.
"""

from __future__ import annotations

import fcntl
import math
import os
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, TypeVar

import orjson

FORMAT = "tokenreel.session"
VERSION = 1

# Guards against absurd inputs (a corrupted or hostile file), far above any real session.
MAX_CHUNKS_PER_RUN = 5_000_000
MAX_RUNS = 1_000_000
MAX_OFFSET_NS = 7 * 24 * 3600 * 10**9  # a week
MAX_TOKENS_PER_EVENT = 1_000_000
MAX_COUNT = MAX_CHUNKS_PER_RUN * MAX_TOKENS_PER_EVENT  # usage and spec-decode counts of one run
# Acceptance length is 1 + accepted / verify steps: at most 1 + the draft window, which no
# drafter takes near this; anything above (or below 1) is a server bug, not a measurement.
MAX_ACCEPTANCE_LENGTH = 1000.0

# "invalid": the server sent a value the archive cannot hold (see `quarantine`); like failed,
# it is in no figure and `--resume` records it again.
RUN_STATUSES = ("ok", "failed", "skipped", "invalid")
GATE_STATUSES = ("idle", "busy", "unavailable")
# How a run's per-event token counts were obtained; "per_event" (one per text event, reconciled
# with the final usage) is the only estimate: a run with it says so in the report and video.
TOKEN_SOURCES = ("usage_delta", "timings", "token_ids", "logprobs", "tokenizer", "per_event")
ESTIMATED_TOKEN_SOURCES = ("per_event",)
CLOCK_SOURCES = ("kernel", "user")
# The default `client_busy` threshold: a run whose client read the network later than this at
# its 99th percentile is flagged (see `Clock` and `tokenreel.ladder.usable_runs`).
CLIENT_BUSY_P99_MS = 2.0
# The default host gate (`HostPressure`): CPU pressure (PSI "some") above this share of the time
# flags a run host_contended, after waiting at most HOST_WAIT_S for it to fall.
HOST_PRESSURE_PCT = 10.0
HOST_WAIT_S = 5.0


class ArchiveError(ValueError):
    """A session file that cannot be used; the message names the file and the field."""

    def __init__(self, path: str | os.PathLike[str], field_name: str, problem: str) -> None:
        self.path = str(path)
        self.field = field_name
        self.problem = problem
        where = f"{self.path}: field '{field_name}'" if field_name else self.path
        super().__init__(f"{where}: {problem}")


@dataclass
class Prompt:
    """One prompt of the suite; chat arms send `messages`, completions arms send `prompt`."""

    id: str
    category: str
    messages: list[dict[str, str]]
    prompt: str


@dataclass
class Arm:
    """One serving configuration. Holds the env var NAME of its API key, never the key."""

    id: str
    label: str
    base_url: str
    model: str
    api: str = "chat"
    api_key_env: str | None = None
    metrics_url: str | None = None
    extra_body: dict[str, Any] = field(default_factory=dict)
    timeouts: dict[str, float] = field(default_factory=dict)
    fingerprint: dict[str, Any] = field(default_factory=dict)
    recorded: list[dict[str, str]] = field(default_factory=list)  # [{"started_at", "finished_at"}]
    # What the endpoint cannot tell (quantization, drafter, engine flags), declared in the config.
    settings: dict[str, str] = field(default_factory=dict)
    tokenizer: str | None = None  # a tokenizer.json to count tokens with when the server gives no running count


@dataclass
class Settings:
    """Session-wide request and measurement settings (from the config's [session] table)."""

    prompts: str = "builtin:mixed"
    max_tokens: int = 1024
    ignore_eos: bool = True
    temperature: float = 0.0
    warmup: int = 1
    repeats: int = 3
    idle_wait_s: float = 30.0
    timeouts: dict[str, float] = field(default_factory=dict)
    client_busy_p99_ms: float = CLIENT_BUSY_P99_MS
    # The host gate (local endpoints only, `HostPressure`): wait up to host_wait_s before a run
    # for the host's CPU pressure to fall below host_pressure_pct, then record anyway, flagged.
    host_pressure_pct: float = HOST_PRESSURE_PCT
    host_wait_s: float = HOST_WAIT_S


@dataclass
class Chunks:
    """Streamed events of one run, column-wise; index i is the i-th SSE data event.

    t_ns: arrival offset from request send in integer nanoseconds: the kernel's receive time of
    the read that delivered the event when the run's clock is "kernel", else the user-space stamp
    of that read; events with equal t_ns arrived in one read (the kernel gives a read the time of
    the last packet it consumed). tokens: tokens carried by the event; content/reasoning/tool:
    text deltas. client_delay_us: kernel-clock runs only (else empty): the user-space stamp minus
    t_ns per event in whole microseconds, the recorder's own delay (4 bytes an event, where a
    second t_ns column would cost 12).
    """

    t_ns: list[int] = field(default_factory=list)
    tokens: list[int] = field(default_factory=list)
    content: list[str] = field(default_factory=list)
    reasoning: list[str] = field(default_factory=list)
    tool: list[str] = field(default_factory=list)
    client_delay_us: list[int] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.t_ns)

    def append(self, t_ns: int, tokens: int, content: str = "", reasoning: str = "", tool: str = "") -> None:
        self.t_ns.append(t_ns)
        self.tokens.append(tokens)
        self.content.append(content)
        self.reasoning.append(reasoning)
        self.tool.append(tool)

    def has_text(self, i: int) -> bool:
        """True when event i carries content, reasoning or a tool call (what counts for TTFT)."""
        return bool(self.content[i] or self.reasoning[i] or self.tool[i])


@dataclass
class Gate:
    """The idle gate's verdict before a run."""

    status: str = "unavailable"  # idle | busy | unavailable
    running: float | None = None
    waiting: float | None = None
    waited_s: float = 0.0
    detail: str = ""


@dataclass
class Acceptance:
    """Speculative-decoding acceptance over one run."""

    mean_length: float | None = None  # 1 + accepted / drafts
    rate: float | None = None  # accepted / draft tokens
    drafts: float | None = None
    draft_tokens: float | None = None
    accepted: float | None = None
    source: str = ""  # "metrics" (counter differences) or the per-response field it came from
    approximate: bool = False  # some count came from counters printed in rounded steps (llama.cpp)
    note: str = ""  # why it is approximate, and the bound rounding puts on the length


@dataclass
class Clock:
    """Which clock stamped a run's chunks, and how late its client read the network (issue 13).

    "kernel": each event has the kernel's receive time (SO_TIMESTAMPNS, Linux) of the read that
    delivered it, on the perf_counter timeline; a busy client cannot skew it. "user": each event
    has the perf_counter stamp its read got in Python (tokenreel before issue 13), `reason` says
    why (platform, no timestamps from the kernel, the wall clock stepped during the run).
    Client delay (user stamp - kernel stamp over the run's events, ms) is known on the kernel
    clock only. `first_shared`: the first token's read also delivered a later token event, so
    its time is that of a later packet (the kernel keeps one time per read, and merges queued
    packets' times when the client reads late): the one way a busy client still moves TTFT.
    """

    source: str = "user"
    reason: str = ""
    delay_p50_ms: float | None = None
    delay_p99_ms: float | None = None
    delay_max_ms: float | None = None
    first_shared: bool = False


@dataclass
class HostPressure:
    """The CPU pressure of the host that runs the engine, over one run (issue 21).

    Read only when the endpoint is on this machine (loopback or one of its addresses): Linux PSI
    (`/proc/pressure/cpu`, else the cgroup's `cpu.pressure`) counts the time some runnable task
    waited for a CPU. `some_pct` is that share of the run's wall time, from the file's `total`
    counter before and after the run; `contended` says it was over `settings.host_pressure_pct`
    after the gate waited `waited_s` (at most `settings.host_wait_s`) for the host to quieten.
    The recorder's own wake-up delay (`Clock`) is another question: whether its times are exact.
    """

    source: str  # the PSI file read
    some_pct: float  # share of the run's wall time some task waited for a CPU, in %
    before_pct: float  # the same over the gate's last sample before the run
    waited_s: float = 0.0
    contended: bool = False


@dataclass
class Run:
    """One request to one arm for one prompt; warmup runs are kept but flagged."""

    arm: str
    prompt: str
    index: int
    warmup: bool
    status: str = "ok"
    error: str = ""
    started_at: str = ""
    http_status: int | None = None
    finish_reason: str | None = None
    usage: dict[str, int] | None = None
    token_source: str = "per_event"
    gate: Gate = field(default_factory=Gate)
    contended: bool | None = None
    contention_detail: str = ""
    acceptance: Acceptance | None = None
    acceptance_note: str = ""  # why no source gave an acceptance figure (empty when one did)
    # None: recorded before tokenreel stated its clock (user-space stamps).
    clock: Clock | None = None
    # Client delay p99 over settings.client_busy_p99_ms; None: not known (user clock).
    client_busy: bool | None = None
    # None: not read (a remote endpoint, no PSI on this host, or recorded before issue 21);
    # `host_note` says which.
    host: HostPressure | None = None
    host_note: str = ""
    # perf_counter_ns() (CLOCK_MONOTONIC) at request send: t_ns counts from it. It puts the runs of
    # one recording on one timeline and pairs a run with a local server's own log. None: older.
    send_monotonic_ns: int | None = None
    chunks: Chunks = field(default_factory=Chunks)

    @property
    def key(self) -> tuple[str, str, int]:
        return (self.arm, self.prompt, self.index)

    @property
    def tokens_estimated(self) -> bool:
        """True when the per-event counts are a guess (no running count, ids, logprobs or tokenizer)."""
        return self.token_source in ESTIMATED_TOKEN_SOURCES


@dataclass
class Session:
    """A whole recording: what was asked, of which endpoints, and every run's stream."""

    name: str
    settings: Settings
    prompts: list[Prompt]
    arms: list[Arm]
    runs: list[Run] = field(default_factory=list)
    tool_version: str = ""
    host: dict[str, str] = field(default_factory=dict)
    created_at: str = ""
    simulated: bool = False

    def arm(self, arm_id: str) -> Arm:
        for arm in self.arms:
            if arm.id == arm_id:
                return arm
        raise KeyError(arm_id)

    def prompt(self, prompt_id: str) -> Prompt:
        for prompt in self.prompts:
            if prompt.id == prompt_id:
                return prompt
        raise KeyError(prompt_id)

    def runs_of(self, arm_id: str, prompt_id: str, measured_only: bool = True) -> list[Run]:
        return [
            r
            for r in self.runs
            if r.arm == arm_id and r.prompt == prompt_id and not (measured_only and r.warmup)
        ]


# ---------------------------------------------------------------------------------------------
# Impossible values: bounded or quarantined, never saved as a file the loader rejects

_ACCEPTANCE_BOUNDS = (
    ("mean_length", "acceptance length", 1.0, MAX_ACCEPTANCE_LENGTH),
    ("rate", "acceptance rate", 0.0, 1.0),
    ("drafts", "draft count", 0.0, float(MAX_COUNT)),
    ("draft_tokens", "draft token count", 0.0, float(MAX_COUNT)),
    ("accepted", "accepted token count", 0.0, float(MAX_COUNT)),
)


def bound_acceptance(run: Run) -> None:
    """Drop acceptance figures no drafter can produce to None, the reason in acceptance_note
    (module rule 2): one `mean_acceptance_length: 1e308` would overflow every later mean.
    Idempotent."""
    acceptance = run.acceptance
    if acceptance is None:
        return
    dropped = []
    for name, label, low, high in _ACCEPTANCE_BOUNDS:
        value = getattr(acceptance, name)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            continue  # None, or a wrong type that validation names
        if not (math.isfinite(value) and low <= value <= high):
            setattr(acceptance, name, None)
            dropped.append(f"{label} {value:g} (outside {low:g} to {high:g})")
    if dropped:
        note = f"the server reported an impossible {', '.join(dropped)}; dropped"
        run.acceptance_note = f"{run.acceptance_note}; {note}" if run.acceptance_note else note


def _drop_chunks(run: Run) -> None:
    run.chunks = Chunks()


def _drop_usage(run: Run) -> None:
    run.usage = None


def _drop_gate_figures(run: Run) -> None:
    status = run.gate.status if run.gate.status in GATE_STATUSES else "unavailable"
    run.gate = Gate(status=status, detail=run.gate.detail if isinstance(run.gate.detail, str) else "")


def _drop_acceptance(run: Run) -> None:
    run.acceptance = None


# The parts of a run that carry values from the server, and how each is dropped.
_DROPPABLE: dict[str, Callable[[Run], None]] = {
    "chunks": _drop_chunks,
    "usage": _drop_usage,
    "gate": _drop_gate_figures,
    "acceptance": _drop_acceptance,
}


def quarantine(run: Run, path: str = "<session>") -> str:
    """Validate one run as the loader does; if it fails, mark it `invalid` (module rule 1).

    Server values it catches: a usage jump of more than MAX_TOKENS_PER_EVENT in one event, a
    negative /metrics gauge, more than MAX_CHUNKS_PER_RUN events. Each offending part is
    dropped and named in `error`. Returns that reason ("" for a valid run); raises ArchiveError
    for a problem in a part the recorder itself sets (a bug, not the server's).
    """
    import re

    bound_acceptance(run)
    reasons: list[str] = []
    for _ in range(len(_DROPPABLE) + 1):
        try:
            _run(_Reader(path), run_to_dict(run), "run")
        except ArchiveError as exc:
            where = exc.field.removeprefix("run.")
            part = re.split(r"[.\[]", where, maxsplit=1)[0]
            if part not in _DROPPABLE or any(r.startswith(part) for r in reasons):
                raise
            reasons.append(f"{where}: {exc.problem}")
            _DROPPABLE[part](run)
            continue
        break
    if not reasons:
        return ""
    dropped = ", ".join(dict.fromkeys(r.split(".")[0].split("[")[0].split(":")[0] for r in reasons))
    reason = (
        f"invalid: the server sent an impossible value ({'; '.join(reasons)}); the run is kept without its"
        f" {dropped}: check the endpoint, then `tokenreel record --resume` records it again"
    )
    run.status, run.error = "invalid", reason
    return reason


# ---------------------------------------------------------------------------------------------
# Saving


def _chunks_to_json(chunks: Chunks) -> dict[str, Any]:
    """Columns that are all empty strings are left out to keep the file small."""
    out: dict[str, Any] = {"t_ns": chunks.t_ns, "tokens": chunks.tokens}
    for name in ("content", "reasoning", "tool"):
        column = getattr(chunks, name)
        if any(column):
            out[name] = column
    if chunks.client_delay_us:
        out["client_delay_us"] = chunks.client_delay_us
    return out


def session_to_dict(session: Session) -> dict[str, Any]:
    out: dict[str, Any] = {"format": FORMAT, "version": VERSION}
    for name in Session.__dataclass_fields__:
        value = getattr(session, name)
        if name == "runs":
            out[name] = [run_to_dict(run) for run in value]
        elif name == "settings":
            out[name] = asdict(value)
        elif name in ("prompts", "arms"):
            out[name] = [asdict(item) for item in value]
        else:
            out[name] = value
    return out


def run_to_dict(run: Run) -> dict[str, Any]:
    """Like asdict, without deep-copying the (possibly huge) chunk columns."""
    out: dict[str, Any] = {}
    for name in Run.__dataclass_fields__:
        value = getattr(run, name)
        if name == "chunks":
            out[name] = _chunks_to_json(value)
        elif name in ("gate", "acceptance", "clock", "host"):
            out[name] = asdict(value) if value is not None else None
        else:
            out[name] = value
    return out


def dumps(session: Session) -> bytes:
    return orjson.dumps(session_to_dict(session))


def save(session: Session, path: str | os.PathLike[str]) -> None:
    """Write atomically: a crash leaves either the previous file or the new one, never half.

    What is written is first checked by the loader's own validation (`from_dict`), so a saved
    file always loads: a run that fails it is quarantined in place (status `invalid`, see
    `quarantine`); anything else that would not load raises ArchiveError and nothing is written.
    """
    import re

    target = Path(path)
    for run in session.runs:
        bound_acceptance(run)
    for _ in range(len(session.runs) + 1):
        data = session_to_dict(session)
        try:
            from_dict(data, str(target))
        except ArchiveError as exc:
            bad = re.match(r"runs\[(\d+)\]", exc.field)
            if bad is None or int(bad[1]) >= len(session.runs) or not quarantine(session.runs[int(bad[1])], str(target)):
                raise
            continue
        break
    target.parent.mkdir(parents=True, exist_ok=True)
    payload = orjson.dumps(data)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        os.fchmod(fd, 0o644)  # mkstemp's 0600 would make shared session files unreadable to others
        with os.fdopen(fd, "wb") as handle:
            handle.write(payload)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    dir_fd = os.open(target.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


# ---------------------------------------------------------------------------------------------
# Loading and validation

T = TypeVar("T")


class _Reader:
    """Typed field access that raises ArchiveError with a dotted field path."""

    def __init__(self, path: str) -> None:
        self.path = path

    def fail(self, where: str, problem: str) -> ArchiveError:
        return ArchiveError(self.path, where, problem)

    def obj(self, value: Any, where: str) -> dict[str, Any]:
        if not isinstance(value, dict):
            raise self.fail(where, f"expected an object, got {type(value).__name__}")
        return value

    def get(self, data: dict[str, Any], key: str, where: str, kind: Callable[[Any, str], T], default: Any = ...) -> T:
        if key not in data:
            if default is ...:
                raise self.fail(f"{where}.{key}".lstrip("."), "missing")
            return default
        return kind(data[key], f"{where}.{key}".lstrip("."))

    def str_(self, value: Any, where: str) -> str:
        if not isinstance(value, str):
            raise self.fail(where, f"expected a string, got {type(value).__name__}")
        return value

    def opt_str(self, value: Any, where: str) -> str | None:
        return None if value is None else self.str_(value, where)

    def bool_(self, value: Any, where: str) -> bool:
        if not isinstance(value, bool):
            raise self.fail(where, f"expected true or false, got {type(value).__name__}")
        return value

    def opt_bool(self, value: Any, where: str) -> bool | None:
        return None if value is None else self.bool_(value, where)

    def int_(self, value: Any, where: str) -> int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.fail(where, f"expected an integer, got {type(value).__name__}")
        return value

    def nonneg_int(self, value: Any, where: str) -> int:
        number = self.int_(value, where)
        if number < 0:
            raise self.fail(where, f"must not be negative, got {number}")
        return number

    def opt_int(self, value: Any, where: str) -> int | None:
        return None if value is None else self.nonneg_int(value, where)

    def num(self, value: Any, where: str) -> float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise self.fail(where, f"expected a number, got {type(value).__name__}")
        if not math.isfinite(value):
            raise self.fail(where, f"must be a finite number, got {value}")
        return float(value)

    def nonneg_num(self, value: Any, where: str) -> float:
        number = self.num(value, where)
        if number < 0:
            raise self.fail(where, f"must not be negative, got {number}")
        return number

    def opt_num(self, value: Any, where: str) -> float | None:
        return None if value is None else self.nonneg_num(value, where)

    def list_(self, value: Any, where: str) -> list[Any]:
        if not isinstance(value, list):
            raise self.fail(where, f"expected a list, got {type(value).__name__}")
        return value

    def any_obj(self, value: Any, where: str) -> dict[str, Any]:
        return self.obj(value, where)

    def str_map(self, value: Any, where: str) -> dict[str, str]:
        data = self.obj(value, where)
        for key, item in data.items():
            self.str_(item, f"{where}.{key}")
        return data

    def num_map(self, value: Any, where: str) -> dict[str, float]:
        data = self.obj(value, where)
        return {key: self.nonneg_num(item, f"{where}.{key}") for key, item in data.items()}

    def one_of(self, choices: tuple[str, ...]) -> Callable[[Any, str], str]:
        def check(value: Any, where: str) -> str:
            text = self.str_(value, where)
            if text not in choices:
                raise self.fail(where, f"must be one of {', '.join(choices)}, got {text!r}")
            return text

        return check


def _prompt(r: _Reader, data: Any, where: str) -> Prompt:
    d = r.obj(data, where)
    messages = r.get(d, "messages", where, r.list_, [])
    for i, message in enumerate(messages):
        r.str_map(message, f"{where}.messages[{i}]")
    return Prompt(
        id=r.get(d, "id", where, r.str_),
        category=r.get(d, "category", where, r.str_),
        messages=messages,
        prompt=r.get(d, "prompt", where, r.str_, ""),
    )


def _arm(r: _Reader, data: Any, where: str) -> Arm:
    d = r.obj(data, where)
    recorded = r.get(d, "recorded", where, r.list_, [])
    for i, item in enumerate(recorded):
        r.str_map(item, f"{where}.recorded[{i}]")
    return Arm(
        id=r.get(d, "id", where, r.str_),
        label=r.get(d, "label", where, r.str_),
        base_url=r.get(d, "base_url", where, r.str_),
        model=r.get(d, "model", where, r.str_),
        api=r.get(d, "api", where, r.one_of(("chat", "completions")), "chat"),
        api_key_env=r.get(d, "api_key_env", where, r.opt_str, None),
        metrics_url=r.get(d, "metrics_url", where, r.opt_str, None),
        extra_body=r.get(d, "extra_body", where, r.any_obj, {}),
        timeouts=r.get(d, "timeouts", where, r.num_map, {}),
        fingerprint=r.get(d, "fingerprint", where, r.any_obj, {}),
        recorded=recorded,
        settings=r.get(d, "settings", where, r.str_map, {}),
        tokenizer=r.get(d, "tokenizer", where, r.opt_str, None),
    )


def _settings(r: _Reader, data: Any, where: str) -> Settings:
    d = r.obj(data, where)
    return Settings(
        prompts=r.get(d, "prompts", where, r.str_),
        max_tokens=r.get(d, "max_tokens", where, r.nonneg_int),
        ignore_eos=r.get(d, "ignore_eos", where, r.bool_),
        temperature=r.get(d, "temperature", where, r.nonneg_num),
        warmup=r.get(d, "warmup", where, r.nonneg_int),
        repeats=r.get(d, "repeats", where, r.nonneg_int),
        idle_wait_s=r.get(d, "idle_wait_s", where, r.nonneg_num, 30.0),
        timeouts=r.get(d, "timeouts", where, r.num_map, {}),
        client_busy_p99_ms=r.get(d, "client_busy_p99_ms", where, r.nonneg_num, CLIENT_BUSY_P99_MS),
        host_pressure_pct=r.get(d, "host_pressure_pct", where, r.nonneg_num, HOST_PRESSURE_PCT),
        host_wait_s=r.get(d, "host_wait_s", where, r.nonneg_num, HOST_WAIT_S),
    )


def _chunks(r: _Reader, data: Any, where: str) -> Chunks:
    d = r.obj(data, where)
    t_ns = r.get(d, "t_ns", where, r.list_)
    n = len(t_ns)
    if n > MAX_CHUNKS_PER_RUN:
        raise r.fail(f"{where}.t_ns", f"{n} chunks is more than the limit of {MAX_CHUNKS_PER_RUN}")
    tokens = r.get(d, "tokens", where, r.list_)
    columns = {"tokens": tokens}
    for name in ("content", "reasoning", "tool"):
        columns[name] = r.get(d, name, where, r.list_, None)
    for name, column in columns.items():
        if column is not None and len(column) != n:
            raise r.fail(f"{where}.{name}", f"has {len(column)} entries but t_ns has {n}")
    previous = 0
    for i, t in enumerate(t_ns):
        if isinstance(t, bool) or not isinstance(t, int):
            raise r.fail(f"{where}.t_ns[{i}]", f"expected an integer, got {type(t).__name__}")
        if t < previous:
            problem = "is negative" if t < 0 else f"goes back in time ({t} < {previous})"
            raise r.fail(f"{where}.t_ns[{i}]", problem)
        if t > MAX_OFFSET_NS:
            raise r.fail(f"{where}.t_ns[{i}]", f"{t} ns is longer than a week")
        previous = t
    for i, count in enumerate(tokens):
        if isinstance(count, bool) or not isinstance(count, int) or count < 0 or count > MAX_TOKENS_PER_EVENT:
            raise r.fail(f"{where}.tokens[{i}]", f"expected a token count from 0 to {MAX_TOKENS_PER_EVENT}, got {count!r}")
    texts = {}
    for name in ("content", "reasoning", "tool"):
        column = columns[name]
        if column is None:
            texts[name] = [""] * n
            continue
        for i, text in enumerate(column):
            if not isinstance(text, str):
                raise r.fail(f"{where}.{name}[{i}]", f"expected a string, got {type(text).__name__}")
        texts[name] = column
    delays = r.get(d, "client_delay_us", where, r.list_, [])
    if delays and len(delays) != n:
        raise r.fail(f"{where}.client_delay_us", f"has {len(delays)} entries but t_ns has {n}")
    for i, delay in enumerate(delays):
        if isinstance(delay, bool) or not isinstance(delay, int) or not 0 <= delay <= MAX_OFFSET_NS // 1000:
            raise r.fail(f"{where}.client_delay_us[{i}]", f"expected microseconds from 0 to a week, got {delay!r}")
    return Chunks(t_ns=t_ns, tokens=tokens, **texts, client_delay_us=delays)


def _gate(r: _Reader, data: Any, where: str) -> Gate:
    d = r.obj(data, where)
    return Gate(
        status=r.get(d, "status", where, r.one_of(GATE_STATUSES)),
        running=r.get(d, "running", where, r.opt_num, None),
        waiting=r.get(d, "waiting", where, r.opt_num, None),
        waited_s=r.get(d, "waited_s", where, r.nonneg_num, 0.0),
        detail=r.get(d, "detail", where, r.str_, ""),
    )


def _acceptance(r: _Reader, data: Any, where: str) -> Acceptance | None:
    if data is None:
        return None
    d = r.obj(data, where)
    return Acceptance(
        mean_length=r.get(d, "mean_length", where, r.opt_num, None),
        rate=r.get(d, "rate", where, r.opt_num, None),
        drafts=r.get(d, "drafts", where, r.opt_num, None),
        draft_tokens=r.get(d, "draft_tokens", where, r.opt_num, None),
        accepted=r.get(d, "accepted", where, r.opt_num, None),
        source=r.get(d, "source", where, r.str_, ""),
        approximate=r.get(d, "approximate", where, r.bool_, False),
        note=r.get(d, "note", where, r.str_, ""),
    )


def _clock(r: _Reader, data: Any, where: str) -> Clock | None:
    if data is None:
        return None
    d = r.obj(data, where)
    return Clock(
        source=r.get(d, "source", where, r.one_of(CLOCK_SOURCES)),
        reason=r.get(d, "reason", where, r.str_, ""),
        delay_p50_ms=r.get(d, "delay_p50_ms", where, r.opt_num, None),
        delay_p99_ms=r.get(d, "delay_p99_ms", where, r.opt_num, None),
        delay_max_ms=r.get(d, "delay_max_ms", where, r.opt_num, None),
        first_shared=r.get(d, "first_shared", where, r.bool_, False),
    )


def _host(r: _Reader, data: Any, where: str) -> HostPressure | None:
    if data is None:
        return None
    d = r.obj(data, where)
    return HostPressure(
        source=r.get(d, "source", where, r.str_),
        some_pct=r.get(d, "some_pct", where, r.nonneg_num),
        before_pct=r.get(d, "before_pct", where, r.nonneg_num),
        waited_s=r.get(d, "waited_s", where, r.nonneg_num, 0.0),
        contended=r.get(d, "contended", where, r.bool_, False),
    )


def _usage(r: _Reader, data: Any, where: str) -> dict[str, int] | None:
    if data is None:
        return None
    d = r.obj(data, where)
    usage = {key: r.nonneg_int(value, f"{where}.{key}") for key, value in d.items() if not isinstance(value, dict)}
    for key, value in usage.items():
        if value > MAX_COUNT:
            raise r.fail(f"{where}.{key}", f"{value} tokens is more than the limit of {MAX_COUNT}")
    return usage


def _run(r: _Reader, data: Any, where: str) -> Run:
    d = r.obj(data, where)
    run = Run(
        arm=r.get(d, "arm", where, r.str_),
        prompt=r.get(d, "prompt", where, r.str_),
        index=r.get(d, "index", where, r.nonneg_int),
        warmup=r.get(d, "warmup", where, r.bool_),
        status=r.get(d, "status", where, r.one_of(RUN_STATUSES)),
        error=r.get(d, "error", where, r.str_, ""),
        started_at=r.get(d, "started_at", where, r.str_, ""),
        http_status=r.get(d, "http_status", where, r.opt_int, None),
        finish_reason=r.get(d, "finish_reason", where, r.opt_str, None),
        usage=_usage(r, d.get("usage"), f"{where}.usage"),
        token_source=r.get(d, "token_source", where, r.one_of(TOKEN_SOURCES), "per_event"),
        gate=_gate(r, d["gate"], f"{where}.gate") if "gate" in d else Gate(),
        contended=r.get(d, "contended", where, r.opt_bool, None),
        contention_detail=r.get(d, "contention_detail", where, r.str_, ""),
        acceptance=_acceptance(r, d.get("acceptance"), f"{where}.acceptance"),
        acceptance_note=r.get(d, "acceptance_note", where, r.str_, ""),
        clock=_clock(r, d.get("clock"), f"{where}.clock"),
        client_busy=r.get(d, "client_busy", where, r.opt_bool, None),
        host=_host(r, d.get("host"), f"{where}.host"),
        host_note=r.get(d, "host_note", where, r.str_, ""),
        send_monotonic_ns=r.get(d, "send_monotonic_ns", where, r.opt_int, None),
        chunks=_chunks(r, d.get("chunks"), f"{where}.chunks"),
    )
    bound_acceptance(run)
    return run


def _list_of(r: _Reader, data: dict[str, Any], key: str, build: Callable[[_Reader, Any, str], T]) -> list[T]:
    items = r.get(data, key, "", r.list_)
    if len(items) > MAX_RUNS:
        raise r.fail(key, f"{len(items)} entries is more than the limit of {MAX_RUNS}")
    return [build(r, item, f"{key}[{i}]") for i, item in enumerate(items)]


def from_dict(data: Any, path: str = "<session>") -> Session:
    """Validate and build a Session; raises ArchiveError naming the first bad field."""
    r = _Reader(path)
    d = r.obj(data, "")
    fmt = d.get("format")
    if fmt != FORMAT:
        raise r.fail("format", f"expected {FORMAT!r}, got {fmt!r}: this is not a tokenreel session")
    version = r.get(d, "version", "", r.int_)
    if version > VERSION:
        raise r.fail("version", f"version {version} is newer than this tokenreel reads ({VERSION}): upgrade tokenreel")
    if version < 1:
        raise r.fail("version", f"unknown version {version}")
    session = Session(
        name=r.get(d, "name", "", r.str_),
        settings=_settings(r, d.get("settings"), "settings"),
        prompts=_list_of(r, d, "prompts", _prompt),
        arms=_list_of(r, d, "arms", _arm),
        runs=_list_of(r, d, "runs", _run),
        tool_version=r.get(d, "tool_version", "", r.str_, ""),
        host=r.get(d, "host", "", r.str_map, {}),
        created_at=r.get(d, "created_at", "", r.str_, ""),
        simulated=r.get(d, "simulated", "", r.bool_, False),
    )
    _check_references(r, session)
    return session


def _check_references(r: _Reader, session: Session) -> None:
    """Ids must be unique and every run must name a known arm and prompt."""
    for name, items in (("arms", session.arms), ("prompts", session.prompts)):
        seen: set[str] = set()
        for i, item in enumerate(items):
            if item.id in seen:
                raise r.fail(f"{name}[{i}].id", f"duplicate id {item.id!r}")
            seen.add(item.id)
    arm_ids = {a.id for a in session.arms}
    prompt_ids = {p.id for p in session.prompts}
    for i, run in enumerate(session.runs):
        if run.arm not in arm_ids:
            raise r.fail(f"runs[{i}].arm", f"unknown arm {run.arm!r}")
        if run.prompt not in prompt_ids:
            raise r.fail(f"runs[{i}].prompt", f"unknown prompt {run.prompt!r}")


def loads(payload: bytes, path: str = "<session>") -> Session:
    try:
        data = orjson.loads(payload)
    except orjson.JSONDecodeError as exc:
        hint = " (the file looks truncated)" if payload.rstrip()[-1:] not in (b"}", b"]") else ""
        raise ArchiveError(path, "", f"not valid JSON{hint}: {exc}") from None
    return from_dict(data, path)


# Inputs are read only from regular files of at most this many bytes: a device (/dev/zero), a
# FIFO or a socket would never end or never answer (issue 11). Callers pass their own bound.
MAX_INPUT_BYTES = 256 << 20


def read_input(path: str | os.PathLike[str], what: str, limit: int = MAX_INPUT_BYTES) -> bytes:
    """The bytes of an input file, or a one-line OSError message for people (shared by loaders).

    Only a regular file (a symlink to one is fine) of at most `limit` bytes is read: anything
    else is refused before a byte is read, saying what it is."""
    import stat as stats

    try:
        kind = os.stat(path).st_mode
        if stats.S_ISDIR(kind):
            raise IsADirectoryError
        if not stats.S_ISREG(kind):
            raise OSError(f"is not a regular file ({_file_kind(kind)}), expected {what}")
        # O_NONBLOCK: should the path be swapped for a FIFO since the stat, open still returns
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
        with os.fdopen(fd, "rb") as handle:
            kind = os.fstat(handle.fileno()).st_mode
            if not stats.S_ISREG(kind):
                raise OSError(f"is not a regular file ({_file_kind(kind)}), expected {what}")
            payload = handle.read(limit + 1)
    except FileNotFoundError:
        raise OSError("no such file") from None
    except IsADirectoryError:
        raise OSError(f"is a directory, expected {what}") from None
    except OSError as exc:
        if exc.errno is None:
            raise
        raise OSError(f"cannot read: {exc.strerror}") from None
    if len(payload) > limit:
        raise OSError(f"larger than {limit >> 20} MiB, the most tokenreel reads as {what}")
    if not payload.strip():
        raise OSError("the file is empty")
    return payload


def _file_kind(mode: int) -> str:
    import stat as stats

    kinds = {stats.S_ISFIFO: "a FIFO", stats.S_ISCHR: "a character device", stats.S_ISBLK: "a block device",
             stats.S_ISSOCK: "a socket", stats.S_ISDIR: "a directory"}
    return next((name for test, name in kinds.items() if test(mode)), "not a file")


def load(path: str | os.PathLike[str]) -> Session:
    """Read and validate a session file; every problem is an ArchiveError naming file and field."""
    try:
        payload = read_input(path, "a session file")
    except OSError as exc:
        raise ArchiveError(path, "", str(exc)) from None
    return loads(payload, str(path))


# ---------------------------------------------------------------------------------------------
# One writer per session


class SessionLock:
    """The exclusive lock of module rule 3: flock on `.<file name>.lock`, which holds the pid.

    Why: two `record` processes on one --out each rewrite the whole file after every run, so
    the last writer would drop the other's runs. Acquire never waits (ArchiveError naming the
    holder's pid); load the session only after acquiring, so resume and --arms merge with what
    is on disk now. Release removes the file; the kernel drops the flock of a killed holder.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self.lock_path = self.path.with_name(f".{self.path.name}.lock")
        self._fd: int | None = None

    def acquire(self) -> SessionLock:
        self.lock_path.parent.mkdir(parents=True, exist_ok=True)
        while True:
            fd = os.open(self.lock_path, os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = os.pread(fd, 32, 0).decode("ascii", "replace").strip() or "unknown"
                os.close(fd)
                raise ArchiveError(
                    self.path, "",
                    f"another `tokenreel record` (pid {holder}) is writing this session; wait for it to finish"
                    " (then --arms or --resume adds to it), or record into another --out",
                ) from None
            except BaseException:
                os.close(fd)
                raise
            try:  # the holder may have removed the file between our open and flock: lock the new one
                same = os.stat(self.lock_path).st_ino == os.fstat(fd).st_ino
            except FileNotFoundError:
                same = False
            if same:
                break
            os.close(fd)
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self._fd = fd
        return self

    def release(self) -> None:
        if self._fd is None:
            return
        try:
            self.lock_path.unlink(missing_ok=True)  # while still locked: a waiter re-checks the inode
        finally:
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> SessionLock:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()
