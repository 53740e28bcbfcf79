"""``quantgym eval --blind both``: every episode named and blind, paired, and the memorization gap.

:func:`quantgym.plan.run_eval` runs a plan whose ``blind_both`` is set as two views of the same plan
(:func:`views`: the envs' ``blind`` kwarg off, then on), with the same agent objects and the same seeds, in
one pool; each task's eval adapter builds its section once per view; :func:`gap_section` merges the two
and pairs the runs per (agent, env id, period / track, seed): each blind row of summary.csv gets the gap
columns of :mod:`quantgym.stats.gap` (docs/blind.md "The memorization gap"), and the terminal table
(:func:`print_gap_table`) shows named, blind, gap, interval and p-value per pair and metric.

Generic: no task is named here. A task's eval adapter may define ``gap_series(run) ->``
:class:`~quantgym.stats.gap.GapSeries` (the run's daily returns and per-date scores, with its row key)
and ``gap_metrics`` (its headline summary columns; default :data:`DEFAULT_METRICS`).
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any, Sequence

from quantgym.results import SectionResult, SummaryRow, to_jsonable

#: the headline metrics of a task whose adapter names none
DEFAULT_METRICS: tuple[str, ...] = ("sharpe", "ret_pct")
#: what a blind row's agent label ends with (:meth:`quantgym.plan.EvalPlan.agent_label`)
BLIND_SUFFIX = " (blind)"


def views(plan: Any) -> list[Any]:
    """The plans a run executes: ``[plan]``, or for ``plan.blind_both`` the named plan (no ``blind``
    env kwarg) and the blind plan (``blind=True``), neither with ``blind_both``."""
    if not getattr(plan, "blind_both", False):
        return [plan]
    named = {k: v for k, v in plan.env_kwargs.items() if k != "blind"}
    return [replace(plan, blind_both=False, env_kwargs=named),
            replace(plan, blind_both=False, env_kwargs={**named, "blind": True})]


def merge_sections(parts: Sequence[SectionResult]) -> SectionResult:
    """One section of a task from its per-view sections: rows and runs in view order, an identical row or
    run given by both views kept once (a reference run that does not depend on the view), list extras
    concatenated (distinct items), other extras from the first view that has them."""
    out = SectionResult(task=parts[0].task)
    seen: set[str] = set()
    for p in parts:
        for r in p.rows:
            if r not in out.rows:
                out.rows.append(r)
        for run in p.runs:
            k = json.dumps(to_jsonable(run), sort_keys=True)
            if k not in seen:
                seen.add(k)
                out.runs.append(run)
        for k, v in p.extra.items():
            if isinstance(v, list):
                cur = out.extra.setdefault(k, [])
                cur += [x for x in v if x not in cur]
            else:
                out.extra.setdefault(k, v)
    return out


def _matches(row: SummaryRow, key: dict[str, Any]) -> bool:
    return all(row.get(k) == v for k, v in key.items())


def gap_section(parts: Sequence[SectionResult], runs: Sequence[Sequence[dict]], adapter: Any,
                console: Any = None, config: Any = None) -> SectionResult:
    """The task's section of a ``--blind both`` run: the merged section (:func:`merge_sections`) whose
    blind rows carry the gap columns (:func:`quantgym.stats.gap.columns`), its ``extra["memorization_gap"]``
    one record per pair (agent, key, per metric named / blind / gap / interval / n / block, the Sharpe test,
    the bootstrap settings), and the gap table printed to ``console``.

    Parameters
    ----------
    parts : the named and the blind section of the task.
    runs : the named and the blind runs (job order, one list per view).
    adapter : the task's eval adapter (``gap_series``, ``gap_metrics``).
    config : :class:`~quantgym.stats.config.BootstrapConfig` (default: the benches' settings).
    """
    from quantgym.stats.config import DEFAULT_BOOTSTRAP
    from quantgym.stats.gap import columns, memorization_gap

    config = config or DEFAULT_BOOTSTRAP
    metrics = tuple(getattr(adapter, "gap_metrics", None) or DEFAULT_METRICS)
    hook = getattr(adapter, "gap_series", None)
    series = [[hook(r) for r in rs] if callable(hook) else [] for rs in runs]
    named_sec, blind_sec = parts
    records = []
    for br in blind_sec.rows:
        if not br.agent.endswith(BLIND_SUFFIX):
            continue
        agent = br.agent[: -len(BLIND_SUFFIX)]
        bs = next((s for s in series[1] if s is not None and _matches(br, s.key)), None)
        key = bs.key if bs is not None else {"profile": br.profile, "period": br.period}
        nr = next((r for r in named_sec.rows if r.agent == agent and _matches(r, key)), None)
        if nr is None:
            continue
        ns = next((s for s in series[0] if s is not None and _matches(nr, s.key)), None)
        gap = memorization_gap(nr, br, ns, bs, metrics, config)
        br.extra.update(gap["cells"])
        records.append({"agent": agent, "key": key, **gap})
    sec = merge_sections(parts)
    for r in sec.rows:  # the gap columns in one order on every row (empty on named and reference rows)
        r.extra = {**{k: v for k, v in r.extra.items() if k not in columns(metrics)},
                   **{c: r.extra.get(c) for c in columns(metrics)}}
    sec.extra["memorization_gap"] = records
    if console is not None and records:
        print_gap_table(console, sec.task, records, metrics)
    return sec


def _header(m: str) -> str:
    """A metric's table header (the registry's, :mod:`quantgym.leaderboard.metrics`), else its column name."""
    from quantgym.leaderboard.metrics import get_metric

    try:
        return get_metric(m).header
    except KeyError:
        return m


#: the gap table's columns (fits 80 columns)
def _gap_cols() -> tuple:
    from quantgym.tables import Col

    return (Col("episode", "left"), Col("metric", "left"), Col("named"), Col("blind"), Col("gap"),
            Col("95% CI", short="CI"), Col("p"), Col("recall", "left"))


def print_gap_table(console: Any, task: str, records: Sequence[dict], metrics: Sequence[str]) -> int:
    """The memorization gap of ``task`` on ``console``: per agent one table, per pair and metric a row
    (named, blind, gap = blind − named, the paired bootstrap interval, the Ledoit-Wolf p-value for the
    Sharpe ratio, ``likely`` where the interval excludes 0). Returns the number of tables printed."""
    from quantgym.tables import fmt, print_table

    def nd(m: str) -> int:
        return 2 if m == "sharpe" else 1 if m == "ret_pct" else 3 if m == "ceps" else 1

    n = 0
    for agent in dict.fromkeys(r["agent"] for r in records):
        rows, ends = [], []
        mine = [r for r in records if r["agent"] == agent]
        for rec in mine:
            episode = "\n".join(str(v) for v in rec["key"].values() if v is not None)
            shown = [m for m in metrics if (rec["metrics"].get(m) or {}).get("named") is not None
                     or (rec["metrics"].get(m) or {}).get("blind") is not None] or list(metrics[:1])
            for j, m in enumerate(shown):
                d = rec["metrics"].get(m) or {}
                ci = "" if d.get("lo") is None else f"[{fmt(d['lo'], nd(m))},{fmt(d['hi'], nd(m))}]"
                p = (d.get("test") or {}).get("p")
                flag = d.get("lo") is not None and (d["lo"] > 0 or d["hi"] < 0)
                rows.append([episode if j == 0 else "", _header(m), fmt(d.get("named"), nd(m)),
                             fmt(d.get("blind"), nd(m)), fmt(d.get("gap"), nd(m)), ci,
                             "" if p is None else ("<.001" if p < 0.001 else f"{p:.3f}"), "likely" if flag else ""])
                ends.append(j == len(shown) - 1)
        n += print_table(console, f"Memorization gap — {task}, {agent}: blind − named", _gap_cols(), rows, keys=2,
                         end_sections=ends, caption="95% CI: paired stationary bootstrap of the gap (same days, "
                         "same resamples); p: Ledoit-Wolf test of equal Sharpe ratios; recall: flagged where the "
                         "interval excludes 0. Blinding hides names, dates and levels, not shapes: no gap does "
                         "not prove no recall (docs/blind.md).")
    return n




# ------------------------------------------------------------------------------ the leaderboard
def read_gap_cells(d: dict[str, Any]) -> dict[str, Any]:
    """The gap cells of a summary row read back (``gap_*`` numbers, ``likely_recall`` a flag or None) and,
    for each ``gap_<m>``, the row's own value of ``m`` (the blind value); empty for a row without them."""
    from quantgym.leaderboard.metrics import number

    out: dict[str, Any] = {}
    for k, v in d.items():
        if k == "likely_recall":
            out[k] = {"true": True, "false": False}.get(str(v).lower()) if v not in (None, "") else None
        elif isinstance(k, str) and k.startswith("gap_"):
            out[k] = number(v)
            m = k[4:]
            if not m.endswith(("_lo", "_hi", "_p")) and m in d:
                out.setdefault(f"blind_{m}", number(d[m]))
    return out


def gap_metrics_of(rows: Sequence[dict[str, Any]]) -> list[str]:
    """The metrics with a gap column among ``rows`` (``gap_<m>``), in order of appearance."""
    seen: dict[str, None] = {}
    for r in rows:
        for k in r:
            if k.startswith("gap_") and not k.endswith(("_lo", "_hi", "_p")) and r.get(k) is not None:
                seen.setdefault(k[4:])
    return list(seen)


def report_section(rows: Sequence[dict[str, Any]]) -> Any:
    """``quantgym report``'s "Memorization gap" section: per blind row of a ``--blind both`` run and per
    metric, the named and blind values, the gap, its interval, the Ledoit-Wolf p-value (Sharpe) and the flag;
    None when no input row has a gap."""
    from quantgym.leaderboard import MISSING, Section, Table, fmt

    mine = [r for r in rows if any(k.startswith("gap_") and r.get(k) is not None for k in r)]
    if not mine:
        return None
    body = []
    for r in mine:
        for m in gap_metrics_of([r]):
            gap, blind = r.get(f"gap_{m}"), r.get(f"blind_{m}")
            named = None if gap is None or blind is None else blind - gap
            lo, hi, p = r.get(f"gap_{m}_lo"), r.get(f"gap_{m}_hi"), r.get(f"gap_{m}_p")
            # "yes" / "no" where there is an interval to read, "–" where there is none (no returns, one number)
            flag = MISSING if lo is None or hi is None else ("yes" if lo > 0 or hi < 0 else "no")
            body.append([r["source"], r["task"] or "", r["agent"] or "",
                         "/".join(x for x in (r["profile"], r["period"]) if x) or MISSING, _header(m),
                         fmt(named, 3, MISSING), fmt(blind, 3, MISSING), fmt(gap, 3, MISSING),
                         MISSING if lo is None else f"[{fmt(lo, 3)}, {fmt(hi, 3)}]", fmt(p, 3, MISSING),
                         flag])
    table = Table("Memorization gap: blind − named", ["source", "task", "agent", "profile/period", "metric",
                  "named", "blind", "gap", "95% CI", "p", "likely_recall"], body, anchor="memorization-gap",
                  note="quantgym eval --blind both: each episode run named and blind with the same agent and seeds. "
                       "95% CI: paired stationary bootstrap (Politis & Romano 1994) of the gap on the same days; "
                       "p: Ledoit & Wolf (2008) test of equal Sharpe ratios. Flagged where the interval excludes "
                       "0. Blinding hides names, dates and levels, not shapes: no gap does not prove no recall.")
    return Section("Memorization gap", "memorization-gap", tables=[table])


__all__ = ["BLIND_SUFFIX", "DEFAULT_METRICS", "gap_metrics_of", "gap_section", "merge_sections", "print_gap_table",
           "read_gap_cells", "report_section", "views"]
