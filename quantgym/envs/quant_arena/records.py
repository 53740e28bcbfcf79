"""Append-only JSONL run records of Quant-Arena (spec quant_arena.md §7, issue §4).

One file per run (episode): ``<record_dir>/<run_id>.jsonl``. Each line is one event::

    {"event": "brief" | "candidate" | "freeze" | "sealed" | "final" | "cancelled" | "model_call" | "note",
     "run_id": ..., "seq": 0, "time": "2026-...Z", ...event fields}

``candidate`` lines carry the source text, its SHA-256, the feedback shown to the
agent and the full research evaluation; ``sealed`` carries the sealed evaluation;
``final`` the scores and the research loop's ``overfitting`` diagnostics (Deflated Sharpe Ratio,
PBO; :func:`~quantgym.envs.quant_arena.metrics.research_overfitting`, not part of S). Lines are written and flushed as they happen, so failed and
cancelled runs keep everything up to the failure. Non-finite numbers are written as
``null`` (:func:`quantgym.results.to_jsonable`).
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import tempfile
import uuid
from pathlib import Path
from typing import Any

from quantgym.results import to_jsonable

#: Environment variable that overrides the default record folder.
RECORD_DIR_ENV = "QUANTGYM_RECORD_DIR"


def default_record_dir() -> Path:
    """``$QUANTGYM_RECORD_DIR`` or ``<system temp>/quantgym/quant_arena`` (never inside the package)."""
    env = os.environ.get(RECORD_DIR_ENV)
    return Path(env) if env else Path(tempfile.gettempdir()) / "quantgym" / "quant_arena"


def new_run_id() -> str:
    """``qa-<UTC timestamp>-<8 hex>``: unique and sortable."""
    stamp = _dt.datetime.now(_dt.timezone.utc).strftime("%Y%m%dT%H%M%S")
    return f"qa-{stamp}-{uuid.uuid4().hex[:8]}"


class RunRecorder:
    """Writer of one run's JSONL record (append-only, flushed per event).

    Parameters
    ----------
    record_dir : path or None
        Folder for the file (created); ``None`` = :func:`default_record_dir`.
    run_id : str, optional
    """

    def __init__(self, record_dir: str | Path | None = None, run_id: str | None = None):
        self.dir = Path(record_dir) if record_dir is not None else default_record_dir()
        self.run_id = run_id or new_run_id()
        self.path = self.dir / f"{self.run_id}.jsonl"
        self.seq = 0

    def write(self, event: str, **fields: Any) -> None:
        """Append one event line (creates the folder on first use)."""
        self.dir.mkdir(parents=True, exist_ok=True)
        doc = {"event": event, "run_id": self.run_id, "seq": self.seq,
               "time": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="milliseconds"), **fields}
        line = json.dumps(to_jsonable(doc), ensure_ascii=False, allow_nan=False)
        with self.path.open("a", encoding="utf-8") as fh:
            fh.write(line + "\n")
            fh.flush()
        self.seq += 1


def read_record(path: str | Path) -> list[dict]:
    """Read a run record back as a list of event dicts (in order)."""
    with Path(path).open(encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


__all__ = ["RunRecorder", "read_record", "default_record_dir", "new_run_id", "RECORD_DIR_ENV"]
