"""Quant-Arena's record in the task registry (:mod:`quantgym.tasks`), spec quant_arena.md. Imports nothing
heavy: every reference is a string."""

from __future__ import annotations

from quantgym.tasks import Task, TaskOption

_ENV = "quantgym.envs.quant_arena.env:QuantArenaEnv"

TASK = Task(
    name="quant_arena",
    title="Quant-Arena",
    envs={"QuantArena-v0": (_ENV, {"mode": "iterative"}), "QuantArena-OneShot-v0": (_ENV, {"mode": "oneshot"})},
    bench="quantgym.envs.quant_arena.bench",
    eval="quantgym.envs.quant_arena.eval:ADAPTER",
    eval_options=(TaskOption("--rounds", "rounds", "most candidates the LLM agent submits (default: the env's "
                             "budget).", kind="int", agent=True),),
    llm="quantgym.envs.quant_arena.llm:QuantArenaLLMAgent",
    report="quantgym.envs.quant_arena.report:section",
    docs="docs/quant_arena.md",
    sharpe_note="quantgym.envs.quant_arena.config:SHARPE_NOTE",
    blind_vocabulary="quantgym.envs.quant_arena.blinding:blind_vocabulary",
)
