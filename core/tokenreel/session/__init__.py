"""The session file: the archive model, its JSON form, validation on load, and the atomic save.

A library user needs only this wing:

    from tokenreel.session import load, save, Session, Run, Arm, Prompt, Settings

The format is specified in docs/session-format.md; the validator cites its sections.

- model.py: the session model (Session, Run, Chunks, limits)
- json_form.py: a session as the JSON object its file holds
- validate.py: reading a session back, every field checked
- quarantine.py: impossible server values bounded, or the run kept as invalid without them
- fields.py: typed access to parsed JSON, each failure naming its dotted field
- archive.py: the session file on disk: load, atomic save, one writer at a time (SessionLock)
- save_form.py: what save writes, each run validated only when new or changed, so a save costs what changed
- engine_archive.py: what the engine said of each request, as archived
- gpu.py, gpu_validate.py: the GPU gate's archive, read back and bounded
- acceptance_validate.py: a run's acceptance read back, and the bounds on it
- stopping.py: `record --target-ci`'s stopping rule as the session keeps it
"""

from __future__ import annotations

from tokenreel.base.version import __version__
from tokenreel.session.archive import load, save
from tokenreel.session.model import Arm, Prompt, Run, Session, Settings

__all__ = ["Arm", "Prompt", "Run", "Session", "Settings", "__version__", "load", "save"]
