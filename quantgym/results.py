"""One results schema for every command (``bench``, ``eval``, ``sweep``, ``train``).

Layout of an output folder (spec portbench §11.9):

- ``summary.csv``: one row per run. The first columns are always :data:`SUMMARY_COLUMNS`
  (empty where a column does not apply): the key columns, one column per metric of the registry
  (:mod:`quantgym.leaderboard.metrics`), then ``status``. ``agent`` is the name a user passes back on the command
  line (a baseline's key, ``cov_risk_parity``; :func:`quantgym.evaluation.policy_key`); the display
  name (``Cov. Risk Parity``) is the run's ``agent`` in ``results.json``, beside ``agent_key``. ``ret_pct`` is the period's total return
  in percent (not annualised), ``maxdd_pct`` is negative, ``gate`` is
  ``true``/``false``/empty. ``status`` (:data:`RUN_STATUSES`) says whether the row is a result: ``ok``
  (every LLM call answered, or an agent that makes none: classical baselines), ``partial`` (some LLM calls
  failed after their retries; the agent fell back at those steps), ``failed`` (no LLM call of the run was
  answered, or the run stopped before it ended): a failed row's metric cells are empty (the numbers of its
  fallback decisions stay in ``results.json``) and reports list it apart, never ranked. After them come
  the tasks' own columns (:attr:`SummaryRow.extra`, e.g. a pass rate or an interval bound), in the order
  they first appear, empty for rows of other tasks.
- ``results.json``: everything else (config with versions, metrics, NAV series,
  per-stage scores, …). Non-finite numbers are written as ``null``.
- ``*.png``: plots.
"""

from __future__ import annotations

import csv
import dataclasses
import datetime as _dt
import json
import math
import platform
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from quantgym.leaderboard.metrics import metric_columns, summary_columns

#: ``status`` values of a row (see the module docstring)
RUN_STATUSES: tuple[str, ...] = ("ok", "partial", "failed")


def __getattr__(name: str) -> Any:
    # SUMMARY_COLUMNS: summary.csv's common columns, read from the metric registry when asked for (a metric
    # registered after this module was imported is among them)
    if name == "SUMMARY_COLUMNS":
        return summary_columns()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def episode_status(usage: dict[str, Any] | None) -> str:
    """A run's ``status`` from its LLM usage (calls, cache hits, failures, answered; None: no LLM calls).

    ``ok`` without LLM calls or without a failed one; ``failed`` when none was answered; else ``partial``.
    """
    if not usage or not int(usage.get("failures") or 0):
        return "ok"
    answered = usage.get("answered")
    if answered is None:  # a record without the count: logical calls minus the failed ones
        answered = (int(usage.get("calls") or 0) + int(usage.get("cache_hits") or 0)
                    - int(usage.get("adaptations") or 0) - int(usage.get("failures") or 0))
    return "partial" if int(answered) > 0 else "failed"


def combined_status(statuses: list[str | None]) -> str:
    """The status of a row that sums up several runs: ``failed`` when all failed, ``partial`` when any
    failed or was partial, else ``ok`` (``None``: ``ok``)."""
    st = [s or "ok" for s in statuses]
    if st and all(s == "failed" for s in st):
        return "failed"
    return "partial" if any(s != "ok" for s in st) else "ok"


@dataclass
class SummaryRow:
    """One row of ``summary.csv``. ``None`` is written as an empty cell."""

    task: str
    agent: str
    profile: str | None = None
    period: str | None = None
    sharpe: float | None = None
    ret_pct: float | None = None
    maxdd_pct: float | None = None
    vol_pct: float | None = None
    ceps: float | None = None
    gate: bool | None = None
    #: ``ok`` | ``partial`` | ``failed`` (:data:`RUN_STATUSES`)
    status: str = "ok"
    #: the task's own columns, written after :data:`SUMMARY_COLUMNS` (name -> number, bool or str); a
    #: registered metric without a field of its own (:func:`quantgym.leaderboard.metrics.register_metric`) is
    #: given here under its name and written among the common columns
    extra: dict[str, Any] = field(default_factory=dict)

    def get(self, name: str) -> Any:
        """The value of column ``name``: the field of that name, else ``extra[name]`` (None when absent)."""
        return getattr(self, name) if name in _FIELDS else self.extra.get(name)

    def as_csv_cells(self, extra_columns: tuple[str, ...] = ()) -> list[str]:
        """The row's cells: :data:`SUMMARY_COLUMNS`, then ``extra_columns`` (empty where absent). A failed row
        (``status == "failed"``) leaves its metric cells and ``extra_columns`` empty."""
        failed = self.status == "failed"
        metric_names = set(metric_columns())
        return [csv_cell(None if failed and name in metric_names else self.get(name))
                for name in summary_columns()] + [csv_cell(None if failed else self.extra.get(name))
                                                  for name in extra_columns]

    @classmethod
    def of(cls, **cells: Any) -> "SummaryRow":
        """A row from column -> value: the fields by name, every other column (a registered metric without a
        field of its own, a task's column) in :attr:`extra`."""
        extra = dict(cells.pop("extra", None) or {})
        extra.update({k: cells.pop(k) for k in list(cells) if k not in _FIELDS})
        return cls(**cells, extra=extra)


_FIELDS = frozenset(f.name for f in dataclasses.fields(SummaryRow)) - {"extra"}


def csv_cell(v: Any) -> str:
    """A ``summary.csv`` cell: empty for None and non-finite numbers, ``true`` / ``false``, ``%.6g`` floats."""
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return ""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return f"{v:.6g}"
    return str(v)


def extra_columns(rows: list[SummaryRow]) -> tuple[str, ...]:
    """The extra column names of ``rows``, in the order they first appear."""
    seen: dict[str, None] = {}
    common = set(summary_columns())
    for r in rows:
        for k in r.extra:
            if k not in common:
                seen.setdefault(k)
    return tuple(seen)


@dataclass
class SectionResult:
    """What one task's part of a command produces: summary rows and JSON run records."""

    task: str
    rows: list[SummaryRow] = field(default_factory=list)
    runs: list[dict[str, Any]] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)


def to_jsonable(obj: Any) -> Any:
    """Convert numpy / pandas / dataclass objects to JSON types; non-finite floats → ``None``."""
    import numpy as np  # here, not at the top: ``quantgym --help`` imports this module
    if obj is None or isinstance(obj, (bool, str)):
        return obj
    if isinstance(obj, (int, np.integer)) and not isinstance(obj, bool):
        return int(obj)
    if isinstance(obj, (float, np.floating)):
        f = float(obj)
        return f if math.isfinite(f) else None
    if isinstance(obj, np.bool_):
        return bool(obj)
    if isinstance(obj, np.ndarray):
        return [to_jsonable(x) for x in obj.tolist()]
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {k: to_jsonable(v) for k, v in dataclasses.asdict(obj).items()}
    if isinstance(obj, Mapping):  # dicts and read-only mappings (e.g. PortBench's info["weights"])
        return {str(k): to_jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple, set)):
        return [to_jsonable(x) for x in obj]
    if isinstance(obj, (_dt.date, _dt.datetime)):
        return obj.isoformat()
    if hasattr(obj, "isoformat"):
        return obj.isoformat()
    if hasattr(obj, "tolist"):
        return to_jsonable(obj.tolist())
    return str(obj)


def environment_info() -> dict[str, Any]:
    """Versions that make a results file reproducible."""
    import gymnasium
    import numpy as np
    import pandas

    from quantgym import __version__

    return {
        "quantgym": __version__,
        "python": platform.python_version(),
        "numpy": np.__version__,
        "pandas": pandas.__version__,
        "gymnasium": gymnasium.__version__,
        "platform": platform.platform(),
    }


def write_summary_csv(path: Path, rows: list[SummaryRow]) -> None:
    """Write ``summary.csv``: :data:`SUMMARY_COLUMNS`, then the rows' :func:`extra_columns`."""
    path = Path(path)
    extra = extra_columns(rows)
    with path.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow([*summary_columns(), *extra])
        for row in rows:
            w.writerow(row.as_csv_cells(extra))


def write_results(out_dir: Path, sections: list[SectionResult], meta: dict[str, Any] | None = None) -> Path:
    """Write ``summary.csv`` and ``results.json`` for ``sections`` into ``out_dir``."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    rows = [r for s in sections for r in s.rows]
    write_summary_csv(out_dir / "summary.csv", rows)
    doc = {
        "schema": "quantgym-results-v1",
        "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "environment": environment_info(),
        "meta": meta or {},
        "summary_columns": [*summary_columns(), *extra_columns(rows)],
        "tasks": {s.task: {"runs": s.runs, **s.extra} for s in sections},
    }
    with (out_dir / "results.json").open("w") as fh:
        json.dump(to_jsonable(doc), fh, indent=1, allow_nan=False)
    return out_dir


def read_summary_csv(path: Path) -> list[dict[str, str]]:
    """Read a ``summary.csv`` back as a list of dicts (strings)."""
    with Path(path).open(newline="") as fh:
        return list(csv.DictReader(fh))
