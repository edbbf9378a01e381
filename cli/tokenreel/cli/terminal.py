"""How the CLI's text reads, in a terminal and in a log: its console and its help pages.

Light on purpose (rich and typer only): `tokenreel --help` imports it before anything else.

- CliConsole fits a terminal's width; written to a pipe, a file or a CI log it never wraps,
  so a path, a sha256 or a table row stays whole on its line (grep finds it, copy works). It
  also strips control sequences from all it prints (see `strip_controls`).
- Command and Group keep help pages in plain words: a metavar is SESSION, N, PATH..., never a
  Python type, and the command list shows each command's short help whole.
- Group turns an error no command expected into one line and exit 2, never a traceback: exit 1
  means "not reproduced" (compare) or "differs" (verify) and nothing else.
"""

from __future__ import annotations

import signal
import sys
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from rich.console import Console, ConsoleDimensions
from rich.segment import Segment
from typer._click.exceptions import ClickException
from typer.core import TyperArgument, TyperCommand, TyperGroup, TyperOption
from typer.exceptions import Abort, Exit

from tokenreel.base.safe_text import strip_controls

if TYPE_CHECKING:
    from typer import _click


UNWRAPPED_WIDTH = 10_000  # a pipe or a log is as wide as the longest line


class CliConsole(Console):
    """A rich Console that wraps only in a terminal window.

    Whether the output is a terminal is asked at each print (tests swap sys.stdout), not
    once: to a terminal, lines fit its width as usual; otherwise plain lines are soft-wrapped
    (never broken) and tables take their natural width. A CI log with FORCE_COLOR set gets
    colours but is still no window: nothing is wrapped there either.
    """

    @property
    def in_window(self) -> bool:
        isatty = getattr(self.file, "isatty", None)
        try:
            return bool(isatty is not None and isatty())
        except ValueError:  # a closed file
            return False

    @property
    def size(self) -> ConsoleDimensions:
        size = super().size
        if self.in_window:
            return size
        return ConsoleDimensions(UNWRAPPED_WIDTH, size.height)

    @size.setter
    def size(self, new_size: tuple[int, int]) -> None:
        self._width, self._height = new_size

    def print(self, *objects: Any, soft_wrap: bool | None = None, **kwargs: Any) -> None:
        if soft_wrap is None and not self.in_window:
            soft_wrap = True
        # Whole sequences go here, before highlighting splits a string into segments.
        objects = tuple(strip_controls(o) if isinstance(o, str) else o for o in objects)
        super().print(*objects, soft_wrap=soft_wrap, **kwargs)

    def _render_buffer(self, buffer: Iterable[Segment]) -> str:
        """Every printed character passes here (print, tables, progress bars): text segments are
        stripped of control sequences; rich's own control segments (cursor moves) are kept."""
        return super()._render_buffer(
            segment if segment.control else Segment(strip_controls(segment.text), segment.style)
            for segment in buffer
        )


def plain_metavar(param: _click.Parameter) -> str:
    """A word for a parameter's value in help pages: N, NUMBER, PATH, TEXT or the choices."""
    if param.metavar:
        return param.metavar
    desc = getattr(param, "type_descriptor", None)
    if desc is None:
        return "VALUE"
    if desc.is_choice:
        return "|".join(str(getattr(c, "value", c)) for c in desc.choices or ())
    if desc.is_path:
        return "PATH"
    annotation = desc.annotation
    if desc.is_list:
        annotation = getattr(annotation, "__args__", (str,))[0]
    if annotation is int:
        return "N"
    if annotation is float:
        return "NUMBER"
    return "TEXT"


class Command(TyperCommand):
    """A command whose help page names values in plain words (SESSION, N, PATH...).

    typer shows an argument as `{SESSION}` in the usage line and `SESSION <path>` in the list,
    and an option without a metavar as `<int range>`; here they read SESSION and N.
    """

    # Options that may be given without a value: then they get "" (the command says what to
    # give, e.g. a bare `render --prompt` lists the prompt ids) instead of click's error.
    optional_values: tuple[str, ...] = ()

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        for param in self.params:
            if isinstance(param, TyperOption) and not param.is_flag and not param.count and not param.metavar:
                param.metavar = plain_metavar(param)

    def invoke(self, ctx: _click.Context) -> Any:
        """Ctrl-C is the command's from here (`interrupts.exit_while_starting` had it while the
        command line loaded): Python's KeyboardInterrupt, or the command's own handler."""
        signal.signal(signal.SIGINT, signal.default_int_handler)
        return super().invoke(ctx)

    def parse_args(self, ctx: _click.Context, args: list[str]) -> list[str]:
        args = list(args)
        for i, arg in enumerate(args):
            if arg == "--":
                break
            if arg in self.optional_values:
                following = args[i + 1] if i + 1 < len(args) else None
                if following is None or (following.startswith("-") and following != "-"):
                    args[i] = f"{arg}="
        return super().parse_args(ctx, args)

    @staticmethod
    def _argument_name(param: TyperArgument) -> str:
        name = param.metavar or (param.name or "value").upper()
        if param.nargs != 1 and not name.endswith("..."):
            name += "..."
        return name

    def collect_usage_pieces(self, ctx: _click.Context) -> list[str]:
        pieces = [self.options_metavar] if self.options_metavar else []
        for param in self.get_params(ctx):
            if isinstance(param, TyperArgument):
                name = self._argument_name(param)
                pieces.append(name if param.required else f"[{name}]")
            else:
                pieces.extend(param.get_usage_pieces(ctx))
        return pieces

    def format_options(self, ctx: _click.Context, formatter: _click.HelpFormatter) -> None:
        args, opts = [], []
        for param in self.get_params(ctx):
            record = param.get_help_record(ctx)
            if record is None:
                continue
            if isinstance(param, TyperArgument):
                args.append((self._argument_name(param), record[1]))
            else:
                opts.append(record)
        if args:
            with formatter.section("Arguments"):
                formatter.write_dl(args)
        if opts:
            with formatter.section("Options"):
                formatter.write_dl(opts)


EXIT_UNEXPECTED = 2
# How click and typer end a command on purpose; anything else escaping a command is a bug.
_DELIBERATE = (ClickException, Exit, Abort)


def unexpected_error_line(exc: Exception) -> str:
    """One line for an error no command expected: what it was, and that it is ours to fix."""
    said = " ".join(str(exc).split())
    return f"tokenreel: unexpected error: {type(exc).__name__}{': ' + said if said else ''} (a bug in tokenreel; please report it)"


class Group(TyperGroup):
    """The top-level command: its list shows each command's short help whole, never cut, and
    an unexpected error ends it with one line and exit 2 (module docstring)."""

    def invoke(self, ctx: _click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except _DELIBERATE:
            raise
        except Exception as exc:  # noqa: BLE001 - the last guard: one line, never a traceback
            CliConsole(stderr=True, highlight=False).print(unexpected_error_line(exc), markup=False, soft_wrap=True)
            sys.exit(EXIT_UNEXPECTED)

    def format_commands(self, ctx: _click.Context, formatter: _click.HelpFormatter) -> None:
        rows = []
        for name in self.list_commands(ctx):
            command = self.get_command(ctx, name)
            if command is None or command.hidden:
                continue
            text = command.short_help or (command.help or "").split("\n\n")[0]
            rows.append((name, " ".join(text.split())))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)
