"""Market-Bench's record in the task registry (:mod:`quantgym.tasks`), spec market_bench.md. Imports nothing
heavy: every reference is a string."""

from __future__ import annotations

from quantgym.tasks import TaskOption, Task

_ENV = "quantgym.envs.market_bench.env:MarketBenchEnv"

TASK = Task(
    name="market_bench",
    title="Market-Bench",
    envs={f"MarketBench-{k}-v0": (_ENV, {"strategy": s})
          for k, s in (("Scheduled", "scheduled"), ("Pairs", "pairs"), ("DeltaHedge", "delta_hedge"))},
    bench="quantgym.envs.market_bench.bench",
    bench_options=(TaskOption("--task-set", "task_set", "task set v1 (default) or v2 (real MSFT hour, real SZSE "
                               "pair; docs/market_bench.md).", kind="str"),),
    eval="quantgym.envs.market_bench.eval:ADAPTER",
    eval_options=(
        TaskOption("--round", "rounds", "rounds, comma-separated (1-5; default all).", kind="int_list"),
        TaskOption("--attempts", "attempts", "attempts per round. Default: the paper's K = 3, the round ends at "
                   "its first success. --attempts n: all n independent attempts run, and the unbiased pass@k / "
                   "correct@k (k <= n) are reported beside the paper's.", kind="int",
                   implies={"all_attempts": True}),
        TaskOption("--feedback", "feedback", "repair mode (the error trace goes back to the agent).", kind="flag"),
    ),
    llm="quantgym.envs.market_bench.llm:MarketBenchLLMAgent",
    report="quantgym.envs.market_bench.report:section",
    docs="docs/market_bench.md",
)
