"""The session file a recording writes into: continue it (`--resume`, `--arms`) or start it, and
clean up after a record that was killed mid-save."""

from __future__ import annotations

import re
from pathlib import Path

from tokenreel.archive import load
from tokenreel.model import Session
from tokenreel.recorder.config import Config
from tokenreel.recorder.runner import new_session


def remove_stale_temps(path: Path) -> list[str]:
    """Remove the temporaries a killed record left next to the session. `archive.save` writes
    `.<name>.XXXXXXXX.tmp` (mkstemp's 8 characters) and renames it, so a SIGKILL mid-save leaves
    one as large as the session. Called only under the session's lock (`SessionLock`, held by
    the one writer for a whole record), so no live writer owns any of them. Returns their names."""
    pattern = re.compile(rf"\.{re.escape(path.name)}\.[a-z0-9_]{{8}}\.tmp")
    removed = []
    try:
        entries = list(path.parent.iterdir())
    except OSError:
        return []
    for entry in entries:
        if pattern.fullmatch(entry.name) and entry.is_file() and not entry.is_symlink():
            try:
                entry.unlink()
            except OSError:
                continue
            removed.append(entry.name)
    return removed


def merge_config(session: Session, cfg: Config, path: Path) -> None:
    """Resuming or adding arms: the archived prompts and settings stay; new arms are appended.
    ValueError (one line naming the file) when the runs would not be like-for-like."""
    if [p.id for p in session.prompts] != [p.id for p in cfg.prompts]:
        raise ValueError(f"{path}: its prompts differ from the config's suite; record into a new --out instead")
    if (cfg.settings.max_tokens, cfg.settings.ignore_eos) != (session.settings.max_tokens, session.settings.ignore_eos):
        raise ValueError(f"{path}: max_tokens/ignore_eos differ from the config; runs would not be like-for-like, use a new --out")
    session.settings.repeats = max(session.settings.repeats, cfg.settings.repeats)
    known = {arm.id: arm for arm in session.arms}
    for arm in cfg.arms:
        if arm.id in known:
            archived = known[arm.id]
            arm.fingerprint, arm.recorded = archived.fingerprint, archived.recorded
            session.arms[session.arms.index(archived)] = arm
        else:
            session.arms.append(arm)


def open_session(cfg: Config, path: Path, resume: bool, arm_ids: list[str] | None, force: bool) -> Session:
    """The session to record into, read under the caller's `SessionLock`: the file on disk
    merged with the config when continuing (`resume`, or adding `arm_ids`), else a new one.
    ValueError (one line) when the file exists and neither was asked for nor `force`."""
    if path.exists() and not force:
        if not (resume or arm_ids):
            raise ValueError(f"{path} already exists; use --resume to continue it, --arms to add arms, or --force to start over")
        session = load(path)
        merge_config(session, cfg, path)
        return session
    return new_session(cfg.name, cfg.settings, cfg.prompts, cfg.arms)
