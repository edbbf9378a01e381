"""The session file on disk: load it, save it, and let one writer at a time hold it.

Loading reads only a regular file of bounded size and validates every field
(`tokenreel.session.validate`): every problem is an `ArchiveError` naming the file and the field.
Saving is atomic (temp file, fsync, rename), so the file on disk is never half-written, and it
writes only what the loader accepts (`tokenreel.session.save_form.validated_bytes`), validating only
the runs new or changed since the last save.

One writer per session: `SessionLock` (fcntl.flock on `.<file name>.lock` next to the file) is
held for a whole `record`; a second writer is refused at once, naming the holder's pid.
"""

from __future__ import annotations

import errno
import fcntl
import os
from pathlib import Path

import orjson

from tokenreel.base import files
from tokenreel.session.json_form import session_to_dict
from tokenreel.session.model import ArchiveError, Session
from tokenreel.session.save_form import validated_bytes
from tokenreel.session.validate import from_dict

# ---------------------------------------------------------------------------------------------
# Saving


def dumps(session: Session) -> bytes:
    """The bytes `save` writes for a session that needs no quarantine (no checks: tests, benches)."""
    return orjson.dumps(session_to_dict(session))


def save(session: Session, path: str | os.PathLike[str]) -> None:
    """Write atomically: a crash leaves either the previous file or the new one, never half.

    What is written is first checked by the loader's own validation (`validated_bytes`), so a
    saved file always loads: a run that fails it is quarantined in place (status `invalid`, see
    `tokenreel.session.quarantine`); anything else that would not load raises ArchiveError and
    nothing is written.
    """
    target = Path(path)
    data = validated_bytes(session, str(target))
    target.parent.mkdir(parents=True, exist_ok=True)
    files.write_atomic(target, data)


# ---------------------------------------------------------------------------------------------
# Loading


def loads(payload: bytes, path: str = "<session>") -> Session:
    """A session from the bytes of a file; not JSON is an ArchiveError too, saying if it looks cut."""
    try:
        data = orjson.loads(payload)
    except orjson.JSONDecodeError as exc:
        hint = " (the file looks truncated)" if payload.rstrip()[-1:] not in (b"}", b"]") else ""
        raise ArchiveError(path, "", f"not valid JSON{hint}: {exc}") from None
    return from_dict(data, path)


def read_input(path: str | os.PathLike[str], kind: str) -> bytes:
    """The bytes of a session or manifest (`files.read_input`, bounded), or a one-line OSError;
    a file of only white space is refused too (a record killed before its first save)."""
    payload = files.read_input(path, kind)
    if not payload.strip():
        raise OSError("the file is empty")
    return payload


def load(path: str | os.PathLike[str]) -> Session:
    """Read and validate a session file; every problem is an ArchiveError naming file and field."""
    try:
        payload = read_input(path, "session")
    except OSError as exc:
        raise ArchiveError(path, "", str(exc)) from None
    return loads(payload, str(path))


# ---------------------------------------------------------------------------------------------
# One writer per session


class SessionLock:
    """One writer per session: flock on `.<file name>.lock`, which holds the writer's pid.

    Why: two `record` processes on one --out each rewrite the whole file after every run, so
    the last writer would drop the other's runs. Acquire never waits (ArchiveError naming the
    holder's pid); load the session only after acquiring, so resume and --arms merge with what
    is on disk now. Release removes the file; the kernel drops the flock of a killed holder.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(os.path.realpath(path))  # a symlinked --out locks (and saves) its target
        self.lock_path = self.path.with_name(f".{self.path.name}.lock")
        self._fd: int | None = None

    def acquire(self) -> SessionLock:
        self.lock_path.parent.mkdir(parents=True, exist_ok=True)
        try:
            links = os.stat(self.path).st_nlink
        except FileNotFoundError:
            links = 1
        if links > 1:  # the lock is per name: another name of the same file would take a lock of its own
            raise ArchiveError(self.path, "", f"has {links} hard links, so two records could write it under two names;"
                               " copy it to a file of its own (cp) and record into that")
        while True:
            try:  # a link planted at the lock's name is not followed (its target would be overwritten)
                fd = os.open(self.lock_path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0), 0o644)
            except OSError as exc:
                if exc.errno != errno.ELOOP:
                    raise  # no permission, a full disk: said by the caller as any output's error
                raise ArchiveError(self.lock_path, "", "is a symbolic link, not the session's lock: remove it (its target is"
                                   " left alone)") from None
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = os.pread(fd, 32, 0).decode("ascii", "replace").strip() or "unknown"
                os.close(fd)
                raise ArchiveError(
                    self.path, "",
                    f"another `tokenreel record` (pid {holder}) is writing this session; wait for it to finish"
                    " (then --arms or --resume adds to it), or record into another --out",
                ) from None
            except BaseException:
                os.close(fd)
                raise
            try:  # the holder may have removed the file between our open and flock: lock the new one
                same = os.stat(self.lock_path).st_ino == os.fstat(fd).st_ino
            except FileNotFoundError:
                same = False
            if same:
                break
            os.close(fd)
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self._fd = fd
        return self

    def release(self) -> None:
        if self._fd is None:
            return
        try:
            self.lock_path.unlink(missing_ok=True)  # while still locked: a waiter re-checks the inode
        finally:
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> SessionLock:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()
