"""A toy task that lives only in the tests: its env, bench section, eval adapter, LLM adapter and report
section (its record is tests/tasks/toy_record.py). ``tests/tasks/test_toy_task.py`` registers it (:func:`quantgym.tasks.register_task`) and
runs ``bench``, ``eval`` (replay agent), ``sweep`` and ``report`` on it without touching any other file."""

from __future__ import annotations

from typing import Any, Callable

import gymnasium as gym

from quantgym.agents.llm.agents import LLMAgent
from quantgym.evaluation import EvalContext, EvalPlan, evaluate, job_label
from quantgym.results import SectionResult, SummaryRow
from quantgym.spaces import AnyText

ENV_ID = "Toy-v0"
QUESTION = "What is six times seven? Answer with the number only."


class ToyEnv(gym.Env):
    """One question, one text answer; reward 1 when the answer is 42.

    ## Description
    A one-step toy. ## Action Space
    Free text. ## Observation Space
    The question. ## Rewards
    1 or 0. ## Starting State
    The question. ## Episode End
    After one answer. ## Arguments
    ``bonus`` adds to the reward.
    """

    metadata = {"render_modes": []}
    task_name = "toy"

    def __init__(self, bonus: float = 0.0):
        self.bonus = float(bonus)
        self.observation_space = AnyText(max_length=200)
        self.action_space = AnyText(max_length=200)
        self._score = None

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        self._score = None
        return QUESTION, {}

    def step(self, action: Any):
        self._score = (1.0 if str(action).strip() == "42" else 0.0) + self.bonus
        return QUESTION, self._score, True, False, {"answer": str(action)}

    def episode_result(self) -> dict[str, Any]:
        return {"metrics": {"score": self._score, "sharpe": self._score}, "period": "toy"}


class ToyLLMAgent(LLMAgent):
    """One call per question."""

    task = "toy"

    def act(self, observation: Any, info: dict) -> str:
        self._st()
        res = self._fitted_call(lambda style: [{"role": "user", "content": str(observation)}], cap=16,
                                meta={"task": "toy"})
        self._log(ok=res.ok, error=res.error, usage=res.usage)
        return (res.text or "") if res.ok else ""


class ToyEval:
    def jobs(self, env_id: str, agent: Any, plan: EvalPlan, ctx: EvalContext) -> list[tuple[str, Callable[[], dict]]]:
        def one() -> dict:
            res = evaluate(env_id, agent, seed=plan.seed)
            label = getattr(agent, "current_episode", None)
            return {"result": res, "usage": agent.episode_usage(label) if hasattr(agent, "episode_usage") else None}
        return [(job_label(env_id), one)]

    def section(self, runs: list[dict], agent: Any, plan: EvalPlan, ctx: EvalContext) -> SectionResult:
        sec = SectionResult(task="toy")
        for run in runs:
            r = run["result"]
            sec.rows.append(r.summary_row())
            sec.runs.append(r.to_dict())
        if ctx.console is not None:
            ctx.console.print(f"toy: {len(runs)} run(s), score {[run['result'].metrics['score'] for run in runs]}")
        return sec


ADAPTER = ToyEval()


def run_section(ctx) -> SectionResult:
    """``quantgym bench --tasks toy``: the reference answer."""
    bonus = float(ctx.options.get("bonus") or 0.0)  # the task's own option (its record's bench_options)
    res = evaluate(gym.make(ENV_ID, bonus=bonus), lambda obs, info: "42", seed=0)
    ctx.console.print(f"toy bench: score {res.metrics['score']}")
    return SectionResult(task="toy", rows=[SummaryRow(task="toy", agent="oracle", period="toy",
                                                      sharpe=res.metrics["score"])],
                         runs=[res.to_dict()])


def report_section(sources, rows):
    from quantgym.leaderboard import Section, Table, fmt

    toy = [r for r in rows if r["task"] == "toy"]
    if not toy:
        return None
    return Section("Toy", "toy", tables=[Table("Toy scores", ["agent", "Sharpe"],
                                               [[r["agent"], fmt(r["sharpe"])] for r in toy])])


def make_baseline(name: str):
    if name != "oracle":
        raise ValueError(f"unknown toy agent {name!r}; choose from oracle")

    class Oracle:
        def __init__(self):
            self.name = "oracle"

        def act(self, obs, info):
            return "42"

    return Oracle()
