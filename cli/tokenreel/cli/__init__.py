"""`tokenreel.cli`: the commands, on the top floor. `app` is the `tokenreel` command.

One module per command, parsing and printing only; what a command does lives in the package
that owns it (recorder, renderer, simulator, report), where a library user can call it. The
modules are imported in the order `tokenreel --help` lists the commands.
"""

from __future__ import annotations

from tokenreel.base.interrupts import exit_while_starting

exit_while_starting()  # first: Ctrl-C while the commands load exits 130 (`Command.invoke` hands it over)

# Each import registers its command on `app`, in this order (so isort leaves them as they are).
# isort: off
from tokenreel.cli import report  # noqa: E402, F401
from tokenreel.cli import compare  # noqa: E402, F401
from tokenreel.cli import plot  # noqa: E402, F401
from tokenreel.cli import init  # noqa: E402, F401
from tokenreel.cli import record  # noqa: E402, F401
from tokenreel.cli import grade  # noqa: E402, F401
from tokenreel.cli import sweep  # noqa: E402, F401
from tokenreel.cli import simulate  # noqa: E402, F401
from tokenreel.cli import render  # noqa: E402, F401
from tokenreel.cli import render_all  # noqa: E402, F401
from tokenreel.cli import verify  # noqa: E402, F401
from tokenreel.cli import demo  # noqa: E402, F401
from tokenreel.cli import prompts  # noqa: E402, F401
from tokenreel.cli import imports  # noqa: E402, F401
from tokenreel.cli import plan  # noqa: E402, F401
from tokenreel.cli.app import app  # noqa: E402
# isort: on

__all__ = ["app"]
