"""What every ``quantgym`` command does with a bad input: one line, exit code 2, nothing written.

Used by :mod:`quantgym.cli` (``bench``) and its plugins (``eval``, ``sweep``, ``report``, a task's own
commands). Imports nothing heavy.

- :func:`fail` prints ``error: <message>`` as one line on stderr (no markup, no wrapping) and exits 2;
- :func:`check_out_dir` refuses an ``--out`` that cannot be a results folder (an existing file, or a
  path below a file) before anything runs;
- :func:`out_dir` creates the results folder and, when the command then fails, removes the folders it
  created as long as nothing was written in them (a folder that existed before is never removed).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
from pathlib import Path
from typing import Iterator, NoReturn

import typer


def one_line(msg: object) -> str:
    """``msg`` with every run of whitespace (newlines included) collapsed to one space."""
    return " ".join(str(msg).split())


def default_out(kind: str) -> Path:
    """The results folder a command writes when ``--out`` is not given: ``results/<kind>-<UTC stamp>``."""
    import datetime as _dt

    return Path("results") / f"{kind}-{_dt.datetime.now(_dt.timezone.utc).strftime('%Y%m%dT%H%M%SZ')}"


def fail(msg: object) -> NoReturn:
    """Print ``error: msg`` as one line on stderr and exit with code 2."""
    print(f"error: {one_line(msg)}", file=sys.stderr, flush=True)
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


__all__ = ["default_out", "fail", "one_line", "check_out_dir", "make_out_dir", "out_dir"]
