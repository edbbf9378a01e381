"""Reading a session back: every field checked, and the rules for impossible server values.

The file format is specified in docs/session-format.md; each reader below cites its section (§).

`from_dict` builds a `Session` (tokenreel.session.model) from the parsed JSON of a session file and
raises `ArchiveError` naming the file and the first bad field: a wrong type, a missing field,
a count or offset past the model's MAX_* limits, time going backwards, an unknown arm.

Rules that keep one bad server value from poisoning a session:

1. The recorder never saves what the loader rejects (§12.1). `validated_bytes` (what
   `tokenreel.session.archive.save` writes, `tokenreel.session.save_form`) runs `from_dict` on exactly
   what is written, each run checked when new or changed; a run that fails it is kept with status
   `invalid` and the reason (`quarantine`: the offending part, such as its chunks, is dropped), so
   the file always loads and `--resume` re-records that run.
2. Every float that reaches a metric is finite and bounded (§12.2): an acceptance length outside
   [1, MAX_ACCEPTANCE_LENGTH], a rate outside [0, 1] or a count above MAX_COUNT is dropped to
   None with a note (`tokenreel.session.acceptance_validate.bound_acceptance`, applied at save
   and at load alike).
3. The engine's own figures are bounded where they are read (`tokenreel.session.engine_archive`); at
   save a run past a bound is quarantined without its `engine` part.
"""

from __future__ import annotations

import math
from typing import Any, Callable

from tokenreel.session.acceptance_validate import bound_acceptance, read_acceptance
from tokenreel.session.engine_archive import read_engine_figures
from tokenreel.session.fields import FieldReader, T
from tokenreel.session.gpu_validate import gpu_check
from tokenreel.session.grading import ANSWER_EXTRACTS, GRADING_KINDS, Grade, Grading
from tokenreel.session.model import (
    CLIENT_BUSY_P99_MS,
    CLOCK_SOURCES,
    FORMAT,
    GATE_STATUSES,
    GPU_UTIL_PCT,
    GPU_WAIT_S,
    HOST_PRESSURE_PCT,
    HOST_WAIT_S,
    IMPORT_LACKS,
    LEVEL_COUNTERS,
    LEVEL_STATUSES,
    MAX_CHUNKS_PER_RUN,
    MAX_COUNT,
    MAX_OFFSET_NS,
    MAX_RESPONSE_ID,
    MAX_RUNS,
    MAX_TOKENS_PER_EVENT,
    PROMPT_CACHE_POLICIES,
    RUN_STATUSES,
    SESSION_KINDS,
    TOKEN_SOURCES,
    VERSION,
    Arm,
    Chunks,
    Clock,
    Gate,
    HostPressure,
    Imported,
    LevelRecord,
    Prompt,
    Run,
    Session,
    Settings,
)
from tokenreel.session.stopping import Stopping

# ---------------------------------------------------------------------------------------------
# Reading: every field checked, the first bad one named

def _prompt(r: FieldReader, data: Any, where: str) -> Prompt:
    """A `prompts[]` entry (docs/session-format.md §5)."""
    d = r.obj(data, where)
    messages = r.get(d, "messages", where, r.list_, [])
    for i, message in enumerate(messages):
        r.str_map(message, f"{where}.messages[{i}]")
    return Prompt(
        id=r.get(d, "id", where, r.str_),
        category=r.get(d, "category", where, r.str_),
        messages=messages,
        prompt=r.get(d, "prompt", where, r.str_, ""),
        grading=_grading(r, d.get("grading"), f"{where}.grading"),
    )


def _grading(r: FieldReader, data: Any, where: str) -> Grading | None:
    """A prompt's `grading` (docs/session-format.md §5.1)."""
    if data is None:
        return None
    d = r.obj(data, where)
    return Grading(
        kind=r.get(d, "kind", where, r.one_of(GRADING_KINDS)),
        tests=r.get(d, "tests", where, r.str_, ""),
        prelude=r.get(d, "prelude", where, r.str_, ""),
        entry_point=r.get(d, "entry_point", where, r.str_, ""),
        answer=r.get(d, "answer", where, r.str_, ""),
        extract=r.get(d, "extract", where, r.one_of(ANSWER_EXTRACTS), "last_number"),
        pattern=r.get(d, "pattern", where, r.str_, ""),
    )


def _grade(r: FieldReader, data: Any, where: str) -> Grade | None:
    """A run's `grade` (docs/session-format.md §7.9)."""
    if data is None:
        return None
    d = r.obj(data, where)
    return Grade(
        passed=r.get(d, "passed", where, r.bool_),
        detail=r.get(d, "detail", where, r.str_, ""),
        seconds=r.get(d, "seconds", where, r.nonneg_num, 0.0),
    )


def _arm(r: FieldReader, data: Any, where: str) -> Arm:
    """An `arms[]` entry (docs/session-format.md §6)."""
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
        base_urls=_strings(r, d.get("base_urls", []), f"{where}.base_urls"),
        metrics_urls=_strings(r, d.get("metrics_urls", []), f"{where}.metrics_urls"),
        gpu=[gpu_check(r, item, f"{where}.gpu[{i}]") for i, item in enumerate(r.get(d, "gpu", where, r.list_, []))],
        drafts_for=r.get(d, "drafts_for", where, r.opt_str, None),
        imported=_imported(r, d["imported"], f"{where}.imported") if d.get("imported") is not None else None,
    )


def _imported(r: FieldReader, data: Any, where: str) -> Imported:
    """An arm's `imported` (docs/session-format.md §6.2)."""
    d = r.obj(data, where)
    lacks = r.get(d, "lacks", where, r.str_map, {})
    for key in lacks:
        r.one_of(IMPORT_LACKS)(key, f"{where}.lacks")
    return Imported(
        tool=r.get(d, "tool", where, r.str_),
        file=r.get(d, "file", where, r.str_),
        version=r.get(d, "version", where, r.str_, ""),
        lacks=lacks,
        notes=_strings(r, d.get("notes", []), f"{where}.notes"),
    )


def _strings(r: FieldReader, data: Any, where: str) -> list[str]:
    return [r.str_(item, f"{where}[{i}]") for i, item in enumerate(r.list_(data, where))]


def _settings(r: FieldReader, data: Any, where: str) -> Settings:
    """`settings` (docs/session-format.md §4)."""
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
        gpu_util_pct=r.get(d, "gpu_util_pct", where, r.nonneg_num, GPU_UTIL_PCT),
        gpu_wait_s=r.get(d, "gpu_wait_s", where, r.nonneg_num, GPU_WAIT_S),
        prompt_cache=r.get(d, "prompt_cache", where, r.one_of(PROMPT_CACHE_POLICIES), "engine"),
    )


def _chunks(r: FieldReader, data: Any, where: str) -> Chunks:
    """A run's `chunks`, column by column (docs/session-format.md §7.2)."""
    d = r.obj(data, where)
    t_ns = r.get(d, "t_ns", where, r.list_)
    n = len(t_ns)
    if n > MAX_CHUNKS_PER_RUN:
        raise r.fail(f"{where}.t_ns", f"{n} chunks is more than the limit of {MAX_CHUNKS_PER_RUN}")
    tokens = r.get(d, "tokens", where, r.list_)
    columns: dict[str, list[Any] | None] = {"tokens": tokens}
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


def _gate(r: FieldReader, data: Any, where: str) -> Gate:
    """A run's `gate` (docs/session-format.md §7.3)."""
    d = r.obj(data, where)
    return Gate(
        status=r.get(d, "status", where, r.one_of(GATE_STATUSES)),
        running=r.get(d, "running", where, r.opt_num, None),
        waiting=r.get(d, "waiting", where, r.opt_num, None),
        waited_s=r.get(d, "waited_s", where, r.nonneg_num, 0.0),
        detail=r.get(d, "detail", where, r.str_, ""),
    )


def _clock(r: FieldReader, data: Any, where: str) -> Clock | None:
    """A run's `clock` (docs/session-format.md §7.5)."""
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


def _host(r: FieldReader, data: Any, where: str) -> HostPressure | None:
    """A run's `host` (docs/session-format.md §7.6): PSI or others' CPU load, at least one."""
    if data is None:
        return None
    d = r.obj(data, where)
    host = HostPressure(
        source=r.get(d, "source", where, r.str_),
        some_pct=r.get(d, "some_pct", where, r.opt_num, None),
        before_pct=r.get(d, "before_pct", where, r.opt_num, None),
        waited_s=r.get(d, "waited_s", where, r.nonneg_num, 0.0),
        contended=r.get(d, "contended", where, r.bool_, False),
        others_pct=r.get(d, "others_pct", where, r.opt_num, None),
        others_before_pct=r.get(d, "others_before_pct", where, r.opt_num, None),
        engine_pct=r.get(d, "engine_pct", where, r.opt_num, None),
        resolution_pct=r.get(d, "resolution_pct", where, r.opt_num, None),
        cpus=r.get(d, "cpus", where, r.opt_int, None),
    )
    if host.some_pct is None and host.others_pct is None:
        raise r.fail(f"{where}.some_pct", "a host needs some_pct (PSI) or others_pct (others' CPU load)")
    return host


def _usage(r: FieldReader, data: Any, where: str) -> dict[str, int] | None:
    """A run's `usage`; members that are objects are not read (docs/session-format.md §7.8)."""
    if data is None:
        return None
    d = r.obj(data, where)
    usage = {key: r.nonneg_int(value, f"{where}.{key}") for key, value in d.items() if not isinstance(value, dict)}
    for key, value in usage.items():
        if value > MAX_COUNT:
            raise r.fail(f"{where}.{key}", f"{value} tokens is more than the limit of {MAX_COUNT}")
    return usage


def read_run(r: FieldReader, data: Any, where: str) -> Run:
    """A `runs[]` entry (docs/session-format.md §7.1), its acceptance bounded (§12.2)."""
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
        acceptance=read_acceptance(r, d.get("acceptance"), f"{where}.acceptance"),
        acceptance_note=r.get(d, "acceptance_note", where, r.str_, ""),
        clock=_clock(r, d.get("clock"), f"{where}.clock"),
        client_busy=r.get(d, "client_busy", where, r.opt_bool, None),
        host=_host(r, d.get("host"), f"{where}.host"),
        host_note=r.get(d, "host_note", where, r.str_, ""),
        send_monotonic_ns=r.get(d, "send_monotonic_ns", where, r.opt_int, None),
        level=_opt_level(r, d.get("level"), f"{where}.level"),
        replica=r.get(d, "replica", where, r.opt_int, None),
        node=r.get(d, "node", where, r.opt_str, None),
        response_id=_short_id(r, d.get("response_id"), f"{where}.response_id"),
        served_model=_short_id(r, d.get("served_model"), f"{where}.served_model"),
        engine=read_engine_figures(r, d.get("engine"), f"{where}.engine"),
        grade=_grade(r, d.get("grade"), f"{where}.grade"),
        chunks=_chunks(r, d.get("chunks"), f"{where}.chunks"),
    )
    bound_acceptance(run)
    return run


def _list_of(r: FieldReader, data: dict[str, Any], key: str, build: Callable[[FieldReader, Any, str], T]) -> list[T]:
    """A top-level list of at most MAX_RUNS entries (docs/session-format.md §3, §11)."""
    items = r.get(data, key, "", r.list_)
    if len(items) > MAX_RUNS:
        raise r.fail(key, f"{len(items)} entries is more than the limit of {MAX_RUNS}")
    return [build(r, item, f"{key}[{i}]") for i, item in enumerate(items)]


RunReader = Callable[[FieldReader, Any, str], Run]


def from_dict(data: Any, path: str = "<session>", run_reader: RunReader = read_run) -> Session:
    """Validate and build a Session; raises ArchiveError naming the first bad field
    (docs/session-format.md: format and version §2, the top level §3, references §10).

    `run_reader` reads each `runs[]` item (`read_run` for parsed JSON); a save passes its own,
    which validates only the runs that changed since the last save (`tokenreel.session.save_form`)."""
    r = FieldReader(path)
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
        runs=_list_of(r, d, "runs", run_reader),
        tool_version=r.get(d, "tool_version", "", r.str_, ""),
        host=r.get(d, "host", "", r.str_map, {}),
        created_at=r.get(d, "created_at", "", r.str_, ""),
        simulated=r.get(d, "simulated", "", r.bool_, False),
        stopping=_stopping(r, d["stopping"], "stopping") if "stopping" in d else None,
        kind=r.get(d, "kind", "", r.one_of(SESSION_KINDS), "ladder"),
        levels=_list_of(r, d, "levels", _level) if "levels" in d else [],
    )
    _check_references(r, session)
    return session


def _opt_level(r: FieldReader, value: Any, where: str) -> int | None:
    """A concurrency level: null or an integer of 1 or more (docs/session-format.md §7.1, §9)."""
    if value is None:
        return None
    level = r.int_(value, where)
    if level < 1:
        raise r.fail(where, f"expected a concurrency level of 1 or more, got {level}")
    return level


def _counters(r: FieldReader, value: Any, where: str) -> dict[str, float]:
    """A level's `before`/`after` counters (docs/session-format.md §9)."""
    counters = r.num_map(value, where)
    for key, number in counters.items():
        if key not in LEVEL_COUNTERS or not math.isfinite(number) or number < 0:
            raise r.fail(f"{where}.{key}", f"expected one of {', '.join(LEVEL_COUNTERS)} with a finite count of 0 or more")
    return counters


def _short_id(r: FieldReader, value: Any, where: str) -> str | None:
    """A run's `response_id` or `served_model`, at most MAX_RESPONSE_ID characters (docs/session-format.md §7.1)."""
    response_id = r.opt_str(value, where)
    if response_id is not None and len(response_id) > MAX_RESPONSE_ID:
        raise r.fail(where, f"expected a response id of at most {MAX_RESPONSE_ID} characters, got {len(response_id)}")
    return response_id


def _level(r: FieldReader, data: Any, where: str) -> LevelRecord:
    """A sweep's `levels[]` entry (`model.LevelRecord`, docs/session-format.md §9)."""
    d = r.obj(data, where)
    record = LevelRecord(
        arm=r.get(d, "arm", where, r.str_),
        level=_opt_level(r, r.get(d, "level", where, r.int_), f"{where}.level") or 0,
        status=r.get(d, "status", where, r.one_of(LEVEL_STATUSES)),
        error=r.get(d, "error", where, r.str_, ""),
        warmup=r.get(d, "warmup", where, r.nonneg_int, 0),
        requests=r.get(d, "requests", where, r.opt_int, None),
        duration_s=r.get(d, "duration_s", where, r.opt_num, None),
        started_at=r.get(d, "started_at", where, r.str_, ""),
        finished_at=r.get(d, "finished_at", where, r.str_, ""),
        completed=r.get(d, "completed", where, r.nonneg_int, 0),
        failed=r.get(d, "failed", where, r.nonneg_int, 0),
        wall_s=r.get(d, "wall_s", where, r.opt_num, None),
        before=_counters(r, d.get("before", {}), f"{where}.before"),
        after=_counters(r, d.get("after", {}), f"{where}.after"),
        peak_running=r.get(d, "peak_running", where, r.opt_num, None),
        peak_waiting=r.get(d, "peak_waiting", where, r.opt_num, None),
        metrics_note=r.get(d, "metrics_note", where, r.str_, ""),
    )
    for name in ("requests", "duration_s", "wall_s", "peak_running", "peak_waiting"):
        value = getattr(record, name)
        if value is not None and not (math.isfinite(value) and value >= 0):
            raise r.fail(f"{where}.{name}", f"expected a finite value of 0 or more, got {value!r}")
    return record


def _stopping(r: FieldReader, data: Any, where: str) -> Stopping:
    """`stopping` (docs/session-format.md §8)."""
    d = r.obj(data, where)

    def items(key: str, kind: Callable[[Any, str], T]) -> list[T]:
        return [kind(v, f"{where}.{key}[{i}]") for i, v in enumerate(r.get(d, key, where, r.list_, []))]

    rule = Stopping(
        r.get(d, "target", where, r.nonneg_num), r.get(d, "level", where, r.nonneg_num), items("looks", r.nonneg_int),
        items("order", r.str_), r.get(d, "seed", where, r.int_), r.get(d, "max_time_s", where, r.opt_num, None),
        items("targets", r.str_), items("looked", r.nonneg_int),
        {k: r.opt_num(v, f"{where}.widths.{k}") for k, v in r.get(d, "widths", where, r.any_obj, {}).items()},
        r.get(d, "stopped", where, r.str_, ""),
    )
    if not 0 < rule.level < 1 or rule.looks != sorted(set(rule.looks)) or rule.looks[-1:] > [len(rule.order)]:
        raise r.fail(where, "expected a level in (0, 1) and looks that grow up to the drawn order's length")
    return rule


def _check_references(r: FieldReader, session: Session) -> None:
    """Ids must be unique and every run must name a known arm and prompt (docs/session-format.md §10)."""
    ids: tuple[tuple[str, list[str]], ...] = (("arms", [a.id for a in session.arms]), ("prompts", [p.id for p in session.prompts]))
    for name, listed in ids:
        seen: set[str] = set()
        for i, item_id in enumerate(listed):
            if item_id in seen:
                raise r.fail(f"{name}[{i}].id", f"duplicate id {item_id!r}")
            seen.add(item_id)
    arm_ids = {a.id for a in session.arms}
    prompt_ids = {p.id for p in session.prompts}
    for i, run in enumerate(session.runs):
        if run.arm not in arm_ids:
            raise r.fail(f"runs[{i}].arm", f"unknown arm {run.arm!r}")
        if run.prompt not in prompt_ids:
            raise r.fail(f"runs[{i}].prompt", f"unknown prompt {run.prompt!r}")
    for i, arm in enumerate(session.arms):
        if arm.drafts_for is not None and (arm.drafts_for not in arm_ids or arm.drafts_for == arm.id):
            raise r.fail(f"arms[{i}].drafts_for", f"{arm.drafts_for!r} is not another arm of this session")
        if len(arm.metrics_urls) != len(arm.base_urls):
            raise r.fail(f"arms[{i}].metrics_urls", f"expected one per base_urls entry ({len(arm.base_urls)}), got {len(arm.metrics_urls)}")
    replicas = {a.id: a.replicas for a in session.arms}
    for i, run in enumerate(session.runs):
        if (run.level is None) != (session.kind == "ladder"):
            raise r.fail(f"runs[{i}].level", "a sweep's runs carry their concurrency level, a ladder's none")
        if run.replica is not None and run.replica >= replicas[run.arm]:
            raise r.fail(f"runs[{i}].replica", f"arm {run.arm!r} has {replicas[run.arm]} replica(s), not a replica {run.replica}")
    for i, record in enumerate(session.levels):
        if session.kind != "sweep":
            raise r.fail("levels", "only a sweep session has levels")
        if record.arm not in arm_ids:
            raise r.fail(f"levels[{i}].arm", f"unknown arm {record.arm!r}")
    drawn: set[str] = set()
    for i, prompt_id in enumerate(session.stopping.order if session.stopping else []):
        if prompt_id not in prompt_ids or prompt_id in drawn:
            raise r.fail(f"stopping.order[{i}]", f"{'repeated' if prompt_id in drawn else 'unknown'} prompt {prompt_id!r}")
        drawn.add(prompt_id)
