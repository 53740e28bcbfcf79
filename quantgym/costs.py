"""Returns net of the agent's inference cost: the ``cost_usd``, ``net_pnl_usd`` and ``pnl_per_cost`` columns.

For one run (docs/llm-agents.md, "Returns net of inference cost"):

- ``cost_usd`` = Σ over the run's LLM calls (prompt tokens × price in + completion tokens × price out) / 10⁶,
  prices in USD per 1M tokens (:mod:`quantgym.agents.llm.prices`); 0 for an agent that makes no LLM call
  (a classical baseline, an RL policy); None when no price is known;
- ``pnl_usd`` = capital × ``ret_pct`` / 100: the period's P&L on the notional the policy manages
  (``--capital``, default :data:`DEFAULT_CAPITAL`), the final NAV minus the initial one scaled to it;
- ``net_pnl_usd`` = ``pnl_usd`` − ``cost_usd``;
- ``pnl_per_cost`` = ``pnl_usd`` / ``cost_usd``: USD of P&L per USD of inference (None when the cost is 0
  or unknown).

Tasks without a P&L (Market-Bench scores code, not a portfolio) carry the cost only.
"""

from __future__ import annotations

import math
from typing import Any, Iterable

#: the notional a policy manages, in USD, when no ``--capital`` is given [project choice: a round
#: institutional mandate size; only the USD columns scale with it]
DEFAULT_CAPITAL = 1_000_000.0
#: the columns (registered metrics, :mod:`quantgym.leaderboard.metrics`)
COST_COLUMNS = ("cost_usd", "net_pnl_usd", "pnl_per_cost")


def checked_amount(value: Any, positive: bool, message: str) -> float:
    """``value`` as a finite float, > 0 (``positive``) or >= 0.

    Raises
    ------
    ValueError
        ``message`` followed by the value given (one line).
    """
    try:
        v = float(value)
    except (TypeError, ValueError):
        v = math.nan
    if isinstance(value, bool) or not math.isfinite(v) or v < 0 or (positive and v == 0):
        raise ValueError(f"{message}, got {value!r}")
    return v


def check_capital(value: Any) -> float:
    """``value`` as the capital (None: :data:`DEFAULT_CAPITAL`).

    Raises
    ------
    ValueError
        One line: not a finite number > 0.
    """
    return DEFAULT_CAPITAL if value is None else checked_amount(value, True, "--capital must be an amount > 0 in USD")


def run_cost(usage: dict[str, Any] | None) -> float | None:
    """A run's inference cost in USD from its LLM usage (``episode_usage()``): 0 without LLM calls (``usage``
    None or empty), None when the agent's price is unknown."""
    if not usage:
        return 0.0
    cost = usage.get("cost_usd")
    return None if cost is None else float(cost)


def total_cost(usages: Iterable[dict[str, Any] | None]) -> float | None:
    """The summed cost of several runs (None when any run's cost is unknown)."""
    costs = [run_cost(u) for u in usages]
    return None if any(c is None for c in costs) else float(sum(costs))


def net_of_cost(ret_pct: float | None, cost_usd: float | None, capital: float = DEFAULT_CAPITAL) -> dict[str, Any]:
    """``pnl_usd``, ``net_pnl_usd`` and ``pnl_per_cost`` of a run (see the module docstring); None where an
    input is missing."""
    pnl = None if ret_pct is None or not math.isfinite(ret_pct) else capital * ret_pct / 100.0
    return {"pnl_usd": pnl,
            "net_pnl_usd": None if pnl is None or cost_usd is None else pnl - cost_usd,
            "pnl_per_cost": None if pnl is None or not cost_usd else pnl / cost_usd}


def agent_model(agent: Any) -> str | None:
    """The model name of an LLM agent (None for a policy without one)."""
    return getattr(getattr(getattr(agent, "engine", None), "config", None), "model", None)


def cost_record(usage: dict[str, Any] | None, ret_pct: float | None = None, capital: float = DEFAULT_CAPITAL,
                pnl: bool = True, model: str | None = None) -> dict[str, Any]:
    """What ``results.json`` records of a run's inference cost: ``cost_usd``, where its price came from
    (``price_source``), with ``pnl`` the ``capital`` and :func:`net_of_cost`'s numbers, and ``note`` (one line)
    when no price of ``model`` is known."""
    cost = run_cost(usage)
    rec: dict[str, Any] = {"cost_usd": cost,
                           "price_source": (usage or {}).get("price_source") if usage else "no LLM calls"}
    if pnl:
        rec.update(capital=capital, **net_of_cost(ret_pct, cost, capital))
    if cost is None:
        from quantgym.agents.llm.prices import no_price_note

        rec["note"] = no_price_note(model or "the model")
    return rec


def cost_columns(record: dict[str, Any]) -> dict[str, Any]:
    """The summary row's cells of :data:`COST_COLUMNS` from a :func:`cost_record` (a record without a P&L,
    ``pnl=False``, gives the cost only)."""
    return {k: record[k] for k in COST_COLUMNS if k in record}


def print_cost_table(console: Any, sections: list[Any], capital: float = DEFAULT_CAPITAL) -> None:
    """Print the rows of ``sections`` (:class:`~quantgym.results.SectionResult`) that carry ``cost_usd``, one
    table per task and profile (agent, period, cost, and where the task has a P&L the net P&L and the P&L per
    USD of inference on ``capital``; 80 columns with the bundled period names); then one line per distinct
    price source of the runs and each distinct "cost n/a" note (a run with no known price: never shown as 0)."""
    from quantgym.leaderboard.metrics import get_metric
    from quantgym.tables import Col, print_table

    rows = [r for s in sections for r in s.rows if "cost_usd" in r.extra and r.status != "failed"]
    groups: dict[tuple[str, str], list[Any]] = {}
    for r in rows:
        groups.setdefault((r.task, r.profile or ""), []).append(r)
    for (task, profile), mine in groups.items():
        metrics = [get_metric(k) for k in COST_COLUMNS if get_metric(k).applies_to(task)]
        cols = [Col("agent", "left"), Col("period", "left"), *[Col(m.header) for m in metrics]]
        cells = [[r.agent, r.period or "", *[m.cell(r.extra.get(m.name), "n/a" if m.name == "cost_usd" else "")
                                             for m in metrics]] for r in mine]
        title = f"{task}{' ' + profile if profile else ''}: inference cost" + (
            f", net on {capital:,.0f} USD" if len(metrics) > 1 else "")
        print_table(console, title, cols, cells, keys=2)
    records = [run.get("inference") or {} for s in sections for run in s.runs]
    for src in dict.fromkeys(r.get("price_source") for r in records if r.get("price_source") not in (None, "no LLM calls")):
        console.print(f"price: {src}", markup=False, highlight=False, soft_wrap=True)
    for note in dict.fromkeys(r["note"] for r in records if r.get("note")):
        console.print(note, markup=False, highlight=False, soft_wrap=True)


__all__ = ["DEFAULT_CAPITAL", "COST_COLUMNS", "checked_amount", "check_capital", "run_cost", "total_cost", "net_of_cost",
           "agent_model", "cost_record", "cost_columns", "print_cost_table"]
