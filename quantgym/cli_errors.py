"""What every ``quantgym`` command does with a bad input: one line, exit code 2, nothing written.

Used by :mod:`quantgym.cli` (``bench``) and its plugins (``eval``, ``sweep``, ``report``, a task's own
commands). Imports nothing heavy.

- :func:`fail` prints ``error: <message>`` as one line on stderr (no markup, no wrapping) and exits 2;
- :func:`check_out_dir` refuses an ``--out`` that cannot be a results folder (an existing file, or a
  path below a file) before anything runs;
- :func:`out_dir` creates the results folder and, when the command then fails, removes the folders it
  created as long as nothing was written in them (a folder that existed before is never removed);
- :class:`RootGroup` is the ``quantgym`` command itself: click's own checks (a bad value, an unknown or
  missing option) are the same one line, and every ``--help`` is click's plain text wrapped to the
  terminal.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
from pathlib import Path
from typing import Any, Iterator, NoReturn

import typer
from typer.core import TyperGroup

try:  # typer >= 0.29 bundles its own click
    from typer._click import exceptions as _click_exc
except ImportError:  # pragma: no cover - older typer
    from click import exceptions as _click_exc

#: click's error class, of the click typer runs on (one-line agent errors, e.g. LLMConfigError, subclass it)
ClickException = _click_exc.ClickException


def one_line(msg: object) -> str:
    """``msg`` with every run of whitespace (newlines included) collapsed to one space."""
    return " ".join(str(msg).split())


def default_out(kind: str) -> Path:
    """The results folder a command writes when ``--out`` is not given: ``results/<kind>-<UTC stamp>``."""
    import datetime as _dt

    return Path("results") / f"{kind}-{_dt.datetime.now(_dt.timezone.utc).strftime('%Y%m%dT%H%M%SZ')}"


def print_error(msg: object) -> None:
    """Print ``error: msg`` as one line on stderr."""
    print(f"error: {one_line(msg)}", file=sys.stderr, flush=True)


def fail(msg: object) -> NoReturn:
    """Print ``error: msg`` as one line on stderr and exit with code 2."""
    print_error(msg)
    raise typer.Exit(2)


def _out_problem(out: Path) -> str | None:
    """Why ``out`` cannot be a results folder, or None."""
    if out.exists():
        return None if out.is_dir() else "it exists and is not a folder"
    for parent in out.parents:
        if parent.exists():
            if not parent.is_dir():
                return f"{parent} is a file, not a folder"
            if not os.access(parent, os.W_OK | os.X_OK):
                return f"{parent} is not writable"
            return None
    return None


def check_out_dir(out: Path, flag: str = "--out") -> None:
    """Exit 2 with one line when ``out`` cannot be a results folder (checked before anything runs)."""
    why = _out_problem(Path(out))
    if why:
        fail(f"{flag} {out}: cannot write the results folder: {why}; give a folder path")


def _first_missing(out: Path) -> Path | None:
    """The topmost folder that creating ``out`` would create (None: ``out`` exists)."""
    out = Path(out).absolute()
    if out.exists():
        return None
    top = out
    for parent in out.parents:
        if parent.exists():
            break
        top = parent
    return top


def _remove_if_empty(top: Path) -> None:
    """Remove ``top`` and the folders below it, bottom up, as long as they hold no file."""
    if not top.is_dir():
        return
    for root, dirs, files in os.walk(top, topdown=False):
        if files:
            continue
        with contextlib.suppress(OSError):
            os.rmdir(root)


def make_out_dir(out: Path, flag: str = "--out") -> Path | None:
    """Create ``out`` (and its parents); exit 2 with one line when impossible. Returns the topmost folder
    created (None when ``out`` existed)."""
    check_out_dir(out, flag)
    created = _first_missing(out)
    try:
        Path(out).mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        why = "it exists and is not a folder" if isinstance(exc, FileExistsError) else (exc.strerror or str(exc))
        fail(f"{flag} {out}: cannot write the results folder: {why}")
    return created


@contextlib.contextmanager
def out_dir(out: Path, flag: str = "--out", results_only: bool = False) -> Iterator[Path]:
    """Create the results folder ``out`` for the body; if the body fails (an exception or a non-zero
    ``typer.Exit``), remove what this call created unless something was written into it. With
    ``results_only`` (a command whose failed run has nothing to resume from, e.g. ``quantgym eval``), what it
    created goes unless a ``summary.csv`` was written into ``out``: records of a run that is no result are
    not left behind."""
    created = make_out_dir(out, flag)
    try:
        yield Path(out)
    except BaseException as exc:
        if created is not None and not (isinstance(exc, typer.Exit) and exc.exit_code == 0):
            if results_only and not (Path(out) / "summary.csv").exists():
                shutil.rmtree(created, ignore_errors=True)
            else:
                _remove_if_empty(created)
        raise


def _plain_help(command: object) -> None:
    """Click's plain help for ``command`` and every command below it (rich's boxed tables cut option names
    and defaults short at 80 columns)."""
    command.rich_markup_mode = None  # type: ignore[attr-defined]
    for sub in (getattr(command, "commands", None) or {}).values():
        _plain_help(sub)


class RootGroup(TyperGroup):
    """The ``quantgym`` command (``typer.Typer(cls=RootGroup)``): click's usage errors (a bad value, an
    unknown or missing option, a surplus argument) print as one line, ``error: <message> (see <command>
    --help)``, with click's exit code 2, like :func:`fail`; every command's ``--help`` is click's plain text.
    With ``standalone_mode=False`` (a caller that handles click's exceptions) it behaves as click's group."""

    def main(self, args: Any = None, prog_name: str | None = None, complete_var: str | None = None,
             standalone_mode: bool = True, **extra: Any) -> Any:
        _plain_help(self)
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        try:
            rv = super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        except _click_exc.NoArgsIsHelpError as exc:  # `quantgym` alone: the help, as click shows it
            exc.show()
            sys.exit(exc.exit_code)
        except ClickException as exc:
            ctx = getattr(exc, "ctx", None)
            print_error(exc.format_message() + (f" (see {ctx.command_path} --help)" if ctx is not None else ""))
            sys.exit(exc.exit_code)
        except _click_exc.Abort:
            print("Aborted!", file=sys.stderr, flush=True)
            sys.exit(1)
        sys.exit(rv if isinstance(rv, int) else 0)  # a command's typer.Exit(code) arrives as its code

    def format_commands(self, ctx: Any, formatter: Any) -> None:
        """The commands with their first sentence whole, wrapped to the terminal (click cuts it short at one
        line)."""
        rows = []
        for name in self.list_commands(ctx):
            cmd = self.get_command(ctx, name)
            if cmd is not None and not cmd.hidden:
                rows.append((name, cmd.get_short_help_str(limit=10_000)))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)


__all__ = ["default_out", "fail", "print_error", "one_line", "check_out_dir", "make_out_dir", "out_dir", "RootGroup",
           "ClickException"]
