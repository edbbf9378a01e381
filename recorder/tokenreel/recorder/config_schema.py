"""The recording config's keys, declared once: each table's keys with their TOML type, default,
an example and what they are for.

The loader (`config`) allows exactly these keys in each table, the config reference page
(`config_reference`, docs/config.md) and `tokenreel init`'s comments are written from them, so
a key cannot be accepted without its documentation. Defaults of the [session] keys that are
`Settings` fields are read from `Settings` itself.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

from tokenreel.session.model import Settings

# connect: TCP+TLS; first_token: send -> first text (covers prefill of long prompts on a cold
# server); between_chunks: a stall after the first token; total: the whole run (8K tokens at
# 10 tok/s fits).
DEFAULT_TIMEOUTS = {"connect": 10.0, "first_token": 300.0, "between_chunks": 60.0, "total": 1800.0}
DEFAULT_READY_TIMEOUT_S = 600.0


@dataclass(frozen=True)
class Key:
    """One config key: `kind` is its TOML type, `default` how an absent key reads ("" when the
    key is required), `example` a TOML value the loader accepts, `doc` what it is for."""

    name: str
    kind: str
    default: str
    example: str
    doc: str


@dataclass(frozen=True)
class Table:
    """A TOML table of the config: `free` tables take keys of the user's choosing (`keys` then
    holds none and `value` says what each value is)."""

    header: str
    doc: str
    keys: tuple[Key, ...] = ()
    free: str = ""

    def names(self) -> tuple[str, ...]:
        return tuple(key.name for key in self.keys)


REQUIRED = ""


def toml_value(value: object) -> str:
    """A Python default as TOML writes it (true, 30.0, "fresh")."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return f'"{value}"'
    return repr(value)


_SETTINGS_DEFAULTS = {f.name: getattr(Settings(), f.name) for f in fields(Settings)}


def _setting(name: str, kind: str, example: str, doc: str) -> Key:
    """A [session] key that is a `Settings` field: its default is the field's."""
    return Key(name, kind, toml_value(_SETTINGS_DEFAULTS[name]), example, doc)


TIMEOUT_DOCS = {
    "connect": "Seconds to open the connection (TCP and TLS).",
    "first_token": "Seconds from sending the request to its first text: covers the prefill of a long prompt on a cold server.",
    "between_chunks": "Seconds the stream may stall after its first token before the run fails as stalled.",
    "total": "Seconds for the whole run.",
}

TIMEOUTS = tuple(
    Key(name, "float", toml_value(seconds), toml_value(seconds * 2), TIMEOUT_DOCS[name]) for name, seconds in DEFAULT_TIMEOUTS.items()
)

SESSION = (
    Key("name", "string", "the config file's name without .toml", '"my-ladder"',
        "The session's name: the report's title and the default session file, sessions/NAME.json."),
    _setting("prompts", "string", '"builtin:ladder4"',
             "The prompt suite: builtin:mixed, builtin:ladder4 or builtin:speed, random:N (N random tokens), sharegpt:N"
             " (N ShareGPT conversations, seeded; the sharegpt extra), the graded suites humaneval and arith:N (see"
             " grading.md), or a .jsonl file relative to the config (one prompt a line: id, category, messages or prompt)."),
    _setting("max_tokens", "integer", "512",
             "Output tokens per run. With ignore_eos every arm decodes exactly this many, so the arms compare like for like."),
    _setting("ignore_eos", "boolean", "true",
             "Ask the engine to keep decoding past its end-of-sequence token, so each run is max_tokens long"
             " (forced length); a run that still stops short is kept but marked not like-for-like."),
    Key("length", "string", '"forced"', '"natural"',
        '"forced": every run decodes max_tokens (ignore_eos), so decode speeds compare like for like; "natural": runs'
        " stop where the model ends (max_tokens a cap), and the report adds tokens and time per task. Sets ignore_eos."),
    _setting("temperature", "float", "0.0", "Sampling temperature; 0 (greedy) lets the report check that the arms give the same answer."),
    _setting("warmup", "integer", "1",
        "Unmeasured runs per prompt and arm before the measured ones (they fill caches and compile kernels)."),
    _setting("repeats", "integer", "3", "Measured runs per prompt and arm; the report quotes their median and spread."),
    _setting("idle_wait_s", "float", "30.0",
             "Seconds to wait before a run for the endpoint to have no other request running or waiting (its /metrics);"
             " a run recorded on a busy endpoint is flagged."),
    Key("timeouts", "table", "see [session.timeouts]", "{ first_token = 600.0 }",
        "Every arm's request timeouts (seconds); an arm's own [arms.timeouts] wins."),
    Key("tokenizer", "string", "none", '"tokenizer.json"',
        "A Hugging Face tokenizer.json (relative to the config) to count tokens with when an endpoint streams no running count."),
    _setting("client_busy_p99_ms", "float", "5.0",
             "A run whose client read the network later than this (99th percentile, milliseconds) is flagged client_busy."),
    _setting("host_pressure_pct", "float", "20.0",
             "Local endpoints: other processes' share of the engine host's CPU time above which a run is flagged host_contended."),
    _setting("host_wait_s", "float", "10.0",
             "Local endpoints: seconds to wait before a run for the host's CPU load to fall below host_pressure_pct;"
             " 0 reads no load before a run (a run is then flagged by the load during it alone)."),
    _setting("gpu_util_pct", "float", "5.0",
             "Local endpoints: GPU utilisation above which (or another process on the GPU) an arm is flagged before it records."),
    _setting("gpu_wait_s", "float", "60.0", "Local endpoints: seconds to wait before an arm for its GPU to be free."),
    _setting("prompt_cache", "string", '"engine"',
             '"fresh": a full prefill every run where the request can ask for one (llama.cpp cache_prompt false, a'
             ' vLLM cache_salt of its own); "engine": the engines\' defaults, so a repeated prompt may hit the prefix cache.'),
    Key("hardware", "string or table", "none", '"1x H200 141 GB"',
        "What every arm ran on (no endpoint says it); kept with each arm's settings. A table (see [session.hardware])"
        " also sets the GPUs' memory bandwidth for the roofline."),
    Key("ray_resources", "array of strings", "[]", '["gpu0", "gpu1"]',
        "record --ray: the Ray custom resource that places each replica's recorder worker, one per replica in base_urls order;"
        " empty places each worker on the node serving its replica."),
)

HARDWARE = (
    Key("name", "string", "none", '"1x RTX PRO 6000 Blackwell"', "What every arm ran on, as [session] hardware's string form."),
    Key("bandwidth_gbps", "float", "the datasheet figure of the GPU NVML names (or `name`)", "1792.0",
        "The GPUs' memory bandwidth in GB/s (all of an arm's GPUs together), for each arm's roofline: for a card"
        " tokenreel's datasheet table lacks or gets wrong."),
)

ARM = (
    Key("id", "string", REQUIRED, '"nvfp4"', "The arm's id: letters, digits, '.', '_' and '-'; unique in the config."),
    Key("label", "string", "the id", '"Quantized · NVFP4"', "The arm's name in the report and the video."),
    Key("base_url", "string", REQUIRED, '"http://127.0.0.1:8000/v1"',
        "The OpenAI-compatible endpoint, up to /v1; {port} when launch starts the engine on a free port. Give it or base_urls."),
    Key("model", "string", REQUIRED, '"Qwen/Qwen3-8B"', "The model name the endpoint serves (its /v1/models id)."),
    Key("api",
        "string", '"chat"', '"completions"', '"chat" sends /v1/chat/completions; "completions" sends /v1/completions with the raw prompt.'),
    Key("api_key_env", "string", "none", '"NVFP4_API_KEY"',
        "The NAME of the environment variable holding the endpoint's key; never the key itself."),
    Key("metrics_url", "string", "the server root's /metrics", '"http://127.0.0.1:8000/metrics"',
        "The engine's Prometheus metrics: the idle gate, spec-decode counters and engine gauges come from it."),
    Key("extra_body", "table", "{}", '{ top_k = 1 }', "Fields merged into every request's JSON body (see [arms.extra_body])."),
    Key("timeouts", "table", "[session.timeouts]", "{ total = 3600.0 }",
        "This arm's request timeouts, over the session's (see [arms.timeouts])."),
    Key("settings", "table", "{}", '{ quantization = "NVFP4" }', "What the endpoint cannot tell about itself (see [arms.settings])."),
    Key("tokenizer", "string", "[session] tokenizer", '"tokenizer.json"', "This arm's tokenizer.json, over the session's."),
    Key("base_urls", "array of strings", "[]", '["http://gpu0:8000/v1", "http://gpu1:8000/v1"]',
        "Replicas: one endpoint per GPU or node serving this configuration, instead of base_url; every arm needs as many."),
    Key("metrics_urls", "array of strings", "each base_urls entry's /metrics", '["http://gpu0:8000/metrics", "http://gpu1:8000/metrics"]',
        "With base_urls: one metrics URL per replica, in the same order."),
    Key("launch", "array of strings", "none (the engine is already running)", '["llama-server", "-m", "model.gguf", "--port", "{port}"]',
        "The command that starts this arm's engine at its turn (run without a shell) and stops it after; {port} is a free port."),
    Key("ready_url", "string", "base_url's /models", '"http://127.0.0.1:{port}/health"',
        "With launch: the URL that answers 200 once the engine serves."),
    Key("ready_timeout_s", "float", toml_value(DEFAULT_READY_TIMEOUT_S), "1200.0", "With launch: seconds to wait for ready_url."),
    Key("drafts_for", "string", "none", '"nvfp4"',
        "The arm that runs the same target model without this arm's drafter: the report checks this arm repeats its answers."),
)

TABLES = (
    Table("[session]", "Settings shared by every arm: the prompts, the forced length, warmup and repeats, and the gates.", SESSION),
    Table("[session.timeouts]", "Request timeouts for every arm, in seconds.", TIMEOUTS),
    Table("[session.hardware]", "What every arm ran on, as a table: `hardware = { name = \"1x H200\", bandwidth_gbps = 4800.0 }`"
          " or `hardware.bandwidth_gbps = 4800.0`.", HARDWARE),
    Table("[[arms]]", "One table per arm, in ladder order: the first arm is the baseline the others are compared with.", ARM),
    Table("[arms.timeouts]", "One arm's request timeouts, over [session.timeouts].", TIMEOUTS),
    Table("[arms.settings]", "What an endpoint cannot tell about itself (quantization, drafter, engine flags), shown in the report"
          " beside the arm; two arms whose endpoints answer alike are told apart by it.",
          free='non-empty strings, e.g. quantization = "NVFP4", speculative = "eagle3 k=4"; never a secret flag such as --api-key'),
    Table("[arms.extra_body]", "Fields merged into every request's JSON body, e.g. an engine's own sampling or"
          " speculative options.",
          free="any TOML value, e.g. top_k = 1; model, messages, prompt and stream are the recorder's own and refused"),
)

SESSION_KEYS = tuple(key.name for key in SESSION)
HARDWARE_KEYS = tuple(key.name for key in HARDWARE)
ARM_KEYS = tuple(key.name for key in ARM)
TIMEOUT_KEYS = tuple(DEFAULT_TIMEOUTS)


def key_doc(table: tuple[Key, ...], name: str) -> str:
    """What one key is for (`tokenreel init` writes it as the key's comment)."""
    return next(key.doc for key in table if key.name == name)
