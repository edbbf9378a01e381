"""The config reference page (docs/config.md), written from the config's own schema
(`config_schema`) so that it cannot drift from what the loader accepts.

    python -m tokenreel.recorder.config_reference docs/config.md          # write it
    python -m tokenreel.recorder.config_reference docs/config.md --check  # exit 1 when stale
"""

from __future__ import annotations

import argparse
import sys
import tomllib
from pathlib import Path

from tokenreel.recorder.config_schema import TABLES, Key, Table

INTRO = """# Config reference

A ladder config is one TOML file: a `[session]` table with what every arm shares, then one
`[[arms]]` table per arm in ladder order. `tokenreel init` writes a commented starter;
`tokenreel record --config FILE --check` checks a config and its endpoints without recording.
Every mistake is one line naming the file and the key, before any endpoint is touched.

```toml
[session]
name = "my-ladder"
max_tokens = 512

[[arms]]
id = "bf16"
base_url = "http://127.0.0.1:8000/v1"
model = "Qwen/Qwen3-8B"

[arms.settings]
quantization = "bf16"
```

This page is generated from the loader's schema (`python -m tokenreel.recorder.config_reference
docs/config.md`); a test fails when it is stale.
"""


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def _is_value(text: str) -> bool:
    """A default written as a TOML value (shown as code), not in words ("the id")."""
    try:
        tomllib.loads(f"x = {text}")
    except tomllib.TOMLDecodeError:
        return False
    return True


def _row(key: Key) -> str:
    default = "required" if not key.default else f"`{key.default}`" if _is_value(key.default) else key.default
    return f"| `{key.name}` | {key.kind} | {_cell(default)} | `{_cell(f'{key.name} = {key.example}')}` | {_cell(key.doc)} |"


def _table(table: Table) -> list[str]:
    lines = [f"## `{table.header}`", "", table.doc, ""]
    if table.free:
        return [*lines, f"Keys of your choosing; values: {table.free}.", ""]
    return [*lines, "| Key | Type | Default | Example | What it is for |", "| --- | --- | --- | --- | --- |",
            *(_row(key) for key in table.keys), ""]


def reference() -> str:
    """The whole page, markdown."""
    lines = [INTRO]
    for table in TABLES:
        lines.extend(_table(table))
    return "\n".join(lines).rstrip("\n") + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Write the config reference page from the config's schema.")
    parser.add_argument("path", type=Path, help="the page to write, e.g. docs/config.md")
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 when the page differs")
    args = parser.parse_args(argv)
    text = reference()
    if args.check:
        current = args.path.read_text(encoding="utf-8") if args.path.is_file() else ""
        if current != text:
            print(f"{args.path}: stale; regenerate it with python -m tokenreel.recorder.config_reference {args.path}", file=sys.stderr)
            return 1
        return 0
    args.path.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
