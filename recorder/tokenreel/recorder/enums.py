"""The recorder's enumerated values, as str-valued enums: the TOML, the archive and every message
hold the same strings as before, while the code compares members, not spellings."""

from __future__ import annotations

from enum import StrEnum


class Choice(StrEnum):
    """A str-valued option: it equals, hashes, prints and reprs as its string, so a message that
    shows one (`session_file.config_changes`) reads as it did when it was a plain str."""

    def __repr__(self) -> str:
        return repr(self.value)


class Api(Choice):
    """An arm's `api`: the OpenAI endpoint its requests go to (`request_body.completions_url`)."""

    CHAT = "chat"
    COMPLETIONS = "completions"


class PromptCache(Choice):
    """`session.prompt_cache` (`Settings.prompt_cache`): a fresh prefill every run where a request
    can ask for one (llama.cpp `cache_prompt: false`), or the engines' defaults."""

    FRESH = "fresh"
    ENGINE = "engine"


class Length(Choice):
    """`session.length`: every run decodes max_tokens past end-of-sequence (forced: `ignore_eos`,
    so decode speeds compare like for like), or stops where the model ends (natural: what a task
    really costs), `max_tokens` then a cap. The session keeps it as `Settings.ignore_eos`."""

    FORCED = "forced"
    NATURAL = "natural"


class EngineKind(Choice):
    """The engine an endpoint's answers name (`fingerprint.engine_of`); UNKNOWN when none does."""

    VLLM = "vllm"
    SGLANG = "sglang"
    LLAMACPP = "llamacpp"
    UNKNOWN = ""

    @classmethod
    def named(cls, text: str) -> EngineKind:
        """The kind a stored string names (an archived fingerprint summary); UNKNOWN for any other."""
        try:
            return cls(text)
        except ValueError:
            return cls.UNKNOWN
