"""The metric registry: every common column of ``summary.csv`` and of the leaderboard tables.

A :class:`Metric` holds a column's name (its ``summary.csv`` header), the table header, its unit, its
direction (higher or lower is better), its decimals (the cell is :func:`quantgym.tables.fmt`), the tasks
it applies to and whether the repeats tables show it. From this one list come

- ``summary.csv``'s common columns (:func:`summary_columns`: the key columns, the metrics in registry
  order, ``status``) and the cells a failed row leaves empty (:mod:`quantgym.results`);
- the parsing of a summary row read back, and the "All summary rows" table of ``quantgym report``
  (:mod:`quantgym.leaderboard.render`);
- the metrics averaged over repeats with their Student-t interval and the columns of the repeats tables
  (``quantgym eval --repeats``, the report's "Repeated runs"; :mod:`quantgym.stats.repeats`), ranked in
  the metric's direction.

A new leaderboard column is one :func:`register_metric` call (for a built-in column, one entry in
:data:`BUILTIN_METRICS`). A task fills it through :attr:`quantgym.results.SummaryRow.extra` under the
metric's name (or the row's field of that name for the built-in metrics); the metric's cell is then
written among the common columns, not after them.

This module holds the columns' presentation; the formulas behind the numbers are in
:mod:`quantgym.metrics` and the tasks' own metric modules.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Iterable

from quantgym.tables import fmt

#: the leading columns of ``summary.csv`` that name a row (task, agent, risk profile, period)
KEY_COLUMNS: tuple[str, ...] = ("task", "agent", "profile", "period")
#: the trailing column of ``summary.csv``'s common columns (:data:`quantgym.results.RUN_STATUSES`)
STATUS_COLUMN = "status"


@dataclass(frozen=True)
class Metric:
    """One common result column.

    Attributes
    ----------
    name : the ``summary.csv`` column (and the :class:`~quantgym.results.SummaryRow` field or ``extra`` key).
    header : the column's header in tables.
    unit : ``"%"`` (percent), ``"ratio"``, ``"score"`` (0–1), ``"USD"`` or ``"pass/fail"``.
    higher_is_better : the direction: rankings put the largest value first when True.
    decimals : decimals of a table cell.
    kind : ``"number"`` or ``"flag"`` (a bool: ``true`` / ``false`` in CSV, ✓ / ✗ in tables).
    tasks : the tasks that write it (None: every task with a return series).
    repeats : shown in the repeats tables (every number metric is averaged over repeats regardless).
    rank : ranks the repeats tables: the first such metric with a value in a (task, profile, period).
    description : one line for the docs.
    """

    name: str
    header: str
    unit: str
    higher_is_better: bool = True
    decimals: int = 2
    kind: str = "number"
    tasks: tuple[str, ...] | None = None
    repeats: bool = True
    rank: bool = False
    description: str = ""

    def __post_init__(self) -> None:
        if self.kind not in ("number", "flag"):
            raise ValueError(f"metric {self.name!r}: kind must be 'number' or 'flag', got {self.kind!r}")
        if not self.name.isidentifier():
            raise ValueError(f"metric name must be an identifier (a summary.csv column), got {self.name!r}")

    @property
    def direction(self) -> str:
        """``"higher"`` or ``"lower"`` (is better)."""
        return "higher" if self.higher_is_better else "lower"

    def applies_to(self, task: str | None) -> bool:
        """Whether rows of ``task`` carry this metric."""
        return self.tasks is None or task in self.tasks

    def parse(self, cell: Any) -> Any:
        """A value read back from a ``summary.csv`` cell or a JSON value (None when empty or unreadable)."""
        if self.kind == "flag":
            if isinstance(cell, bool):
                return cell
            return {"true": True, "True": True, "1": True, "false": False, "False": False, "0": False}.get(
                cell if isinstance(cell, str) else str(cell))
        return None if isinstance(cell, bool) else number(cell)

    def cell(self, value: Any, missing: str = "") -> str:
        """The table cell of ``value`` (a number, a flag or a repeats interval; :func:`quantgym.tables.fmt`)."""
        return fmt(value, self.decimals, missing)


def number(cell: Any) -> float | None:
    """A finite float from a CSV cell or a JSON value; None when empty, unreadable or not finite."""
    if cell is None or cell == "":
        return None
    try:
        v = float(cell)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None


#: the built-in common columns, in ``summary.csv`` order (spec portbench §7 for Sharpe, return, drawdown,
#: volatility, CEPS and the stress gate; Quant-Arena and the sweeps write the first four)
BUILTIN_METRICS: tuple[Metric, ...] = (
    Metric("sharpe", "Sharpe", "ratio", decimals=3, rank=True,
           description="annualised Sharpe ratio of the daily returns (the task's convention, its sharpe_note)"),
    Metric("ret_pct", "Ret%", "%", description="total return over the period (not annualised)"),
    Metric("maxdd_pct", "MaxDD%", "%",
           description="maximum drawdown (negative: the closer to 0 the better)"),
    Metric("vol_pct", "Vol%", "%", higher_is_better=False, repeats=False,
           description="annualised volatility of the daily returns"),
    Metric("ceps", "CEPS", "score", decimals=3, tasks=("portbench",), rank=True,
           description="composite end-to-end pipeline score of the stage-scored runs (spec portbench §7)"),
    Metric("gate", "gate", "pass/fail", kind="flag", tasks=("portbench",), repeats=False,
           description="the profile's drawdown gate in the stress windows (spec portbench §7.2)"),
    # returns net of the agent's inference cost (quantgym.costs; docs/llm-agents.md)
    Metric("cost_usd", "Cost$", "USD", higher_is_better=False, decimals=4, repeats=False,
           tasks=("portbench", "quant_arena", "market_bench"),
           description="inference cost of the run's LLM calls in USD (tokens × price; 0 without LLM calls, "
                       "empty when no price is known)"),
    Metric("net_pnl_usd", "NetP&L$", "USD", decimals=0, tasks=("portbench", "quant_arena"), repeats=False,
           description="P&L on the capital (--capital, default 1,000,000 USD) minus the inference cost, in USD"),
    Metric("pnl_per_cost", "P&L/$", "ratio", decimals=0, tasks=("portbench", "quant_arena"), repeats=False,
           description="P&L in USD per USD of inference (empty when the cost is 0 or unknown)"),
)

_REGISTRY: dict[str, Metric] = {m.name: m for m in BUILTIN_METRICS}


def register_metric(metric: Metric) -> Metric:
    """Add ``metric`` as a common column (after the registered ones) of ``summary.csv``, the report's tables and
    the repeats tables, in this process. Re-registering a name replaces its entry in place.

    Raises
    ------
    ValueError
        The name is a key or status column.
    """
    if metric.name in (*KEY_COLUMNS, STATUS_COLUMN):
        raise ValueError(f"{metric.name!r} is a key column of summary.csv, not a metric")
    _REGISTRY[metric.name] = metric
    return metric


def unregister_metric(name: str) -> None:
    """Remove the metric ``name`` (no error when it is not registered)."""
    _REGISTRY.pop(name, None)


def metrics(tasks: Iterable[str | None] | None = None) -> tuple[Metric, ...]:
    """The registered metrics in column order; with ``tasks``, those that apply to at least one of them."""
    if tasks is None:
        return tuple(_REGISTRY.values())
    names = set(tasks)
    return tuple(m for m in _REGISTRY.values() if any(m.applies_to(t) for t in names))


def get_metric(name: str) -> Metric:
    """The metric ``name``.

    Raises
    ------
    KeyError
        No such metric.
    """
    try:
        return _REGISTRY[name]
    except KeyError:
        raise KeyError(f"no metric {name!r} (registered: {', '.join(_REGISTRY)})") from None


def metric_columns() -> tuple[str, ...]:
    """The metric column names, in order."""
    return tuple(_REGISTRY)


def number_metrics() -> tuple[Metric, ...]:
    """The metrics averaged over repeats (every ``number`` metric)."""
    return tuple(m for m in _REGISTRY.values() if m.kind == "number")


def repeat_metrics() -> tuple[Metric, ...]:
    """The metrics shown in the repeats tables."""
    return tuple(m for m in _REGISTRY.values() if m.kind == "number" and m.repeats)


def summary_columns() -> tuple[str, ...]:
    """``summary.csv``'s common columns: :data:`KEY_COLUMNS`, the metrics, then ``status``."""
    return (*KEY_COLUMNS, *_REGISTRY, STATUS_COLUMN)


__all__ = ["Metric", "number", "BUILTIN_METRICS", "KEY_COLUMNS", "STATUS_COLUMN", "register_metric", "unregister_metric",
           "metrics", "get_metric", "metric_columns", "number_metrics", "repeat_metrics", "summary_columns"]
