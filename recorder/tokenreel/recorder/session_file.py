"""The session file a recording writes into: continue it (`--resume`, `--arms`) or start it, and
clean up after a record that was killed mid-save."""

from __future__ import annotations

import re
from pathlib import Path

from tokenreel.base.safe_text import shown_path
from tokenreel.recorder.config import Config, launch_of
from tokenreel.recorder.engines.fingerprint import scrubbed_argv
from tokenreel.recorder.runner import new_session
from tokenreel.recorder.secrets import one_line
from tokenreel.session.archive import load
from tokenreel.session.model import Session


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


# What must match the archive for a run recorded now to share a cell with the runs on disk.
ARM_FIELDS = ("base_url", "base_urls", "model", "api", "extra_body")
SAMPLING_FIELDS = ("max_tokens", "ignore_eos", "temperature")


def config_changes(session: Session, cfg: Config) -> list[str]:
    """What the config changes of the archive's endpoints, prompts and sampling, one short phrase
    each (arm id + field, prompt id, setting); empty when runs recorded now are like-for-like."""
    changes = []
    archived_arms = {arm.id: arm for arm in session.arms}
    for arm in cfg.arms:
        archived = archived_arms.get(arm.id)
        if archived is None:
            continue
        for name in ARM_FIELDS:
            if getattr(arm, name) != getattr(archived, name):
                changes.append(f"arm {arm.id!r} {name}{_values(getattr(archived, name), getattr(arm, name))}")
        launched = archived.fingerprint.get("launch")  # the command its runs were recorded with, scrubbed
        launch = launch_of(arm)
        if launched is not None and launched != (scrubbed_argv(launch.argv) if launch else None):
            changes.append(f"arm {arm.id!r} launch")
    archived_prompts = {prompt.id: prompt for prompt in session.prompts}
    for prompt in cfg.prompts:
        archived_prompt = archived_prompts[prompt.id]
        if (prompt.messages, prompt.prompt) != (archived_prompt.messages, archived_prompt.prompt):
            changes.append(f"prompt {prompt.id!r} text")
    for name in SAMPLING_FIELDS:
        old, new = getattr(session.settings, name), getattr(cfg.settings, name)
        if old != new:
            changes.append(f"{name}{_values(old, new)}")
    return changes


def _values(old: object, new: object) -> str:
    """' (A archived, B in the config)' for short values; nothing for a dict (extra_body)."""
    if isinstance(old, dict) or isinstance(new, dict):
        return ""
    return f" ({one_line(repr(old), 80)} archived, {one_line(repr(new), 80)} in the config)"


def merge_config(session: Session, cfg: Config, path: Path, force_config: bool = False) -> None:
    """Resuming or adding arms: the archived prompts and settings stay; new arms are appended.
    ValueError (one line naming the file and each changed field) when the runs would not be
    like-for-like, unless `force_config`: then the config's arms replace the archived ones."""
    if [p.id for p in session.prompts] != [p.id for p in cfg.prompts]:
        raise ValueError(f"{shown_path(path)}: its prompts differ from the config's suite; record into a new --out instead")
    changes = config_changes(session, cfg)
    if changes and not force_config:
        raise ValueError(
            f"{shown_path(path)}: the config changes what the archive recorded: {'; '.join(changes)}; runs would not be"
            " like-for-like: record into a new --out, or pass --force-config to record anyway"
        )
    session.settings.repeats = max(session.settings.repeats, cfg.settings.repeats)
    known = {arm.id: arm for arm in session.arms}
    for arm in cfg.arms:
        if arm.id in known:
            archived = known[arm.id]
            arm.fingerprint, arm.recorded = archived.fingerprint, archived.recorded
            session.arms[session.arms.index(archived)] = arm
        else:
            session.arms.append(arm)


def open_session(
    cfg: Config, path: Path, resume: bool, arm_ids: list[str] | None, force: bool, force_config: bool = False
) -> Session:
    """The session to record into, read under the caller's `SessionLock`: the file on disk
    merged with the config when continuing (`resume`, or adding `arm_ids`), else a new one.
    ValueError (one line) when the file exists and neither was asked for nor `force`, or when
    the config changes what it recorded (`merge_config`) without `force_config`."""
    if path.exists() and not force:
        if not (resume or arm_ids):
            raise ValueError(f"{shown_path(path)} already exists; use --resume to continue it, --arms to add arms,"
                             " or --force to start over")
        session = load(path)
        if session.kind == "sweep":
            raise ValueError(f"{shown_path(path)} is a sweep session (tokenreel sweep): record does not add to it;"
                             " record into a new --out")
        merge_config(session, cfg, path, force_config)
        return session
    return new_session(cfg.name, cfg.settings, cfg.prompts, cfg.arms)
