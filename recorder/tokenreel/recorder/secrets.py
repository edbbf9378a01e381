"""Secrets never leave this process: every known one is scrubbed from what is archived, printed or drawn.

THE SECRETS RULE: every secret this process knows (API keys read from api_key_env, extra_body
values whose names look secret, the argument after a secret flag of a launch command) is
scrubbed from a string BEFORE the string is cut, in everything archived, printed or drawn:
`scrub_secrets` is the one function, and `one_line`, the one place server text is cut, calls it
first. Credentials in URLs are refused at config load instead. Known secrets are kept for the
life of the process, never written.
"""

from __future__ import annotations

import re
from typing import Any

# A command-line flag whose value is a secret (--api-key X, --hf-token=X, --admin-api-key X): the
# fingerprint scrubs such values from launch commands, and the config refuses them in [arms.settings].
SECRET_FLAG = re.compile(
    r"(?<![\w-])(--?(?:[A-Za-z0-9_.-]*(?:api[_-]?key|secret|passw|credential)[A-Za-z0-9_.-]*"
    r"|(?:[A-Za-z0-9_.-]*[_.-])?token))(=|\s+)(\"[^\"]*\"|'[^']*'|\S+)",
    re.IGNORECASE,
)


def scrub_secret_flags(text: str) -> str:
    """The same command line with every secret flag's value replaced by ***."""
    return SECRET_FLAG.sub(lambda m: f"{m.group(1)}{m.group(2)}***", text)


# Names whose values are secrets (fingerprint JSON keys, extra_body fields) and values that look
# like keys whatever their name. A model's special tokens (bos_token...) are vocabulary, not secrets.
SECRET_KEY = re.compile(
    r"api[_-]?key|secret|passw|auth|credential|cookie|bearer|(^|[_-])(access_)?token$", re.IGNORECASE
)
VOCAB_TOKEN_KEY = re.compile(r"(bos|eos|eot|eog|pad|unk|sep|cls|mask|nl|fim_(pre|suf|mid|pad|rep|sep))_token", re.I)
# Keys' own prefixes are lower case and go on with a letter or digit: HF_HUB_OFFLINE=1 is no key.
SECRET_VALUE = re.compile(r"^(?:(?:sk-|hf_|ghp_|gho_|github_pat_|xox[abp]-)[A-Za-z0-9]|(?i:bearer)\s)")
# An environment assignment of a launch command (HF_TOKEN=..., HF_HUB_OFFLINE=1): kept verbatim
# unless its name or its value is a secret by the rules above.
ENV_ASSIGNMENT = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)=(.*)", re.DOTALL)
SECRET_MASK = "***"

# Every secret this process knows (the module docstring's rule).
_KNOWN_SECRETS: set[str] = set()


def remember_secret(value: str | None) -> None:
    """Add a secret to the set scrubbed from every message (empty values are ignored)."""
    if value:
        _KNOWN_SECRETS.add(value)


def scrub_secrets(text: str) -> str:
    """`text` with every known secret replaced by *** (longest first, so none survives in part)."""
    for secret in sorted(_KNOWN_SECRETS, key=len, reverse=True):
        if secret in text:
            text = text.replace(secret, SECRET_MASK)
    return text


def known_secrets() -> list[str]:
    """The secrets to mask in streamed text, longest first."""
    return sorted(_KNOWN_SECRETS, key=len, reverse=True)


def looks_secret(name: str) -> bool:
    """A field name whose value is a secret (api_key, client_secret, access_token; not max_tokens)."""
    return bool(SECRET_KEY.search(name)) and not VOCAB_TOKEN_KEY.fullmatch(name)


def scrub_env_assignment(text: str) -> str:
    """NAME=VALUE with the value masked (and remembered) where the name or the value looks
    secret; else as is."""
    match = ENV_ASSIGNMENT.fullmatch(text)
    if match is None or not match[2] or not (looks_secret(match[1]) or SECRET_VALUE.match(match[2])):
        return text
    remember_secret(match[2])
    return f"{match[1]}={SECRET_MASK}"


def scrub_secret_fields(value: Any) -> Any:
    """A copy of a JSON-like value whose string values under secret-looking names (at any depth),
    and string values that look like keys, are replaced by ***; each such value is remembered."""
    if isinstance(value, dict):
        out = {}
        for key, item in value.items():
            if isinstance(item, str) and looks_secret(str(key)):
                remember_secret(item)
                out[key] = SECRET_MASK
            else:
                out[key] = scrub_secret_fields(item)
        return out
    if isinstance(value, list):
        return [scrub_secret_fields(item) for item in value]
    if isinstance(value, str) and len(value) >= 16 and SECRET_VALUE.match(value):  # a key, not a stop string "sk-"
        remember_secret(value)
        return SECRET_MASK
    return value


def is_secret_flag(text: str) -> bool:
    """`--api-key` alone: the argument after it is a secret."""
    return text.startswith("-") and bool(SECRET_FLAG.fullmatch(text + " x"))


def remember_launch_secrets(argv: list[str]) -> None:
    """Remember every key a launch command carries, so the engine's own echo of its arguments or
    environment is scrubbed too: the item after a secret flag (`--api-key X`), the value of a
    secret flag given as one item (`--api-key=X`), a secret environment assignment (`HF_TOKEN=X`)."""
    for i, item in enumerate(argv):
        if i and is_secret_flag(argv[i - 1]):
            remember_secret(item)
            continue
        flag = SECRET_FLAG.fullmatch(item)
        if flag is not None and flag[2] == "=":
            remember_secret(flag[3].strip("\"'"))
        scrub_env_assignment(item)


def mask_secrets(texts: list[str]) -> int:
    """Mask every known secret in streamed text, in place, even one split across events.

    Each character of a secret becomes "*", so every event keeps its length (its characters are
    drawn at the same moments and positions in the video); returns how many were masked.
    """
    secrets = known_secrets()
    if not secrets or not texts:
        return 0
    joined = "".join(texts)
    spans = [(m, m + len(secret)) for secret in secrets for m in _find_all(joined, secret)]
    if not spans:
        return 0
    chars = list(joined)
    for start, end in spans:
        chars[start:end] = "*" * (end - start)
    masked, at = "".join(chars), 0
    for i, text in enumerate(texts):
        texts[i], at = masked[at : at + len(text)], at + len(text)
    return len(spans)


def _find_all(text: str, part: str) -> list[int]:
    found, at = [], text.find(part)
    while at >= 0:
        found.append(at)
        at = text.find(part, at + 1)
    return found


def one_line(text: str, limit: int = 300) -> str:
    """Scrub secrets, collapse whitespace, then cut long server messages: run errors are one line.

    The one place server text is cut; scrubbing comes first so that no part of a key survives.
    """
    text = " ".join(scrub_secrets(text).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."
