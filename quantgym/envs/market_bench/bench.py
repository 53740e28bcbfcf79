"""``quantgym bench`` section of Market-Bench: the reference agent and the mutation suite.

Runs the reference agent on all 15 (strategy, round) pairs and every mutant on the 5 rounds
of its strategy, each through the env (sandbox, host-side validation, scoring), and reports
pass@3, pass@1, mean MAE over solved rounds and average first attempt per (agent, strategy)
(spec §6), with ``correct@3`` / ``correct@1`` (tolerance-based, anti-stub), the mean
equity-path correlation and the largest per-metric relative error beside. The reference must
score pass@1 = correct@1 = 1 and MAE = 0 everywhere; each mutant must run (SUCCESS) with
MAE > 0, and is then not correct (the ``lifo`` mutant has MAE 0 on scheduled rounds where no
lot is closed out of order and is correct there).

Attempts: K = 3, but an episode ends at its first success and every agent here is
deterministic, so a successful agent uses one attempt per round. The reference runs on all 15
rounds, the zero stub (:class:`StubAgent`: pass@1 = 1 but correct@1 = 0) on all 15, and each
mutant on the rounds :data:`MUTANT_ROUNDS` of its strategy (all 5 by default): 15 + 15 + 30
sandbox runs, two at a time, about 30 s on 2 cores. Lower :data:`MUTANT_ROUNDS` if the
section must be faster. ``summary.csv`` rows: ``task=market_bench``, ``agent``, ``period=<task version>``,
the shared metric columns empty, then the extra columns of :func:`~quantgym.envs.market_bench.scoring.summary_extra`
(the agent's overall ``pass@1``, ``pass@3``, ``correct@1``, ``correct@3``, ``mae``, ``n_attempts``; the
unbiased estimates stay empty here, see :data:`BENCH_NOT_SAMPLES`); everything else goes into ``results.json``.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from quantgym.envs.market_bench.agents import MUTANTS, MutantAgent, ReferenceAgent, StubAgent
from quantgym.envs.market_bench.config import (N_ROUNDS, STRATEGIES, MarketBenchSandboxLimits, MarketBenchScoringConfig,
                                               check_task_set)
from quantgym.envs.market_bench.scoring import AttemptRecord, fmt, score_table, summary_extra, unbiased_table
from quantgym.results import SectionResult, SummaryRow
from quantgym.tables import Col

TASK = "market_bench"
#: the bench job calls no compiled kernel in its own process (the attempts replay in sandbox children, which
#: never load numba), so ``quantgym bench`` announces no first-run compile for it
COMPILES_KERNELS = False
#: why ``quantgym bench --data market_bench=...`` is refused (the CLI prints it as one line)
DATA_REFUSAL = ("Market-Bench's bench checks the reference agent and the mutants on the 15 shipped rounds against "
                "the outputs shipped with them; on your own round those outputs would come from the reference "
                "agent itself, so the bench has nothing to check: run it without --data (your own round: the env's "
                "data=, docs/market_bench.md)")


def agent_name(agent) -> str:
    if isinstance(agent, MutantAgent):
        return f"mutant:{agent.mutant.strategy}/{agent.mutant.name}"
    return agent.name


class BenchPolicy:
    """A bench agent (``act(obs) -> source``) as a policy of :func:`quantgym.evaluation.evaluate`: an agent
    that raises instead of answering submits a source that raises the same message (a failed attempt)."""

    def __init__(self, agent: Any):
        self.agent = agent
        self.name = agent_name(agent)

    def act(self, obs: dict[str, Any], info: dict) -> str:
        try:
            return self.agent.act(obs)
        except Exception as exc:  # noqa: BLE001 - an agent failing to answer is a failed attempt
            return f"raise RuntimeError({f'agent failed to produce a source: {exc}'[:200]!r})\n"


def run_episode(agent, strategy: str, round_: int, attempts: int = 3,
                sandbox: MarketBenchSandboxLimits = MarketBenchSandboxLimits(),
                task_set: str | None = None) -> list[dict[str, Any]]:
    """Run one agent on one (strategy, round) episode of a task set (default v1) through
    :func:`quantgym.evaluation.evaluate`; returns its attempt records."""
    from quantgym.envs.market_bench.env import MarketBenchEnv
    from quantgym.envs.market_bench.eval import attempt_rows
    from quantgym.evaluation import evaluate

    policy = BenchPolicy(agent)
    env = MarketBenchEnv(strategy=strategy, round=round_, attempts=attempts, sandbox=sandbox, task_set=task_set)
    return attempt_rows(evaluate(env, policy, seed=None), policy.name)


#: rounds the mutants run on in the bench (the reference runs on all 5). Each attempt is a
#: sandbox child (~0.5-0.8 CPU-s); all 5 keep the section near 25 s on 2 cores
MUTANT_ROUNDS: tuple[int, ...] = (1, 2, 3, 4, 5)


def default_jobs(rounds: tuple[int, ...] = tuple(range(1, N_ROUNDS + 1)),
                 mutant_rounds: tuple[int, ...] = MUTANT_ROUNDS) -> list[tuple[Any, str, int]]:
    """(agent, strategy, round) of the bench: reference and the zero stub on ``rounds``, each mutant on
    ``mutant_rounds`` of its strategy."""
    jobs: list[tuple[Any, str, int]] = [(ReferenceAgent(), s, r) for s in STRATEGIES for r in rounds]
    jobs += [(StubAgent(), s, r) for s in STRATEGIES for r in rounds]
    jobs += [(MutantAgent(m), m.strategy, r) for m in MUTANTS for r in mutant_rounds]
    return jobs


def run_jobs(jobs, workers: int = 2, attempts: int = 3, on_done=None, task_set: str | None = None) -> list[dict[str, Any]]:
    """Run episodes of a task set (default v1) concurrently (each attempt is its own sandbox process);
    records in job order."""
    def one(job):
        recs = run_episode(job[0], job[1], job[2], attempts=attempts, task_set=task_set)
        if on_done is not None:
            on_done()
        return recs

    with ThreadPoolExecutor(max_workers=max(1, int(workers))) as ex:
        results = list(ex.map(one, jobs))
    return [r for recs in results for r in recs]


#: why the bench reports no unbiased pass@k: its agents are deterministic and each episode ends at its first
#: success, so a round's attempts are not n independent samples (``quantgym eval --attempts n`` has them)
BENCH_NOT_SAMPLES = ("each episode ends at its first success and the bench agents are deterministic: the attempts "
                     "are not n independent samples (quantgym eval --attempts n keeps n of them)")


def records_to_attempts(records: list[dict[str, Any]]) -> list[AttemptRecord]:
    return [AttemptRecord(r["agent"], r["strategy"], int(r["round"]), int(r["attempt"]), r["status"], r["mae"],
                          r["reason"], r["sandbox_status"], r["path_corr"], r["max_rel_error"], r.get("correct"))
            for r in records]


def extras_table(records: list[dict[str, Any]]):
    """Per (agent, strategy): mean path correlation and max relative error over successful attempts."""
    import pandas as pd

    df = pd.DataFrame(records)
    ok = df[df["status"] == "SUCCESS"]
    g = ok.groupby(["agent", "strategy"], sort=False)
    return pd.DataFrame({"mean_path_corr": g["path_corr"].mean(), "max_rel_error": g["max_rel_error"].max()}).reset_index()


def validate(options: dict[str, Any]) -> None:
    """Check the bench options before anything runs: ``task_set`` must be a Market-Bench task set."""
    check_task_set(options.get("task_set"))


def run_section(ctx) -> SectionResult:
    """Bench entry point (``quantgym bench``): see the module docstring. ``ctx.options["task_set"]``
    (``quantgym bench --task-set v2``) selects the rounds (default v1)."""
    config = MarketBenchScoringConfig()
    task_set = check_task_set(ctx.options.get("task_set"))
    jobs = default_jobs()
    tid = ctx.progress.add_task(f"Market-Bench {task_set}", total=len(jobs))
    records = run_jobs(jobs, workers=2, attempts=config.attempts, on_done=lambda: ctx.progress.advance(tid),
                       task_set=task_set)
    attempts = records_to_attempts(records)
    scores = score_table(attempts, config)
    unbiased = unbiased_table(attempts, not_samples=BENCH_NOT_SAMPLES)
    extras = extras_table(records)
    table = scores.merge(extras, on=["agent", "strategy"], how="left")
    k = config.attempts
    print_bench_tables(ctx.console, table, k, config, task_set=task_set)
    agents = list(dict.fromkeys(r["agent"] for r in records))
    rows = [SummaryRow(task=TASK, agent=a, period=task_set, extra=summary_extra(attempts, unbiased, a))
            for a in agents]
    if ctx.options.get("plots", False):
        _plot(table, ctx.out_dir / "market_bench_mae.png", k)
    return SectionResult(task=TASK, rows=rows, runs=records, extra={
        "task_version": task_set, "scoring": config, "sandbox": MarketBenchSandboxLimits(),
        "scores": table.to_dict(orient="records"),
        "unbiased": unbiased.to_dict(orient="records"), "unbiased_note": BENCH_NOT_SAMPLES,
        "mutant_rounds": list(MUTANT_ROUNDS),
        "metrics_note": "pass@k / pass@1 are the paper's (solved = ran and returned every metric; a stub returning "
                        "constants is 'solved'); correct@k / correct@1 count attempts whose every metric is within "
                        "max(correct_atol, correct_rtol*|reference|) of the reference (ScoringConfig)",
        "note": "each episode ends at its first success; deterministic agents use one attempt per solved round; "
                "the reference runs on all 5 rounds per strategy, the mutants on rounds "
                + ", ".join(map(str, MUTANT_ROUNDS)),
    })


def score_cols(k: int, extras: bool = True, rank: bool = True) -> list[Col]:
    """The columns of a Market-Bench score table (fits 80 columns): rank, agent (or strategy), the paper's
    p@k / p@1 / MAE / attempts, the anti-stub c@k / c@1, and (per strategy) path correlation and relative error."""
    return [*([Col("#")] if rank else []), Col("agent", "left"), Col(f"p@{k}"), Col("p@1"),
            Col("mean MAE", short="MAE"), Col("att."), Col(f"c@{k}", group=True), Col("c@1"),
            *([Col("corr"), Col("rel err", short="rel")] if extras else [])]


def _e(x: float) -> str:
    return f"{x:g}".replace("e-0", "e-")


def legend(k: int, config: MarketBenchScoringConfig = MarketBenchScoringConfig(), stub: bool = True,
           extras: bool = True) -> str:
    """What the score columns mean, printed under the Market-Bench tables."""
    text = (f"p@{k} / p@1 (pass@k, the paper's, spec §6): share of rounds solved within the first {k} attempts / on "
            "the first; solved = the attempt ran in the sandbox and returned every required metric as a finite "
            f"number, whatever its value. c@{k} / c@1 (correct@k, beyond the paper): share of rounds with an attempt "
            f"whose every metric is within max({_e(config.correct_atol)}, {_e(config.correct_rtol)}·|reference|) of the "
            "reference. MAE: mean |metric − reference| over the strategy's metrics, averaged over solved rounds; "
            "att.: mean first successful attempt" + ("; corr: equity-path correlation with the reference; rel: "
                                                       "largest per-metric relative error." if extras else "."))
    if stub:
        text += (f" stub_zeros returns 0.0 for every required metric without reading the data: 0.0 is a finite "
                 f"number, so each of its attempts counts as solved (p@{k} = p@1 = 1.00) though its values are wrong "
                 f"(c@{k} = c@1 = 0.00, a large MAE, no equity path so no corr); c@{k} is the column that tells a "
                 "stub from a solution.")
    return text


def print_bench_tables(console: Any, table, k: int, config: MarketBenchScoringConfig = MarketBenchScoringConfig(),
                       width: int | None = None, task_set: str = "v1") -> None:
    """One score table per strategy and one overall (``table``: :func:`score_table` merged with
    :func:`extras_table`), fitted to the terminal, then the legend of the columns."""
    from quantgym.tables import print_table

    strategies = (*STRATEGIES, "overall")
    for i, strategy in enumerate(strategies):
        sub = table[table["strategy"] == strategy]
        rows = []
        for _, row in sub.iterrows():
            rel = row.get("max_rel_error", np.nan)
            name = str(row["agent"]).replace("mutant:", "")
            name = name.split("/")[-1] if strategy != "overall" else name
            cells = [str(row["rank"]), name, fmt(row[f"pass@{k}"]), fmt(row["pass@1"]),
                     fmt(row["mean_mae_solved"]), fmt(row["avg_attempt"]), fmt(row[f"correct@{k}"]),
                     fmt(row["correct@1"])]
            if strategy != "overall":
                cells += [fmt(row.get("mean_path_corr"), 4), f"{rel:.1e}" if np.isfinite(rel) else "-"]
            rows.append(cells)
        print_table(console, f"Market-Bench {task_set} — {strategy}", score_cols(k, strategy != "overall"), rows,
                    keys=2, width=width, caption=(legend(k, config) + " Mutants run on rounds "
                                                  + ", ".join(map(str, MUTANT_ROUNDS)) + ".")
                    if i == len(strategies) - 1 else None)


def _plot(table, path, k) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    t = table[table["strategy"] != "overall"]
    fig, ax = plt.subplots(figsize=(8, 3.8))
    labels = [f"{a}\n({s})" if not a.startswith("mutant") else a.replace("mutant:", "") for a, s in zip(t["agent"], t["strategy"])]
    vals = np.maximum(t["mean_mae_solved"].fillna(np.nan).to_numpy(float), 1e-12)
    ax.bar(range(len(t)), vals, color=["tab:green" if a == "reference" else "tab:red" for a in t["agent"]])
    ax.set_yscale("log")
    ax.set_xticks(range(len(t)), labels, rotation=45, ha="right", fontsize=7)
    ax.set_ylabel("mean MAE (log; 0 drawn at 1e-12)")
    ax.set_title("Market-Bench: reference (MAE 0) vs mutants")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
