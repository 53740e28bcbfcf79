"""The inputs of a leaderboard: results folders in the common schema (:mod:`quantgym.results`).

A folder holds ``summary.csv`` and/or ``results.json``; a sweep folder whose final files are missing
(an interrupted sweep) is read from its ``runs/*.json``; a folder of Inspect logs of quantgym tasks
(``inspect eval quantgym/...``, docs/inspect.md) is read through :mod:`quantgym.integrations.inspect.logs`. Fields a task does not write are skipped, never
an error. Each summary row is read back into a dict of its common columns
(:func:`quantgym.leaderboard.metrics.summary_columns`, parsed by each metric's kind) plus ``source``,
the folder's name; a row written without a ``status`` column reads as ``ok``.
"""

from __future__ import annotations

import csv
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from quantgym.leaderboard.metrics import metrics, summary_columns


class ReportError(ValueError):
    """An input folder without results (no summary.csv, results.json or runs/)."""


def read_row(d: dict[str, Any], source: str) -> dict[str, Any]:
    """One summary row (CSV cells or JSON values) as the leaderboard reads it: metric cells parsed by their
    kind (numbers, flags; None when empty), ``status`` defaulting to ``ok``, the memorization gap's cells
    (:func:`quantgym.memorization.read_gap_cells`), and ``source``."""
    r = {c: d.get(c) for c in summary_columns()}
    for m in metrics():
        r[m.name] = m.parse(r[m.name])
    r["status"] = str(r.get("status") or "ok")
    for c in ("task", "agent", "profile", "period"):
        r[c] = None if r[c] in (None, "") else str(r[c])
    from quantgym.memorization import read_gap_cells

    r.update(read_gap_cells(d))  # the memorization gap of a --blind both row (empty for any other row)
    r["source"] = source
    return r


@dataclass
class Source:
    """One input folder: its summary rows and its ``results.json`` document (may be empty)."""

    path: Path
    name: str
    rows: list[dict[str, Any]]
    doc: dict[str, Any]
    #: what could not be read or recomputed from this folder (shown in the report, never dropped silently)
    warnings: list[str] = field(default_factory=list)

    @property
    def command(self) -> str:
        meta = self.doc.get("meta") or {}
        tokens = str(meta.get("command") or "").split()
        if not tokens:
            return "?"
        tokens[0] = Path(tokens[0]).name  # "/usr/local/bin/quantgym bench ..." -> "quantgym bench ..."
        cmd = " ".join(tokens)
        return cmd if len(cmd) <= 90 else cmd[:89] + "…"

    @property
    def created(self) -> str:
        return str(self.doc.get("created") or "")

    def task_doc(self, task: str) -> dict[str, Any]:
        """``results.json``'s entry of ``task``, without the runs whose ``status`` is ``failed`` (never
        plotted or ranked beside real runs; the report lists them apart); empty when the entry itself
        is marked failed (a stopped run, or a one-agent section whose every run failed)."""
        doc = ((self.doc.get("tasks") or {}).get(task)) or {}
        if doc.get("status") == "failed":
            return {}
        runs = doc.get("runs")
        if isinstance(runs, list) and any(isinstance(r, dict) and r.get("status") == "failed" for r in runs):
            doc = {**doc, "runs": [r for r in runs if not (isinstance(r, dict) and r.get("status") == "failed")]}
        return doc


def load_source(path: str | Path, name: str | None = None) -> Source:
    """Read one results folder (see the module docstring).

    Raises
    ------
    ReportError
        The folder has no ``summary.csv``, ``results.json`` or ``runs/*.json``.
    """
    p = Path(path)
    label = name or p.name
    doc: dict[str, Any] = {}
    if (p / "results.json").is_file():
        doc = json.loads((p / "results.json").read_text())
    rows: list[dict[str, Any]] = []
    if (p / "summary.csv").is_file():
        with (p / "summary.csv").open(newline="") as fh:
            rows = [read_row(d, label) for d in csv.DictReader(fh)]
    if not doc and not rows and (p / "runs").is_dir():
        from quantgym.sweep.runner import sections_from_records

        recs = []
        skipped = []
        for f in sorted((p / "runs").glob("*.json")):
            try:
                recs.append(json.loads(f.read_text()))
            except ValueError as exc:  # a torn or corrupt run file: skipped, and said so
                skipped.append(f"{label}: run file {f.name} is not valid JSON ({exc}); skipped")
        sections = sections_from_records(recs)
        from quantgym.results import to_jsonable

        doc = {"meta": {"command": "sweep (partial: read from runs/)"},
               "tasks": {s.task: {"runs": to_jsonable(s.runs), **to_jsonable(s.extra)} for s in sections}}
        rows = [read_row(to_jsonable(r), label) for s in sections for r in s.rows]
    else:
        skipped = []
    if not doc and not rows:  # a folder of Inspect logs of quantgym tasks (docs/inspect.md)
        from quantgym.integrations.inspect.logs import read_logs

        try:
            found = read_logs(p)
        except ImportError as exc:
            raise ReportError(f"{p}: holds Inspect logs; {exc}") from None
        if found is not None:
            inspect_rows, doc, skipped = found
            rows = [read_row(r, label) for r in inspect_rows]
    if not doc and not rows:
        raise ReportError(f"{p}: no summary.csv, results.json, runs/ or Inspect logs of quantgym tasks (not a "
                          "quantgym results folder)")
    return Source(path=p, name=label, rows=rows, doc=doc, warnings=skipped)


def expand_repeats(paths: Sequence[Path]) -> list[tuple[Path, str | None]]:
    """Replace each ``quantgym eval --repeats R`` folder by its ``repeat-1`` .. ``repeat-R`` subfolders.

    Such a folder's own summary.csv holds the mean over the repeats; the report reads every repeat
    instead (each one is a row in its task's section) and groups them in "Repeated runs". Returns
    ``(folder, source name or None)`` pairs; other folders pass through unchanged (name None:
    :func:`unique_names` names them).
    """
    out: list[tuple[Path, str | None]] = []
    for p in paths:
        reps = sorted((q for q in p.glob("repeat-*") if q.is_dir() and q.name[7:].isdigit()),
                      key=lambda q: int(q.name[7:]))
        if reps:
            out += [(q, f"{p.name}/{q.name}") for q in reps]
        else:
            out.append((p, None))
    return out


def unique_names(paths: Sequence[Path]) -> list[str]:
    """A source name per folder: its name, or ``parent/name#i`` where two folders share a name."""
    names = [p.name or str(p) for p in paths]
    out = []
    for i, (p, n) in enumerate(zip(paths, names)):
        out.append(n if names.count(n) == 1 else f"{p.parent.name}/{n}#{i + 1}")
    return out


__all__ = ["ReportError", "Source", "load_source", "read_row", "expand_repeats", "unique_names"]
