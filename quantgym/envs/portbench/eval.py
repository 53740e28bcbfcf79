"""PortBench's part of ``quantgym eval`` (its :class:`~quantgym.evaluation.EvalAdapter`): one episode per
(env id, period) through :func:`quantgym.evaluation.evaluate`, Equal-Weight beside the agent for the NAV
plots, and the result table with the stress gate (spec portbench §7.2)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Callable

from quantgym.costs import agent_model, cost_columns, cost_record
from quantgym.evaluation import (EvalContext, EvalPlan, evaluate, is_llm_agent, job_label, llm_summary, policy_name)
from quantgym.results import SectionResult
from quantgym.tables import STATUS_NOTE, Col, status_agent
from quantgym.tables import fmt as _fmt, print_warnings as _print_warnings

#: ``quantgym eval``'s periods when the plan names none [project choice: the calm year, one episode]
EVAL_PERIODS = ("normal_2024",)


def eval_periods(plan: EvalPlan) -> list[Any]:
    """The plan's PortBench periods (option ``periods``, ``quantgym eval --period``; default
    :data:`EVAL_PERIODS`) as :class:`~quantgym.envs.portbench.config.Period` / ``LivePeriod`` objects.

    :meth:`PortBenchEval.validate` resolves the plan's periods once and the plan carries the objects from
    then on (:func:`~quantgym.envs.portbench.config.resolve_period` returns an object as it is), so the
    period grammar is parsed once per plan.
    """
    from quantgym.envs.portbench.config import resolve_period

    return [resolve_period(p) for p in plan.get("periods") or EVAL_PERIODS]


def run_portbench(agent: Any, env_id: str, period: Any, plan: EvalPlan) -> dict[str, Any]:
    """One PortBench episode through :func:`quantgym.evaluation.evaluate`."""
    kw = {k: v for k, v in plan.env_kwargs.items()}
    res = evaluate(env_id, agent, seed=plan.seed, period=period, **kw)
    # a baseline / sb3 policy has no episode labels or token usage
    label = getattr(agent, "current_episode", None)
    usage = agent.episode_usage(label) if hasattr(agent, "episode_usage") else None
    text_stats: dict[str, dict[str, int]] = {}
    for st in res.steps:
        t = st.get("text") or {}
        if not t:
            continue
        d = text_stats.setdefault(t["stage"], {"ok": 0, "refused": 0, "unparseable": 0, "invalid": 0, "retry": 0,
                                               "coerced": 0})
        d[t["status"]] = d.get(t["status"], 0) + 1
        d["coerced"] += bool(t.get("coercions"))
    return {"result": res, "usage": usage, "episode": label, "parse_stats": text_stats,
            "llm": llm_summary(agent, label)}



class PortBenchEval:
    """:class:`~quantgym.evaluation.EvalAdapter` of PortBench."""

    reference_name = "Equal-Weight"

    def validate(self, plan: EvalPlan) -> dict[str, Any]:
        """Resolve the plan's periods, refusing an unknown one before any episode runs (the message lists
        the valid ones). Returns the resolved options, ``{"periods": [Period, ...]}``.

        Raises
        ------
        ValueError
            From :func:`~quantgym.envs.portbench.config.resolve_period`.
        """
        from quantgym.envs.portbench.config import LivePeriod

        periods = eval_periods(plan)
        if plan.get("after") and {"data", "universe"} & set(plan.env_kwargs):
            raise ValueError("--after cuts the bundled data's periods; with your own data give the window "
                             "after the cutoff as --period START:END[:FREQ]")
        if not {"data", "universe"} & set(plan.env_kwargs):  # the bundled data (loaded once, cached): refuse a
            from quantgym.envs.portbench.data import load_portbench_data  # period outside it before any run
            from quantgym.envs.portbench.simulator import period_rows

            dates = load_portbench_data().dates
            for period in periods:
                if not isinstance(period, LivePeriod):
                    period_rows(dates, period)
            if plan.get("after"):
                periods = periods_after(periods, str(plan.get("after")), dates)
        return {"periods": periods}

    def jobs(self, env_id: str, agent: Any, plan: EvalPlan, ctx: EvalContext) -> list[tuple[str, Callable[[], dict]]]:
        return [(job_label(env_id, p.name), (lambda e=env_id, p=p: run_portbench(ctx.new_agent(), e, p, plan)))
                for p in eval_periods(plan)]

    def reference_jobs(self, env_ids: list[str], agent: Any, plan: EvalPlan) -> list[tuple[str, Any, Callable[[], Any]]]:
        if not plan.get("baseline", True) or policy_name(agent) == "Equal-Weight":
            return []
        from quantgym.envs.portbench.baselines import make_baseline

        periods = eval_periods(plan)
        return [(job_label(e, p.name), (e, p.name),
                 (lambda e=e, p=p: evaluate(e, make_baseline("equal_weight"), seed=plan.seed, period=p)))
                for e in env_ids for p in periods]

    def section(self, runs: list[dict], agent: Any, plan: EvalPlan, ctx: EvalContext) -> SectionResult:
        return _portbench_section(runs, ctx.references, agent, ctx.out_dir, plan, ctx.console)

    #: env kwargs the runner sets from the task's own options (quantgym.plan.validate_plan refuses them in
    #: --env-kwargs): evaluate() sets each episode's period from the plan's periods
    owned_kwargs = {"period": "--period (e.g. --period covid_2020 or START:END[:FREQ])"}

    #: the memorization gap's headline metrics (``quantgym eval --blind both``, docs/blind.md)
    gap_metrics = ("sharpe", "ret_pct", "ceps")

    def gap_series(self, run: dict) -> Any:
        """The run's daily NAV returns and per-decision CEPS (:class:`quantgym.stats.gap.GapSeries`), with
        the Sharpe convention of its config (rf, 252 days) and its row key (profile, period)."""
        import pandas as pd

        from quantgym.envs.portbench.uncertainty import _settings, daily_returns
        from quantgym.metrics import TRADING_DAYS
        from quantgym.stats.gap import GapSeries

        r = run["result"]
        rf, include_start = _settings(r)
        # the per-decision CEPS: the step that trades a decision carries its ceps and date in info
        recs = [x for x in r.steps if x.get("ceps") is not None]
        ceps = pd.Series([float(x["ceps"]) for x in recs], index=[x["date"] for x in recs], dtype=float)
        return GapSeries(key={"profile": r.profile, "period": r.period}, returns=daily_returns(r.nav),
                         scores={"ceps": ceps} if len(ceps) else {}, rf=rf, periods_per_year=TRADING_DAYS,
                         include_start=include_start)


def periods_after(periods: list[Any], after: str, dates: Any) -> list[Any]:
    """The ``periods`` cut to their decision dates strictly after ``after`` (``quantgym eval --after``, the
    model's training cutoff; docs/llm-agents.md): a period's start moves to its first decision date after
    the cutoff (named ``<period>_after_<date>``), a period with none left is dropped; one line per period
    on stderr says how many decision dates remain. Live periods are kept as they are.

    Raises
    ------
    ValueError
        ``after`` is no ISO date, is on or after the data's last date, or leaves no decision date at all.
    """
    import dataclasses
    import sys

    import pandas as pd

    from quantgym.envs.portbench.config import LivePeriod
    from quantgym.envs.portbench.simulator import period_rows

    try:
        cut = pd.Timestamp(after)
    except ValueError:
        raise ValueError(f"--after must be a date YYYY-MM-DD, got {after!r}") from None
    if cut >= dates[-1]:
        raise ValueError(f"--after {cut.date()} is not before the data's last date {dates[-1].date()}: "
                         "no decision date remains (live mode, docs/live.md, evaluates after any date)")
    kept = []
    for p in periods:
        if isinstance(p, LivePeriod):
            kept.append(p)
            continue
        rows = period_rows(dates, p)[2]
        left = [dates[r] for r in rows if dates[r] > cut]
        if not left:
            print(f"--after {cut.date()}: {p.name}: 0 of {len(rows)} decision dates remain; dropped",
                  file=sys.stderr)
            continue
        q = p if len(left) == len(rows) else dataclasses.replace(
            p, name=f"{p.name}_after_{cut.date()}", start=str(left[0].date()))
        n = len(period_rows(dates, q)[2])
        print(f"--after {cut.date()}: {p.name}: {n} of {len(rows)} decision dates remain", file=sys.stderr)
        kept.append(q)
    if not kept:
        raise ValueError(f"--after {cut.date()}: every period lies before it; choose a later period "
                         "(e.g. recent_2025)")
    return kept


def _portbench_section(runs: list[dict], baselines: dict, agent: Any, out_dir: Path, plan: EvalPlan,
                       console: Any) -> SectionResult:
    from quantgym.envs.portbench.config import period_gate
    from quantgym.envs.portbench.profiles import PROFILES

    sec = SectionResult(task="portbench")
    cells_rows: list[dict[str, str]] = []  # one per table row, keyed by EVAL_COLS header
    by_profile: dict[str, dict[str, float]] = {}
    base_by_profile: dict[str, dict[str, float]] = {}  # the Equal-Weight references' drawdowns: their own gate
    for run in runs:
        r = run["result"]
        by_profile.setdefault(r.profile, {})[r.period] = r.metrics["max_drawdown"]
        base = baselines.get((r.env_id, r.period))
        if base is not None:
            base_by_profile.setdefault(r.profile, {})[r.period] = base.metrics["max_drawdown"]
    for run in runs:
        r = run["result"]
        tol = PROFILES[r.profile].max_drawdown
        gate = period_gate(r.period, by_profile[r.profile], tol)
        row = r.summary_row(gate=gate)
        row.agent = plan.agent_label(row.agent)
        inference = cost_record(run["usage"], row.ret_pct, plan.capital, model=agent_model(agent))
        row.extra.update(cost_columns(inference))
        sec.rows.append(row)
        base = baselines.get((r.env_id, r.period))
        d = r.to_dict()
        d.update(usage=run["usage"], episode=run["episode"], parse_stats=run["parse_stats"], llm=run.get("llm"),
                 transcript=agent.usage().get("transcript") if hasattr(agent, "usage") else None,
                 inference=inference)
        sec.runs.append(d)
        base_gate = period_gate(r.period, base_by_profile[r.profile], tol) if base is not None else None
        if base is not None:
            sec.rows.append(base.summary_row(gate=base_gate))
            sec.rows[-1].profile = r.profile
            sec.rows[-1].extra.update(cost_columns(cost_record(None, sec.rows[-1].ret_pct, plan.capital)))
            bd = base.to_dict()
            bd["note"] = "Equal-Weight reference for the plot (direct allocation, no stage scores)"
            sec.runs.append(bd)
        if console is not None:
            ss = r.stage_scores or {}
            u = run["usage"] or {}
            m = r.metrics
            cells = {"Sharpe": _fmt(m["sharpe"], 3), "Ret%": _fmt(m["ret_pct"]), "MaxDD%": _fmt(m["maxdd_pct"]),
                     "Vol%": _fmt(m["vol_pct"]), "CEPS": _fmt(r.ceps, 3),
                     **{s: _fmt(ss.get(s), 3) for s in ("S1", "S2", "S3", "S4", "S5")},
                     "gate": "" if gate is None else ("✓" if gate else "✗")}
            if r.status == "failed":  # not a result: no number shown (they stay in results.json)
                cells = {k: "–" for k in cells}
            cells_rows.append({
                "profile": r.profile, "period": r.period, "agent": status_agent(plan.agent_label(r.agent), r.status), **cells,
                "refused": str(m.get("refused_steps", "")),
                "unparse": str(sum(v.get("unparseable", 0) for v in run["parse_stats"].values())),
                "calls": str(u.get("calls", "")), "tokens": str(u.get("total_tokens", "")),
                "warn": str(u.get("warnings", 0) or "")})
            if base is not None:
                bm = base.metrics
                cells_rows.append({"profile": r.profile, "period": r.period, "agent": base.agent,
                                   "Sharpe": _fmt(bm["sharpe"], 3), "Ret%": _fmt(bm["ret_pct"]),
                                   "MaxDD%": _fmt(bm["maxdd_pct"]), "Vol%": _fmt(bm["vol_pct"]),
                                   "gate": "" if base_gate is None else ("✓" if base_gate else "✗")})
        if plan.plots:
            from quantgym.envs.portbench.plots import plot_nav

            curves = [r] + ([base] if base is not None else [])
            label = plan.agent_label(r.agent)  # blind and named runs of --blind both: one plot each
            safe = re.sub(r"[^A-Za-z0-9._-]+", "_", f"{label}_{r.profile}_{r.period}")
            path = plot_nav(curves, f"PortBench {r.period} — {r.profile}: {label}", out_dir / f"portbench_nav_{safe}.png",
                            tol)
            sec.extra.setdefault("plots", []).append(str(path))
    if console is not None:
        how = ("stagewise S1→S2→S3, text protocol" if is_llm_agent(agent) else
               "direct allocation, no stage scores" if getattr(agent, "direct_allocation", False) else "policy")
        print_eval_table(console, f"PortBench — {plan.agent_label(policy_name(agent))} ({how})", cells_rows, llm=is_llm_agent(agent),
                         stage_scores=not getattr(agent, "direct_allocation", False),
                         caption=" ".join([sharpe_caption(runs)] + (
                             [STATUS_NOTE] if any(run["result"].status != "ok" for run in runs) else [])))
        _print_warnings(console, runs)
    return sec


def sharpe_caption(runs: list[dict]) -> str:
    """The eval table's Sharpe footer: :func:`~quantgym.envs.portbench.config.sharpe_note` with the runs'
    risk-free rate (their config's ``rf``; one note per rate when the runs differ)."""
    from quantgym.envs.portbench.config import sharpe_note

    rfs = dict.fromkeys(((run["result"].config or {}).get("config") or {}).get("rf") for run in runs) or {None: None}
    return " ".join(f"{sharpe_note(rf)}." for rf in rfs)


#: the ``eval`` table's columns (fits 80 columns): the keys (profile: one table each; period, agent), the
#: metrics and the gate, then the stage scores, then the LLM's text-protocol counts; a split table breaks
#: between these groups when it can
EVAL_COLS = (Col("profile", "left"), Col("period", "left"), Col("agent", "left"), Col("Sharpe"),
             Col("Ret%"), Col("MaxDD%", short="MDD%"), Col("Vol%"), Col("gate", "center"), Col("CEPS", group=True),
             *[Col(s) for s in ("S1", "S2", "S3", "S4", "S5")], Col("refused", short="ref.", group=True),
             Col("unparse", short="unp."), Col("calls"), Col("tokens", short="tok."), Col("warn", short="w"))
_LLM_ONLY = ("refused", "unparse", "calls", "tokens", "warn")
_STAGE = ("CEPS", "S1", "S2", "S3", "S4", "S5")


def print_eval_table(console: Any, title: str, rows: list[dict[str, str]], llm: bool, stage_scores: bool = True,
                     width: int | None = None, caption: str | None = None) -> int:
    """The ``eval`` result table from ``rows`` (cells keyed by :data:`EVAL_COLS` header; a missing cell is
    empty), one table per profile (named in its title), each fitted to the terminal by
    :func:`quantgym.tables.print_table` with period and agent in every part; ``caption`` under each profile's
    table. Returns the number of parts."""
    from quantgym.tables import print_table

    cols = [c for c in EVAL_COLS[1:] if (llm or c.header not in _LLM_ONLY) and (stage_scores or c.header not in _STAGE)]
    n = 0
    for prof in dict.fromkeys(r.get("profile", "") for r in rows):
        mine = [r for r in rows if r.get("profile", "") == prof]
        # a line after each period's block: the agent's row, then its Equal-Weight reference
        ends = [i + 1 < len(mine) and mine[i + 1].get("period") != r.get("period") for i, r in enumerate(mine)]
        n += print_table(console, f"{title}, {prof} profile" if prof else title, cols,
                         [[r.get(c.header, "") for c in cols] for r in mine], keys=2, width=width, end_sections=ends,
                         caption=caption)
    return n


ADAPTER = PortBenchEval()

__all__ = ["ADAPTER", "PortBenchEval", "run_portbench"]
