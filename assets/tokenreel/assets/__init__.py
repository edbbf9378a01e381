"""Data shipped inside the package: fonts (with licences), prompt suites, themes, example configs.

Found with importlib.resources, so they are the same files from a wheel, an sdist or a checkout.
A file that is missing means a broken installation, which `MissingAsset` says in one line.
"""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path


class MissingAsset(FileNotFoundError):
    """A file tokenreel ships is not where the package should have it."""


def folder(kind: str) -> Path:
    """One kind of asset (`fonts`, `prompts`, `themes`, `configs`) as a real directory.

    Pillow opens fonts by file name, so the package must be installed as files (pip always
    does); a zipped install is reported rather than half-working.
    """
    path = Path(str(files(__name__).joinpath(kind)))
    if not path.is_dir():
        raise MissingAsset(f"tokenreel's installation lacks its {kind} folder ({path}); reinstall tokenreel")
    return path


def names(kind: str, suffix: str) -> list[str]:
    """The stems of one kind's files, sorted, e.g. names('themes', '.json') -> ['dark', 'light']."""
    return sorted(p.stem for p in folder(kind).glob(f"*{suffix}"))


def file(kind: str, name: str) -> Path:
    """One shipped file; MissingAsset names it when the installation lacks it."""
    path = folder(kind) / name
    if not path.is_file():
        raise MissingAsset(f"tokenreel's installation lacks {kind}/{name}; reinstall tokenreel")
    return path
