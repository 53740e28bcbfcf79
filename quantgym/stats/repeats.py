"""Repeated runs of one agent: the mean of each metric with its interval, and rankings with ties.

An LLM agent's answers differ from run to run (sampling at temperature > 0, and batching / kernel
nondeterminism of the server even at temperature 0), so one run's Sharpe or CEPS is one draw. With
``r`` repeats the metric's mean is reported with a Student-t interval over the repeats
(``scipy.stats.t``); two agents are *tied* when their intervals overlap (a conservative reading: no
test of the difference is implied).
"""

from __future__ import annotations

import math
from typing import Any, Iterable, Mapping

from quantgym.leaderboard.metrics import number_metrics, repeat_metrics


def repeat_interval(values: Iterable[float | None], level: float = 0.95) -> dict[str, Any]:
    """Mean and Student-t interval of one metric over repeats.

    Parameters
    ----------
    values : the metric of each repeat (None / NaN entries are dropped and counted).
    level : two-sided confidence level of the interval.

    Returns
    -------
    dict
        ``n`` (finite values), ``n_missing``, ``mean``, ``sd`` (ddof 1), ``lo``, ``hi`` (None when
        ``n < 2``: one run has no spread), ``level``.

    Raises
    ------
    ValueError
        ``level`` outside (0, 1).
    """
    from scipy import stats

    if not 0.0 < level < 1.0:
        raise ValueError(f"level must be in (0, 1), got {level!r}")
    given = list(values)
    vals = [float(v) for v in given if v is not None and math.isfinite(float(v))]
    missing = len(given) - len(vals)
    n = len(vals)
    out: dict[str, Any] = {"n": n, "n_missing": missing, "level": level, "mean": None, "sd": None, "lo": None,
                           "hi": None}
    if n == 0:
        return out
    mean = sum(vals) / n
    out["mean"] = mean
    if n < 2:
        return out
    sd = math.sqrt(sum((v - mean) ** 2 for v in vals) / (n - 1))
    half = float(stats.t.ppf(0.5 + level / 2, n - 1)) * sd / math.sqrt(n)
    out.update(sd=sd, lo=mean - half, hi=mean + half)
    return out


def rank_with_ties(intervals: Mapping[str, Mapping[str, Any]], higher_is_better: bool = True) -> list[dict]:
    """Rank agents by their mean; an agent is tied with every agent whose interval overlaps its own.

    Parameters
    ----------
    intervals : agent -> :func:`repeat_interval` result (``mean``, ``lo``, ``hi``; an agent without an
        interval, ``n < 2``, is tied with nobody by that rule but still ranked by its mean).
    higher_is_better : rank the largest mean first.

    Returns
    -------
    list of dict
        In rank order: ``rank`` (1-based, competition ranking of the means), ``agent``, ``mean``,
        ``lo``, ``hi``, ``tied_with`` (agents whose interval overlaps this one's), and ``rank_range``
        ``(best, worst)`` rank this agent could take given the ties.
    """
    items = [(a, d) for a, d in intervals.items() if d.get("mean") is not None]
    items.sort(key=lambda x: -x[1]["mean"] if higher_is_better else x[1]["mean"])

    def overlap(p: Mapping[str, Any], q: Mapping[str, Any]) -> bool:
        if p.get("lo") is None or q.get("lo") is None:
            return False
        return p["lo"] <= q["hi"] and q["lo"] <= p["hi"]

    out = []
    for i, (a, d) in enumerate(items):
        rank = 1 + sum(1 for _, e in items if (e["mean"] > d["mean"] if higher_is_better else e["mean"] < d["mean"]))
        tied = [b for b, e in items if b != a and overlap(d, e)]
        positions = [j + 1 for j, (b, _) in enumerate(items) if b == a or b in tied]
        out.append({"rank": rank, "agent": a, "mean": d["mean"], "lo": d.get("lo"), "hi": d.get("hi"),
                    "tied_with": tied, "rank_range": (min(positions), max(positions))})
    return out


def repeats_section(repeats: list[list[Any]], level: float = 0.95, console: Any = None) -> Any:
    """Summarise ``R`` repeats of one evaluation (``quantgym eval --repeats R``).

    Parameters
    ----------
    repeats : the sections :func:`run_eval` returned, one list per repeat.
    level : confidence level of the Student-t interval over the repeats.
    console : a rich Console to print the summary table on (None: silent).

    Returns
    -------
    SectionResult
        Task ``"repeats"``: one summary row per (task, agent, profile, period) with the mean of every
        number metric of the registry (:func:`quantgym.leaderboard.metrics.number_metrics`) and of the
        task's numeric extra columns over the repeats, and extra columns ``<metric>_lo`` / ``<metric>_hi`` (the
        interval), ``n_repeats`` and ``gate_rate`` (share of repeats whose gate passed); ``runs`` hold
        every metric's :func:`~quantgym.stats.repeats.repeat_interval` and the per-repeat values.
    """
    from quantgym.results import SectionResult, SummaryRow, combined_status

    metric_list = number_metrics()
    names = {m.name for m in metric_list}
    groups: dict[tuple, dict[str, list]] = {}
    for k, sections in enumerate(repeats):
        for sec in sections:
            for row in sec.rows:
                key = (row.task, row.agent, row.profile, row.period)
                g = groups.setdefault(key, {"_gate": [], "_repeat": [], "_status": []})
                g["_status"].append(row.status)
                if row.status == "failed":  # not a result: left out of the mean and its interval
                    continue
                g["_repeat"].append(k + 1)
                g["_gate"].append(row.gate)
                vals = {m.name: row.get(m.name) for m in metric_list}
                vals.update({m: v for m, v in row.extra.items()
                             if isinstance(v, (int, float)) and not isinstance(v, bool)})
                for m, v in vals.items():
                    g.setdefault(m, []).append(v)
    out = SectionResult(task="repeats")
    for (task, agent, profile, period), g in groups.items():
        stats = {m: repeat_interval(v, level) for m, v in g.items() if not m.startswith("_")}
        gates = [x for x in g["_gate"] if x is not None]
        extra: dict[str, Any] = {"n_repeats": len(g["_repeat"]),
                                 "gate_rate": (sum(gates) / len(gates)) if gates else None}
        for m, st in stats.items():
            if m not in names:
                extra[m] = st["mean"]
            extra[f"{m}_lo"], extra[f"{m}_hi"] = st["lo"], st["hi"]
        status = combined_status(g["_status"])
        out.rows.append(SummaryRow.of(task=task, agent=agent, profile=profile, period=period, status=status,
                                      **{m: stats[m]["mean"] for m in names if m in stats}, extra=extra))
        out.runs.append({"task": task, "agent": agent, "profile": profile, "period": period, "level": level,
                         "status": status, "statuses": g["_status"],
                         "repeats": g["_repeat"], "gate": g["_gate"], "metrics": stats,
                         "values": {m: v for m, v in g.items() if not m.startswith("_")}})
    if console is not None:
        from quantgym.tables import Col, print_table

        shown = [m for m in repeat_metrics()
                 if any((r["metrics"].get(m.name) or {}).get("mean") is not None for r in out.runs)]
        one_task = len({r["task"] for r in out.runs}) == 1  # then the task is in the title, not a column
        cols = [*([] if one_task else [Col("task", "left")]), Col("agent", "left"), Col("period", "left"),
                *[Col(m.header) for m in shown], Col("n")]
        rows = [[*([] if one_task else [r["task"]]), r["agent"], "/".join(x for x in (r["profile"], r["period"]) if x),
                 *[m.cell(r["metrics"].get(m.name)) for m in shown], str(len(r["repeats"]))] for r in out.runs]
        what = f"{out.runs[0]['task']}: " if one_task and out.runs else ""
        from quantgym.tasks import sharpe_notes

        print_table(console, f"{what}mean ± half-width of the Student-t {level:.0%} interval over {len(repeats)} "
                    "repeats", cols, rows, keys=2 if one_task else 3,
                    caption=sharpe_notes(r["task"] for r in out.runs) or None)
    return out


__all__ = ["repeat_interval", "rank_with_ties", "repeats_section"]
