"""The session model: one self-contained JSON file per recording session, and what it holds.

Everything needed to re-analyse and re-render a session without its endpoints lives in the file:
settings (minus secrets), arm fingerprints, prompts, and every run with the arrival time of
every streamed chunk. Chunks are stored column-wise (one list per field) because a session can
hold millions of tokens: columns load fast and keep the file small.

The format (specified in docs/session-format.md): a JSON object `{"format": FORMAT, "version": VERSION, ...}` followed by the fields
of `Session` in order, each dataclass below as an object with its fields in order
(`tokenreel.session.json_form.session_to_dict` builds it, `Chunks` says what each column means). The MAX_* limits bound
every count and offset a file may hold, far above any real session.

Which clock stamped each run is stated: `Run.clock` says "kernel" (t_ns is the
kernel's receive time of the read that delivered the event) or "user" with the reason, and a
kernel-clock run keeps the user-space stamps too (`Chunks.client_delay_us`). Sessions written
before it (no `clock`) load with `clock` None: user-space stamps, as recorded then.

Reading a file back checks every field (`tokenreel.session.validate`); the file on disk is
`tokenreel.session.archive`'s (load, atomic save, one writer at a time).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from tokenreel.base.safe_text import shown_path
from tokenreel.session.grading import Grade, Grading
from tokenreel.session.stopping import Stopping

if TYPE_CHECKING:
    from tokenreel.session.gpu import GpuCheck

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
# Draft positions an acceptance may count per position (a draft window no drafter comes near).
MAX_DRAFT_POSITIONS = 256
MAX_RESPONSE_ID = 256  # characters of a server's response id kept (a longer one is not kept)

# "invalid": the server sent a value the archive cannot hold (`tokenreel.session.quarantine`);
# like failed, it is in no figure and `--resume` records it again.
RUN_STATUSES = ("ok", "failed", "skipped", "invalid")
GATE_STATUSES = ("idle", "busy", "unavailable")
# How a run's per-event token counts were obtained; "per_event" (one per text event, reconciled
# with the final usage) is the only estimate: a run with it says so in the report and video.
# "chunk_count": an imported run whose peer kept as many chunks as completion tokens, one each.
TOKEN_SOURCES = ("usage_delta", "timings", "token_ids", "logprobs", "tokenizer", "per_event", "chunk_count")
ESTIMATED_TOKEN_SOURCES = ("per_event",)
CLOCK_SOURCES = ("kernel", "user")
# The default `client_busy` threshold: a run whose client read the network later than this at
# its 99th percentile is flagged (see `Clock` and `tokenreel.analysis.ladder.usable_runs`).
CLIENT_BUSY_P99_MS = 2.0
# The default host gate (`HostPressure`): other processes using more than this share of the engine's
# CPUs' time flags a run host_contended, after waiting at most HOST_WAIT_S for it to fall.
HOST_PRESSURE_PCT = 10.0
HOST_WAIT_S = 5.0
# The GPU gate (`GpuCheck`, endpoints on this machine): utilisation above this, or a
# compute process that is not the arm's engine, flags the arm after waiting at most GPU_WAIT_S.
GPU_UTIL_PCT = 10.0
GPU_WAIT_S = 30.0
# The fastest decode any figure may claim: 600 x the fastest single-request decode published
# (~17 k tok/s, 2026); it bounds running counts while streaming and an engine's decode figure.
MAX_TOKENS_PER_SECOND = 10_000_000
MAX_ENGINE_MS = MAX_OFFSET_NS / 1e6  # an engine's own duration of one request: at most a week
ENGINE_DURATIONS = ("ttft_ms", "queue_ms", "generation_ms")  # EngineFigures' durations, in ms
# Acceptance's per-position counts: written only when set (added to format version 1 later).
ACCEPTANCE_POSITIONS = ("accepted_per_position", "drafted_per_position")
# HostPressure's members left out of the file when None: PSI (older files) or others' CPU load.
HOST_LOAD_FIELDS = ("some_pct", "before_pct", "others_pct", "others_before_pct", "engine_pct", "resolution_pct", "cpus")
# `Settings.prompt_cache`: "fresh": a fresh prefill every run where a request can ask for one
# (llama.cpp `cache_prompt: false`; extra_body overrides); "engine": the engines' defaults.
PROMPT_CACHE_POLICIES = ("fresh", "engine")


# What an imported arm's file did not hold (`Imported.lacks` keys): each token's arrival time,
# each chunk's text, each chunk's token count, the prompts' text, the request settings.
IMPORT_LACKS = ("token_times", "chunk_text", "token_counts", "prompts", "settings")


class ArchiveError(ValueError):
    """A session file that cannot be used; the message names the file and the field."""

    def __init__(self, path: str | os.PathLike[str], field_name: str, problem: str) -> None:
        self.path = str(path)
        self.field = field_name
        self.problem = problem
        where = f"{shown_path(self.path)}: field '{field_name}'" if field_name else shown_path(self.path)
        super().__init__(f"{where}: {problem}")


@dataclass
class Prompt:
    """One prompt of the suite; chat arms send `messages`, completions arms send `prompt`."""

    id: str
    category: str
    messages: list[dict[str, str]]
    prompt: str
    grading: Grading | None = None  # what a correct answer is; None: not graded (absent from the file)


@dataclass
class Imported:
    """An arm made from a peer tool's result file (`tokenreel import`), not recorded by tokenreel.
    `lacks`: what the file did not hold (IMPORT_LACKS keys), each with its reason in one sentence;
    `notes`: how the runs were rebuilt from what it held."""

    tool: str  # "vllm bench serve", "aiperf"
    file: str  # the file's name, without its folder
    version: str = ""  # the tool's version, where the file or the user gave it
    lacks: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


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
    # Replicas: one endpoint per GPU or node serving this configuration, base_url and
    # metrics_url being the first's. Empty: one replica (absent from the file).
    base_urls: list[str] = field(default_factory=list)
    metrics_urls: list[str] = field(default_factory=list)
    # The GPU gate's check before each recording of this arm, oldest first; empty
    # (absent from the file): never checked (remote endpoint, replicas, or recorded before).
    gpu: list[GpuCheck] = field(default_factory=list)
    # The arm whose model this arm drafts for (`drafts_for` in the config): its answers are
    # checked against that arm's, which speculative decoding must repeat (`tokenreel.analysis.drafting`).
    # None: not declared (absent from the file).
    drafts_for: str | None = None
    # Made from a peer tool's result file (`tokenreel import`); None: recorded (absent from the file).
    imported: Imported | None = None

    @property
    def replicas(self) -> int:
        return len(self.base_urls) or 1


def replica_count(arms: list[Arm]) -> int:
    """The replicas every arm has (a config makes them agree): 1 for arms with one endpoint."""
    return max((arm.replicas for arm in arms), default=1)


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
    # for other processes' CPU load to fall below host_pressure_pct, then record anyway, flagged.
    host_pressure_pct: float = HOST_PRESSURE_PCT
    host_wait_s: float = HOST_WAIT_S
    # The GPU gate (local endpoints only, `GpuCheck`): wait up to gpu_wait_s before an arm for its
    # GPU to have no other compute process and utilisation at most gpu_util_pct, then flag it.
    gpu_util_pct: float = GPU_UTIL_PCT
    gpu_wait_s: float = GPU_WAIT_S
    prompt_cache: str = "fresh"  # PROMPT_CACHE_POLICIES; files without it load as "engine"


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
    # Per draft position (index 0: the first drafted token): draft tokens accepted there, and the
    # verify steps whose draft reached it where the engine counts those (None: it does not, and
    # every verify step is the denominator, as vLLM's and llama.cpp's own per-position rates).
    accepted_per_position: list[float] | None = None
    drafted_per_position: list[float] | None = None


@dataclass
class Clock:
    """Which clock stamped a run's chunks, and how late its client read the network.

    "kernel": each event has the kernel's receive time (SO_TIMESTAMPNS, Linux) of the read that
    delivered it, on the perf_counter timeline; a busy client cannot skew it. "user": each event
    has the perf_counter stamp its read got in Python, `reason` says
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
    """How loaded the host that runs the engine was by other work, over one run.

    Read only when the endpoint is on this machine (loopback or one of its addresses) and its
    engine's processes are known (launched by tokenreel, the owner of the endpoint's port, or the
    GPU's compute processes). `others_pct` is the share of the CPU time of the CPUs the engine and
    the recorder may run on that went to any other process over the run (`/proc/stat`'s busy time
    less the engine's and the recorder's own CPU time); `contended` says it was over
    `settings.host_pressure_pct` by more than the counters' resolution after the gate waited
    `waited_s` (at most `settings.host_wait_s`) for the host to quieten. Files written before the
    gate knew its engine hold Linux PSI instead (`some_pct`: the share of time some task, the
    engine's own included, waited for a CPU). The recorder's own wake-up delay (`Clock`) is
    another question: whether its times are exact.
    """

    source: str  # what was read: "/proc/stat" (others' CPU load), or the PSI file in older files
    some_pct: float | None = None  # PSI: share of the run's wall time some task waited for a CPU, in %
    before_pct: float | None = None  # PSI over the gate's last sample before the run
    waited_s: float = 0.0
    contended: bool = False
    others_pct: float | None = None  # share of the CPUs' time other processes used over the run, in %
    others_before_pct: float | None = None  # the same over the gate's last sample before the run
    engine_pct: float | None = None  # share of the CPUs' time the engine's processes used over the run
    resolution_pct: float | None = None  # the counters' resolution over the run (one tick a CPU and a process)
    cpus: int | None = None  # how many CPUs the shares are of

    def load_pct(self) -> float:
        """The run's figure that decided `contended`: others' load, or PSI in older files."""
        return self.others_pct if self.others_pct is not None else self.some_pct or 0.0

    def measure(self) -> str:
        """What `load_pct` is, in words for notes and reasons."""
        return "other processes' CPU load" if self.others_pct is not None else "CPU pressure"

    def gate_pct(self) -> float:
        """The higher of the run's figure and the gate's last sample before it."""
        before = self.others_before_pct if self.others_pct is not None else self.before_pct
        return max(self.load_pct(), before or 0.0)


@dataclass
class EngineFigures:
    """What the engine said of one request. `decode_tok_s` is tokenreel's decode
    (tokenreel.analysis.metrics: tokens after the first over first to last token); from llama.cpp's
    `timings`: (predicted_n - 1) / predicted_ms, not predicted_per_second, which older builds
    computed over all predicted_n tokens; from vLLM's per-request `metrics`: (completion_tokens -
    1) / generation_time_ms. `cached_prompt_tokens`: prompt tokens its cache served
    (llama.cpp `cache_n`, vLLM/SGLang `usage.prompt_tokens_details.cached_tokens`): a TTFT with
    any is no whole prefill. The three durations are vLLM's (`metrics`): its TTFT (scheduled to
    first token, so without queueing or HTTP), its queue time, its first to last output token.
    None: not said. `source`: where they came from ("" for nowhere)."""

    decode_tok_s: float | None = None
    prompt_tokens: int | None = None
    cached_prompt_tokens: int | None = None
    source: str = ""
    ttft_ms: float | None = None
    queue_ms: float | None = None
    generation_ms: float | None = None

    @property
    def cache_hit(self) -> bool:
        return bool(self.cached_prompt_tokens)


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
    # None: not read (a remote endpoint, its engine's processes not found, or recorded before tokenreel read it);
    # `host_note` says which.
    host: HostPressure | None = None
    host_note: str = ""
    # perf_counter_ns() (CLOCK_MONOTONIC) at request send: t_ns counts from it. It puts the runs of
    # one recording on one timeline and pairs a run with a local server's own log. None: older.
    send_monotonic_ns: int | None = None
    # A sweep's concurrency level (requests kept in flight); None in a ladder (absent from the file).
    level: int | None = None
    # Which of the arm's replicas (`Arm.base_urls` index) served it; None: one replica (absent).
    replica: int | None = None
    # The Ray node that recorded it (`record --ray`: the node's IP as Ray names it), the recorder
    # worker placed next to its engine; None: recorded by the `record` process itself (absent).
    node: str | None = None
    # The `id` the server gave its response (the first event's): it names this request in the
    # server's own log (simulator/tokenreel/simulator/truth.py pairs runs with the simulator's by it). None: no id
    # given, or recorded before tokenreel kept it (absent from the file).
    response_id: str | None = None
    # The `model` the server named in its response (the first event's): replicas pooled in one
    # arm must all name the same one. None: not given, or recorded before tokenreel kept it (absent).
    served_model: str | None = None
    engine: EngineFigures | None = None  # what the engine said of it; None: recorded before tokenreel archived it
    # Its answer graded against its prompt's `Grading`; None: not graded (absent from the file).
    grade: Grade | None = None
    chunks: Chunks = field(default_factory=Chunks)

    @property
    def key(self) -> tuple[str, str, int]:
        return (self.arm, self.prompt, self.index)

    @property
    def tokens_estimated(self) -> bool:
        """True when the per-event counts are a guess (no running count, ids, logprobs or tokenizer)."""
        return self.token_source in ESTIMATED_TOKEN_SOURCES


SESSION_KINDS = ("ladder", "sweep")
LEVEL_STATUSES = ("ok", "failed", "skipped", "interrupted")
# The counters a sweep reads from /metrics before and after each level (`LevelRecord`).
LEVEL_COUNTERS = ("running", "waiting", "generated_tokens", "drafts", "draft_tokens", "accepted_tokens")


@dataclass
class LevelRecord:
    """`tokenreel sweep`: one concurrency level of one arm.

    `level` requests were kept in flight after `warmup` discarded ones, until `requests` measured
    requests were sent (or `duration_s` passed), and until the last of them finished (the fill:
    unmeasured requests, flagged warmup, keep the level full), then drained. `before`/`after`: the engine's
    counters (LEVEL_COUNTERS that /metrics gave) at the start and end of the measured window;
    `peak_running`/`peak_waiting`: the gauges' highest readings during it; `metrics_note` says
    why any is missing. `status` "failed": the endpoint refused the level (429/503) or no request
    completed, `error` says why in one line; "skipped": not tried (busy endpoint, or a lower
    level was refused); "interrupted": Ctrl-C during it (its completed requests are kept).
    """

    arm: str
    level: int
    status: str = "ok"
    error: str = ""
    warmup: int = 0
    requests: int | None = None
    duration_s: float | None = None
    started_at: str = ""
    finished_at: str = ""
    completed: int = 0  # measured requests that finished ok
    failed: int = 0
    wall_s: float | None = None  # the measured window, first send to last completion
    before: dict[str, float] = field(default_factory=dict)
    after: dict[str, float] = field(default_factory=dict)
    peak_running: float | None = None
    peak_waiting: float | None = None
    metrics_note: str = ""


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
    stopping: Stopping | None = None  # recorded with --target-ci; absent from the file otherwise
    # "ladder" (`tokenreel record`, absent from the file) or "sweep" (`tokenreel sweep`: runs carry
    # their concurrency level, `levels` each level's record); ladder files stay byte-identical.
    kind: str = "ladder"
    levels: list[LevelRecord] = field(default_factory=list)

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


def fingerprint_summary(arm: Arm) -> dict[str, str]:
    """The recorder's summary of what the endpoint said; for older archives, version and context."""
    fp = arm.fingerprint
    if isinstance(fp.get("summary"), dict):
        return {str(k): str(v) for k, v in fp["summary"].items()}
    out = {}
    version = fp.get("version")
    if isinstance(version, dict) and version.get("version") is not None:
        out["version"] = str(version["version"])
    if isinstance(fp.get("max_model_len"), int):
        out["max_model_len"] = str(fp["max_model_len"])
    return out
