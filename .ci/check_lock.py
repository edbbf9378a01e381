"""Check that a venv is complete, consistent, and exactly what constraints.txt locks.

    .venv/bin/python .ci/check_lock.py            # make test runs this before pytest
    VENV/bin/python .ci/check_lock.py --subset    # a venv that holds the wheel and its dependencies only

Run it with the venv's own python. Two checks, both must pass:
  1. `pip check`: every installed package's requirements are installed, at versions they accept;
  2. `pip freeze --all --exclude-editable` against the lock, names normalised (PEP 503) and versions
     compared as versions: a package installed but not locked, locked but not installed, or at
     another version is listed, all of them in one list, and the exit code is 1.
With --subset, packages of the lock that are not installed are fine (the runtime dependencies alone,
without the `test` extra), as are the venv's own pip and setuptools and the project itself; every
other installed package must still be in the lock at its version.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tomllib
from pathlib import Path

LOCK = Path(__file__).resolve().parents[1] / "constraints.txt"
PROJECT = "tokenreel"
VENV_TOOLS = {"pip", "setuptools", "wheel"}
# Extras the lock pins but the venv need not hold (pyproject's optional-dependencies of that name).
OPTIONAL_EXTRAS = ("gpu", "sharegpt")
PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)(?:\[[^\]]*\])?\s*===?\s*([^\s;#]+)")


def canonicalize_name(name: str) -> str:
    """PEP 503: Pygments, pygments and prometheus_client, prometheus-client are one name each."""
    return re.sub(r"[-_.]+", "-", name).lower()


def same_version(a: str, b: str) -> bool:
    """Equal as versions (1.0 == 1.0.0); `packaging` is absent from a runtime-only venv, then as text."""
    try:
        from packaging.version import InvalidVersion, Version
    except ImportError:
        return a == b
    try:
        return Version(a) == Version(b)
    except InvalidVersion:
        return a == b


def optional_packages(pyproject: Path) -> set[str]:
    """The packages of OPTIONAL_EXTRAS: locked, allowed to be absent, checked when installed."""
    extras = tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"].get("optional-dependencies", {})
    return {canonicalize_name(re.split(r"[\s<>=!~;\[]", item, maxsplit=1)[0])
            for extra in OPTIONAL_EXTRAS for item in extras.get(extra, [])}


def read_lock(path: Path) -> dict[str, str]:
    """name -> version for each `name==version` line; any other requirement is an error in a lock."""
    pins: dict[str, str] = {}
    for number, raw in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        line = raw.split(" #", 1)[0].strip()
        if not line or line.startswith("#"):
            continue
        match = PIN.match(line)
        if match is None:
            sys.exit(f"check_lock: {path.name}:{number}: not a `name==version` pin: {raw.strip()}")
        pins[canonicalize_name(match.group(1))] = match.group(2)
    return pins


def pip(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pip", "--disable-pip-version-check", *args],
        capture_output=True, text=True, check=False,
    )


def read_installed() -> tuple[dict[str, str], list[str]]:
    """name -> version from pip freeze, and the lines that are not plain pins (URLs, VCS, ...)."""
    freeze = pip("freeze", "--all", "--exclude-editable")
    if freeze.returncode != 0:
        sys.exit(f"check_lock: pip freeze failed:\n{freeze.stderr}")
    installed: dict[str, str] = {}
    unpinned: list[str] = []
    for raw in freeze.stdout.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        match = PIN.match(line)
        if match is None:  # `name @ URL`: a direct-URL install (a wheel file, a VCS checkout)
            unpinned.append(line)
        else:
            installed[canonicalize_name(match.group(1))] = match.group(2)
    return installed, unpinned


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lock", type=Path, default=LOCK, help="the lock file (default: %(default)s)")
    parser.add_argument("--subset", action="store_true",
                        help="allow locked packages to be absent (a runtime-only venv); skip pip/setuptools/the project")
    args = parser.parse_args()

    failed = False
    check = pip("check")
    if check.returncode != 0:
        failed = True
        print(f"check_lock: `pip check` found broken requirements in {sys.prefix}:", file=sys.stderr)
        print("  " + (check.stdout + check.stderr).strip().replace("\n", "\n  "), file=sys.stderr)

    lock = read_lock(args.lock)
    installed, unpinned = read_installed()
    ignored = (VENV_TOOLS | {PROJECT}) if args.subset else set()
    optional = optional_packages(LOCK.with_name("pyproject.toml"))
    rows: list[tuple[str, str, str]] = []  # (name, installed, locked)
    for name in sorted(set(lock) | set(installed)):
        if name in ignored:
            continue
        have, want = installed.get(name), lock.get(name)
        if have is None and (args.subset or name in optional):
            continue
        if have is None or want is None or not same_version(have, want):
            rows.append((name, have or "(not installed)", want or "(not in the lock)"))
    for line in unpinned:
        if canonicalize_name(line.split("@", 1)[0].strip()) not in ignored:
            rows.append((line, "(from a URL)", "(not in the lock)"))

    if rows:
        failed = True
        width = max(len(name) for name, _, _ in rows)
        what = "installed packages outside" if args.subset else "the venv does not match"
        print(f"check_lock: {what} {args.lock.name}: {len(rows)} package(s) differ", file=sys.stderr)
        print(f"  {'package':<{width}}  {'installed':<20}  locked", file=sys.stderr)
        for name, have, want in rows:
            print(f"  {name:<{width}}  {have:<20}  {want}", file=sys.stderr)
        print("  Fix: reinstall from the lock (make clean && make), or, if pyproject.toml changed its "
              "dependencies, regenerate the lock with `make lock`.", file=sys.stderr)
    if failed:
        return 1
    compared = sum(1 for name in installed if name not in ignored)
    print(f"check_lock: pip check ok; {compared} installed packages match {args.lock.name}"
          + (" (subset)" if args.subset else f" ({len(lock)} locked)"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
