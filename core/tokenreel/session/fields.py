"""Typed access to the fields of parsed JSON, each failure an ArchiveError naming its dotted path.

The session loader (`tokenreel.session.validate`) reads every field through it, so a bad file names the
first bad field ("runs[3].chunks.t_ns[7]: goes back in time") rather than a traceback.
"""

from __future__ import annotations

import math
from enum import Enum
from typing import Any, Callable, TypeVar, overload

from tokenreel.session.model import ArchiveError

T = TypeVar("T")
D = TypeVar("D")


class Required(Enum):
    """`FieldReader.get`'s default when a field has none: its absence is an error."""

    FIELD = 0


class FieldReader:
    """Typed field access that raises ArchiveError with a dotted field path."""

    def __init__(self, path: str) -> None:
        self.path = path

    def fail(self, where: str, problem: str) -> ArchiveError:
        return ArchiveError(self.path, where, problem)

    def obj(self, value: Any, where: str) -> dict[str, Any]:
        if not isinstance(value, dict):
            raise self.fail(where, f"expected an object, got {type(value).__name__}")
        return value

    @overload
    def get(self, data: dict[str, Any], key: str, where: str, kind: Callable[[Any, str], T]) -> T: ...

    @overload
    def get(self, data: dict[str, Any], key: str, where: str, kind: Callable[[Any, str], T], default: D) -> T | D: ...

    def get(self, data: dict[str, Any], key: str, where: str, kind: Callable[[Any, str], T],
            default: D | Required = Required.FIELD) -> T | D:
        """`kind` of data[key] (its dotted field named on failure); `default` when absent, else absence fails."""
        if key not in data:
            if isinstance(default, Required):
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
