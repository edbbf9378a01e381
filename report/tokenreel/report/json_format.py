"""The report as JSON: the report's data as it is (full precision), indented for diffs."""

from __future__ import annotations

from typing import Any

import orjson


def to_json(report: dict[str, Any]) -> str:
    return orjson.dumps(report, option=orjson.OPT_INDENT_2).decode() + "\n"
