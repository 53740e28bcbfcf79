"""Market-Bench's part of ``quantgym eval`` (its :class:`~quantgym.evaluation.EvalAdapter`): one episode of up
to K attempts per (env id, round), and the pass@k / MAE table (spec market_bench §6)."""

from __future__ import annotations

from typing import Any, Callable

from quantgym.evaluation import EvalContext, EvalPlan, job_label, llm_summary, print_warnings as _print_warnings
from quantgym.results import SectionResult, SummaryRow
from quantgym.tables import Col


def run_market_bench(agent: Any, env_id: str, rnd: int, plan: EvalPlan) -> dict[str, Any]:
    """One Market-Bench (strategy, round) episode of up to K attempts."""
    import gymnasium as gym

    env = gym.make(env_id, round=rnd, attempts=plan.attempts, feedback=plan.feedback, **plan.env_kwargs)
    try:
        obs, info = env.reset(seed=plan.seed)
        agent.reset(env)
        done = False
        while not done:
            obs, _, done, _, info = env.step(agent.act(obs, info))
        u = env.unwrapped
        label = agent.current_episode
        recs = []
        for rec in u.records:
            r = {k: v for k, v in rec.items() if k != "metrics"}
            r.update(agent=agent.name, strategy=u.strategy, round=u.round_number)
            recs.append(r)
        return {"env_id": env_id, "round": rnd, "records": recs, "round_record": info["record"], "episode": label,
                "usage": agent.episode_usage(label), "decisions": agent.logs.get(label, []),
                "llm": llm_summary(agent, label)}
    finally:
        env.close()


class MarketBenchEval:
    """:class:`~quantgym.evaluation.EvalAdapter` of Market-Bench."""

    def jobs(self, env_id: str, agent: Any, plan: EvalPlan, ctx: EvalContext) -> list[tuple[str, Callable[[], dict]]]:
        return [(job_label(env_id, f"round {int(r)}"), (lambda r=r: run_market_bench(agent, env_id, int(r), plan)))
                for r in plan.rounds]

    def section(self, runs: list[dict], agent: Any, plan: EvalPlan, ctx: EvalContext) -> SectionResult:
        return _section(runs, agent, plan, ctx.console)


def _section(runs: list[dict], agent: Any, plan: EvalPlan, console: Any) -> SectionResult:
    from quantgym.envs.market_bench.bench import records_to_attempts
    from quantgym.envs.market_bench.config import TASK_VERSION, MarketBenchScoringConfig as ScoringConfig
    from quantgym.envs.market_bench.scoring import fmt, score_table

    records = [r for run in runs for r in run["records"]]
    cfg = ScoringConfig(attempts=plan.attempts) if "attempts" in ScoringConfig.__dataclass_fields__ else ScoringConfig()
    scores = score_table(records_to_attempts(records), cfg)
    sec = SectionResult(task="market_bench", rows=[SummaryRow(task="market_bench", agent=agent.name,
                                                              period=TASK_VERSION)],
                        runs=[{**run, "agent": agent.name, "transcript": agent.usage().get("transcript")}
                              for run in runs],
                        extra={"scores": scores.to_dict(orient="records"), "task_version": TASK_VERSION,
                               "feedback": plan.feedback, "attempts": plan.attempts})
    if console is not None:
        from quantgym.envs.market_bench.bench import legend, score_cols
        from quantgym.tables import print_table

        k = plan.attempts
        cols = [c if c.header != "agent" else Col("strategy", "left") for c in score_cols(k, extras=False, rank=False)]
        rows = [[str(row["strategy"]), *[fmt(row.get(c)) for c in (f"pass@{k}", "pass@1", "mean_mae_solved",
                                                                     "avg_attempt", f"correct@{k}", "correct@1")]]
                for _, row in scores.iterrows()]
        print_table(console, f"Market-Bench {TASK_VERSION} — {agent.name} ({'repair' if plan.feedback else 'independent'} "
                    f"attempts, K={k})", cols, rows, keys=1, caption=legend(k, cfg, stub=False))
        _print_warnings(console, runs)
    return sec



ADAPTER = MarketBenchEval()

__all__ = ["ADAPTER", "MarketBenchEval", "run_market_bench"]
