"""The one error a prompt suite raises, apart from the suites so that every reader of one shares it."""

from __future__ import annotations


class PromptError(ValueError):
    """A prompt suite that cannot be used; one line naming the source and what to fix."""
