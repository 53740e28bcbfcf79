"""quantgym.tools.TaskTools / ToolConfig / tool_use: a task's tools in an env (docs/tools.md): answers outside
the stage budget, a task's own budget refusing a call, the log and its metrics, pickling."""

from __future__ import annotations

import pickle
from dataclasses import dataclass

import pytest

from quantgym.config import Config
from quantgym.tools import TaskTools, ToolConfig, Toolbox, tool


@dataclass(frozen=True)
class DemoToolConfig(ToolConfig, Config, version="demo-v1"):
    calls: int = 2
    chars: int = 50
    runs: int = 1


class Env:
    answered = 0


class DemoTools(TaskTools):
    config_class = DemoToolConfig
    answer_tools = ("answer",)

    def __init__(self, env, config=None):
        super().__init__(env, config)
        self.runs = 0

    def refuse(self, name):
        return "run budget exhausted (1 run)" if name == "run" and self.runs >= self.config.runs else None

    def _build(self):
        @tool
        def run(x: int) -> str:
            """One run."""
            self.runs += 1
            return "r" * x

        @tool
        def answer(k: int) -> str:
            """The stage's answer."""
            if k < 0:
                raise ValueError("k must be >= 0")
            self.env.answered += 1
            return "answered"

        return Toolbox([run, answer])


def test_answers_refusals_log_and_metrics():
    t = DemoTools(Env(), {"calls": 2, "chars": 50, "runs": 1})
    with pytest.raises(ValueError, match="DemoToolConfig.runs must be an integer >= 0"):
        DemoToolConfig(runs=-1)
    with pytest.raises(TypeError, match="must be a DemoToolConfig"):
        DemoTools(Env(), object())
    a = t.run("run", {"x": 80}, stage=1)
    assert a.ok and a.truncated == 30 and a.chars_left == 0
    b = t.run("run", {"x": 1}, stage=1)  # the stage's characters are spent: the generic budget speaks first
    assert b.error == "budget_exhausted" and "result characters" in b.content
    c = t.run("answer", {"k": -1}, stage=1)  # a failed answer uses one call, even past the budget
    assert c.error == "tool_error" and t.state.calls_used == 2 and t.env.answered == 0
    d = t.run("answer", {"k": 1}, stage=1)  # an answer is never refused for the stage budget; it resets it
    assert d.ok and t.env.answered == 1 and (d.calls_left, d.chars_left) == (2, 50)
    e = t.run("run", {"x": 1}, stage=2)  # the task's own budget: one run per episode
    assert e.error == "budget_exhausted" and e.content == "error: run budget exhausted (1 run)"
    assert t.state.calls_used == 0
    assert [r["stage"] for r in t.log] == [1, 1, 1, 1, 2]
    assert t.metrics() == {"tool_calls": 5, "tool_errors": 3, "tool_error_kinds": {"budget_exhausted": 2,
                           "tool_error": 1}, "tool_result_chars": len(a.content) + len(d.content),
                           "tool_truncated": 1}
    assert t.stage_info(False)["tools"] == t.toolbox.schemas() and "tools" not in t.stage_info(True)
    assert t.stage_info(True) == {"tool_budget": t.state.to_dict()}
    clone = pickle.loads(pickle.dumps(t))
    assert clone._toolbox is None and clone.toolbox.names == ["run", "answer"] and clone.log == t.log
    t.reset()
    assert t.log == [] and t.state.calls_used == 0
