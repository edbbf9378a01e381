"""`tokenreel.cli`: the commands, on the top floor. `app` is the `tokenreel` command.

One module per command, parsing and printing only; what a command does lives in the package
that owns it (recorder, renderer, simulator, report), where a library user can call it. The
modules are imported in the order `tokenreel --help` lists the commands.
"""

from __future__ import annotations

from tokenreel.base.interrupts import exit_while_starting

exit_while_starting()  # first: Ctrl-C while the commands load exits 130 (`Command.invoke` hands it over)

# Each import registers its command on `app`, in this order.
from tokenreel.cli import (
    compare,  # noqa: F401
    demo,  # noqa: F401
    plan,  # noqa: F401
    plot,  # noqa: F401
    prompts,  # noqa: F401
    record,  # noqa: F401
    render,  # noqa: F401
    render_all,  # noqa: F401
    report,  # noqa: F401
    simulate,  # noqa: F401
    sweep,  # noqa: F401
    verify,  # noqa: F401
)
from tokenreel.cli.app import app

__all__ = ["app"]
