"""Market-Bench's part of ``quantgym eval`` (its :class:`~quantgym.evaluation.EvalAdapter`): one episode of up
to K attempts per (env id, round), and the pass@k / MAE table (spec market_bench §6)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from quantgym.costs import agent_model, cost_record, total_cost
from quantgym.evaluation import EvalContext, EvalPlan, evaluate, job_label, llm_summary
from quantgym.results import SectionResult, SummaryRow, combined_status, episode_status
from quantgym.tables import STATUS_NOTE, Col, status_agent
from quantgym.tables import print_warnings as _print_warnings


@dataclass(frozen=True)
class MarketBenchPlan:
    """Market-Bench's options of an :class:`~quantgym.evaluation.EvalPlan` (its record's ``eval_options``),
    with their defaults.

    Attributes
    ----------
    rounds : rounds to run (``--round``; default 1..N_ROUNDS).
    attempts : K attempts per round (``--attempts``; default the paper's 3, spec §6).
    feedback : repair mode (``--feedback``): each attempt sees the previous error.
    all_attempts : run all K attempts, no stop at the first success (set by ``--attempts n``): the n
        independent samples of the unbiased pass@k.
    """

    rounds: tuple[int, ...]
    attempts: int
    feedback: bool
    all_attempts: bool

    @classmethod
    def of(cls, plan: EvalPlan) -> "MarketBenchPlan":
        from quantgym.envs.market_bench.config import N_ROUNDS, MarketBenchScoringConfig

        return cls(rounds=tuple(int(r) for r in plan.get("rounds", range(1, N_ROUNDS + 1))),
                   attempts=int(plan.get("attempts", MarketBenchScoringConfig.attempts)),
                   feedback=bool(plan.get("feedback", False)), all_attempts=bool(plan.get("all_attempts", False)))


def run_market_bench(agent: Any, env_id: str, rnd: int, plan: EvalPlan) -> dict[str, Any]:
    """One Market-Bench (strategy, round) episode of up to K attempts, through
    :func:`quantgym.evaluation.evaluate`: the attempt records and the round record are the result's."""
    mb = MarketBenchPlan.of(plan)
    kw = dict(plan.env_kwargs)
    # quantgym eval --attempts n: all n independent attempts run (the samples of the unbiased pass@k);
    # by default (and in repair mode) the episode ends at the first success, as in the paper
    kw.setdefault("end_on_success", not (mb.all_attempts and not mb.feedback))
    res = evaluate(env_id, agent, seed=plan.seed, round=rnd, attempts=mb.attempts, feedback=mb.feedback, **kw)
    label = agent.current_episode
    return {"env_id": env_id, "round": rnd, "records": attempt_rows(res, agent.name),
            "round_record": res.info["record"], "episode": label, "all_attempts": not kw["end_on_success"],
            "usage": agent.episode_usage(label), "decisions": agent.logs.get(label, []),
            "llm": llm_summary(agent, label)}


def attempt_rows(res: Any, agent: str) -> list[dict[str, Any]]:
    """The attempt records of a Market-Bench :class:`~quantgym.evaluation.EvalResult` (its ``records``), each
    with the agent, strategy and round: the rows of the scorer's attempt table."""
    rr = res.metrics  # the round record (episode_result's metrics)
    return [{**r, "agent": agent, "strategy": rr["strategy"], "round": rr["round"]} for r in res.records]


class MarketBenchEval:
    """:class:`~quantgym.evaluation.EvalAdapter` of Market-Bench."""

    #: env kwargs the runner sets from the task's own options (quantgym.plan.validate_plan refuses them in
    #: --env-kwargs)
    owned_kwargs = {"round": "--round", "attempts": "--attempts", "feedback": "--feedback / --no-feedback"}

    def validate(self, plan: EvalPlan) -> None:
        """Refuse an unknown task set (``--env-kwargs '{"task_set": ...}'``), a round outside 1..N_ROUNDS or
        fewer than one attempt before anything runs (one line)."""
        from quantgym.envs.market_bench.config import N_ROUNDS, check_task_set

        check_task_set((plan.env_kwargs or {}).get("task_set"))
        try:
            mb = MarketBenchPlan.of(plan)
        except (TypeError, ValueError):
            raise ValueError(f"Market-Bench rounds and attempts must be integers; got rounds "
                             f"{plan.get('rounds')!r}, attempts {plan.get('attempts')!r}") from None
        bad = [r for r in mb.rounds if not 1 <= r <= N_ROUNDS]
        if bad or not mb.rounds:
            raise ValueError(f"--round takes round numbers 1-{N_ROUNDS}, comma-separated; got {list(mb.rounds)}")
        if mb.attempts < 1:
            raise ValueError(f"--attempts must be at least 1, got {mb.attempts}")

    def jobs(self, env_id: str, agent: Any, plan: EvalPlan, ctx: EvalContext) -> list[tuple[str, Callable[[], dict]]]:
        return [(job_label(env_id, f"round {r}"), (lambda r=r: run_market_bench(agent, env_id, r, plan)))
                for r in MarketBenchPlan.of(plan).rounds]

    def section(self, runs: list[dict], agent: Any, plan: EvalPlan, ctx: EvalContext) -> SectionResult:
        return _section(runs, agent, plan, ctx.console)


def not_samples_reason(runs: list[dict], feedback: bool) -> str | None:
    """Why the runs' attempts are not n independent samples (None when they are)."""
    if feedback:
        return ("repair mode (--feedback): each attempt sees the previous error, so the attempts are not independent "
                "samples")
    if not runs or not all(run.get("all_attempts") for run in runs):
        return ("the episodes ended at the first success (the paper's protocol): give quantgym eval --attempts n "
                "to keep all n independent attempts")
    return None


def _section(runs: list[dict], agent: Any, plan: EvalPlan, console: Any) -> SectionResult:
    from quantgym.envs.market_bench.bench import records_to_attempts
    from quantgym.envs.market_bench.config import MarketBenchScoringConfig as ScoringConfig, check_task_set
    from quantgym.envs.market_bench.scoring import (UNBIASED_KS, first_success_prefix, fmt, score_table, summary_extra,
                                                    unbiased_table)

    mb = MarketBenchPlan.of(plan)
    for run in runs:
        run["status"] = episode_status(run.get("usage"))
    status = combined_status([run["status"] for run in runs])  # the row sums up every round's episode
    for run in runs:  # Market-Bench scores code, not a portfolio: the inference cost only, no P&L
        run["inference"] = cost_record(run.get("usage"), pnl=False, model=agent_model(agent))
    records = [r for run in runs for r in run["records"]]
    task_set = check_task_set((getattr(plan, "env_kwargs", None) or {}).get("task_set"))  # --env-kwargs {"task_set": ..}
    config = ScoringConfig(attempts=mb.attempts) if "attempts" in ScoringConfig.__dataclass_fields__ else ScoringConfig()
    attempts = records_to_attempts(records)
    # the paper's sequential metrics from what its protocol would have run (up to each round's first success)
    sequential = first_success_prefix(attempts)
    scores = score_table(sequential, config)
    why = not_samples_reason(runs, mb.feedback)
    unbiased = unbiased_table(attempts, not_samples=why)
    sec = SectionResult(task="market_bench", rows=[SummaryRow(task="market_bench", agent=agent.name,
                                                              period=task_set, status=status,
                                                              extra={**summary_extra(sequential, unbiased,
                                                                                     agent.name),
                                                                     "cost_usd": total_cost(run.get("usage")
                                                                                            for run in runs)})],
                        runs=[{**run, "agent": agent.name, "transcript": agent.usage().get("transcript")}
                              for run in runs],
                        extra={"status": status, "scores": scores.to_dict(orient="records"),
                               "task_version": task_set,
                               "feedback": mb.feedback, "attempts": mb.attempts,
                               "unbiased": unbiased.to_dict(orient="records"), "unbiased_note": why or UNBIASED_NOTE})
    if console is not None:
        from quantgym.envs.market_bench.bench import legend, score_cols
        from quantgym.tables import print_table

        k = mb.attempts
        cols = [c if c.header != "agent" else Col("strategy", "left") for c in score_cols(k, extras=False, rank=False)]
        rows = [[str(row["strategy"]), *[fmt(row.get(c)) for c in (f"pass@{k}", "pass@1", "mean_mae_solved",
                                                                     "avg_attempt", f"correct@{k}", "correct@1")]]
                for _, row in scores.iterrows()]
        caption = legend(k, config, stub=False, extras=False)
        note = None if status == "ok" else f"{status_agent(agent.name, status)}: {STATUS_NOTE}"
        print_table(console, f"Market-Bench {task_set} — {status_agent(agent.name, status)} "
                    f"({'repair' if mb.feedback else 'independent'} attempts, K={k})", cols, rows, keys=1,
                    caption=" ".join(x for x in (caption if why is not None else None, note) if x) or None)
        if why is None:
            ks = list(UNBIASED_KS)
            ucols = [Col("strategy", "left"), Col("rounds"),
                     *[Col(f"{m}@{kk}", short=f"{m[0]}@{kk}", group=m == "pass") for kk in ks for m in ("pass", "correct")]]
            urows = [[str(row["strategy"]), str(row["n_rounds"]),
                      *[interval_cell(row, f"{m}@{kk}") for kk in ks for m in ("pass", "correct")]]
                     for _, row in unbiased.iterrows()]
            print_table(console, f"Unbiased pass@k / correct@k over n = {k} attempts per round (Chen et al. 2021; "
                        "95 % t interval over rounds)", ucols, urows, keys=1, caption=caption)
        else:
            console.print(f"[dim]Unbiased pass@k not estimated: {why}.[/]")
        _print_warnings(console, runs)
    return sec


#: results.json note on the unbiased estimates
UNBIASED_NOTE = ("pass@k_unbiased = mean over rounds of 1 - C(n-c,k)/C(n,k) (Chen et al. 2021) with c the SUCCESS "
                 "attempts of n; correct@k_unbiased the same with the correct attempts; lo/hi: 95 % Student-t "
                 "interval over the rounds, clipped to [0, 1]. The paper's sequential pass@k (scores) is unchanged.")


def interval_cell(row: Any, name: str) -> str:
    """``0.62 [0.41, 0.83]`` of an unbiased estimate (``-`` when undefined)."""
    from quantgym.envs.market_bench.scoring import fmt

    est, lo, hi = row.get(f"{name}_unbiased"), row.get(f"{name}_lo"), row.get(f"{name}_hi")
    if est is None or (isinstance(est, float) and est != est):
        return "-"
    if lo is None or (isinstance(lo, float) and lo != lo):
        return fmt(est)
    return f"{fmt(est)} [{fmt(lo)}, {fmt(hi)}]"


ADAPTER = MarketBenchEval()

__all__ = ["ADAPTER", "MarketBenchEval", "attempt_rows", "run_market_bench", "not_samples_reason", "interval_cell",
           "UNBIASED_NOTE"]
