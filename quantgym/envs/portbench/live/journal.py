"""Append-only JSON Lines journal of a live run, with a per-folder lock.

Every record is one line, written with a single ``write`` and followed by ``flush`` + ``fsync``, so
a crash can lose at most the record being written. A torn last line (a crash mid-write) is moved
to ``<journal>.torn-<UTC stamp>`` and cut off when the journal is next opened; a malformed line
elsewhere is an error (the journal was edited by hand).
"""

from __future__ import annotations

import datetime as _dt
import json
import os
from pathlib import Path
from typing import Any

from quantgym.results import to_jsonable

try:  # POSIX advisory lock; on other platforms runs are not protected against overlap
    import fcntl
except ImportError:  # pragma: no cover
    fcntl = None  # type: ignore[assignment]


class JournalError(RuntimeError):
    """The run folder is locked by another process or its journal is corrupt."""


class Journal:
    """Append-only JSONL file.

    Parameters
    ----------
    path : the journal file (created on first append).
    """

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)
        self.repaired: str | None = None

    def read(self) -> list[dict[str, Any]]:
        """All complete records, in file order (repairs a torn last line first).

        Raises
        ------
        JournalError
            A complete line that is not a JSON object.
        """
        if not self.path.exists():
            return []
        raw = self.path.read_bytes()
        if raw and not raw.endswith(b"\n"):
            cut = raw.rfind(b"\n") + 1
            stamp = _dt.datetime.now(_dt.timezone.utc).strftime("%Y%m%dT%H%M%S%fZ")
            torn = self.path.with_name(f"{self.path.name}.torn-{stamp}")
            torn.write_bytes(raw[cut:])
            with self.path.open("r+b") as fh:
                fh.truncate(cut)
                fh.flush()
                os.fsync(fh.fileno())
            self.repaired = str(torn)
            raw = raw[:cut]
        out = []
        for n, line in enumerate(raw.decode("utf-8").splitlines(), start=1):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
            except json.JSONDecodeError as exc:
                raise JournalError(f"{self.path}: line {n} is not valid JSON ({exc.msg}); the journal is append-only "
                                   "and must not be edited") from None
            if not isinstance(rec, dict):
                raise JournalError(f"{self.path}: line {n} is not a JSON object")
            out.append(rec)
        return out

    def append(self, record: dict[str, Any]) -> None:
        """Append one record (NaN/inf → null) and make it durable before returning."""
        line = json.dumps(to_jsonable(record), sort_keys=True, allow_nan=False, separators=(",", ":")) + "\n"
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            data = line.encode("utf-8")
            written = os.write(fd, data)
            while written < len(data):  # pragma: no cover - short writes on regular files are rare
                written += os.write(fd, data[written:])
            os.fsync(fd)
        finally:
            os.close(fd)


class FolderLock:
    """Exclusive advisory lock on ``<folder>/.lock`` (non-blocking: a second run fails at once)."""

    def __init__(self, folder: str | os.PathLike):
        self.path = Path(folder) / ".lock"
        self._fh = None

    def __enter__(self) -> "FolderLock":
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._fh = self.path.open("a+")
        if fcntl is not None:
            try:
                fcntl.flock(self._fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                self._fh.close()
                self._fh = None
                raise JournalError(f"another live run is using {self.path.parent} (lock {self.path})") from None
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._fh is not None:
            if fcntl is not None:
                fcntl.flock(self._fh.fileno(), fcntl.LOCK_UN)
            self._fh.close()
            self._fh = None


def write_json_atomic(path: str | os.PathLike, obj: Any) -> None:
    """Write ``obj`` as JSON to ``path`` via a temporary sibling and ``os.replace``."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    tmp.write_text(json.dumps(to_jsonable(obj), indent=1, sort_keys=True, allow_nan=False) + "\n", encoding="utf-8")
    os.replace(tmp, path)


__all__ = ["Journal", "JournalError", "FolderLock", "write_json_atomic"]
