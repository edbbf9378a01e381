"""The recording config (TOML): session settings, the prompt suite and the arms in ladder order.

Every mistake raises a one-line `ConfigError` naming the file, the field and what to do, before
any endpoint is touched: a typo found after two arms were recorded costs an hour of GPU time.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlsplit

from tokenizers import Tokenizer

from tokenreel import assets
from tokenreel.base.files import read_input
from tokenreel.base.safe_text import shown_path
from tokenreel.recorder.config_schema import ARM_KEYS, DEFAULT_READY_TIMEOUT_S, HARDWARE_KEYS, SESSION_KEYS, TIMEOUT_KEYS
from tokenreel.recorder.enums import Api, Choice, Length, PromptCache
from tokenreel.recorder.secrets import remember_launch_secrets, scrub_secret_fields, scrub_secret_flags
from tokenreel.recorder.suites import load_prompts
from tokenreel.session.model import Arm, Prompt, Settings, replica_count

LAUNCH_KEYS = ("launch", "ready_url", "ready_timeout_s")
PORT = "{port}"  # in launch, base_url, metrics_url and ready_url: a free loopback port picked at the arm's turn
# The recorder sets these itself; letting extra_body replace them would break the stream parsing.
RESERVED_BODY_KEYS = ("model", "messages", "prompt", "stream")
ARM_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
@dataclass(frozen=True)
class Launch:
    """How `record` starts an arm's engine for its turn (recorder.launch): the argv (run without a
    shell), the URL that answers 200 once it serves (None: `<base_url>/models`) and how long to wait."""

    argv: tuple[str, ...]
    ready_url: str | None = None
    ready_timeout_s: float = DEFAULT_READY_TIMEOUT_S


def launch_of(arm: Arm) -> Launch | None:
    """The arm's launch command, or None for an arm whose engine is already running. Like the sent
    extra_body it lives beside the dataclass fields: the config says it, the archive never holds it
    (the fingerprint keeps the scrubbed argv)."""
    launch = arm.__dict__.get("_launch")
    return launch if isinstance(launch, Launch) else None


class ConfigError(ValueError):
    """A config that cannot be used; the message is one line: file, field, problem, fix."""


@dataclass
class Config:
    """A validated config: what `new_session` needs."""

    path: Path
    name: str
    settings: Settings
    prompts: list[Prompt]
    arms: list[Arm]
    # `record --ray`: the Ray custom resource that places each replica's recorder worker, in
    # base_urls order (`ray start --resources='{"NAME": 1}'` on the node serving it). Empty: each
    # worker goes to the node whose address serves the replica (recorder.ray_placement).
    ray_resources: list[str] = field(default_factory=list)


def load_config(path: str | Path, suite: str | None = None) -> Config:
    """Read and validate a TOML config (a path, or `builtin:NAME` for one shipped with tokenreel);
    relative prompt paths resolve against its folder. `suite` (record --suite) replaces [session]
    prompts, a path in it relative to the working folder."""
    path = _builtin_config(str(path)) if str(path).startswith("builtin:") else Path(path)
    try:
        data = tomllib.loads(read_input(path, "config").decode("utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"{shown_path(path)}: config file not found; check the path") from None
    except OSError as exc:
        raise ConfigError(f"--config {shown_path(path)}: {exc}") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{shown_path(path)}: cannot read the config: {exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{shown_path(path)}: invalid TOML: {exc}; fix the syntax there") from None
    check = _Checker(path)
    check.keys(data, "", ("session", "arms"))
    session = check.table(data.get("session"), "session")
    name, settings = _session(check, session, path.stem)
    default_tokenizer = None
    if "tokenizer" in session:
        default_tokenizer = check.tokenizer(session["tokenizer"], "session.tokenizer", path.parent)
    arms = _arms(check, data.get("arms"), default_tokenizer, path.parent)
    for key, value in _hardware(check, session.get("hardware")).items():  # no endpoint says it: kept with each arm's settings
        for arm in arms:
            arm.settings.setdefault(key, value)
    if suite is not None:
        settings.prompts = suite
    prompts = load_prompts(settings.prompts, path.parent if suite is None else Path.cwd())
    resources = _ray_resources(check, session.get("ray_resources", []), arms)
    return Config(path=path, name=name, settings=settings, prompts=prompts, arms=arms, ray_resources=resources)


def _hardware(check: _Checker, value: Any) -> dict[str, str]:
    """`session.hardware`: what every arm ran on, a name ("1x H200") or a table with `name` and
    `bandwidth_gbps` (the GPUs' memory bandwidth, over tokenreel's datasheet table), as settings."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        return {"hardware": check.text(value, "session.hardware")}
    check.keys(value, "session.hardware", HARDWARE_KEYS)
    out = {"hardware": check.text(value["name"], "session.hardware.name")} if "name" in value else {}
    if "bandwidth_gbps" in value:
        out["bandwidth_gbps"] = repr(check.number(value["bandwidth_gbps"], "session.hardware.bandwidth_gbps", positive=True))
    return out


def _ray_resources(check: _Checker, value: Any, arms: list[Arm]) -> list[str]:
    """`session.ray_resources`: one distinct Ray resource name per replica, or none at all."""
    where, replicas = "session.ray_resources", replica_count(arms)
    if not isinstance(value, list) or not all(isinstance(name, str) and name.strip() for name in value):
        raise check.fail(where, "must be a list of Ray resource names, one per replica (base_urls order)")
    if value and len(value) != replicas:
        raise check.fail(where, f"lists {len(value)} resource(s) for {replicas} replica(s): name one per replica, in base_urls order")
    if len(set(value)) != len(value):
        raise check.fail(where, "names one resource twice: each replica's worker needs the resource of its own node or GPU")
    return list(value)


def _builtin_config(spec: str) -> Path:
    name = spec.removeprefix("builtin:")
    known = assets.names("configs", ".toml")
    if name not in known:
        raise ConfigError(f"config {spec!r}: no such built-in config; known: {', '.join(known) or 'none'}")
    return assets.file("configs", f"{name}.toml")


def _session(check: _Checker, table: dict[str, Any], default_name: str) -> tuple[str, Settings]:
    check.keys(table, "session", SESSION_KEYS)
    defaults = Settings()
    name = check.text(table.get("name", default_name), "session.name")
    settings = Settings(
        prompts=check.text(table.get("prompts", defaults.prompts), "session.prompts"),
        max_tokens=check.integer(table.get("max_tokens", defaults.max_tokens), "session.max_tokens", minimum=1),
        ignore_eos=_ignore_eos(check, table, defaults.ignore_eos),
        temperature=check.number(table.get("temperature", defaults.temperature), "session.temperature"),
        warmup=check.integer(table.get("warmup", defaults.warmup), "session.warmup", minimum=0),
        repeats=check.integer(table.get("repeats", defaults.repeats), "session.repeats", minimum=1),
        idle_wait_s=check.number(table.get("idle_wait_s", defaults.idle_wait_s), "session.idle_wait_s"),
        timeouts=check.timeouts(table.get("timeouts", {}), "session.timeouts"),
        client_busy_p99_ms=check.number(
            table.get("client_busy_p99_ms", defaults.client_busy_p99_ms), "session.client_busy_p99_ms"
        ),
        host_pressure_pct=check.number(
            table.get("host_pressure_pct", defaults.host_pressure_pct), "session.host_pressure_pct"
        ),
        host_wait_s=check.number(table.get("host_wait_s", defaults.host_wait_s), "session.host_wait_s"),
        gpu_util_pct=check.number(table.get("gpu_util_pct", defaults.gpu_util_pct), "session.gpu_util_pct"),
        gpu_wait_s=check.number(table.get("gpu_wait_s", defaults.gpu_wait_s), "session.gpu_wait_s"),
        prompt_cache=check.choice(table.get("prompt_cache", defaults.prompt_cache), "session.prompt_cache", PromptCache),
    )
    return name, settings


def _ignore_eos(check: _Checker, table: dict[str, Any], default: bool) -> bool:
    """`session.ignore_eos`, or what `session.length` implies (forced: true, natural: false);
    both given, they must agree."""
    if "length" not in table:
        return check.boolean(table.get("ignore_eos", default), "session.ignore_eos")
    forced = check.choice(table["length"], "session.length", Length) is Length.FORCED
    if "ignore_eos" in table and check.boolean(table["ignore_eos"], "session.ignore_eos") != forced:
        wanted = "true" if forced else "false"
        raise check.fail("session.ignore_eos", f"contradicts length = {table['length']!r}, which sets it {wanted};"
                                               " remove ignore_eos (length says it)")
    return forced


def _arms(check: _Checker, value: Any, default_tokenizer: str | None, folder: Path) -> list[Arm]:
    if value is None:
        raise check.fail("arms", "missing; add at least one [[arms]] table")
    if not isinstance(value, list) or not all(isinstance(item, dict) for item in value):
        raise check.fail("arms", "must be an array of tables; write each arm as [[arms]]")
    if not value:
        raise check.fail("arms", "is empty; add at least one [[arms]] table")
    arms: list[Arm] = []
    seen: set[str] = set()
    for i, table in enumerate(value):
        arm = _arm(check, table, f"arms[{i}]", default_tokenizer, folder)
        if arm.id in seen:
            raise check.fail(f"arms[{i}].id", f"duplicate arm id {arm.id!r}; give each arm a unique id")
        seen.add(arm.id)
        arms.append(arm)
    _drafted(check, arms)
    counts = {arm.replicas for arm in arms}
    if len(counts) > 1:
        listed = ", ".join(f"{arm.id} {arm.replicas}" for arm in arms)
        raise check.fail("arms", f"every arm needs the same number of replicas (base_urls), got {listed}:"
                                 " each replica runs the whole ladder")
    return arms


def _drafted(check: _Checker, arms: list[Arm]) -> None:
    """`drafts_for` names another arm, one that runs the target model without a drafter of its own."""
    ids = [arm.id for arm in arms]
    drafting = {arm.id: arm.drafts_for for arm in arms}
    for i, arm in enumerate(arms):
        target = arm.drafts_for
        if target is None:
            continue
        where = f"arms[{i}].drafts_for"
        if target == arm.id:
            raise check.fail(where, "names the arm itself; name the arm that runs the target model without the drafter")
        if target not in drafting:
            raise check.fail(where, f"no arm {target!r} (arms: {', '.join(ids)}); name the arm that runs the target model")
        if drafting[target] is not None:
            raise check.fail(where, f"arm {target!r} drafts for {drafting[target]!r} itself; name the arm without a drafter")


def _arm(check: _Checker, table: dict[str, Any], where: str, default_tokenizer: str | None, folder: Path) -> Arm:
    check.keys(table, where, ARM_KEYS)
    for key in ("id", "model"):
        if key not in table:
            raise check.fail(f"{where}.{key}", "missing; every arm needs id, base_url (or base_urls) and model")
    arm_id = check.text(table["id"], f"{where}.id")
    if not ARM_ID.fullmatch(arm_id):
        raise check.fail(f"{where}.id", f"{arm_id!r} is not a valid id; use letters, digits, '.', '_' and '-'")
    base_urls, metrics_urls = _replicas(check, table, where, arm_id)
    base_url = base_urls[0] if base_urls else check.url(table["base_url"], f"{where}.base_url", arm_id)
    api = check.choice(table.get("api", Api.CHAT), f"{where}.api", Api, 'must be "chat" or "completions"')
    key_env = table.get("api_key_env")
    if key_env is not None and not ENV_NAME.fullmatch(check.text(key_env, f"{where}.api_key_env")):
        problem = "must NAME an environment variable (like BF16_API_KEY), never hold the key"
        raise check.fail(f"{where}.api_key_env", problem)
    metrics_url = table.get("metrics_url")
    if metrics_url is not None:
        metrics_url = check.url(metrics_url, f"{where}.metrics_url", arm_id)
    extra_body = check.extra_body(table.get("extra_body", {}), f"{where}.extra_body")
    arm = Arm(
        id=arm_id,
        label=check.text(table.get("label", arm_id), f"{where}.label"),
        base_url=base_url,
        model=check.text(table["model"], f"{where}.model"),
        api=api,
        api_key_env=key_env,
        metrics_url=metrics_urls[0] if metrics_urls else metrics_url or default_metrics_url(base_url),
        extra_body=scrub_secret_fields(extra_body),
        timeouts=check.timeouts(table.get("timeouts", {}), f"{where}.timeouts"),
        settings=check.settings(table.get("settings", {}), f"{where}.settings"),
        tokenizer=(
            check.tokenizer(table["tokenizer"], f"{where}.tokenizer", folder) if "tokenizer" in table
            else default_tokenizer
        ),
        base_urls=base_urls,
        metrics_urls=metrics_urls,
        drafts_for=check.text(table["drafts_for"], f"{where}.drafts_for") if "drafts_for" in table else None,
    )
    launch = _launch(check, table, where, arm)
    if launch is not None:
        arm.__dict__["_launch"] = launch
    if arm.extra_body != extra_body:
        # The archive gets the scrubbed extra_body; requests send this one (not a dataclass field,
        # so never archived). See `request_extra_body`.
        arm.__dict__["_extra_body_sent"] = extra_body
    return arm


def _launch(check: _Checker, table: dict[str, Any], where: str, arm: Arm) -> Launch | None:
    """An arm's `launch`, `ready_url` and `ready_timeout_s`; `{port}` only where a launch picks it."""
    if "launch" not in table:
        for key in ("ready_url", "ready_timeout_s"):
            if key in table:
                raise check.fail(f"{where}.{key}", "goes with launch (the command that starts the arm's engine); add launch or remove it")
        if PORT in arm.base_url or PORT in (arm.metrics_url or ""):
            raise check.fail(f"{where}.base_url", "holds {port}, which only a launched engine fills in; add launch or give the port")
        return None
    argv = table["launch"]
    if isinstance(argv, str):
        example = f'["llama-server", "-m", "model.gguf", "--port", "{PORT}"]'
        raise check.fail(f"{where}.launch", f"must be a list of strings (run without a shell), e.g. {example}")
    if not isinstance(argv, list) or not argv or not all(isinstance(item, str) and item for item in argv):
        raise check.fail(f"{where}.launch", "must be a non-empty list of non-empty strings: the command and its arguments")
    if arm.base_urls:
        raise check.fail(f"{where}.launch", "launches one engine; with replicas (base_urls) start the engines yourself")
    if any(PORT in item for item in argv) and PORT not in arm.base_url:
        raise check.fail(f"{where}.base_url", "launch listens on {port} (picked at the arm's turn): write base_url with {port} too")
    remember_launch_secrets(argv)  # a key on the command line is scrubbed from the engine log and the fingerprint
    ready_url = table.get("ready_url")
    if ready_url is not None:
        ready_url = check.url(ready_url, f"{where}.ready_url", arm.id)
    timeout = check.number(table.get("ready_timeout_s", DEFAULT_READY_TIMEOUT_S), f"{where}.ready_timeout_s", positive=True)
    return Launch(tuple(argv), ready_url, timeout)


def _replicas(check: _Checker, table: dict[str, Any], where: str, arm_id: str) -> tuple[list[str], list[str]]:
    """An arm's `base_urls` and `metrics_urls` (one per replica; default each replica's /metrics),
    or two empty lists for an arm with one `base_url`. One of base_url and base_urls, never both."""
    if "base_urls" not in table:
        if "base_url" not in table:
            raise check.fail(f"{where}.base_url", "missing; every arm needs id, base_url (or base_urls) and model")
        if "metrics_urls" in table:
            raise check.fail(f"{where}.metrics_urls", "goes with base_urls (one per replica); with one base_url use metrics_url")
        return [], []
    for key in ("base_url", "metrics_url"):
        if key in table:
            raise check.fail(f"{where}.{key}", f"give base_urls and metrics_urls for replicas, not {key} beside them")
    urls = table["base_urls"]
    if not isinstance(urls, list) or not urls:
        raise check.fail(f"{where}.base_urls", "must be a non-empty list of URLs, one per replica")
    base_urls = [check.url(url, f"{where}.base_urls[{i}]", arm_id) for i, url in enumerate(urls)]
    if len(set(base_urls)) != len(base_urls):
        raise check.fail(f"{where}.base_urls", "lists one URL twice; each replica is its own endpoint")
    given = table.get("metrics_urls", [default_metrics_url(url) for url in base_urls])
    if not isinstance(given, list) or len(given) != len(base_urls):
        raise check.fail(f"{where}.metrics_urls", f"must list one URL per base_urls entry ({len(base_urls)})")
    return base_urls, [check.url(url, f"{where}.metrics_urls[{i}]", arm_id) for i, url in enumerate(given)]


def request_extra_body(arm: Arm) -> dict[str, Any]:
    """The extra_body to send: the config's own values, where the archived copy has them scrubbed."""
    sent = arm.__dict__.get("_extra_body_sent")
    return sent if isinstance(sent, dict) else arm.extra_body


@lru_cache(maxsize=8)
def load_tokenizer(path: str) -> Any:
    """A Hugging Face `tokenizers` tokenizer from a tokenizer.json (read bounded, regular files
    only: `files.read_input`); OSError/ValueError if unusable."""
    payload = read_input(path, "tokenizer")
    try:
        return Tokenizer.from_buffer(payload)
    except Exception as exc:  # tokenizers raises its own Exception type for a bad file
        if isinstance(exc, OSError):
            raise
        raise ValueError(str(exc).splitlines()[0] if str(exc) else type(exc).__name__) from None


def default_metrics_url(base_url: str) -> str:
    """vLLM, SGLang and llama.cpp serve /metrics at the server root, beside /v1."""
    return f"{server_root(base_url)}/metrics"


def server_root(base_url: str) -> str:
    """The server's root URL: base_url without a trailing /v1."""
    root = base_url.rstrip("/")
    return root.removesuffix("/v1")


C = TypeVar("C", bound=Choice)  # an option's enum (`_Checker.choice`)


class _Checker:
    """Type checks that raise ConfigError naming the file and the dotted field."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def fail(self, where: str, problem: str) -> ConfigError:
        return ConfigError(f"{shown_path(self.path)}: {where}: {problem}")

    def keys(self, table: dict[str, Any], where: str, allowed: tuple[str, ...]) -> None:
        for key in table:
            if key not in allowed:
                field = f"{where}.{key}" if where else key
                raise self.fail(field, f"unknown key; allowed here: {', '.join(allowed)}")

    def table(self, value: Any, where: str) -> dict[str, Any]:
        if value is None:
            raise self.fail(where, f"missing; add a [{where}] table")
        if not isinstance(value, dict):
            raise self.fail(where, f"must be a table, got {_kind(value)}")
        return value

    def text(self, value: Any, where: str) -> str:
        if not isinstance(value, str) or not value.strip():
            raise self.fail(where, f"must be a non-empty string, got {_kind(value)}")
        return value

    def integer(self, value: Any, where: str, minimum: int) -> int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.fail(where, f"must be an integer, got {_kind(value)}")
        if value < minimum:
            raise self.fail(where, f"must be at least {minimum}, got {value}")
        return value

    def number(self, value: Any, where: str, positive: bool = False) -> float:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value:
            raise self.fail(where, f"must be a number, got {_kind(value)}")
        if value < 0 or (positive and value == 0) or value == float("inf"):
            bound = "greater than 0" if positive else "0 or more"
            raise self.fail(where, f"must be a finite number {bound}, got {value}")
        return float(value)

    def choice(self, value: Any, where: str, kind: type[C], expected: str = "") -> C:
        """The member of `kind` a string names; the problem says `expected` (default: every value)."""
        text = self.text(value, where)
        try:
            return kind(text)
        except ValueError:
            expected = expected or f"expected one of {', '.join(repr(member.value) for member in kind)}"
            raise self.fail(where, f"{expected}, got {text!r}") from None

    def boolean(self, value: Any, where: str) -> bool:
        if not isinstance(value, bool):
            raise self.fail(where, f"must be true or false, got {_kind(value)}")
        return value

    def url(self, value: Any, where: str, arm_id: str) -> str:
        """An http(s) URL with a host, a valid port, and no credentials, query or fragment.

        Checked here, before any endpoint is touched: a bad port or an empty host would otherwise
        surface as a connection error mid-recording, and credentials in a URL would be archived.
        """
        text = self.text(value, where)
        field = where.rsplit(".", 1)[-1]
        if PORT in text:  # a launched engine's port: checked with a stand-in, kept as written
            self.url(text.replace(PORT, "1"), where, arm_id)
            return text.rstrip("/")

        def bad(problem: str) -> ConfigError:
            return self.fail(where, f"{problem} (arm {arm_id!r}); fix {field}")

        if "@" in re.split(r"[/?#]", text.partition("://")[2], maxsplit=1)[0]:  # first, and without echoing them
            raise bad("holds credentials (user:password@): remove them, name the key's variable in api_key_env")
        if not text.startswith(("http://", "https://")):
            raise bad(f"must start with http:// or https://, got {text!r}")
        if any(ord(c) < 33 or ord(c) == 127 for c in text):
            raise bad("holds spaces or control characters")
        try:
            parts = urlsplit(text)
            port = parts.port
        except ValueError as exc:  # a port out of range or not a number, a malformed IPv6 host
            raise bad(f"is not a valid URL ({exc})") from None
        if not parts.hostname:
            raise bad(f"has no host: {text!r}")
        if port == 0:
            raise bad("port 0 is not a port")
        if parts.query or parts.fragment or "?" in text or "#" in text:
            raise bad("must not have a query or fragment (paths are appended to it)")
        return text.rstrip("/")

    def timeouts(self, value: Any, where: str) -> dict[str, float]:
        table = self.table(value, where)
        self.keys(table, where, TIMEOUT_KEYS)
        return {key: self.number(item, f"{where}.{key}", positive=True) for key, item in table.items()}

    def settings(self, value: Any, where: str) -> dict[str, str]:
        """[arms.settings]: free-form strings for what the endpoint cannot tell (quantization, drafter, flags)."""
        table = self.table(value, where)
        for key, item in table.items():
            if not isinstance(item, str) or not item.strip():
                raise self.fail(
                    f"{where}.{key}", f'must be a non-empty string, got {_kind(item)}; quote it, e.g. {key} = "Q4_0"'
                )
            if scrub_secret_flags(item) != item:
                raise self.fail(f"{where}.{key}", "holds a secret flag value (like --api-key X); never put keys in the config")
        return dict(table)

    def tokenizer(self, value: Any, where: str, folder: Path) -> str:
        """A tokenizer.json that loads; relative paths resolve against the config's folder."""
        path = Path(self.text(value, where)).expanduser()
        path = path if path.is_absolute() else folder / path
        if not path.is_file():
            raise self.fail(where, f"{str(path)!r} is not a file; point it at a Hugging Face tokenizer.json")
        try:
            load_tokenizer(str(path.resolve()))
        except (OSError, ValueError) as exc:
            raise self.fail(where, f"cannot load {str(path)!r} as a Hugging Face tokenizer.json: {exc}") from None
        return str(path.resolve())

    def extra_body(self, value: Any, where: str) -> dict[str, Any]:
        table = self.table(value, where)
        for key in RESERVED_BODY_KEYS:
            if key in table:
                problem = "is set by the recorder; remove it (model goes in the arm, prompts in [session])"
                raise self.fail(f"{where}.{key}", problem)
        return table


def _kind(value: Any) -> str:
    """TOML's name for a value's type, for error messages."""
    names = {bool: "a boolean", int: "an integer", float: "a float", str: "a string", list: "an array", dict: "a table"}
    return names.get(type(value), type(value).__name__)
