"""Quant-Arena's part of ``quantgym eval`` (its :class:`~quantgym.evaluation.EvalAdapter`): one research run
(submit / feedback / freeze, or the one-shot track) per env id, and the result table (S_in, S_out, S and the
sealed window's metrics, spec quant_arena §10)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

from quantgym.costs import DEFAULT_CAPITAL, agent_model, cost_columns, cost_record
from quantgym.evaluation import EvalContext, EvalPlan, evaluate, job_label, llm_summary
from quantgym.results import SectionResult, SummaryRow, episode_status
from quantgym.tables import STATUS_NOTE, Col, status_agent
from quantgym.tables import fmt as _fmt, print_warnings as _print_warnings

from .config import SHARPE_NOTE
from .metrics import summary_extra


def run_quant_arena(agent: Any, env_id: str, plan: EvalPlan, record_dir: Path | None = None) -> dict[str, Any]:
    """One Quant-Arena research run (submit / feedback / freeze) or one-shot submission, through
    :func:`quantgym.evaluation.evaluate`: the final scores are the last step's ``info``, the feedback the
    earlier steps'."""
    import gymnasium as gym

    kw = dict(plan.env_kwargs)
    kw.setdefault("record_dir", record_dir if record_dir is not None else False)
    kw.setdefault("agent", agent.name)
    kw.setdefault("model", getattr(agent.engine.config, "model", None))
    kw.setdefault("framework", "quantgym.agents.llm")
    env = gym.make(env_id, **kw)
    res = evaluate(env, agent, seed=plan.seed)
    u = env.unwrapped
    label = agent.current_episode
    return {"env_id": env_id, "track": u.mode, "period": res.period,  # Windows.period_label
            "final": res.info, "S": res.steps[-1]["reward"],
            "feedback": [{"reward": st["reward"], **(st.get("feedback") or {})} for st in res.steps[:-1]],
            "episode": label, "usage": agent.episode_usage(label), "decisions": agent.logs.get(label, []),
            "llm": llm_summary(agent, label), "record_path": None if u.record_path is None else str(u.record_path),
            "sealed_nav": _sealed_nav(u)}


def _sealed_nav(env: Any) -> dict[str, list] | None:
    """The sealed window's account NAV by execution day (``dates``, ``nav`` from D_0), None without one."""
    res = env.sealed_result
    daily = getattr(res, "daily", None) or {}
    if not daily.get("nav"):
        return None
    return {"dates": list(daily["dates"]), "nav": list(daily["nav"])}


class QuantArenaEval:
    """:class:`~quantgym.evaluation.EvalAdapter` of Quant-Arena (run records in ``OUT/quant_arena_records``)."""

    def jobs(self, env_id: str, agent: Any, plan: EvalPlan, ctx: EvalContext) -> list[tuple[str, Callable[[], dict]]]:
        rec_dir = ctx.out_dir / "quant_arena_records"
        return [(job_label(env_id), (lambda: run_quant_arena(agent, env_id, plan, rec_dir)))]

    def section(self, runs: list[dict], agent: Any, plan: EvalPlan, ctx: EvalContext) -> SectionResult:
        return _section(runs, agent, ctx.console, plan)

    #: the memorization gap's headline metrics (``quantgym eval --blind both``, docs/blind.md): the 0-100
    #: score (no per-date series: its point gap only) and the sealed window's Sharpe ratio
    gap_metrics = ("S", "sharpe")

    def gap_series(self, run: dict) -> Any:
        """The sealed window's daily returns (:class:`quantgym.stats.gap.GapSeries`; Sharpe without
        risk-free rate over 242 days, spec quant_arena §10.11), with the run's row key (period, track)."""
        import pandas as pd

        from quantgym.stats.gap import GapSeries

        nav = run.get("sealed_nav")
        returns = None
        if nav:
            s = pd.Series(nav["nav"], index=nav["dates"], dtype=float)
            returns = (s / s.shift(1) - 1.0).iloc[1:]
        return GapSeries(key={"period": run["period"], "track": run.get("track")}, returns=returns, rf=0.0,
                         periods_per_year=242)


def _section(runs: list[dict], agent: Any, console: Any, plan: EvalPlan | None = None) -> SectionResult:
    sec = SectionResult(task="quant_arena")
    name = plan.agent_label(agent.name) if plan is not None else agent.name
    rows: list[list[str]] = []
    for run in runs:
        fin = run["final"] or {}
        m = fin.get("sealed") or {}
        status = episode_status(run.get("usage"))
        run["status"] = status
        ret_pct = None if m.get("total_return") is None else 100 * m["total_return"]
        run["inference"] = cost_record(run.get("usage"), ret_pct, plan.capital if plan is not None else
                                       DEFAULT_CAPITAL, model=agent_model(agent))
        sec.rows.append(SummaryRow(
            task="quant_arena", agent=name, profile=None, period=run["period"], status=status,
            sharpe=m.get("sharpe"), ret_pct=ret_pct,
            maxdd_pct=None if m.get("max_drawdown") is None else 100 * m["max_drawdown"],
            vol_pct=None if m.get("volatility") is None else 100 * m["volatility"],
            extra={**summary_extra(fin), **({"track": run["track"]} if run.get("track") else {}),
                   **cost_columns(run["inference"])}))
        sec.runs.append({"task": "quant_arena", "agent": agent.name, **run,
                         "transcript": agent.usage().get("transcript")})
        u = run["usage"] or {}
        # candidates submitted: the research runs (the freeze picks one of them); one-shot: the one submission
        n_cand = (fin.get("overfitting") or {}).get("n_candidates")
        if n_cand is None:
            n_cand = len(run["feedback"]) or (1 if fin.get("frozen_candidate") else 0)
        rows.append([status_agent(run["env_id"], status), str(n_cand),
                     str(fin.get("frozen_candidate")), _fmt(fin.get("S_in")), _fmt(fin.get("S_out")),
                     _fmt(fin.get("S")), _fmt((fin.get("overfitting") or {}).get("dsr")),
                     _fmt((fin.get("overfitting") or {}).get("pbo")),
                     _fmt(None if m.get("arr") is None else 100 * m["arr"]),
                     _fmt(m.get("sharpe")), str(u.get("calls", "")), str(u.get("total_tokens", ""))])
    if console is not None:
        from quantgym.tables import print_table

        print_table(console, f"Quant-Arena — {name}", EVAL_COLS, rows,
                    caption=" ".join([f"{SHARPE_NOTE}, on the sealed window."] + (
                        [STATUS_NOTE] if any(r.get("status") != "ok" for r in runs) else [])))
        _print_warnings(console, runs)
    return sec


#: the ``eval`` table's columns (fit 80 columns)
EVAL_COLS = (Col("env", "left"), Col("candidates", short="cand."), Col("frozen", short="frz."), Col("S_in"),
             Col("S_out"), Col("S"), Col("DSR", group=True), Col("PBO"), Col("sealed ARR%", short="ARR%", group=True),
             Col("Sharpe"), Col("calls", group=True), Col("tokens", short="tok."))


ADAPTER = QuantArenaEval()

__all__ = ["ADAPTER", "QuantArenaEval", "run_quant_arena"]
