"""Every file tokenreel reads or writes goes through here: one bounded reader, one atomic writer.

Why: a theme, logo, config, prompt file or session that is `/dev/zero` would be read until the
kernel kills the process, a FIFO would block forever, and an output written in place is left
truncated under its final name by a full disk or a kill. So an input is read only
from a regular file (symlinks resolved) of at most its kind's cap (`INPUTS`, the one place the
caps are stated), and anything else is refused before a byte is read, without blocking. An
output is written to a temporary file beside it, fsynced and renamed over it, so its final name
holds the old file or the whole new one; an output that exists and is not a regular file (a
device, a FIFO, a folder) is refused, and a symlinked output is written through to its target,
so the link stays a link.
"""

from __future__ import annotations

import os
import stat
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from tokenreel.base.safe_text import shown_path


@dataclass(frozen=True)
class InputKind:
    """What a file is, for the one line that refuses it, and the most bytes read of it."""

    what: str
    limit: int


INPUTS: dict[str, InputKind] = {
    "session": InputKind("a session file", 256 << 20),
    "manifest": InputKind("a render manifest", 256 << 20),
    "config": InputKind("a TOML config", 1 << 20),
    "prompts": InputKind("a JSONL prompt file", 64 << 20),
    "planned answers": InputKind("a JSONL of planned answers", 64 << 20),
    # `prompts import` reads a whole set (often Parquet, with columns it does not need) to write a suite
    "prompt set": InputKind("a prompt set (JSONL, CSV or Parquet)", 512 << 20),
    # `tokenreel import`: a peer's per-request results (vllm bench serve, AIPerf), texts included
    "peer result": InputKind("a benchmark result file", 512 << 20),
    "tokenizer": InputKind("a Hugging Face tokenizer.json", 128 << 20),
    "theme": InputKind("a JSON theme file", 1 << 20),
    "logo": InputKind("a PNG logo", 32 << 20),
}


def read_input(path: str | os.PathLike[str], kind: str) -> bytes:
    """The bytes of an input file of `kind` (a key of INPUTS), or an OSError whose message is
    one line for people, without the path (the caller names the option and the file).

    Only a regular file (a symlink to one is fine) within the kind's cap is read; a FIFO, a
    device, a socket or a folder is refused from its stat, and the open is non-blocking should
    the path be swapped for a FIFO since."""
    spec = INPUTS[kind]
    try:
        _require_regular(os.stat(path).st_mode, spec.what)
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        with os.fdopen(fd, "rb") as handle:
            _require_regular(os.fstat(handle.fileno()).st_mode, spec.what)
            payload = handle.read(spec.limit + 1)
    except FileNotFoundError:
        raise FileNotFoundError("no such file") from None
    except OSError as exc:
        if exc.errno is None:
            raise
        raise OSError(f"cannot read: {exc.strerror}") from None
    if len(payload) > spec.limit:
        raise OSError(f"larger than {spec.limit >> 20} MiB, the most tokenreel reads as {spec.what}")
    return payload


def _require_regular(mode: int, what: str) -> None:
    if stat.S_ISDIR(mode):
        raise OSError(f"is a directory, expected {what}")
    if not stat.S_ISREG(mode):
        raise OSError(f"is not a regular file ({file_kind(mode)}), expected {what}")


def file_kind(mode: int) -> str:
    """'a FIFO', 'a character device'...: what a non-regular file is, for one-line errors."""
    kinds = {stat.S_ISDIR: "a directory", stat.S_ISFIFO: "a FIFO", stat.S_ISCHR: "a character device",
             stat.S_ISBLK: "a block device", stat.S_ISSOCK: "a socket", stat.S_ISREG: "a regular file"}
    return next((name for test, name in kinds.items() if test(mode)), "not a file")


# ---------------------------------------------------------------------------------------------
# Writing


def output_target(path: str | os.PathLike[str], option: str = "--out") -> Path:
    """The file an output really goes to: symlinks resolved (the link is written through, not
    replaced). ValueError (one line naming the option) when it exists and is not a regular file:
    replacing a device node or a FIFO with our file is never what was meant, --force or not."""
    target = Path(os.path.realpath(path))
    try:
        mode = os.stat(target).st_mode
    except FileNotFoundError:
        return target
    if not stat.S_ISREG(mode):
        raise ValueError(f"{option} {shown_path(path)}: exists and is {file_kind(mode)}, not a regular file; "
                         f"remove it or choose another {option}")
    return target


def write_atomic(path: str | os.PathLike[str], data: bytes | Iterable[bytes], option: str = "--out") -> Path:
    """Write `data` (bytes, or pieces written in order) so that the output's name holds the old file or all of the new one, never a
    part (a temporary `.<name>.XXXXXXXX.tmp` beside it, fsynced, renamed over it; removed if
    anything fails). A new file gets the umask's mode, a replaced one keeps its own. Returns the
    file written (the symlink's target for a symlink)."""
    target = output_target(path, option)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        os.fchmod(fd, _mode_for(target))
        with os.fdopen(fd, "wb") as handle:
            if isinstance(data, bytes):
                handle.write(data)
            else:
                handle.writelines(data)
        commit(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return target


def commit(staged: str | os.PathLike[str], target: str | os.PathLike[str]) -> None:
    """Put a fully written file in place: fsync it, rename it over the target, fsync the folder,
    so a crash after we return cannot leave the name empty or half-written."""
    fd = os.open(staged, os.O_RDONLY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(staged, target)
    folder = os.open(Path(target).parent, os.O_RDONLY | os.O_CLOEXEC)
    try:
        os.fsync(folder)
    finally:
        os.close(folder)


def _mode_for(target: Path) -> int:
    try:
        return stat.S_IMODE(os.stat(target).st_mode)
    except FileNotFoundError:
        umask = os.umask(0o022)
        os.umask(umask)
        return 0o666 & ~umask
